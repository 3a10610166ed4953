"""ServerStack: nginx (over MPTCP) in front of the QoE collector (Flask under gunicorn), on the
host or inside a topology's server namespace, up for the duration of a `with` block.

    with ServerStack(media_dir, netns=topo.server_ns, host=topo.server_addr) as stack:
        stack.base_url, stack.api_url, stack.access_log, stack.database_url

nginx listens on host:port over MPTCP (`listen ... multipath` where nginx has it, otherwise
nginx runs under `mptcpize run`); gunicorn listens on a unix socket in the work directory,
which nginx reaches whatever network namespace it is in. Both are stopped on exit, also after
an error or Ctrl-C.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

import requests

from mpstream.errors import UserError
from mpstream.manifests.lltree import read_low_latency
from mpstream.network import in_netns
from mpstream.proc import stop
from mpstream.qoe.collector import CollectorClient, CollectorRefused
from mpstream.scratch import clean_stale_tempdirs, session_mkdtemp
from mpstream.sending import SendOptions
from mpstream.server import process, storage
from mpstream.server.app import ensure_schema
from mpstream.server.nginx import NginxConfig, supports_multipath_listen

GUNICORN_CONF = Path(__file__).parent / "gunicorn_conf.py"
# gunicorn_conf.py's switch: the master imports the app once and forks its workers.
PRELOAD_ENV = "MPSTREAM_COLLECTOR_PRELOAD"
# A unix socket's path must fit the kernel's sun_path (108 bytes with its NUL).
SUN_PATH_MAX = 107
SOCKET_PREFIX = "mps-sock-"
APP_SPEC = "mpstream.server.app:create_app()"
START_TIMEOUT_S = 60.0
# A health check that hangs this long is a collector not up yet.
HEALTH_TIMEOUT_S = 2.0


class ServerStack:
    def __init__(
        self,
        media_dir: Path,
        *,
        netns: str | None = None,
        host: str = "127.0.0.1",
        port: int = 8080,
        database_url: str | None = None,
        workdir: Path | None = None,
        mptcp: bool = True,
        collector_workers: int | None = None,
        noop_endpoint: bool = False,
        api_rate: int = 5000,
        api_burst: int = 10000,
        also_listen: tuple[tuple[str, int], ...] = (),
        send: SendOptions | None = None,
        collector_app: str = APP_SPEC,
        collector_env: dict[str, str] | None = None,
        one_trial: bool = False,
        shared_collector: Path | str | None = None,
    ):
        self.media_dir = Path(media_dir)
        self.netns = netns
        self.host = host
        self.port = port
        self.mptcp = mptcp
        self.collector_workers = collector_workers
        self.noop_endpoint = noop_endpoint
        # nginx's limit on API requests per second from one client address, and its burst
        self.api_rate = api_rate
        self.api_burst = api_burst
        # (host, port) nginx listens on besides host:port (a multi-homed server)
        self.also_listen = tuple(also_listen)
        # nginx's socket options (tcp_nopush, tcp_nodelay, sndbuf)
        self.send = send or SendOptions()
        # The app gunicorn runs ("module:factory()"), and what it reads from its environment:
        # the collector, or an app that adds pages to it (runner/report/runpages.py).
        self.collector_app = collector_app
        self.collector_env = dict(collector_env or {})
        # A stack that serves one trial and goes: its collector imports the app once and forks
        # its workers (no HUP reload needed), and stops at once after nginx (every event was
        # committed before its POST was answered, and nginx, stopped first, sends no more).
        self.one_trial = one_trial
        if one_trial:
            self.collector_env[PRELOAD_ENV] = "1"
        # A collector already running for many stacks (`shared_collector`, a run's trials):
        # this stack starts and stops only its nginx, which reaches it through its socket.
        self.shared_collector = Path(shared_collector) if shared_collector else None
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else None
        self._database_url = database_url
        self.nginx: subprocess.Popen | None = None
        self.collector: subprocess.Popen | None = None
        # A low-latency live tree is served partly by its origin (server/origin/), behind nginx.
        self.low_latency = False  # decided at start, from the tree's live.json
        self.origin: subprocess.Popen | None = None
        self.mptcp_method: str = "off"  # "listen-multipath" | "mptcpize" | "off"

    # --- what users read ---

    @property
    def base_url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    @property
    def api_url(self) -> str:
        return self.base_url + "/api/v1"

    @property
    def dashboard_url(self) -> str:
        return self.base_url + "/dashboard/"

    @property
    def player_url(self) -> str:
        return self.base_url + "/player/index.html"

    @property
    def access_log(self) -> Path:
        return self._nginx_config().access_log

    @property
    def database_url(self) -> str:
        if self._database_url is None:
            assert self.workdir is not None, "the stack is not started"
            self._database_url = storage.sqlite_url(str(self.workdir / "qoe.sqlite3"))
        return self._database_url

    @property
    def collector_socket(self) -> Path:
        """The collector's socket: in the work directory, unless that path is too long for a
        socket (a workdir deep in a run folder, e.g. a cluster host's copy of a trial); then in
        the temp dir, under a name derived from the workdir so every handle on this stack
        finds it."""
        if self.shared_collector is not None:
            return self.shared_collector
        return self._socket("collector", "")

    @property
    def origin_socket(self) -> Path:
        """The low-latency origin's socket (server/origin/), placed as the collector's."""
        return self._socket("origin", "-origin")

    def _socket(self, name: str, suffix: str) -> Path:
        assert self.workdir is not None
        own = self.workdir / f"{name}.sock"
        if len(os.fsencode(own)) <= SUN_PATH_MAX:
            return own
        digest = hashlib.sha256(os.fsencode(self.workdir.resolve())).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / f"{SOCKET_PREFIX}{digest}{suffix}.sock"

    @property
    def collector_pidfile(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "collector.pid"

    @property
    def logs_dir(self) -> Path:
        assert self.workdir is not None, "the stack is not started"
        return self.workdir / "logs"

    # --- lifecycle ---

    def __enter__(self) -> ServerStack:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        if not (self.media_dir / ".").is_dir():
            raise UserError(
                f"media directory {self.media_dir} does not exist: make one with "
                "`mpstream encode ... --out DIR` and pass --media DIR."
            )
        if self.workdir is None:
            # A killed session's folder (its 1 GB probe file with it) goes before a new one.
            clean_stale_tempdirs(purposes=("server",))
            self.workdir = session_mkdtemp("server")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(exist_ok=True)
        try:
            # nginx starts while the collector boots (it reaches the collector only per
            # request); each is waited for once both are started.
            if self.shared_collector is None:
                self._spawn_collector()
            self.low_latency = read_low_latency(self.media_dir) is not None
            if self.low_latency:
                self._spawn_origin()
            self._spawn_nginx()
            self._wait_collector()
            if self.origin is not None:
                self._wait(self.origin_socket.exists, self.origin, self.logs_dir / "origin.log",
                           "the low-latency origin")
                self._nginx_config().share_with_workers(self.origin_socket)
            self._wait_nginx()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        # nginx first (no new requests reach the collector), then the collector.
        if self.nginx is not None:
            stop(self.nginx, signal.SIGQUIT, timeout=10)
        if self.origin is not None:
            stop(self.origin, signal.SIGTERM, timeout=10)
        if self.collector is not None:
            # gunicorn's own shutdown takes about a second even when quick (SIGQUIT).
            stop(self.collector, signal.SIGKILL if self.one_trial else signal.SIGTERM,
                 timeout=15)
        if self.workdir is None:
            return
        if self.shared_collector is None and self.collector_socket.parent != self.workdir:
            self.collector_socket.unlink(missing_ok=True)
        if not self.workdir.exists():
            return
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        else:
            self._nginx_config().remove_scratch()

    def stop_collector(self) -> None:
        """Stop only the collector (nginx then answers 502 on /api/), e.g. to test a player's
        re-sends; `start_collector()` brings it back on the same database."""
        if self.collector is not None:
            stop(self.collector, signal.SIGTERM, timeout=15)

    def start_collector(self) -> None:
        self._spawn_collector()
        self._wait_collector()

    def reload_collector(self) -> None:
        """Graceful restart: new workers, the old ones finish their requests first."""
        assert self.collector is not None
        self.collector.send_signal(signal.SIGHUP)

    # --- collector ---

    def _spawn_collector(self) -> None:
        # Create the tables once here rather than racing in every worker.
        engine = storage.make_engine(self.database_url)
        try:
            ensure_schema(engine)
        except Exception as exc:
            raise UserError(
                f"cannot reach the database {self.database_url}: {exc}. Check DATABASE_URL."
            ) from exc
        finally:
            engine.dispose()
        self.collector_socket.unlink(missing_ok=True)
        env = dict(os.environ)
        env.update(
            DATABASE_URL=self.database_url,
            MPSTREAM_COLLECTOR_BIND=f"unix:{self.collector_socket}",
            MPSTREAM_COLLECTOR_PIDFILE=str(self.collector_pidfile),
            MPSTREAM_NOOP_ENDPOINT="1" if self.noop_endpoint else "0",
        )
        env.update(self.collector_env)
        if self.collector_workers:
            env["MPSTREAM_COLLECTOR_WORKERS"] = str(self.collector_workers)
        argv = [
            *in_netns(self.netns),
            sys.executable, "-m", "gunicorn", "-c", str(GUNICORN_CONF), self.collector_app,
        ]  # fmt: skip
        self.collector = process.spawn(argv, self.logs_dir / "collector.log", env)

    def _wait_collector(self) -> None:
        if self.collector is None:  # a shared one, started before this stack
            if not self._collector_answers():
                raise UserError(f"the shared collector at {self.collector_socket} does not "
                                "answer: the run that started it has ended")
        else:
            self._wait(lambda: self._collector_answers(), self.collector,
                       self.logs_dir / "collector.log", "the collector")
        # nginx's workers reach the socket the collector has now made.
        if self.nginx is not None:
            self._nginx_config().share_with_workers(self.collector_socket)

    def _collector_answers(self) -> bool:
        try:
            CollectorClient.over_socket(self.collector_socket, HEALTH_TIMEOUT_S).health()
        except (OSError, CollectorRefused):
            return False
        return True

    # --- the low-latency origin ---

    def _spawn_origin(self) -> None:
        self.origin_socket.unlink(missing_ok=True)
        argv = [*in_netns(self.netns), sys.executable, "-m", "mpstream.server.origin",
                "--tree", str(self.media_dir.resolve()), "--socket", str(self.origin_socket)]
        self.origin = process.spawn(argv, self.logs_dir / "origin.log")

    # --- nginx ---

    def _nginx_config(self) -> NginxConfig:
        assert self.workdir is not None, "the stack is not started"
        def fmt(host: str, port: int) -> str:
            return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

        return NginxConfig(
            workdir=self.workdir,
            media_root=self.media_dir,
            listen=fmt(self.host, self.port),
            also_listen=tuple(fmt(h, p) for h, p in self.also_listen),
            collector_socket=self.collector_socket,
            origin_socket=self.origin_socket if self.low_latency else None,
            multipath=self.mptcp and supports_multipath_listen(),
            api_rate=self.api_rate,
            api_burst=self.api_burst,
            send=self.send,
        )

    def _spawn_nginx(self) -> None:
        config = self._nginx_config()
        prefix = in_netns(self.netns)
        config.write(prefix)
        if self.mptcp and config.multipath:
            self.mptcp_method = "listen-multipath"
        elif self.mptcp:
            if shutil.which("mptcpize") is None:
                raise UserError(
                    "this nginx has no `listen ... multipath` and mptcpize is missing: "
                    "install the mptcpd package (`make setup`), or serve with mptcp=False."
                )
            prefix = [*prefix, "mptcpize", "run"]
            self.mptcp_method = "mptcpize"
        argv = [*prefix, *config.argv("-g", "daemon off; master_process on;")]
        self.nginx = process.spawn(argv, self.logs_dir / "nginx.out")

    def _wait_nginx(self) -> None:
        assert self.nginx is not None
        error_log = self.logs_dir / "error.log"
        try:
            self._wait(self._nginx_answers, self.nginx, error_log, "nginx")
        except UserError:
            explained = self._nginx_config().explain(process.log_tail(error_log))
            if explained:
                raise UserError(explained) from None
            raise

    def _nginx_answers(self) -> bool:
        url = self.api_url + "/health"
        if self.netns:
            done = subprocess.run(
                [*in_netns(self.netns), "curl", "-s", "-o", "/dev/null",
                 "-w", "%{http_code}", "--max-time", "2", url],
                capture_output=True, text=True,
            )  # fmt: skip
            return done.stdout.strip() == "200"
        try:
            return requests.get(url, timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def _wait(self, answers, proc: subprocess.Popen, log: Path, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise UserError(
                    f"{what} exited at start (code {proc.returncode}):\n{process.log_tail(log)}"
                )
            if answers():
                return
            time.sleep(0.1)
        raise UserError(
            f"{what} did not answer within {START_TIMEOUT_S:.0f} s:\n{process.log_tail(log)}"
        )

    def describe(self) -> dict[str, object]:
        return {
            "base_url": self.base_url,
            "player_url": self.player_url,
            "dashboard_url": self.dashboard_url,
            "api_url": self.api_url,
            "database_url": self.database_url,
            "access_log": str(self.access_log),
            "mptcp": self.mptcp_method,
            "send": self.send.model_dump(),
            "netns": self.netns,
            "nginx_pid": self.nginx.pid if self.nginx else None,
            "collector_pid": self.collector.pid if self.collector else None,
            "origin_pid": self.origin.pid if self.origin else None,
        }

    def __repr__(self) -> str:
        return f"ServerStack({json.dumps(self.describe())})"


@contextlib.contextmanager
def shared_collector(workdir: Path, workers: int = 2) -> Iterator[Path]:
    """A collector for many stacks in turn (the trials of a run): started here and stopped on
    the way out, its database and log in `workdir`; yields its socket for
    `ServerStack(shared_collector=...)`. A unix socket is a file, so nginx reaches it from any
    network namespace; sessions are told apart by their ids, so each trial still reads back
    only its own."""
    stack = ServerStack(workdir, workdir=workdir, collector_workers=workers,
                        collector_env={PRELOAD_ENV: "1"})
    stack.logs_dir.mkdir(parents=True, exist_ok=True)
    stack.start_collector()
    try:
        yield stack.collector_socket
    finally:
        stack.stop_collector()
