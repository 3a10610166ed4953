"""Real servers for tests and benchmarks (bench/ imports this too): a throwaway PostgreSQL
cluster and a tiny media tree.

Both are the real thing (Debian's PostgreSQL, ffmpeg), made in a temporary directory and
removed afterwards.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from mpstream.errors import UserError

PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
PG_USER = "postgres"


def _pg_tool(name: str) -> str:
    for d in PG_BIN_DIRS:
        if (d / name).exists():
            return str(d / name)
    found = shutil.which(name)
    if found is None:
        raise UserError(f"PostgreSQL's {name} is missing: run `make setup` (installs postgresql).")
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def throwaway_postgres(dbname: str = "mpstream") -> Iterator[str]:
    """Start a fresh PostgreSQL cluster (initdb + pg_ctl as the `postgres` system user, on a
    unix socket in a temporary directory), yield its SQLAlchemy URL, stop and remove it."""
    if os.geteuid() != 0:
        raise UserError("a throwaway PostgreSQL cluster needs root (to run as the postgres user)")
    entry = pwd.getpwnam(PG_USER)
    tmp = Path(tempfile.mkdtemp(prefix="mps-pg-"))
    data, sock = tmp / "data", tmp / "sock"
    sock.mkdir()
    for p in (tmp, sock):
        os.chown(p, entry.pw_uid, entry.pw_gid)
    port = _free_port()

    def as_pg(argv: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run(
            argv, user=PG_USER, group=entry.pw_gid, capture_output=True, text=True, cwd=tmp,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"},
        )  # fmt: skip

    started = False
    try:
        done = as_pg([_pg_tool("initdb"), "-D", str(data), "-U", PG_USER, "--auth=trust",
                      "-E", "UTF8", "--no-sync"])  # fmt: skip
        if done.returncode != 0:
            raise UserError(f"initdb failed: {done.stderr.strip()}")
        opts = f"-k {sock} -p {port} -c listen_addresses='' -c fsync=off"
        done = as_pg([_pg_tool("pg_ctl"), "-D", str(data), "-o", opts, "-l",
                      str(tmp / "server.log"), "-w", "-t", "30", "start"])  # fmt: skip
        if done.returncode != 0:
            log = (tmp / "server.log").read_text(errors="replace")[-2000:]
            raise UserError(f"PostgreSQL did not start: {done.stderr.strip()}\n{log}")
        started = True
        done = as_pg([_pg_tool("createdb"), "-h", str(sock), "-p", str(port), dbname])
        if done.returncode != 0:
            raise UserError(f"createdb failed: {done.stderr.strip()}")
        yield f"postgresql+psycopg://{PG_USER}@/{dbname}?host={sock}&port={port}"
    finally:
        if started:
            as_pg([_pg_tool("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"])
        shutil.rmtree(tmp, ignore_errors=True)


def make_tiny_media(out: Path, seconds: int = 6, segment_s: int = 2) -> Path:
    """A small HLS (MPEG-TS) and DASH (fMP4) tree of a test pattern with ffmpeg, in the layout
    the encoder makes (hls/master.m3u8, hls/<rung>/index.m3u8, dash/manifest.mpd)."""
    out = Path(out)
    rung = out / "hls" / "360p"
    rung.mkdir(parents=True, exist_ok=True)
    (out / "dash").mkdir(parents=True, exist_ok=True)
    source = [
        "-f", "lavfi", "-i", f"testsrc2=size=640x360:rate=25:duration={seconds}",
        "-f", "lavfi", "-i", f"sine=frequency=440:duration={seconds}",
        "-c:v", "libx264", "-preset", "ultrafast", "-b:v", "800k", "-g", str(25 * segment_s),
        "-keyint_min", str(25 * segment_s), "-sc_threshold", "0",
        "-c:a", "aac", "-b:a", "64k",
    ]  # fmt: skip
    ffmpeg = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y"]
    subprocess.run(
        [*ffmpeg, *source, "-f", "hls", "-hls_time", str(segment_s), "-hls_playlist_type", "vod",
         "-hls_segment_filename", str(rung / "seg_%03d.ts"), str(rung / "index.m3u8")],
        check=True,
    )  # fmt: skip
    (out / "hls" / "master.m3u8").write_text(
        "#EXTM3U\n#EXT-X-VERSION:3\n"
        '#EXT-X-STREAM-INF:BANDWIDTH=900000,RESOLUTION=640x360,CODECS="avc1.64001e,mp4a.40.2"\n'
        "360p/index.m3u8\n"
    )
    subprocess.run(
        [*ffmpeg, *source, "-f", "dash", "-seg_duration", str(segment_s), "-use_template", "1",
         "-use_timeline", "0", "-init_seg_name", "init-$RepresentationID$.m4s",
         "-media_seg_name", "chunk-$RepresentationID$-$Number%05d$.m4s",
         str(out / "dash" / "manifest.mpd")],
        check=True,
    )  # fmt: skip
    return out
