"""gunicorn settings of the QoE collector (`gunicorn -c server/gunicorn_conf.py ...`).

Everything a run varies comes from the environment, so the same file serves the test suite,
`mpstream serve` and the container:
  MPSTREAM_COLLECTOR_BIND     where to listen (default 127.0.0.1:8081; ServerStack: a unix socket)
  MPSTREAM_COLLECTOR_WORKERS  worker processes (default: sized to the machine, see below)
  MPSTREAM_COLLECTOR_PIDFILE  where the master writes its pid (for `kill -HUP`)
  MPSTREAM_DATABASE_WAIT_S    wait up to this long for DATABASE_URL to accept connections
                              before starting workers (a database started beside the collector)
  MPSTREAM_COLLECTOR_PRELOAD  1: the master imports the app once and forks the workers from it
                              (a trial's collector: half the CPU at start; a HUP then does not
                              pick up new code)
Graceful restart: SIGHUP starts fresh workers (re-reading the app) and retires the old ones
after their requests finish; the listening socket stays open.
"""

import multiprocessing
import os

bind = os.environ.get("MPSTREAM_COLLECTOR_BIND", "127.0.0.1:8081").split(",")
# Sync workers block on the database; 2 per core plus one keeps a core busy while another
# worker waits for a commit. Capped: SQLite has one writer at a time anyway.
workers = int(
    os.environ.get("MPSTREAM_COLLECTOR_WORKERS") or min(2 * multiprocessing.cpu_count() + 1, 9)
)
worker_class = "sync"
timeout = 30
graceful_timeout = 10
keepalive = 5
# Fresh workers import the app themselves, so a HUP picks up new code; a collector that lives
# for one trial imports it once in the master instead (about a second of CPU per worker here).
preload_app = os.environ.get("MPSTREAM_COLLECTOR_PRELOAD") == "1"
pidfile = os.environ.get("MPSTREAM_COLLECTOR_PIDFILE") or None
# Owner-only: the collector's unix socket and its files. ServerStack then opens the socket to the
# group of nginx's workers alone (NginxConfig.share_with_workers).
umask = 0o077
accesslog = None  # nginx logs every request
errorlog = "-"
loglevel = os.environ.get("MPSTREAM_COLLECTOR_LOGLEVEL", "warning")
proc_name = "mpstream-collector"


def on_starting(server):
    """Workers build the app, which creates the schema, at once; a database that is still
    starting would make them fail to boot, so the master waits for it first when asked to."""
    wait_s = float(os.environ.get("MPSTREAM_DATABASE_WAIT_S") or 0)
    url = os.environ.get("DATABASE_URL")
    if wait_s > 0 and url:
        from mpstream.server.storage import wait_for_database

        server.log.info("waiting up to %g s for the database", wait_s)
        wait_for_database(url, wait_s)


def post_fork(server, worker):
    """A preloaded app's database connections were opened in the master: each worker drops
    them (without closing the master's) and opens its own."""
    if preload_app:
        engine = server.app.wsgi().extensions.get("mpstream_engine")
        if engine is not None:
            engine.dispose(close=False)
