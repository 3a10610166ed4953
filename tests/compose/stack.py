"""Running docker-compose.yml with podman for a test: images, one project's stack, its teardown.

Podman is driven with this repository's containers.conf (CONTAINERS_CONF), never the host's
settings, and every container, pod, network and volume carries the project's compose label, so
that what a run made can be found, and shown gone, by that label alone."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CONTAINERS_CONF = REPO / "docker" / "podman" / "containers.conf"
BASE_IMAGE = "localhost/mpstream-base:bookworm"
PODMAN_COMPOSE = Path(sys.executable).parent / "podman-compose"
# Service -> the image it builds; nginx shares the collector's, built once.
BUILT_SERVICES = {"encoder": "mpstream-encoder", "postgres": "mpstream-postgres",
                  "collector": "mpstream-server"}
PROJECT_LABEL = "io.podman.compose.project"


def podman_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF),
            "MPSTREAM_BASE_IMAGE": BASE_IMAGE, **extra}


def run(argv: list[str], env: dict[str, str] | None = None, timeout: float = 600,
        check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, cwd=REPO, env=env or podman_env(), capture_output=True,
                          text=True, timeout=timeout)
    if check and done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-25:])
        raise RuntimeError(f"{shlex.join(argv)} exited {done.returncode}:\n{tail}")
    return done


def build_images() -> None:
    """The Debian base (debootstrap, made once), then the project's images; both come from
    podman's layer cache when nothing they are built from changed."""
    run([str(REPO / "scripts" / "container-base.sh"), BASE_IMAGE], timeout=900)
    # One at a time: two cores, and podman-compose's parallel build can end 0 with an image
    # missing, so each is checked.
    for service, image in BUILT_SERVICES.items():
        run([str(PODMAN_COMPOSE), "-p", "mpstream-build", "build", service], timeout=900)
        if run(["podman", "image", "exists", image], check=False).returncode != 0:
            raise RuntimeError(f"podman-compose build {service} made no image {image}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lines(argv: list[str]) -> list[str]:
    return [line for line in run(argv).stdout.splitlines() if line.strip()]


def leftovers(project: str) -> dict[str, list[str]]:
    """What is left of `project`: containers, pods, networks and volumes, by kind (empty kinds
    are left out)."""
    label = f"label={PROJECT_LABEL}={project}"
    found = {
        "containers": _lines(["podman", "ps", "-a", "--filter", label, "--format",
                              "{{.Names}}"]),
        "pods": [p for p in _lines(["podman", "pod", "ps", "--format", "{{.Name}}"])
                 if project in p],
        "networks": _lines(["podman", "network", "ls", "--filter", label, "--format",
                            "{{.Name}}"]),
        "volumes": _lines(["podman", "volume", "ls", "--filter", label, "--format",
                           "{{.Name}}"]),
    }
    return {kind: names for kind, names in found.items() if names}


def remove_leftovers(project: str) -> None:
    """Last resort after a failed `down`: remove by label whatever the project still has."""
    left = leftovers(project)
    for kind, names in left.items():
        verb = {"containers": ["rm", "-f", "-t", "0"], "pods": ["pod", "rm", "-f"],
                "networks": ["network", "rm", "-f"], "volumes": ["volume", "rm", "-f"]}[kind]
        run(["podman", *verb, *names], check=False)


def mptcp_counters(container: str) -> dict[str, int]:
    """The MPTcpExt counters of `container`'s network namespace (/proc/PID/net is the netns of
    PID)."""
    pid = run(["podman", "inspect", "--format", "{{.State.Pid}}", container]).stdout.strip()
    lines = Path(f"/proc/{pid}/net/netstat").read_text().splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=True):
        if names.startswith("MPTcpExt:"):
            return dict(zip(names.split()[1:], map(int, values.split()[1:]), strict=True))
    raise AssertionError(f"no MPTcpExt counters in {container}'s namespace: is MPTCP built in?")


class ComposeStack:
    """`podman-compose up -d` of docker-compose.yml under project name `project`, with nginx
    published on a free port of 127.0.0.1; `down -v` on the way out, whatever happened."""

    def __init__(self, project: str, encode_s: int = 12):
        self.project = project
        self.port = free_port()
        self.env = podman_env(
            MPSTREAM_PUBLISH="127.0.0.1",
            MPSTREAM_PORT=str(self.port),
            MPSTREAM_DURATION=str(encode_s),
            MPSTREAM_DB_PASSWORD=secrets.token_hex(12),
        )
        self.base_url = f"http://127.0.0.1:{self.port}"

    def compose(self, *args: str, timeout: float = 600, check: bool = True):
        return run([str(PODMAN_COMPOSE), "-p", self.project, *args], env=self.env,
                   timeout=timeout, check=check)

    def __enter__(self) -> ComposeStack:
        try:
            self.compose("up", "-d", "--no-build")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            self.down_result = self.compose("down", "-v", "-t", "10", timeout=180, check=False)
        finally:
            # What `down` did not remove is kept for the test to show; the host is cleaned anyway.
            self.left_after_down = leftovers(self.project)
            if self.left_after_down:
                remove_leftovers(self.project)

    def container(self, service: str) -> str:
        names = _lines(["podman", "ps", "-a", "--filter", f"label={PROJECT_LABEL}={self.project}",
                        "--filter", f"label=com.docker.compose.service={service}",
                        "--format", "{{.Names}}"])
        assert len(names) == 1, f"service {service}: containers {names}"
        return names[0]

    def exit_code(self, service: str) -> int:
        state = run(["podman", "inspect", "--format", "{{json .State}}",
                     self.container(service)]).stdout
        return json.loads(state)["ExitCode"]

    def wait_healthy(self, service: str, timeout_s: float) -> None:
        """Run the service's compose health check until it passes (podman < 4.6 runs health
        checks only through systemd timers, which a host without systemd does not have)."""
        name = self.container(service)
        deadline = time.monotonic() + timeout_s
        while True:
            done = run(["podman", "healthcheck", "run", name], check=False)
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                logs = run(["podman", "logs", "--tail", "20", name], check=False)
                raise AssertionError(f"{service} not healthy after {timeout_s:g} s: "
                                     f"{done.stdout}{done.stderr}\n{logs.stdout}{logs.stderr}")
            time.sleep(1)

    def http_get(self, path: str) -> tuple[int, bytes]:
        try:
            with urllib.request.urlopen(self.base_url + path, timeout=10) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()

    def psql(self, sql: str) -> str:
        return run(["podman", "exec", self.container("postgres"), "psql", "-U", "mpstream",
                    "-d", "mpstream", "-tA", "-v", "ON_ERROR_STOP=1", "-c", sql]).stdout


@contextlib.contextmanager
def host_browser(mptcp: bool) -> Iterator[Any]:
    """Headless Chromium in the host's own network namespace (where the published port is), its
    sockets MPTCP (mptcpize) when `mptcp`."""
    from playwright.sync_api import sync_playwright

    from mpstream.player.browsers import CHROMIUM, CHROMIUM_FLAGS

    with tempfile.TemporaryDirectory(prefix="mps-compose-browser-") as tmp, \
            sync_playwright() as pw:
        wrapper = Path(tmp) / "chromium"
        argv = ["mptcpize", "run", CHROMIUM] if mptcp else [CHROMIUM]
        wrapper.write_text(f'#!/bin/sh\nexec {shlex.join(argv)} "$@"\n')
        wrapper.chmod(0o755)
        browser = pw.chromium.launch(executable_path=str(wrapper), headless=True,
                                     args=CHROMIUM_FLAGS, timeout=60_000)
        try:
            yield browser
        finally:
            browser.close()


def main(argv: list[str]) -> None:
    """`python -m tests.compose.stack up PROJECT`: bring the stack up, say "up" on stdout, hold
    it until SIGTERM or Ctrl-C, then take it down (the teardown test's subject)."""
    from mpstream.proc import signals_interrupt

    if argv[:1] != ["up"] or len(argv) != 2:
        raise SystemExit("usage: python -m tests.compose.stack up PROJECT")
    with signals_interrupt(), ComposeStack(argv[1], encode_s=4):
        print("up", flush=True)
        while True:
            time.sleep(3600)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except KeyboardInterrupt:
        sys.exit(130)
