"""`run_live`: a never-ending source -> ONE ffmpeg (one decode, every rung, HLS + DASH through
the tee muxer) -> a live tree nginx serves, kept current by a small publisher loop.

The tree (under --out):

    hls/master.m3u8                 written once every rung has its first segment
    hls/<rung>/index.m3u8           sliding-window media playlists (ffmpeg, temp file + rename)
    hls/<rung>/<stamp>-NNNNN.ts     MPEG-TS segments (ffmpeg, temp file + rename)
    dash/manifest.mpd               the published dynamic MPD (see below)
    dash/ffmpeg.mpd                 ffmpeg's own MPD, the publisher's input
    dash/<stamp>-init-<i>.m4s, dash/<stamp>-<i>-NNNNN.m4s   fMP4 (temp file + rename)
    live.json                       state: running | ended, and the stream's parameters

Nothing is ever served half-written: ffmpeg writes each segment, playlist and MPD under a
temporary name and renames it into place when complete, the publisher does the same with
manifest.mpd and master.m3u8, and nginx refuses `*.tmp`.

Ending (Ctrl-C, SIGTERM, or ffmpeg failing): ffmpeg is asked to stop (SIGINT), which makes it
write its trailers: every HLS playlist gets EXT-X-ENDLIST. The publisher then makes
manifest.mpd static, listing the segments still on disk, and live.json says `ended`. The
ended tree thus stays playable as a short on-demand presentation of the last window, and no
player mistakes it for a live stream.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import IO

from mpstream.encoder.commands import Intermediate, LiveLayout, intermediates, live_command
from mpstream.encoder.ladder import Ladder, load_ladder
from mpstream.encoder.lowlatency import LowLatency, check_timing
from mpstream.encoder.runner import FfmpegFailed, stderr_tail
from mpstream.encoder.sources import LiveSource, resolve_live_source
from mpstream.encoder.tools import require_tools
from mpstream.errors import UserError
from mpstream.manifests import dash, hls
from mpstream.manifests.bitstream import init_segment_codecs
from mpstream.manifests.codecs import CodecError
from mpstream.manifests.isobmff import BoxError
from mpstream.manifests.lltree import (
    LIVE_JSON,
    LOW_LATENCY_KEY,
    LowLatencyTree,
    Rendition,
    read_live_state,
)
from mpstream.proc import die_with_parent, pid_alive, stop

# The MPD's UTCTiming points here; nginx answers it itself (server/nginx.conf.j2), so a dash.js
# player computes latency against the server's clock.
UTC_TIMING_URL = "/api/time"
# Segments kept on disk after they left the playlists, for players that read a playlist just
# before it moved on.
KEEP_AFTER_WINDOW = 2
STOP_TIMEOUT_S = 10.0
_POLL_S = 0.1


@dataclass(frozen=True)
class LiveConfig:
    source: str
    ladder: str | Path = "small"
    segment_duration: float = 2.0
    window_s: float = 30.0
    out: Path = Path("media/live")
    # LL-DASH and LL-HLS, each segment served while it is written (None: whole segments)
    low_latency: LowLatency | None = None

    @property
    def window_segments(self) -> int:
        return max(3, math.ceil(self.window_s / self.segment_duration - 1e-9))


@dataclass
class LiveState:
    """live.json: what a player, the runner or a person needs to know about the stream."""

    state: str  # "starting", "running" or "ended"
    source: str
    ladder: str
    segment_duration: float
    window_segments: int
    stamp: str
    started_at: str
    pid: int
    hls_master: str = "hls/master.m3u8"
    dash_manifest: str = "dash/manifest.mpd"
    ended_at: str | None = None
    end_reason: str | None = None
    extra: dict = field(default_factory=dict)

    def write(self, root: Path) -> None:
        tmp = root / f".{LIVE_JSON}.tmp"
        tmp.write_text(json.dumps(self.__dict__, indent=2) + "\n")
        tmp.chmod(0o644)
        tmp.replace(root / LIVE_JSON)


def validate_config(config: LiveConfig) -> None:
    if not config.segment_duration > 0:
        raise UserError(
            f"--segment-duration must be a positive number of seconds, got"
            f" {config.segment_duration}."
        )
    if not config.window_s >= config.segment_duration:
        raise UserError(
            f"--window ({config.window_s:g} s) must hold at least one segment"
            f" ({config.segment_duration:g} s)."
        )
    if config.low_latency is not None:
        check_timing(config.segment_duration, config.low_latency)


def prepare_tree(out: Path) -> Path:
    """An empty directory for the tree. A previous live tree there (live.json) is replaced;
    anything else is refused, so a typo never wipes someone's files."""
    out = Path(out).resolve()
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; pass a directory for the live tree.")
    if out.is_dir() and any(out.iterdir()):
        if not (out / LIVE_JSON).is_file():
            raise UserError(
                f"--out {out} exists and does not hold a live tree (no {LIVE_JSON}); refusing"
                " to replace it. Pass a new or empty directory."
            )
        state = read_live_state(out) or {}
        if state.get("state") != "ended" and _alive(state.get("pid")):
            raise UserError(
                f"--out {out} is being written by a running `mpstream live` (pid"
                f" {state['pid']}); stop it first or pass another directory."
            )
        for child in out.iterdir():
            shutil.rmtree(child) if child.is_dir() else child.unlink()
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o755)  # nginx's workers read the tree as another user
    return out


def _alive(pid) -> bool:
    return isinstance(pid, int) and pid != os.getpid() and pid_alive(pid)


def run_live(
    config: LiveConfig,
    *,
    on_ready: Callable[[Path], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    on_warning: Callable[[str], None] | None = None,
) -> LiveState:
    """Run until interrupted (KeyboardInterrupt), `should_stop()` is true, or ffmpeg fails.
    `on_ready(out)` is called once both manifests are published; `on_warning(message)` once
    if the encoder falls behind real time."""
    validate_config(config)
    if config.low_latency is not None:  # 0.33 s parts of a 2 s segment are sixths of it
        config = replace(config, low_latency=config.low_latency.fitted(config.segment_duration))
    tools = require_tools()
    spec = load_ladder(config.ladder)
    src = resolve_live_source(config.source, spec.top.width, spec.top.height)
    out = prepare_tree(config.out)
    started = datetime.now(UTC)
    layout = LiveLayout(stamp=started.strftime("%Y%m%dT%H%M%S"))
    _make_stream_folders(out, spec)
    window = config.window_segments
    state = LiveState(
        state="starting", source=src.label, ladder=spec.name,
        segment_duration=config.segment_duration, window_segments=window, stamp=layout.stamp,
        started_at=started.isoformat(timespec="milliseconds"), pid=os.getpid(),
    )
    if config.low_latency is not None:
        state.extra[LOW_LATENCY_KEY] = _describe_low_latency(config, layout, spec, src)
    state.write(out)
    argv = live_command(tools.ffmpeg, src, spec, config.segment_duration, layout, window,
                        KEEP_AFTER_WINDOW, UTC_TIMING_URL, config.low_latency)
    publisher = Publisher(out, layout, spec, src, config.segment_duration,
                          low_latency=config.low_latency)
    reason = "interrupted"
    with tempfile.TemporaryFile() as stderr:
        proc = _start_ffmpeg(argv, out, stderr)
        state.extra["ffmpeg_pid"] = proc.pid
        pace = Pace(proc, config.segment_duration)
        try:
            reason = _publish_while_running(proc, pace, publisher, state, out,
                                            on_ready, should_stop, on_warning)
        except KeyboardInterrupt:
            reason = "interrupted"
        finally:
            stop(proc, graceful=signal.SIGINT, timeout=STOP_TIMEOUT_S)
            publisher.finish()
            state.state = "ended"
            state.ended_at = datetime.now(UTC).isoformat(timespec="milliseconds")
            state.end_reason = reason
            state.write(out)
        if reason.startswith("ffmpeg exited"):
            raise FfmpegFailed(
                f"the live ffmpeg stopped on its own ({reason}): {stderr_tail(stderr)}."
                " Check that the source still delivers (a camera unplugged?) and that the disk"
                " has space."
            )
    return state


def _describe_low_latency(config: LiveConfig, layout: LiveLayout, spec: Ladder,
                          src: LiveSource) -> dict:
    """live.json's low_latency block: what the origin makes the LL-HLS playlists from. Each
    AVC rung's playlist lists the DASH representation of the same index, as does the audio's."""
    low = config.low_latency
    assert low is not None
    renditions = [Rendition(playlist=_hls_name(item), rep=str(index),
                            kind="audio" if item.kind == "audio" else "video")
                  for index, item in enumerate(intermediates(spec, Path(".")))
                  if item.kind in ("avc", "audio")]
    return LowLatencyTree(
        stamp=layout.stamp, segment_duration=config.segment_duration,
        part_duration=low.part_duration, part_target=round(low.part_target(src.fps), 6),
        target_latency_s=low.target_s, window_segments=config.window_segments,
        renditions=tuple(renditions),
    ).model_dump(mode="json")


def _hls_name(item: Intermediate) -> str:
    return item.rung.name if item.rung is not None else "audio"


def _make_stream_folders(out: Path, spec: Ladder) -> None:
    """hls/<rung>/ for each rung and dash/, readable by nginx's workers."""
    for rung in spec.rungs_for("avc"):
        (out / "hls" / rung.name).mkdir(parents=True)
    (out / "dash").mkdir()
    for d in [out / "hls", out / "dash", *(out / "hls").iterdir()]:
        d.chmod(0o755)


def _start_ffmpeg(argv: list[str], out: Path, stderr: IO[bytes]) -> subprocess.Popen[str]:
    """ffmpeg in a session of its own: a terminal's Ctrl-C reaches only us, and we stop ffmpeg
    in the one way that lets it finish its playlists. Its progress comes on stdout."""
    argv = [argv[0], "-progress", "pipe:1", "-nostats", *argv[1:]]
    # `mpstream live` killed with -9 stops its encoder too (which then ends its files).
    return subprocess.Popen(argv, cwd=out, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=stderr, text=True, start_new_session=True,
                            preexec_fn=die_with_parent)


def _publish_while_running(
    proc: subprocess.Popen[str],
    pace: Pace,
    publisher: Publisher,
    state: LiveState,
    out: Path,
    on_ready: Callable[[Path], None] | None,
    should_stop: Callable[[], bool] | None,
    on_warning: Callable[[str], None] | None,
) -> str:
    """Publish the manifests as ffmpeg writes segments, until it exits or `should_stop()`;
    why it ended."""
    while proc.poll() is None:
        behind = pace.behind_s()
        if behind is not None and on_warning and not pace.warned:
            pace.warned = True
            on_warning(
                f"the encoder is {behind:.1f} s behind real time: latency to live will"
                " keep growing. Use a smaller ladder (--ladder small), faster presets"
                " or a lower frame rate, or free the CPU."
            )
        if publisher.update() and state.state == "starting":
            state.state = "running"
            state.write(out)
            if on_ready:
                on_ready(out)
        if should_stop and should_stop():
            return "stopped"
        time.sleep(_POLL_S)
    return f"ffmpeg exited with status {proc.returncode}"


class Pace:
    """How far ffmpeg's output lags the wall clock, from its `-progress` reports (read on a
    thread of its own so the pipe never fills)."""

    def __init__(self, proc: subprocess.Popen, segment_duration: float):
        self.started = time.monotonic()
        self.media_s = 0.0
        self.first_output: float | None = None
        self.warned = False
        # Allowed lag: the encoders' lookahead and start-up, plus a segment of slack.
        self.allowed_s = 3.0 + 2 * segment_duration
        threading.Thread(target=self._read, args=(proc.stdout,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            key, _, value = line.strip().partition("=")
            if key == "out_time_us" and value.isdigit():
                self.media_s = int(value) / 1e6
                if self.first_output is None and self.media_s > 0:
                    self.first_output = time.monotonic() - self.media_s

    def behind_s(self) -> float | None:
        """Seconds behind real time, when more than allowed; else None."""
        if self.first_output is None:
            return None
        behind = (time.monotonic() - self.first_output) - self.media_s
        return behind if behind > self.allowed_s else None


class Publisher:
    """Turns what ffmpeg writes into what players read: the HLS master playlist (once), and
    dash/manifest.mpd each time ffmpeg rewrites dash/ffmpeg.mpd."""

    def __init__(self, out: Path, layout: LiveLayout, spec: Ladder, src: LiveSource,
                 segment_duration: float, low_latency: LowLatency | None = None):
        self.out, self.layout, self.spec, self.src = out, layout, spec, src
        # Low latency: the media playlists are the origin's, made from the DASH segments; the
        # master names them and the audio's. The MPD tells the parts' timing.
        self.low_latency = low_latency is not None
        self.mpd_timing = (low_latency.mpd_timing(segment_duration) if low_latency is not None
                           else None)
        self.segment_duration = segment_duration
        self.items = intermediates(spec, Path("."))
        self.codecs: dict[str, str] = {}  # DASH Representation@id -> codecs string
        self.master_written = False
        self.mpd_mtime = 0
        self.title = f"mpstream live {spec.name} ladder: {src.label}"

    @property
    def ffmpeg_mpd(self) -> Path:
        return self.out / self.layout.ffmpeg_mpd

    @property
    def manifest(self) -> Path:
        return self.out / "dash" / "manifest.mpd"

    def update(self) -> bool:
        """Publish what changed; True once both manifests are out."""
        self._read_codecs()
        if not self.master_written and len(self.codecs) == len(self.items):
            self.master_written = self._write_master()
        try:
            mtime = self.ffmpeg_mpd.stat().st_mtime_ns
        except FileNotFoundError:
            return False
        if mtime != self.mpd_mtime and len(self.codecs) == len(self.items):
            dash.publish_live_mpd(self.ffmpeg_mpd, self.manifest, self.codecs, self.title,
                                  update_period=self.segment_duration,
                                  low_latency=self.mpd_timing)
            self.mpd_mtime = mtime
        return self.master_written and self.manifest.exists()

    def _read_codecs(self) -> None:
        for index, _ in enumerate(self.items):
            rep = str(index)
            if rep in self.codecs:
                continue
            init = self.out / "dash" / self.layout.dash_init.replace(
                "$RepresentationID$", rep).replace("$ext$", "m4s")
            # A failed read is retried on the next round.
            with contextlib.suppress(CodecError, BoxError, OSError):
                self.codecs[rep] = init_segment_codecs(init)[1]

    def _write_master(self) -> bool:
        enc = self.spec.encoding
        audio_codecs = self.codecs[str(len(self.items) - 1)]
        variants = []
        for index, item in enumerate(self.items):
            if item.kind != "avc" or item.rung is None:
                continue
            playlist = self.out / self.layout.hls_playlist(item.rung)
            if not self.low_latency and (not playlist.is_file()
                                         or "#EXTINF" not in playlist.read_text()):
                return False
            rung = item.rung
            audio = enc.audio_bitrate_kbps * 1000
            variants.append(hls.Variant(
                uri=f"{rung.name}/index.m3u8",
                # Capped VBR: the encoder never exceeds peak_factor × nominal over its VBV.
                peak_bandwidth=round(rung.bitrate * enc.peak_factor) + audio,
                average_bandwidth=rung.bitrate + audio, width=rung.width, height=rung.height,
                codecs=f"{self.codecs[str(index)]},{audio_codecs}",
                frame_rate=Fraction(self.src.fps),
            ))
        tmp = self.out / "hls" / ".master.m3u8.tmp"
        hls.write_master(tmp, variants, audio_uri="audio/index.m3u8" if self.low_latency
                         else None)
        tmp.chmod(0o644)
        tmp.replace(self.out / "hls" / "master.m3u8")
        return True

    def finish(self) -> None:
        """After ffmpeg has exited: every playlist ends (ENDLIST), the MPD becomes static over
        the segments left on disk, and no temporary file remains."""
        for tmp in self.out.rglob("*.tmp"):
            tmp.unlink(missing_ok=True)
        for item in self.items:
            if item.kind == "avc" and item.rung is not None:
                playlist = self.out / self.layout.hls_playlist(item.rung)
                if playlist.is_file() and "#EXT-X-ENDLIST" not in playlist.read_text():
                    # ffmpeg was killed before its trailer: end the playlist ourselves.
                    with playlist.open("a") as f:
                        f.write("#EXT-X-ENDLIST\n")
        self._read_codecs()
        numbers = self._segment_numbers()
        if self.ffmpeg_mpd.is_file() and numbers and len(self.codecs) == len(self.items):
            first, last = numbers
            dash.end_live_mpd(self.ffmpeg_mpd, self.manifest, self.codecs, self.title,
                              first, last)
        else:
            self.manifest.unlink(missing_ok=True)  # nothing playable was made

    def _segment_numbers(self) -> tuple[int, int] | None:
        """(first, last) segment number that every DASH representation still has on disk."""
        pattern = re.compile(rf"^{re.escape(self.layout.stamp)}-(\d+)-(\d+)\.m4s$")
        per_rep: dict[str, set[int]] = {}
        for path in (self.out / "dash").iterdir():
            m = pattern.match(path.name)
            if m:
                per_rep.setdefault(m.group(1), set()).add(int(m.group(2)))
        if len(per_rep) != len(self.items):
            return None
        common = set.intersection(*per_rep.values())
        if not common:
            return None
        # The longest run of consecutive numbers ending at the last common one.
        last = max(common)
        first = last
        while first - 1 in common:
            first -= 1
        return first, last


@contextlib.contextmanager
def live_in_background(config: LiveConfig, ready_timeout: float = 60.0) -> Iterator[Path]:
    """`mpstream live` as a child process (the runner and the tests play from it): yields the
    tree once both manifests are published; on exit stops it the way Ctrl-C does and waits
    until the tree has ended."""
    out = Path(config.out).resolve()
    argv = [sys.executable, "-m", "mpstream.cli", "live", config.source,
            "--ladder", str(config.ladder), "--segment-duration", f"{config.segment_duration:g}",
            "--window", f"{config.window_s:g}", "--out", str(out)]
    low = config.low_latency
    if low is not None:
        argv += ["--low-latency", "--part-duration", f"{low.part_duration:g}",
                 "--target-latency", f"{low.target_s:g}"]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + ready_timeout
            while True:
                state = read_live_state(out)
                if state and state.get("pid") == proc.pid and state["state"] == "running":
                    break
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    tail = log.read().decode(errors="replace").strip().splitlines()[-4:]
                    raise UserError(
                        f"`mpstream live {config.source}` did not start streaming within"
                        f" {ready_timeout:g} s: {' | '.join(tail) or 'no output'}"
                    )
                time.sleep(0.2)
            yield out
        finally:
            stop(proc, graceful=signal.SIGINT, timeout=STOP_TIMEOUT_S + 10)
