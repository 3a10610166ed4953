"""`mpstream live synthetic` for real: one ffmpeg, served by nginx while it writes. The
playlists and the MPD slide (their size holds, old segments leave the disk), every segment a
client is sent is complete, nginx answers the MPD's UTCTiming, and SIGINT ends the stream with
an ended tree and no ffmpeg left."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest
import requests
from lxml import etree

from mpstream.manifests.isobmff import read_sample_entries
from mpstream.proc import pid_alive, stop
from mpstream.server.stack import ServerStack
from tests.servers import _free_port

SEGMENT_S = 1.0
WINDOW_SEGMENTS = 4
KEEP = 2  # encoder.live.KEEP_AFTER_WINDOW
NS = {"d": "urn:mpeg:dash:schema:mpd:2011"}


def _ts_complete(body: bytes) -> bool:
    return len(body) > 0 and len(body) % 188 == 0 and all(b == 0x47 for b in body[::188])


def _mp4_complete(body: bytes) -> bool:
    """Top-level boxes cover the body exactly and it has its media (moof + mdat)."""
    offset, kinds = 0, []
    while offset + 8 <= len(body):
        size = int.from_bytes(body[offset:offset + 4], "big")
        if size < 8:
            return False
        kinds.append(body[offset + 4:offset + 8])
        offset += size
    return offset == len(body) and b"moof" in kinds and b"mdat" in kinds


class Fetcher(threading.Thread):
    """A client that keeps following the playlists and the MPD and downloads every segment
    they name, as a player would, recording anything incomplete."""

    def __init__(self, base: str, rungs: list[str]):
        super().__init__(daemon=True)
        self.base, self.rungs = base, rungs
        self.checked, self.bad, self.errors = 0, [], []
        self.halt = threading.Event()

    def run(self):
        session = requests.Session()
        seen = set()
        while not self.halt.is_set():
            urls = []
            for rung in self.rungs:
                text = session.get(f"{self.base}/hls/{rung}/index.m3u8").text
                urls += [f"{self.base}/hls/{rung}/{line}" for line in text.splitlines()
                         if line.endswith(".ts")]
            r = session.get(f"{self.base}/dash/manifest.mpd")
            if r.status_code == 200:
                root = etree.fromstring(r.content)
                for rep in root.iterfind(".//d:Representation", NS):
                    tpl = rep.find("d:SegmentTemplate", NS)
                    media = tpl.get("media").replace("$RepresentationID$", rep.get("id"))
                    # The newest numbers the client could know of: those on the playlists'
                    # heels. Ask for a few around the live edge.
                    start = int(tpl.get("startNumber"))
                    for n in range(start, start + 40):
                        urls.append(f"{self.base}/dash/" + re.sub(
                            r"\$Number%05d\$", f"{n:05d}", media))
            for url in urls:
                if url in seen:
                    continue
                resp = session.get(url)
                if resp.status_code == 404:
                    continue  # not made yet (DASH guesses ahead) or already slid out
                if resp.status_code != 200:
                    self.errors.append((url, resp.status_code))
                    continue
                seen.add(url)
                self.checked += 1
                ok = _ts_complete(resp.content) if url.endswith(".ts") else \
                    _mp4_complete(resp.content)
                if not ok:
                    self.bad.append((url, len(resp.content)))
            time.sleep(0.05)


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("live")
    tmp.chmod(0o755)
    out = tmp / "tree"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mpstream.cli", "live", "synthetic", "--ladder", "small",
         "--segment-duration", str(SEGMENT_S), "--window", str(WINDOW_SEGMENTS * SEGMENT_S),
         "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        yield proc, out
    finally:
        stop(proc, graceful=signal.SIGINT, timeout=20)


# Watches a stream slide for many segments: `make test-live`.
@pytest.mark.long
def test_live_stream_slides_serves_whole_segments_and_ends_cleanly(live_run):
    proc, out = live_run
    deadline = time.monotonic() + 30
    while not (out / "hls" / "master.m3u8").is_file() or not (
            out / "dash" / "manifest.mpd").is_file():
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "no manifests within 30 s"
        time.sleep(0.2)
    state = json.loads((out / "live.json").read_text())
    assert state["state"] == "running"
    ffmpeg_pid = state["extra"]["ffmpeg_pid"]
    assert pid_alive(ffmpeg_pid)

    with ServerStack(out, port=_free_port()) as stack:
        base = stack.base_url + "/media"
        # UTCTiming: the MPD names the clock, and nginx answers it with milliseconds.
        mpd = etree.fromstring(requests.get(base + "/dash/manifest.mpd").content)
        assert mpd.get("type") == "dynamic" and mpd.get("availabilityStartTime")
        utc = mpd.find("d:UTCTiming", NS)
        assert utc.get("schemeIdUri") == "urn:mpeg:dash:utc:http-xsdate:2014"
        r = requests.get(stack.base_url + utc.get("value"))
        assert r.status_code == 200 and r.headers["Cache-Control"] == "no-store"
        server_now = datetime.fromisoformat(r.text).timestamp()
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}([+-]\d\d:\d\d|Z)", r.text)
        assert abs(server_now - time.time()) < 1.0
        sets = {a.get("contentType") + ":" + a.find("d:Representation", NS).get("codecs")[:4]
                for a in mpd.iterfind(".//d:AdaptationSet", NS)}
        assert sets == {"video:avc1", "video:hvc1", "audio:mp4a"}
        for rep in mpd.iterfind(".//d:Representation", NS):
            assert "$Number" in rep.find("d:SegmentTemplate", NS).get("media")

        # A packager's temporary file is never served, even when asked for by name.
        (out / "hls" / "144p" / "probe.ts.tmp").write_bytes(b"half")
        assert requests.get(base + "/hls/144p/probe.ts.tmp").status_code == 404
        (out / "hls" / "144p" / "probe.ts.tmp").unlink()

        fetcher = Fetcher(base, ["144p", "234p"])
        fetcher.start()
        sequences, sizes, on_disk = [], [], []
        t_end = time.monotonic() + (WINDOW_SEGMENTS + 6) * SEGMENT_S
        while time.monotonic() < t_end:
            text = requests.get(base + "/hls/144p/index.m3u8").text
            sequences.append(int(re.search(r"#EXT-X-MEDIA-SEQUENCE:(\d+)", text).group(1)))
            sizes.append(text.count("#EXTINF"))
            on_disk.append(len(list((out / "hls" / "144p").glob("*.ts"))))
            time.sleep(0.25)
        fetcher.halt.set()
        fetcher.join(10)

    assert proc.poll() is None, "live stopped on its own"
    # The window slid and held its size; old segments left the disk.
    assert sequences[-1] >= sequences[0] + 4, sequences
    assert max(sizes) == WINDOW_SEGMENTS and sizes[-1] == WINDOW_SEGMENTS, sizes
    assert max(on_disk) <= WINDOW_SEGMENTS + KEEP + 1, on_disk
    assert not (out / "hls" / "144p" / f"{state['stamp']}-00000.ts").exists()
    dash_media = [p for p in (out / "dash").glob("*.m4s") if "-init-" not in p.name]
    assert len(dash_media) <= 3 * (WINDOW_SEGMENTS + KEEP + 2)  # 3 representations
    # Every segment a client was sent was complete.
    assert fetcher.checked >= 20, fetcher.checked
    assert fetcher.bad == [] and fetcher.errors == []

    # Ctrl-C: the stream ends within seconds, ffmpeg with it, and the tree says so.
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    proc.wait(20)
    assert time.monotonic() - t0 < 15
    assert proc.returncode == 0, proc.stdout.read()
    assert not pid_alive(ffmpeg_pid)
    assert not [p for p in Path("/proc").glob("[0-9]*")
                if _cmdline(p).startswith("ffmpeg") and str(out) in _cwd(p)]
    state = json.loads((out / "live.json").read_text())
    assert state["state"] == "ended" and state["end_reason"] == "interrupted"
    for rung in ("144p", "234p"):
        assert (out / "hls" / rung / "index.m3u8").read_text().rstrip().endswith(
            "#EXT-X-ENDLIST")
    ended = etree.parse(str(out / "dash" / "manifest.mpd")).getroot()
    assert ended.get("type") == "static" and ended.get("mediaPresentationDuration")
    tpl = ended.find(".//d:SegmentTemplate", NS)
    first = int(tpl.get("startNumber"))
    rep0 = ended.find(".//d:Representation", NS).get("id")
    first_file = out / "dash" / tpl.get("media").replace("$RepresentationID$", rep0).replace(
        "$Number%05d$", f"{first:05d}")
    assert first_file.is_file()  # the static MPD starts at a segment that is still there
    assert read_sample_entries(out / "dash" / tpl.get("initialization").replace(
        "$RepresentationID$", rep0).replace("$ext$", "m4s"))
    assert not list(out.rglob("*.tmp"))


def _cmdline(p: Path) -> str:
    try:
        return (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _cwd(p: Path) -> str:
    try:
        return os.readlink(p / "cwd")
    except OSError:
        return ""


def _start_live(out: Path) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mpstream.cli", "live", "synthetic", "--ladder", "small",
         "--segment-duration", "1", "--window", "4", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    deadline = time.monotonic() + 30
    while True:
        assert proc.poll() is None, proc.stdout.read()
        assert time.monotonic() < deadline, "live did not start within 30 s"
        try:
            state = json.loads((out / "live.json").read_text())
        except (OSError, ValueError):
            state = {}
        if state.get("state") == "running":
            return proc, state
        time.sleep(0.2)


def _assert_ended(out: Path, state: dict, reason: str) -> None:
    assert not pid_alive(state["extra"]["ffmpeg_pid"])
    final = json.loads((out / "live.json").read_text())
    assert final["state"] == "ended" and final["end_reason"].startswith(reason), final
    for rung in ("144p", "234p"):
        text = (out / "hls" / rung / "index.m3u8").read_text()
        assert text.rstrip().endswith("#EXT-X-ENDLIST") and text.count("#EXT-X-ENDLIST") == 1
    assert 'type="static"' in (out / "dash" / "manifest.mpd").read_text()
    assert not list(out.rglob("*.tmp"))


def test_sigterm_ends_the_stream_like_ctrl_c(tmp_path):
    tmp_path.chmod(0o755)
    proc, state = _start_live(tmp_path / "t")
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        assert proc.returncode == 0, proc.stdout.read()
        _assert_ended(tmp_path / "t", state, "interrupted")
    finally:
        stop(proc, timeout=5)


def test_an_encoder_that_dies_fails_the_command_and_still_ends_the_tree(tmp_path):
    """ffmpeg killed outright (no trailer): the command says so, exits non-zero, and ends the
    playlists itself."""
    tmp_path.chmod(0o755)
    proc, state = _start_live(tmp_path / "t")
    try:
        os.kill(state["extra"]["ffmpeg_pid"], signal.SIGKILL)
        proc.wait(20)
        output = proc.stdout.read()
        assert proc.returncode == 2, output
        assert "the live ffmpeg stopped on its own" in output
        _assert_ended(tmp_path / "t", state, "ffmpeg exited")
    finally:
        stop(proc, timeout=5)
