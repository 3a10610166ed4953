"""The keyframe check used by the validator finds a segment that does not start with one."""

import subprocess
from pathlib import Path

import pytest

from mpstream.manifests.ffprobe import segments_start_with_keyframe
from mpstream.manifests.isobmff import iter_boxes


def _ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-nostdin", *args], check=True)


SOURCE = ("-f", "lavfi", "-i", "testsrc2=size=160x90:rate=25", "-t", "4",
          "-c:v", "libx264", "-preset", "ultrafast", "-g", "50", "-sc_threshold", "0")


@pytest.fixture(scope="module")
def ts_segments(tmp_path_factory) -> list[Path]:
    """1 s MPEG-TS segments of a stream with a keyframe every 2 s: every other segment
    starts mid-GOP (the segment muxer may cut there, HLS packaging must not)."""
    out = tmp_path_factory.mktemp("ts")
    _ffmpeg(*SOURCE, "-f", "segment", "-segment_time", "1", "-break_non_keyframes", "1",
            "-segment_format", "mpegts", str(out / "s%02d.ts"))
    return sorted(out.glob("s*.ts"))


def test_ts_segments(ts_segments):
    keys = segments_start_with_keyframe(b"", [p.read_bytes() for p in ts_segments])
    assert keys == [True, False, True, False]


def test_fragmented_mp4(tmp_path):
    # One fragment per frame, a keyframe every 50 frames.
    mp4 = tmp_path / "f.mp4"
    _ffmpeg(*SOURCE, "-movflags", "+empty_moov+default_base_moof+frag_every_frame", str(mp4))
    data = mp4.read_bytes()
    boxes = list(iter_boxes(data))
    header_end = next(start - 8 for kind, start, _ in boxes if kind == b"moof")
    fragments, current = [], b""
    for kind, start, end in boxes:
        if kind == b"moof" and current:
            fragments.append(current)
            current = b""
        if start - 8 >= header_end:
            current += data[start - 8 : end]
    fragments.append(current)
    keys = segments_start_with_keyframe(data[:header_end], fragments)
    assert len(keys) == 100
    assert keys == [i % 50 == 0 for i in range(100)]
