"""Reading MPDs: durations, templates, timelines; finishing ffmpeg's MPD."""

from pathlib import Path

import pytest
from lxml import etree

from mpstream.manifests.dash import (
    MpdError,
    expand_template,
    finish_mpd,
    load_mpd,
    parse_iso_duration,
)

MPD = """<?xml version="1.0" encoding="utf-8"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT1M0.5S"
     profiles="urn:mpeg:dash:profile:isoff-live:2011" minBufferTime="PT4.0S">
  <ProgramInformation></ProgramInformation>
  <ServiceDescription id="0"></ServiceDescription>
  <Period id="0" start="PT0.0S">
    <AdaptationSet id="0" contentType="video" bitstreamSwitching="true">
      <Representation id="0" mimeType="video/mp4" codecs="hvc1" bandwidth="1" width="640"
                      height="360">
        <SegmentTemplate timescale="1000" initialization="$RepresentationID$/init.m4s"
                         media="$RepresentationID$/seg_$Number%05d$.m4s" startNumber="1">
          <SegmentTimeline><S t="0" d="20000" r="2"/><S d="500"/></SegmentTimeline>
        </SegmentTemplate>
      </Representation>
    </AdaptationSet>
    <AdaptationSet id="1" mimeType="audio/mp4">
      <SegmentTemplate timescale="48000" duration="96000" initialization="a/init.mp4"
                       media="a/$Time$.m4s" startNumber="1"/>
      <Representation id="aud" codecs="mp4a.40.2" bandwidth="128000"/>
    </AdaptationSet>
  </Period>
</MPD>
"""


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("PT10.0S", 10.0), ("PT1M0.5S", 60.5), ("PT1H2M3S", 3723.0), ("P1DT1S", 86401.0)],
)
def test_iso_durations(text, seconds):
    assert parse_iso_duration(text) == pytest.approx(seconds)


def test_bad_iso_duration():
    with pytest.raises(MpdError):
        parse_iso_duration("10 seconds")


def test_template_variables_and_widths():
    assert expand_template("$RepresentationID$/seg_$Number%05d$.m4s", "avc-1", 7, 0, 5) == (
        "avc-1/seg_00007.m4s"
    )
    assert expand_template("$Bandwidth$-$Time$-$Number$$$", "x", 3, 900, 128) == "128-900-3$"


def test_load_expands_timeline_and_duration_templates(tmp_path):
    path = tmp_path / "m.mpd"
    path.write_text(MPD)
    mpd = load_mpd(path)
    assert mpd.duration == pytest.approx(60.5)
    video, audio = mpd.adaptation_sets
    rep = video.representations[0]
    assert [s.path.name for s in rep.segments] == [f"seg_0000{i}.m4s" for i in range(1, 5)]
    assert [s.duration for s in rep.segments] == [20.0, 20.0, 20.0, 0.5]
    assert rep.init == tmp_path / "0/init.m4s"
    assert audio.content_type == "audio"
    aud = audio.representations[0]
    assert len(aud.segments) == 31 and aud.segments[-1].duration == pytest.approx(0.5)
    assert aud.segments[1].path == tmp_path / "a/96000.m4s"


def test_dynamic_mpd_is_refused(tmp_path):
    path = tmp_path / "live.mpd"
    path.write_text(MPD.replace('type="static"', 'type="dynamic"'))
    with pytest.raises(MpdError, match="dynamic"):
        load_mpd(path)


def test_finish_sets_ids_codecs_bandwidth_and_drops_bitstream_switching(tmp_path):
    path = tmp_path / "m.mpd"
    path.write_text(MPD)
    finish_mpd(path, {"0": "hevc-360p", "aud": "audio"},
               {"hevc-360p": "hvc1.1.6.L63.90", "audio": "mp4a.40.2"},
               {"hevc-360p": 812345, "audio": 130000}, title="t")
    root = etree.parse(str(path)).getroot()
    ns = {"d": "urn:mpeg:dash:schema:mpd:2011"}
    rep = root.find(".//d:Representation", ns)
    assert (rep.get("id"), rep.get("codecs"), rep.get("bandwidth")) == (
        "hevc-360p", "hvc1.1.6.L63.90", "812345")
    assert root.find(".//d:AdaptationSet", ns).get("bitstreamSwitching") is None
    assert root.find("d:ProgramInformation/d:Title", ns).text == "t"
    assert root.find("d:ServiceDescription", ns) is None
    assert load_mpd(Path(path)).adaptation_sets[0].representations[0].id == "hevc-360p"
