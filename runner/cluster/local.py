"""`mpstream run --cluster local:N`: a cluster on this one machine for one run, how a user tries
cluster mode and how the tests run it.

Each host, and the head, is a sandbox: its own network namespace (an address on a private
bridge in a hub namespace, 10.200.0.0/24, and no route anywhere else: nothing Ray tries can leave
the machine), its own mount namespace (a fresh /run, so Ray's sessions, mpstream's state and the
namespaces its trials make are the host's own) and its own pid namespace. A host's temporary
files (TMPDIR: browser profiles, the server stack's files, trial scratch, the media cache) go
to a folder in its own /run too; /tmp stays the machine's, so a checkout, a virtual environment,
a scenario, media or traces kept there are seen by every host as by the user.

A sandbox's first process (`init` below) reaps orphans and, told to stop, sends
SIGTERM to everything in it, waits for the trials to tear down, and exits: the kernel then ends
whatever is left, and with the last process the mount namespace and every network namespace a
trial made in it are gone. The hosts are started with `mpstream cluster head` and `mpstream
cluster join`, the commands a testbed uses, and the run's driver runs inside the head's sandbox.

What it makes is recorded before it is made (`clusters/NAME.json` in the state root: owner,
namespaces, the sandboxes' first processes), so `mpstream clean` removes a cluster whose `run`
was killed with -9. Sandboxes see the machine's file system (the repository, the media, the run
folder) but not its /run: a sandbox checks, before it says it is ready, that it sees the
interpreter, the project, the working folder and the run folder, and names what it cannot see.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from mpstream import state
from mpstream.clean import Cleaned
from mpstream.errors import UserError
from mpstream.netem.system import require_root
from mpstream.netem.teardown import NETNS_DIR, netns_pids, remove_namespaces
from mpstream.network import in_netns
from mpstream.proc import child_pids, pid_alive, stop, stop_pids
from mpstream.runner.cluster.hosts import CACHE_ENV, CONFIG_ENV, TOKEN_FILE, ensure_token
from mpstream.runner.layout import TRIAL_JSON, trial_dir
from mpstream.runner.process import TEARDOWN_TIMEOUT_S, Finished, Started
from mpstream.runner.record import load_record
from mpstream.runner.scenario import Trial

NS_PREFIX = "mpsc-"
SUBNET = "10.200.0"  # .1 the head, .2 and up the hosts
MAX_HOSTS = 32
# Inside a sandbox its own /run holds the token, mpstream's state (Ray's session folder among
# it: hosts.ray_temp_dir), a host's cache (media, trial scratch) and the sandbox's TMPDIR. Private
# temporary files matter beyond tidiness: the hosts' pid namespaces reuse pids, and a folder
# named after one host's live process (mpstream/scratch.py) would look stale to another's
# `clean`. /tmp itself is left alone: a fresh one there hid any checkout under /tmp.
SANDBOX_CONFIG = "/run/mpstream/cluster"
SANDBOX_STATE = "/run/mpstream"
SANDBOX_CACHE = "/run/mpstream-host/cache"
SANDBOX_TMPDIR = "/run/mpstream-host/tmp"
# How long a sandbox's init waits, once told to stop, for its processes to end (a host's: a
# trial's teardown; the head's: no trial, and Ray's head services linger on SIGTERM) before it
# exits and the kernel ends the rest.
STOP_GRACE_S = TEARDOWN_TIMEOUT_S + 15
HEAD_STOP_GRACE_S = 5
START_TIMEOUT_S = 180
# What a sandbox's init says, instead of "ready", of a path it needs and cannot see.
CANNOT_SEE = "cannot see "
# What the run's driver said (Ray's warnings, media copied to hosts, errors), in the run folder.
CLUSTER_LOG = "cluster.log"


def local_hosts(spec: str) -> int | None:
    """N of `local:N`; None for a cluster's ADDRESS."""
    match = re.fullmatch(r"local(?::(\d+))?", spec)
    if match is None:
        return None
    n = int(match.group(1) or 0)
    if not 1 <= n <= MAX_HOSTS:
        raise UserError(f"--cluster {spec}: give the number of hosts, local:N with N from 1 "
                        f"to {MAX_HOSTS}")
    return n


def clusters_dir() -> Path:
    return state.kind_dir(state.CLUSTERS)


# --- a sandbox ----------------------------------------------------------------------------------


@dataclass
class Sandbox:
    """One simulated machine: see the module's docstring."""

    name: str  # "head", "local-1", ...
    netns: str
    address: str
    host: bool  # runs trials
    proc: subprocess.Popen | None = None
    init_pid: int | None = None

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({CONFIG_ENV: SANDBOX_CONFIG, state.ENV: SANDBOX_STATE})
        env["TMPDIR"] = SANDBOX_TMPDIR
        if self.host:
            env[CACHE_ENV] = SANDBOX_CACHE
        return env

    def start(self, token: Path, log: Path, needs: list[Path]) -> int:
        """The sandbox up and its init's pid; `needs`: the paths its processes must see (an
        error names the first one it cannot)."""
        argv = in_netns(self.netns, [
            "unshare", "--mount", "--propagation", "private", "--pid", "--fork",
            "--mount-proc", "--kill-child=SIGKILL",
            sys.executable, "-m", "mpstream.runner.cluster.local", "init", str(token),
            str(STOP_GRACE_S if self.host else HEAD_STOP_GRACE_S), *map(str, needs)])
        with log.open("ab") as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=err, start_new_session=True)
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], 60)
        line = self.proc.stdout.readline().decode(errors="replace").strip() if ready else ""
        self.proc.stdout.close()
        if line.startswith(CANNOT_SEE):
            self.proc.wait(10)
            raise UserError(cannot_see_message(self.name, line.removeprefix(CANNOT_SEE)))
        if line != "ready":
            raise UserError(f"sandbox {self.name} did not start: {log.read_text()[-500:]}")
        self.init_pid = next(iter(child_pids(self.proc.pid)), None)
        if self.init_pid is None:
            raise UserError(f"sandbox {self.name}: no init process")
        return self.init_pid

    def popen(self, argv: list[str], env: dict[str, str] | None = None,
              **kw) -> subprocess.Popen:
        """A process inside the sandbox (its network, mounts and pids), with the sandbox's
        environment and `env` on top. With a new pid namespace nsenter forks: the process is
        nsenter's child, and nsenter dies (SIGTERM) with the process that started it."""
        assert self.init_pid is not None
        enter = ["setpriv", "--pdeathsig", "TERM", "nsenter", f"--target={self.init_pid}",
                 "--net", "--mount", "--pid", f"--wd={os.getcwd()}"]
        return subprocess.Popen([*enter, *argv], env={**self.env(), **(env or {})}, **kw)

    def run(self, argv: list[str], timeout: float = START_TIMEOUT_S) -> None:
        proc = self.popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop(proc)
            raise UserError(f"{self.name}: `{' '.join(argv)}` took over {timeout:.0f} s") from None
        if proc.returncode != 0:
            raise UserError(f"{self.name}: `{' '.join(argv)}` failed: {out.strip()[-600:]}")

    def ask_to_stop(self) -> None:
        if self.init_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init_pid, signal.SIGTERM)

    def wait_stopped(self, timeout: float) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            if self.init_pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.init_pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)


# --- the cluster ------------------------------------------------------------------------------


@dataclass
class LocalCluster:
    """A head and `hosts` hosts in sandboxes, for as long as the `with` block runs (also on an
    error, Ctrl-C or SIGTERM)."""

    hosts: int
    name: str = field(default_factory=lambda: f"c{os.getpid()}")
    # Paths beyond the project's own (project_paths) that every sandbox must see: the run folder.
    inputs: list[Path] = field(default_factory=list)
    sandboxes: list[Sandbox] = field(init=False)

    @property
    def needs(self) -> list[Path]:
        return [*project_paths(), *self.inputs]

    def __post_init__(self) -> None:
        self.head = Sandbox("head", self._ns("head"), f"{SUBNET}.1", host=False)
        self.sandboxes = [self.head] + [
            Sandbox(f"local-{i}", self._ns(f"h{i}"), f"{SUBNET}.{i + 1}", host=True)
            for i in range(1, self.hosts + 1)]
        self.hub = self._ns("hub")
        self.folder = clusters_dir() / self.name
        self.record_path = clusters_dir() / f"{self.name}.json"

    def _ns(self, role: str) -> str:
        return f"{NS_PREFIX}{self.name}-{role}"

    @property
    def address(self) -> str:
        return f"{self.head.address}:6379"

    def __enter__(self) -> LocalCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _write_record(self) -> None:
        self.record_path.parent.mkdir(parents=True, exist_ok=True)
        record = {"name": self.name, "owner_pid": os.getpid(),
                  "namespaces": [self.hub, *(s.netns for s in self.sandboxes)],
                  "inits": {s.netns: s.init_pid for s in self.sandboxes if s.init_pid}}
        tmp = self.record_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=2))
        tmp.replace(self.record_path)

    def start(self) -> None:
        require_root()
        clean_stale()  # what a killed run left: its owner is gone
        self._write_record()  # before anything it names exists
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        token_dir = self.folder / "config"
        token_dir.mkdir(mode=0o700, exist_ok=True)
        os.environ[CONFIG_ENV], saved = str(token_dir), os.environ.get(CONFIG_ENV)
        try:
            token = ensure_token()
        finally:
            _restore_env(CONFIG_ENV, saved)
        self._network()
        for sandbox in self.sandboxes:
            sandbox.start(token, self.folder / f"{sandbox.name}.log", self.needs)
            self._write_record()
        mpstream = [sys.executable, "-m", "mpstream.cli", "cluster"]
        self.head.run([*mpstream, "head", "--node-address", self.head.address, "--no-trials",
                       "--name", "head"])
        joins = [(s, s.popen([*mpstream, "join", self.address, "--node-address", s.address,
                              "--name", s.name], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
                 for s in self.sandboxes[1:]]
        for sandbox, proc in joins:
            out, _ = proc.communicate(timeout=START_TIMEOUT_S)
            if proc.returncode != 0:
                raise UserError(f"{sandbox.name} could not join: {out.strip()[-600:]}")

    def _network(self) -> None:
        def ip(*args: str) -> None:
            done = subprocess.run(["ip", *args], capture_output=True, text=True)
            if done.returncode != 0:
                raise UserError(f"ip {' '.join(args)}: {done.stderr.strip()}")

        ip("netns", "add", self.hub)
        ip("-n", self.hub, "link", "add", "br0", "type", "bridge")
        ip("-n", self.hub, "link", "set", "br0", "up")
        for sandbox in self.sandboxes:
            ip("netns", "add", sandbox.netns)
            port = sandbox.name.replace("local-", "h")
            ip("-n", self.hub, "link", "add", port, "type", "veth", "peer", "name", "ctl0",
               "netns", sandbox.netns)
            ip("-n", self.hub, "link", "set", port, "master", "br0", "up")
            ip("-n", sandbox.netns, "addr", "add", f"{sandbox.address}/24", "dev", "ctl0")
            ip("-n", sandbox.netns, "link", "set", "ctl0", "up")
            ip("-n", sandbox.netns, "link", "set", "lo", "up")

    def stop(self) -> None:
        """The hosts asked to stop at once (their trials tear down side by side), then the
        head; whatever is left killed, the namespaces removed, the record last."""
        hosts = self.sandboxes[1:]
        for sandbox in hosts:
            sandbox.ask_to_stop()
        for sandbox in hosts:
            sandbox.wait_stopped(STOP_GRACE_S + 5)
        self.head.ask_to_stop()
        self.head.wait_stopped(HEAD_STOP_GRACE_S + 5)
        remove_cluster(self.name)

    def driver(self, run_dir: Path, keys: list[str], margin_s: float, log: Path,
               balance: bool = False) -> subprocess.Popen:
        """The run's driver inside the head's sandbox: `python -m
        mpstream.runner.cluster.raytrials`."""
        argv = [sys.executable, "-m", "mpstream.runner.cluster.raytrials", str(run_dir), *keys,
                "--address", self.address, "--node-address", self.head.address,
                "--margin", str(margin_s), *(["--balance-hosts"] if balance else [])]
        with log.open("ab") as err:
            return self.head.popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=err, text=True)


def project_paths() -> list[Path]:
    """What every sandbox runs from: the interpreter as it is called (a virtual environment's
    own path), the packages of mpstream's parts and the working folder (nsenter's --wd)."""
    parts = {Path(state.__file__).parent, Path(__file__).parents[1]}  # mpstream/, runner/
    return [Path(sys.executable), *sorted(parts), Path(os.getcwd())]


def cannot_see_message(sandbox: str, path: str) -> str:
    return (f"local cluster host {sandbox} cannot see {path}: each host of `--cluster local:N` "
            "mounts its own /run, which hides whatever the machine keeps there. Move it (the "
            "checkout and its virtual environment, the run folder with --out, or the working "
            "folder) out of /run, e.g. under your home folder or /tmp, and run again")


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


class LocalClusterTrials:
    """A run's trials on a local cluster made for it (runner/process.py's TrialRunner)."""

    def __init__(self, hosts: int, margin_s: float, balance: bool = False):
        self.hosts, self.margin_s, self.balance = hosts, margin_s, balance

    def run(self, run_dir: Path, trials: list[Trial], started: Started,
            finished: Finished) -> None:
        if not trials:
            return
        if Path(run_dir).resolve().is_relative_to("/run"):
            raise UserError(f"{run_dir}: a local cluster's hosts each have their own /run, so "
                            "the run folder must be elsewhere")
        with LocalCluster(self.hosts, inputs=[Path(run_dir).resolve()]) as cluster:
            log = Path(run_dir) / CLUSTER_LOG
            proc = cluster.driver(run_dir, [t.key for t in trials], self.margin_s, log,
                                  self.balance)
            try:
                self._follow(proc, run_dir, started, finished)
                code = proc.wait()
            except KeyboardInterrupt:
                _interrupt(proc)
                raise
            if code == 130:
                raise KeyboardInterrupt
            if code != 0:
                said = [line for line in log.read_text().splitlines() if line.strip()]
                errors = [line for line in said if line.startswith("error:")]
                raise UserError("the local cluster's run stopped: "
                                + ((errors or said or ["(no message)"])[-1]
                                   .removeprefix("error: ")))

    @staticmethod
    def _follow(proc: subprocess.Popen, run_dir: Path, started: Started,
                finished: Finished) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "started":
                started(event["key"])
            elif event.get("event") == "finished":
                record = load_record(trial_dir(run_dir, event["key"]) / TRIAL_JSON)
                if record is not None:
                    finished(event["key"], record)


def _interrupt(proc: subprocess.Popen) -> None:
    """The driver (nsenter's child) stops its trials as Ctrl-C would; it is waited for."""
    for pid in child_pids(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    try:
        proc.wait(TEARDOWN_TIMEOUT_S + 30)
    except subprocess.TimeoutExpired:
        stop(proc)


# --- what a killed run left -----------------------------------------------------------------------


def _records() -> dict[str, dict]:
    out = {}
    folder = clusters_dir()
    for path in folder.glob("*.json") if folder.is_dir() else []:
        try:
            out[path.stem] = json.loads(path.read_text())
        except (OSError, ValueError):
            out[path.stem] = {}
    return out


def _namespaces_of(name: str) -> list[str]:
    if not NETNS_DIR.is_dir():
        return []
    return sorted(p.name for p in NETNS_DIR.iterdir()
                  if p.name.startswith(f"{NS_PREFIX}{name}-"))


def remove_cluster(name: str, record: dict | None = None) -> list[str]:
    """Stops every sandbox of cluster `name` (its first process, then anything left in its
    namespaces), removes its namespaces, folder and record; returns the namespaces."""
    record = record if record is not None else _records().get(name, {})
    namespaces = sorted(set(record.get("namespaces", [])) | set(_namespaces_of(name)))
    namespaces = [ns for ns in namespaces if (NETNS_DIR / ns).exists()]
    inits = [pid for ns, pid in (record.get("inits") or {}).items()
             if ns in namespaces and pid in netns_pids(ns)]
    stop_pids(inits, timeout=STOP_GRACE_S)  # each sandbox stops its own, then ends
    remove_namespaces(namespaces)
    shutil.rmtree(clusters_dir() / name, ignore_errors=True)
    (clusters_dir() / f"{name}.json").unlink(missing_ok=True)
    (clusters_dir() / f"{name}.tmp").unlink(missing_ok=True)
    return namespaces


def clean_stale() -> list[str]:
    """Removes the local clusters whose `run` died; one line each of what went."""
    lines = []
    records = _records()
    names = set(records)
    if NETNS_DIR.is_dir():
        names |= {m.group(1) for p in NETNS_DIR.iterdir()
                  if (m := re.match(rf"{NS_PREFIX}(c\d+)-", p.name))}
    for name in sorted(names):
        owner = (records.get(name) or {}).get("owner_pid")
        if isinstance(owner, int) and pid_alive(owner) and owner != os.getpid():
            continue
        gone = remove_cluster(name, records.get(name))
        why = f"owner pid {owner} is gone" if owner else "no record"
        lines.append(f"removed local cluster {name} ({why}): namespaces {' '.join(gone)}"
                     if gone else f"removed local cluster {name} ({why}): its record")
    return lines


def clean_step() -> Cleaned:
    """`mpstream clean`'s step for local clusters (mpstream/hooks.py)."""
    lines = clean_stale()
    return Cleaned(lines, acted=bool(lines))


def leftovers() -> list[str]:
    """What is there of any local cluster: namespaces and records. Empty after teardown."""
    found = [f"namespace {p.name}" for p in NETNS_DIR.iterdir()
             if p.name.startswith(NS_PREFIX)] if NETNS_DIR.is_dir() else []
    found += [f"record {name}" for name in _records()]
    return found


# --- a sandbox's first process ------------------------------------------------------------------


def init(token: Path, grace_s: float, needs: list[Path]) -> int:
    """Pid 1 of a sandbox: mounts its own /run (with its cache and TMPDIR in it), checks it
    sees every path in `needs` (else says which it cannot and exits), puts the token in its
    /run, says "ready", reaps orphans until told to stop, then stops everything in it."""
    secret = token.read_bytes()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "mode=0755", "mpstream-run", "/run"],
                   check=True)
    Path(SANDBOX_CACHE).mkdir(parents=True)
    Path(SANDBOX_TMPDIR).mkdir(parents=True)
    os.chmod(SANDBOX_TMPDIR, 0o1777)  # as /tmp's
    for path in needs:
        if not path.exists():
            print(f"{CANNOT_SEE}{path}", flush=True)
            return 1
    config = Path(SANDBOX_CONFIG)
    config.mkdir(mode=0o700, parents=True)
    fd = os.open(config / TOKEN_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(secret)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(True))
    print("ready", flush=True)
    sys.stdout.close()
    while not stopping:
        _reap()
        time.sleep(0.5)
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGTERM)  # every process of this pid namespace but this one
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _others_alive():
        _reap()
        time.sleep(0.2)
    return 0  # the kernel ends whatever is left


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _others_alive() -> bool:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != "1":
            with contextlib.suppress(OSError, IndexError):
                if not (entry / "stat").read_text().rsplit(") ", 1)[1].startswith("Z"):
                    return True
    return False


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "init":
        sys.exit(init(Path(sys.argv[2]), float(sys.argv[3]), [Path(p) for p in sys.argv[4:]]))
    print("usage: python -m mpstream.runner.cluster.local init TOKEN_FILE GRACE_S "
          "[NEEDED_PATH ...]", file=sys.stderr)
    sys.exit(2)
