"""Real encodes (tiny ladder, a few seconds) checked from the outside: the tree of the
interface, the validator, ffprobe, rate control, media.json, interruption, damage."""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import etree

from mpstream.encoder.pipeline import BITRATE_TOLERANCE, encode_media
from mpstream.errors import EXIT_INTERRUPTED, UserError
from mpstream.manifests.codecs import codec_family
from mpstream.manifests.isobmff import read_sample_entries
from mpstream.manifests.validate import validate_media_tree
from mpstream.proc import child_pids, pid_alive
from tests.waiting import wait_until

DURATION = 6.0
SEGMENT = 2.0


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    out = tmp_path_factory.mktemp("media") / "synthetic"
    return encode_media("synthetic", "tiny", SEGMENT, DURATION, out, progress=False)


def test_tree_has_the_agreed_paths(synthetic):
    root = synthetic.out
    assert synthetic.hls_master == root / "hls/master.m3u8"
    assert synthetic.dash_manifest == root / "dash/manifest.mpd"
    for rung in ("144p", "234p", "360p"):
        assert (root / "hls" / rung / "index.m3u8").is_file()
    assert json.loads((root / "media.json").read_text())["ladder"] == "tiny"
    # nothing of the staging directory is left beside the tree
    assert [p.name for p in root.parent.iterdir()] == ["synthetic"]
    assert not (root / "work").exists()


def test_validator_and_ffprobe_accept_it(synthetic):
    report = validate_media_tree(synthetic.out)
    assert report.ok, report.problems
    assert report.keyframes_checked == 3 * 3 + 6 * 3  # HLS rungs + DASH video representations
    for manifest in (synthetic.hls_master, synthetic.dash_manifest):
        done = subprocess.run(
            ["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "json",
             str(manifest)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert abs(float(json.loads(done.stdout)["format"]["duration"]) - DURATION) < 0.5


def test_mean_bitrate_within_tolerance_of_nominal(synthetic):
    assert len(synthetic.renditions) == 6
    for r in synthetic.renditions:
        assert abs(r.measured_bitrate / r.nominal_bitrate - 1) <= BITRATE_TOLERANCE, r


def test_mpd_has_hevc_avc_and_audio_sets_with_complete_codecs(synthetic):
    ns = {"d": "urn:mpeg:dash:schema:mpd:2011"}
    root = etree.parse(str(synthetic.dash_manifest)).getroot()
    sets = root.findall(".//d:AdaptationSet", ns)
    families = [
        {codec_family(r.get("codecs")) for r in s.findall("d:Representation", ns)} for s in sets
    ]
    assert families == [{"avc"}, {"hevc"}, {"aac"}]  # AVC first: Chromium cannot play HEVC
    for rep in root.iterfind(".//d:Representation", ns):
        assert rep.find("d:SegmentTemplate", ns) is not None
    hevc_init = synthetic.out / "dash/hevc-360p/init.m4s"
    assert read_sample_entries(hevc_init)[0].fourcc == "hvc1"


def test_hls_master_attributes(synthetic):
    text = synthetic.hls_master.read_text()
    lines = [line for line in text.splitlines() if line.startswith("#EXT-X-STREAM-INF")]
    assert len(lines) == 3
    for line in lines:
        for attr in ("BANDWIDTH=", "AVERAGE-BANDWIDTH=", "RESOLUTION=", "CODECS=\"avc1.",
                     ",mp4a.40.2\"", "FRAME-RATE=25.000"):
            assert attr in line


def test_segments_are_aligned_across_rungs_and_protocols(synthetic):
    counts = {len(list((synthetic.out / "hls" / r).glob("*.ts"))) for r in ("144p", "360p")}
    counts |= {len(list((synthetic.out / "dash" / d).glob("seg_*.m4s")))
               for d in ("avc-144p", "hevc-360p")}
    assert counts == {int(DURATION / SEGMENT)}


def test_media_json_describes_the_rungs(synthetic):
    record = json.loads(synthetic.media_json.read_text())
    assert record["segment_duration"] == SEGMENT and record["duration"] == DURATION
    rung = record["rungs"][0]
    assert rung["name"] == "144p" and (rung["width"], rung["height"]) == (256, 144)
    assert codec_family(rung["codecs"]["avc"]) == "avc"
    assert codec_family(rung["codecs"]["hevc"]) == "hevc"
    assert rung["nominal_bitrate"] == 200_000 and rung["measured_bitrate"]["avc"] > 0
    assert (synthetic.out / rung["hls_playlist"]).is_file()


def _damaged_copy(synthetic, tmp_path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(synthetic.out, copy)
    return copy


def test_validator_finds_a_missing_segment(synthetic, tmp_path):
    copy = _damaged_copy(synthetic, tmp_path)
    (copy / "hls/234p/seg_00001.ts").unlink()
    (copy / "dash/hevc-144p/seg_00002.m4s").unlink()
    problems = " ".join(validate_media_tree(copy).problems)
    assert "hls/234p/seg_00001.ts: missing" in problems
    assert "dash/hevc-144p/seg_00002.m4s: missing" in problems


def test_validator_finds_bare_and_wrong_codecs(synthetic, tmp_path):
    copy = _damaged_copy(synthetic, tmp_path)
    mpd = copy / "dash/manifest.mpd"
    real = synthetic.record.rungs[2].codecs["hevc"]
    mpd.write_text(mpd.read_text().replace(f'codecs="{real}"', 'codecs="hvc1"'))
    master = copy / "hls/master.m3u8"
    master.write_text(master.read_text().replace("avc1.64001e", "avc1.640028"))
    problems = " ".join(validate_media_tree(copy).problems)
    assert "'hvc1' is not a complete RFC 6381 string" in problems
    assert "bitstream says 'avc1.64001e'" in problems


def test_validator_finds_wrong_durations_and_a_segment_without_keyframe(synthetic, tmp_path):
    copy = _damaged_copy(synthetic, tmp_path)
    playlist = copy / "hls/144p/index.m3u8"
    playlist.write_text(playlist.read_text().replace("#EXTINF:2.000000,", "#EXTINF:2.500000,", 1))
    # A segment that begins mid-GOP: keep the program tables (the first two 188-byte TS
    # packets) and drop the packets of the first half of the segment.
    seg = copy / "hls/360p/seg_00001.ts"
    data = seg.read_bytes()
    half = (len(data) // 2 // 188) * 188
    seg.write_bytes(data[: 2 * 188] + data[half:])
    problems = " ".join(validate_media_tree(copy).problems)
    assert "hls/144p/index.m3u8: segment durations sum to 6.500 s" in problems
    assert "seg_00001.ts: does not start with a keyframe" in problems


def test_sample_source_encodes_and_validates(tmp_path):
    result = encode_media("sample", "tiny", 2.0, 6.0, tmp_path / "sample", progress=False)
    assert result.validation.ok
    assert "Big Buck Bunny" in result.source
    assert result.record.audio.codecs == "mp4a.40.2"


def test_a_silent_file_gets_a_tone_and_a_rerun_replaces_the_tree(tmp_path):
    clip = tmp_path / "silent.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc2=size=320x180:rate=30", "-t", "4", "-c:v", "libx264",
                    "-preset", "ultrafast", str(clip)], check=True)
    out = tmp_path / "silent"
    first = encode_media(str(clip), "tiny", 2.0, None, out, progress=False)
    assert first.duration == pytest.approx(4.0, abs=0.05)
    assert first.record.frame_rate == 30
    assert (out / "dash/audio/init.m4s").is_file()
    (out / "marker").write_text("old tree")
    encode_media(str(clip), "tiny", 2.0, None, out, progress=False)
    assert not (out / "marker").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["silent", "silent.mp4"]


def test_truncated_file_with_index_in_front_is_caught(tmp_path):
    clip = tmp_path / "faststart.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc2=size=320x180:rate=25", "-t", "8", "-c:v", "libx264",
                    "-preset", "ultrafast", "-movflags", "+faststart", str(clip)], check=True)
    data = clip.read_bytes()
    clip.write_bytes(data[: len(data) // 2])  # the index still claims 8 s
    with pytest.raises(UserError, match="truncated"):
        encode_media(str(clip), "tiny", 2.0, None, tmp_path / "out", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["faststart.mp4"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_leaves_no_tree_no_staging_and_no_ffmpeg(tmp_path, signum):
    out = tmp_path / "media"
    proc = subprocess.Popen(
        [sys.executable, "-m", "mpstream.cli", "encode", "synthetic", "--ladder", "tiny",
         "--duration", "120", "--segment-duration", "2", "--out", str(out), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    ffmpeg = wait_until(lambda: child_pids(proc.pid, "ffmpeg"), 60, "the encode starts ffmpeg",
                        0.2)
    # Interrupted mid-encode: ffmpeg has written into the staging folder.
    wait_until(lambda: any(f.stat().st_size > 0
                           for f in tmp_path.glob(".media.partial-*/work/*") if f.is_file()),
               60, "ffmpeg writes into the staging folder")
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == EXIT_INTERRUPTED
    assert "Traceback" not in err.decode()
    assert list(tmp_path.iterdir()) == []
    for pid in ffmpeg:
        assert not pid_alive(pid)  # a zombie waiting for init's reaping holds nothing


def test_staging_of_a_killed_encode_is_removed_by_the_next(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    abandoned = tmp_path / f".media.partial-{dead.pid}-abc123"
    (abandoned / "hls").mkdir(parents=True)
    live = tmp_path / f".media.partial-{os.getpid()}-def456"
    live.mkdir()
    encode_media("synthetic", "tiny", 2.0, 2.0, tmp_path / "media", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == [live.name, "media"]


def test_validator_command(synthetic, tmp_path, capsys):
    from mpstream.manifests.validate import main

    assert main([str(synthetic.out)]) == 0
    assert capsys.readouterr().out.startswith("valid:")
    copy = _damaged_copy(synthetic, tmp_path)
    (copy / "dash/avc-360p/init.m4s").unlink()
    assert main([str(copy)]) == 1
    assert "avc-360p/init.m4s: initialization segment missing" in capsys.readouterr().out
