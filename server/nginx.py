"""nginx for one run: a configuration rendered from nginx.conf.j2 into a work directory of its
own (pid, temp dirs, logs), never the system's /etc/nginx or /var/lib/nginx."""

from __future__ import annotations

import argparse
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import jinja2

from mpstream.errors import UserError
from mpstream.paths import REPO_ROOT
from mpstream.sending import SendOptions
from mpstream.server.schemas import MAX_BODY_BYTES

TEMPLATE = Path(__file__).parent / "nginx.conf.j2"
PLAYER_DIST = REPO_ROOT / "player" / "dist"
WORKER_USER = "www-data"
# Size of /probe/blob, the file `mpstream paths check` downloads for a while (sparse).
PROBE_BYTES = 1 << 30
PROBE_FILE = "probe.blob"
# What nginx needs in its workdir while it runs and nobody needs after: the probe file (sparse
# here, but a gigabyte to any copy that does not keep holes, e.g. a trial folder tarred back
# from a cluster host) and the temp folders for request bodies.
SCRATCH = (PROBE_FILE, "tmp")


def nginx_binary() -> str:
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None
    )
    if found is None:
        raise UserError(
            "nginx is not installed: run `make setup` (it installs nginx-light), then try again."
        )
    return found


@cache
def supports_multipath_listen() -> bool:
    """Whether this nginx accepts `listen ... multipath` (added after 1.22); probed by `nginx -t`
    on a throwaway configuration, which parses but binds nothing."""
    with tempfile.TemporaryDirectory(prefix="mps-nginx-probe-") as tmp:
        conf = Path(tmp) / "probe.conf"
        conf.write_text(
            f"pid {tmp}/p.pid; error_log stderr; events {{}}\n"
            f"http {{ access_log off; client_body_temp_path {tmp}; proxy_temp_path {tmp};\n"
            f" fastcgi_temp_path {tmp}; uwsgi_temp_path {tmp}; scgi_temp_path {tmp};\n"
            " server { listen 127.0.0.1:9 multipath; } }\n"
        )
        done = subprocess.run(
            [nginx_binary(), "-t", "-q", "-p", tmp, "-c", str(conf), "-e", "stderr"],
            capture_output=True,
            text=True,
        )
    return done.returncode == 0


def _world_readable(path: Path) -> bool:
    """Can an unprivileged user reach and read `path` (o+x on every parent, o+r on it)?"""
    path = path.resolve()
    if not path.exists():
        return True
    if not path.stat().st_mode & 0o004:
        return False
    return all(p.stat().st_mode & 0o001 for p in path.parents)


def worker_user(served: list[Path]) -> str | None:
    """Workers drop to www-data when it can read what they serve and reach the work directory
    (collector socket, temp files); otherwise (e.g. a media tree in a private temp dir) they
    run as the owner of the first of those paths. None when not root."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(WORKER_USER)
    except KeyError:
        return "root"
    if all(_world_readable(p) for p in served):
        return f"{WORKER_USER} {WORKER_USER}"
    owner = pwd.getpwuid(served[0].resolve().stat().st_uid).pw_name
    return owner


@dataclass(frozen=True)
class NginxConfig:
    workdir: Path
    media_root: Path
    listen: str  # "host:port"
    collector_socket: Path | None  # the collector's unix socket, or
    collector_address: str | None = None  # host:port of a collector elsewhere (containers)
    # A low-latency live tree's origin (server/origin/): what is not a finished file under
    # /media/ goes there (the segment being written, its parts, the LL-HLS playlists).
    origin_socket: Path | None = None
    multipath: bool = False
    player_root: Path = PLAYER_DIST
    api_rate: int = 5000  # requests/s per client address; bursts of beacons are fine
    api_burst: int = 10000
    # The collector's own limit, so that nginx refuses a larger body itself: the collector
    # answers 413 without reading the body and closes, and its kernel resets the connection
    # for the bytes left unread, which could reach nginx before the answer did (a 502).
    body_limit: str = str(MAX_BODY_BYTES)
    worker_processes: str = "auto"
    also_listen: tuple[str, ...] = ()  # further "host:port" (a multi-homed server's addresses)
    # tcp_nopush, tcp_nodelay, sndbuf (a frozen model: one shared default is safe)
    send: SendOptions = SendOptions()  # noqa: RUF009

    @property
    def access_log(self) -> Path:
        return self.workdir / "logs" / "access.jsonl"

    @property
    def path(self) -> Path:
        return self.workdir / "nginx.conf"

    def render(self) -> str:
        env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(str(TEMPLATE.parent)),
            undefined=jinja2.StrictUndefined,
            keep_trailing_newline=True,
        )
        user = worker_user([self.media_root, self.player_root, self.workdir])
        return env.get_template(TEMPLATE.name).render(
            workdir=self.workdir,
            user=user,
            worker_processes=self.worker_processes,
            access_log=self.access_log,
            media_root=self.media_root.resolve(),
            player_root=self.player_root.resolve(),
            listen=self.listen,
            also_listen=list(self.also_listen),
            multipath=self.multipath,
            collector=(
                self.collector_address
                if self.collector_address
                else f"unix:{self.collector_socket}"
            ),
            origin=self.origin_socket,
            api_rate=self.api_rate,
            api_burst=self.api_burst,
            body_limit=self.body_limit,
            send=self.send,
        )

    def share_with_workers(self, socket_path: Path) -> None:
        """Let nginx's workers, and no one else, connect to the collector's socket: gunicorn
        creates it owner-only (umask 077), so the workers' group gets read/write on it when the
        workers run as another user than its owner."""
        user = worker_user([self.media_root, self.player_root, self.workdir])
        if not user:
            return
        entry = pwd.getpwnam(user.split()[0])
        if entry.pw_uid == socket_path.stat().st_uid:
            return
        os.chown(socket_path, -1, entry.pw_gid)
        socket_path.chmod(0o660)

    def write(self, run_prefix: list[str] | None = None, check: bool = True) -> Path:
        """Lay out the work directory and write the configuration; checks it with `nginx -t`
        (which binds the listen address, so it runs where nginx will: `run_prefix`, e.g.
        `ip netns exec NS`)."""
        for sub in ("logs", "tmp/body", "tmp/proxy", "tmp/fastcgi", "tmp/uwsgi", "tmp/scgi"):
            (self.workdir / sub).mkdir(parents=True, exist_ok=True)
        # Workers (maybe www-data) write request bodies under tmp/.
        self.workdir.chmod(0o755)
        user = worker_user([self.media_root, self.player_root, self.workdir])
        if user:
            entry = pwd.getpwnam(user.split()[0])
            for sub in ("tmp", "tmp/body", "tmp/proxy", "tmp/fastcgi", "tmp/uwsgi", "tmp/scgi"):
                os.chown(self.workdir / sub, entry.pw_uid, entry.pw_gid)
        self.path.write_text(self.render())
        with open(self.workdir / PROBE_FILE, "wb") as blob:
            blob.truncate(PROBE_BYTES)
        (self.workdir / PROBE_FILE).chmod(0o644)
        if not check:
            return self.path
        done = subprocess.run(
            [*(run_prefix or []), *self.argv("-t", "-q")], capture_output=True, text=True
        )
        if done.returncode != 0:
            raise UserError(
                self.explain(done.stderr)
                or f"the generated nginx configuration is invalid: {done.stderr.strip()}"
            )
        return self.path

    def explain(self, log: str) -> str | None:
        """A message the user can act on for the failures nginx reports that they can fix."""
        if "Address already in use" in log:
            return (
                f"{self.listen} is already in use: stop what listens there (`ss -ltnp`) "
                "or choose another port (--port)."
            )
        if "Cannot assign requested address" in log:
            return (
                f"cannot listen on {self.listen}: no such address here (with --netns, use an "
                "address of that namespace)."
            )
        return None

    def remove_scratch(self) -> None:
        """Removes what only a running nginx needs (SCRATCH); its logs and config stay."""
        for name in SCRATCH:
            path = self.workdir / name
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)

    def argv(self, *extra: str) -> list[str]:
        return [
            nginx_binary(),
            "-p", str(self.workdir),
            "-c", str(self.path),
            "-e", str(self.workdir / "logs" / "error.log"),
            *extra,
        ]  # fmt: skip


def launcher_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mpstream.server.nginx")
    parser.add_argument("--media", type=Path, required=True)
    parser.add_argument("--listen", default="0.0.0.0:8080")
    parser.add_argument("--collector", required=True, help="host:port of the collector")
    parser.add_argument("--workdir", type=Path, default=Path("/run/mpstream-nginx"))
    parser.add_argument("--player", type=Path, default=PLAYER_DIST)
    return parser


def main(argv: list[str] | None = None) -> None:
    """Render the configuration and become nginx (a container's entry point):
    python -m mpstream.server.nginx --media DIR --listen ADDR:PORT --collector HOST:PORT"""
    args = launcher_parser().parse_args(argv)
    config = NginxConfig(
        workdir=args.workdir, media_root=args.media, listen=args.listen,
        collector_socket=None, collector_address=args.collector,
        multipath=supports_multipath_listen(), player_root=args.player,
    )  # fmt: skip
    args.workdir.mkdir(parents=True, exist_ok=True)
    # The access log goes to the container's volume; nginx -t would resolve the upstream now,
    # before the collector's container may be up, so the check is left to nginx's own start.
    config.write(check=False)
    argv_nginx = config.argv("-g", "daemon off; master_process on;")
    if not config.multipath:
        # Without MPTCP the stack would still serve, silently over plain TCP: refuse instead.
        if not shutil.which("mptcpize"):
            raise SystemExit(
                "nginx here has no `listen ... multipath` and mptcpize is not installed: "
                "install the mptcpize package (Debian) in the image, or an nginx with "
                "multipath support (1.29.7+)."
            )
        argv_nginx = ["mptcpize", "run", *argv_nginx]
    os.execvp(argv_nginx[0], argv_nginx)


if __name__ == "__main__":
    main()
