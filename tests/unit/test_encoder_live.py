"""`mpstream live`: the one ffmpeg command's shape, the sources, bad input, and the MPD of an
ended stream."""

import re
import subprocess
import sys
from fractions import Fraction

import pytest
from lxml import etree

from mpstream.encoder.commands import LiveLayout, live_command
from mpstream.encoder.ladder import load_ladder
from mpstream.encoder.live import LiveConfig, prepare_tree, validate_config
from mpstream.encoder.sources import LiveSource, _camera, resolve_live_source
from mpstream.errors import UserError
from mpstream.manifests import dash

SOURCE = LiveSource(label="s", input_args=("-re", "-f", "lavfi", "-i", "testsrc2"),
                    audio_map=None, fps=Fraction(25), overlay="drawtext=text=x")


def _values(argv, flag):
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def _live(window=5, keep=2):
    return live_command("ffmpeg", SOURCE, load_ladder("tiny"), 2.0, LiveLayout("T"), window,
                        keep, "/api/time")


def test_one_process_one_decode_every_rung_through_one_tee():
    argv = _live()
    assert argv.count("-f") == 3  # lavfi source, lavfi tone, tee output
    assert _values(argv, "-f")[-1] == "tee"
    (graph,) = _values(argv, "-filter_complex")
    assert graph.count("[0:v:0]") == 1 and "drawtext=text=x,split=3" in graph
    encoders = [argv[i + 1] for i, a in enumerate(argv) if re.fullmatch(r"-c:\d+", a)]
    assert encoders == ["libx264"] * 3 + ["libx265"] * 3 + ["aac"]
    # The tone is paced like the source: both inputs are real time.
    assert argv.count("-re") == 2
    assert _values(argv, "-force_key_frames:0") == ["expr:gte(t,n_forced*2)"]
    assert _values(argv, "-flags:0") == ["+cgop+global_header"]


def test_tee_writes_sliding_hls_per_avc_rung_and_one_dynamic_dash():
    tee = _live(window=7, keep=3)[-1]
    slaves = tee.split("|")
    hls_slaves = [s for s in slaves if "f='hls'" in s]
    dash_slaves = [s for s in slaves if "f='dash'" in s]
    assert len(hls_slaves) == 3 and len(dash_slaves) == 1
    for index, (slave, rung) in enumerate(zip(hls_slaves, ("144p", "234p", "360p"),
                                             strict=True)):
        assert slave.startswith("[onfail=abort:")
        assert f"select='{index},6'" in slave  # its AVC stream and the audio
        assert "hls_list_size='7'" in slave and "hls_delete_threshold='3'" in slave
        assert "delete_segments" in slave and "temp_file" in slave
        assert slave.endswith(f"]hls/{rung}/index.m3u8")
        assert f"hls/{rung}/T-%05d.ts" in slave
    (d,) = dash_slaves
    assert "window_size='7'" in d and "extra_window_size='3'" in d
    assert "use_template='1'" in d and "$Number%05d$" in d
    assert "adaptation_sets='id=0,streams=0,1,2 id=1,streams=3,4,5 id=2,streams=6'" in d
    assert "utc_timing_url='/api/time'" in d
    assert d.endswith("]dash/ffmpeg.mpd")


def test_tee_refuses_values_it_would_misparse():
    with pytest.raises(ValueError, match="escaping"):
        live_command("ffmpeg", SOURCE, load_ladder("tiny"), 2.0, LiveLayout("a|b"), 5, 2, "/t")


def test_synthetic_burns_a_utc_clock_with_milliseconds():
    src = resolve_live_source("synthetic", 640, 360)
    assert "drawtext" in src.overlay and "%3N" in src.overlay and "gmtime" in src.overlay
    assert src.input_args.count("-re") == 2


def test_a_missing_camera_is_a_clear_error():
    with pytest.raises(UserError, match=r"Camera /dev/video97 does not exist.*synthetic"):
        resolve_live_source("/dev/video97", 640, 360)


def test_a_missing_camera_fails_the_command_before_starting_anything(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "mpstream.cli", "live", "/dev/video97", "--out",
         str(tmp_path / "t")], capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 2
    assert "Camera /dev/video97 does not exist" in done.stderr
    assert not (tmp_path / "t").exists()


def test_a_device_that_is_not_a_camera(tmp_path):
    (tmp_path / "video0").write_text("")
    with pytest.raises(UserError, match="not a camera"):
        _camera(tmp_path / "video0")


def test_bad_settings_and_foreign_directories(tmp_path):
    with pytest.raises(UserError, match="segment-duration"):
        validate_config(LiveConfig(source="synthetic", segment_duration=0))
    with pytest.raises(UserError, match="window"):
        validate_config(LiveConfig(source="synthetic", segment_duration=4, window_s=2))
    (tmp_path / "mine.txt").write_text("keep me")
    with pytest.raises(UserError, match="does not hold a live tree"):
        prepare_tree(tmp_path)
    assert (tmp_path / "mine.txt").read_text() == "keep me"


FFMPEG_FINAL_MPD = """<?xml version="1.0" encoding="utf-8"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" profiles="urn:mpeg:dash:profile:isoff-live:2011"
 type="static" mediaPresentationDuration="PT40.0S" maxSegmentDuration="PT2.0S">
 <ProgramInformation></ProgramInformation><ServiceDescription id="0"></ServiceDescription>
 <Period id="0" start="PT0.0S">
  <AdaptationSet id="0" contentType="video" bitstreamSwitching="true">
   <Representation id="0" mimeType="video/mp4" codecs="hvc1" bandwidth="1">
    <SegmentTemplate timescale="1000000" duration="2000000"
     initialization="i-$RepresentationID$.m4s"
     media="s-$RepresentationID$-$Number%05d$.m4s" startNumber="1"/>
   </Representation>
  </AdaptationSet>
 </Period>
 <UTCTiming schemeIdUri="urn:mpeg:dash:utc:http-xsdate:2014" value="/api/time"/>
</MPD>
"""


def test_an_ended_stream_mpd_lists_only_what_is_left(tmp_path):
    src, dst = tmp_path / "ffmpeg.mpd", tmp_path / "manifest.mpd"
    src.write_text(FFMPEG_FINAL_MPD)
    dash.end_live_mpd(src, dst, {"0": "hvc1.1.6.L60.90"}, "t", first_number=12,
                      last_number=20)
    root = etree.parse(str(dst)).getroot()
    q = "{urn:mpeg:dash:schema:mpd:2011}"
    assert root.get("type") == "static" and root.get("mediaPresentationDuration") == "PT18.000S"
    tpl = root.find(f".//{q}SegmentTemplate")
    assert tpl.get("startNumber") == "12"
    assert tpl.get("presentationTimeOffset") == str(11 * 2000000)
    assert root.find(f".//{q}Representation").get("codecs") == "hvc1.1.6.L60.90"
    assert root.find(f".//{q}AdaptationSet").get("bitstreamSwitching") is None
    assert root.find(f"{q}UTCTiming") is None


def test_a_published_live_mpd_is_refreshed_often(tmp_path):
    src, dst = tmp_path / "ffmpeg.mpd", tmp_path / "manifest.mpd"
    src.write_text(FFMPEG_FINAL_MPD.replace('type="static"', 'type="dynamic"'))
    dash.publish_live_mpd(src, dst, {"0": "hvc1.1.6.L60.90"}, "t", update_period=2.0)
    root = etree.parse(str(dst)).getroot()
    assert root.get("minimumUpdatePeriod") == "PT2S"
    assert root.find("{urn:mpeg:dash:schema:mpd:2011}UTCTiming").get("value") == "/api/time"
    assert not list(tmp_path.glob(".*.tmp"))


def test_pace_tells_when_the_encoder_falls_behind_real_time():
    import io
    import time as _time
    from types import SimpleNamespace

    from mpstream.encoder.live import Pace

    pace = Pace(SimpleNamespace(stdout=io.StringIO("out_time_us=N/A\nout_time_us=2000000\n")),
                segment_duration=1.0)
    deadline = _time.monotonic() + 5
    while pace.first_output is None and _time.monotonic() < deadline:
        _time.sleep(0.01)
    assert pace.media_s == 2.0 and pace.behind_s() is None  # on time
    pace.first_output -= 10  # ten more seconds of wall clock, no more media
    assert pace.behind_s() == pytest.approx(10, abs=0.5)
