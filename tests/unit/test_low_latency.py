"""Low-latency live: the timing checks, the chunks of a growing CMAF segment, the LL-HLS
playlists (parsed back by the m3u8 library), the origin's index of a tree being written, and the
blocking-reload rule. The segments here are built box by box, so every size and duration is
known."""

import asyncio
import struct
from datetime import UTC, datetime
from fractions import Fraction

import m3u8
import pytest

from mpstream.encoder.lowlatency import DEFAULT_RTT_S, LowLatency, check_timing
from mpstream.errors import UserError
from mpstream.manifests.cmaf import read_chunks, track_timescale
from mpstream.manifests.llhls import MediaPlaylist, Part, Segment
from mpstream.manifests.lltree import LowLatencyTree, Rendition
from mpstream.server.origin.app import Origin
from mpstream.server.origin.clock import StreamClock
from mpstream.server.origin.index import StreamIndex, reload_answer

TIMESCALE = 12800
FRAME = 512  # ticks: 25 frames a second


def box(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I4s", 8 + len(payload), kind) + payload


def full(kind: bytes, flags: int, payload: bytes) -> bytes:
    return box(kind, struct.pack(">I", flags) + payload)


def init_segment() -> bytes:
    mdhd = full(b"mdhd", 0, struct.pack(">IIII", 0, 0, TIMESCALE, 0) + b"\0" * 4)
    return box(b"ftyp", b"iso6\0\0\0\0") + box(b"moov", box(b"trak", box(b"mdia", mdhd)))


def chunk(frames: int, payload: int = 100, per_sample: bool = False) -> bytes:
    """A moof + mdat of `frames` samples: with a default duration in tfhd, or (per_sample) a
    duration per sample in trun."""
    if per_sample:
        tfhd = full(b"tfhd", 0, struct.pack(">I", 1))
        trun = full(b"trun", 0x100, struct.pack(">I", frames) + struct.pack(">I", FRAME) * frames)
    else:
        tfhd = full(b"tfhd", 0x08, struct.pack(">II", 1, FRAME))
        trun = full(b"trun", 0, struct.pack(">I", frames))
    return box(b"moof", box(b"traf", tfhd + trun)) + box(b"mdat", b"\0" * payload)


STYP = box(b"styp", b"msdh\0\0\0\0")
MPD_NS = "{urn:mpeg:dash:schema:mpd:2011}"


# --- timing -------------------------------------------------------------------------------------

def test_timing_accepts_whole_parts_and_a_target_of_three():
    check_timing(2.0, LowLatency(part_duration=0.5, target_latency_s=1.5))
    check_timing(2.0, LowLatency(part_duration=0.25))


@pytest.mark.parametrize("segment, part, target, says", [
    (2.0, 0.5, 1.0, "give at least 1.5 s"),
    (2.0, 0.3, None, "does not divide"),
    (2.0, 1.5, None, "at least two parts"),
    (2.0, 0.0, None, "positive"),
])
def test_timing_refuses_what_does_not_fit_and_says_what_would(segment, part, target, says):
    with pytest.raises(UserError, match=says):
        check_timing(segment, LowLatency(part_duration=part, target_latency_s=target))


def test_part_target_is_the_part_rounded_up_to_frames():
    assert LowLatency(part_duration=0.5).part_target(Fraction(25)) == pytest.approx(0.52)
    # At 30 fps the video's parts are 0.5 s; the audio's, 24 AAC frames, are longer.
    assert LowLatency(part_duration=0.5).part_target(Fraction(30)) == pytest.approx(0.512)


def test_the_default_target_is_three_parts_and_a_round_trip():
    assert LowLatency(part_duration=0.2, rtt_s=0.05).target_s == pytest.approx(0.65)
    assert LowLatency(part_duration=0.5).target_s == pytest.approx(1.5 + DEFAULT_RTT_S)
    assert LowLatency(part_duration=0.2, target_latency_s=1.0, rtt_s=0.3).target_s == 1.0
    with pytest.raises(UserError, match=r"give at least 0\.6 s"):
        check_timing(2.0, LowLatency(part_duration=0.2, target_latency_s=0.5))


@pytest.mark.parametrize("given, part, frag, target_ms, part_target, offset, parts", [
    (0.2, 0.2, "0.2", 700, 0.213, "1.800", 10),  # the audio's 10 AAC frames are the longest
    (0.25, 0.25, "0.25", 850, 0.280, "1.750", 8),  # 7 frames at 25 fps
    (0.33, 2 / 6, "0.333333", 1100, 0.360, "1.667", 6),  # a sixth of the segment, 9 frames
], ids=["0.2", "0.25", "0.33"])
def test_short_parts_set_the_chunks_the_mpd_and_the_hold_back(
        tmp_path, given, part, frag, target_ms, part_target, offset, parts):
    low = LowLatency(part_duration=given)
    check_timing(2.0, low)
    low = low.fitted(2.0)
    assert low.part_duration == pytest.approx(part)
    # The encoder's chunks, and the ServiceDescription's target (ms) ffmpeg writes too.
    options = low.muxer_options()
    assert options["frag_duration"] == frag
    assert round(float(options["target_latency"]) * 1000) == target_ms
    assert low.part_target(Fraction(25)) == pytest.approx(part_target, abs=5e-4)
    # The published MPD: the segment's first part is there one part after the segment began.
    mpd = _published_mpd(tmp_path, low)
    for template in mpd.iter(f"{MPD_NS}SegmentTemplate"):
        assert template.get("availabilityTimeOffset") == offset
        assert template.get("availabilityTimeComplete") == "false"
    service = mpd.find(f"{MPD_NS}ServiceDescription")
    assert service.find(f"{MPD_NS}Latency").get("target") == str(target_ms)
    assert service.find(f"{MPD_NS}PlaybackRate").get("max") == "1.10"
    # LL-HLS: PART-TARGET the longest part, PART-HOLD-BACK the target, at least three of them.
    index, tree = _tree(tmp_path, part=low.part_duration,
                        part_target=low.part_target(Fraction(25)), target=low.target_s)
    dash = tmp_path / "dash"
    (dash / tree.segment_name("0", 1)).write_bytes(STYP + chunk(5) * parts)
    (dash / f"{tree.segment_name('0', 2)}.tmp").write_bytes(STYP + chunk(5) * (parts - 1))
    index.scan()
    playlist = m3u8.loads(index.playlist(tree.renditions[0]).text())
    assert playlist.part_inf.part_target == pytest.approx(part_target, abs=5e-4)
    hold_back = playlist.server_control.part_hold_back
    assert hold_back == pytest.approx(target_ms / 1000) and hold_back >= 3 * part_target - 1e-3
    assert playlist.preload_hint.uri.endswith(f"T-0-00002.p{parts - 1}.m4s")
    assert len(playlist.segments[-1].parts) == parts - 1


def _published_mpd(tmp_path, low: LowLatency):
    from lxml import etree

    from mpstream.manifests import dash
    from tests.unit.test_encoder_live import FFMPEG_FINAL_MPD

    src, dst = tmp_path / "ffmpeg.mpd", tmp_path / "manifest.mpd"
    src.write_text(FFMPEG_FINAL_MPD.replace('type="static"', 'type="dynamic"'))
    dash.publish_live_mpd(src, dst, {}, "t", update_period=2.0,
                          low_latency=low.mpd_timing(2.0))
    return etree.parse(str(dst)).getroot()


# --- chunks ---------------------------------------------------------------------------------------

def test_chunks_end_at_each_mdat_and_carry_their_durations():
    data = STYP + chunk(13) + chunk(13, per_sample=True) + chunk(11)
    chunks, rest = read_chunks(data)
    assert [c.ticks for c in chunks] == [13 * FRAME, 13 * FRAME, 11 * FRAME]
    assert chunks[0].offset == 0 and chunks[0].size == len(STYP + chunk(13))
    assert sum(c.size for c in chunks) == rest == len(data)
    assert track_timescale(init_segment()) == TIMESCALE


def test_a_chunk_still_being_written_is_left_for_later():
    data = STYP + chunk(13) + chunk(13)
    chunks, rest = read_chunks(data[:-10])
    assert len(chunks) == 1 and rest == len(STYP + chunk(13))
    more, end = read_chunks(data, rest)
    assert len(more) == 1 and more[0].offset == rest and end == len(data)


# --- LL-HLS playlists -------------------------------------------------------------------------

def _playlist(ended=False) -> MediaPlaylist:
    start = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    parts = tuple(Part(f"s{n}.p{k}.m4s", 0.5, k == 0) for n in range(1) for k in range(4))
    segments = tuple(Segment(n, f"s{n}.m4s", 2.0, start, parts) for n in range(3, 8))
    return MediaPlaylist(map_uri="init.m4s", target_duration=2.0, part_target=0.52,
                         part_hold_back=2.0, segments=segments, open_msn=8,
                         open_parts=(Part("s8.p0.m4s", 0.52, True),),
                         preload_hint="s8.p1.m4s", ended=ended)


def test_playlist_has_the_tags_low_latency_players_need():
    text = _playlist().text()
    parsed = m3u8.loads(text)
    done = [s for s in parsed.segments if s.uri]  # the parts after them: a segment without URI
    assert parsed.media_sequence == 3 and len(done) == 5
    assert [p.uri for p in parsed.segments[-1].parts] == ["s8.p0.m4s"]
    assert parsed.part_inf.part_target == pytest.approx(0.52)
    assert parsed.server_control.can_block_reload == "YES"
    assert parsed.server_control.part_hold_back == pytest.approx(2.0)
    assert parsed.preload_hint.uri == "s8.p1.m4s"
    # parts for the last three segments only, then the open segment's
    assert [len(s.parts) for s in done] == [0, 0, 4, 4, 4]
    assert "#EXT-X-PROGRAM-DATE-TIME:2026-11-29T12:00:00.000Z" in text
    assert text.rstrip().endswith('#EXT-X-PRELOAD-HINT:TYPE=PART,URI="s8.p1.m4s"')


def _first_segment_being_written(parts: int) -> MediaPlaylist:
    """What a viewer joining in the stream's first seconds is given: no segment finished."""
    return MediaPlaylist(map_uri="init.m4s", target_duration=2.0, part_target=0.5,
                         part_hold_back=1.5, segments=(), open_msn=1,
                         open_parts=tuple(Part(f"s1.p{k}.m4s", 0.5, k == 0)
                                          for k in range(parts)),
                         preload_hint=f"s1.p{parts}.m4s")


@pytest.mark.parametrize("playlist", [
    _playlist(), _playlist(ended=True), _first_segment_being_written(0),
    _first_segment_being_written(3)], ids=["window", "ended", "no-part-yet", "parts-only"])
def test_a_playlist_reads_back_as_it_was_written(playlist):
    text = playlist.text()
    again = MediaPlaylist.parse(text)
    assert again.text() == text
    assert again.edge == (playlist.open_msn, 0 if playlist.ended else len(playlist.open_parts))
    assert again.ended == playlist.ended and again.preload_hint == (
        None if playlist.ended else playlist.preload_hint)


def test_the_live_edge_of_a_stream_whose_first_segment_is_being_written():
    edge = MediaPlaylist.parse(_first_segment_being_written(3).text())
    assert edge.segments == () and edge.edge == (1, 3)
    assert edge.lists(1, 2) and not edge.lists(1, 3) and not edge.lists(1, None)
    assert [p.independent for p in edge.open_parts] == [True, False, False]


@pytest.mark.parametrize("text, rule", [
    ("#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2,\na.ts\n", "PART-TARGET"),
    ("#EXTM3U\n#EXT-X-PART-INF:PART-TARGET=0.5\n", "TARGETDURATION"),
])
def test_a_playlist_that_is_not_low_latency_is_refused_by_name(text, rule):
    with pytest.raises(ValueError, match=rule):
        MediaPlaylist.parse(text)


def test_an_ended_playlist_lists_no_parts_and_ends():
    text = _playlist(ended=True).text()
    assert "#EXT-X-PART:" not in text and "PRELOAD-HINT" not in text
    assert text.rstrip().endswith("#EXT-X-ENDLIST")


@pytest.mark.parametrize("msn, part, answer", [
    (7, None, "ready"), (8, 0, "ready"), (8, 1, "wait"), (8, None, "wait"), (9, 0, "wait"),
    (10, None, "refuse"), (8, 4, "refuse"), (8, 3, "wait"),
])
def test_blocking_reload_waits_or_refuses_as_the_specification_says(msn, part, answer):
    assert reload_answer(_playlist(), msn, part) == answer


# --- the origin's index of a tree being written --------------------------------------------

def _tree(tmp_path, part: float = 0.5, part_target: float = 0.52, target: float = 2.0
          ) -> tuple[StreamIndex, LowLatencyTree]:
    tree = LowLatencyTree(stamp="T", segment_duration=2.0, part_duration=part,
                          part_target=part_target, target_latency_s=target, window_segments=3,
                          renditions=(Rendition(playlist="360p", rep="0", kind="video"),))
    dash = tmp_path / "dash"
    dash.mkdir()
    (dash / tree.init_name("0")).write_bytes(init_segment())
    (dash / "ffmpeg.mpd").write_text('<MPD availabilityStartTime="2026-11-29T12:00:00.000Z"/>')
    return StreamIndex(tmp_path, tree), tree


def test_index_follows_a_segment_as_it_is_written_and_renamed(tmp_path):
    index, tree = _tree(tmp_path)
    growing = tmp_path / "dash" / f"{tree.segment_name('0', 1)}.tmp"
    growing.write_bytes(STYP + chunk(13) + chunk(13)[:20])
    assert index.scan()
    playlist = index.playlist(tree.renditions[0])
    assert playlist is not None and playlist.open_msn == 1 and len(playlist.open_parts) == 1
    assert playlist.preload_hint.endswith("T-0-00001.p1.m4s")
    assert not index.scan()  # nothing new

    growing.write_bytes(STYP + chunk(13) + chunk(13) + chunk(13) + chunk(11))
    growing.rename(tmp_path / "dash" / tree.segment_name("0", 1))
    assert index.scan()
    playlist = index.playlist(tree.renditions[0])
    assert [s.msn for s in playlist.segments] == [1] and playlist.open_msn == 2
    assert playlist.segments[0].duration == pytest.approx(2.0)
    assert reload_answer(playlist, 1, 3) == "ready"
    assert playlist.preload_hint.endswith("T-0-00002.p0.m4s")


def test_index_times_each_chunk_against_the_clock_it_was_due_by(tmp_path):
    index, tree = _tree(tmp_path)
    start = datetime(2026, 11, 29, 12, tzinfo=UTC).timestamp()
    now = [0.0]
    index.clock = StreamClock(tree.part_target, 2 * tree.segment_duration, wall=lambda: now[0])
    dash = tmp_path / "dash"
    for number in range(1, 11):
        late = 0.1 if number <= 5 else 2.6  # the encoder falls 2.5 s behind at segment 6
        growing = dash / f"{tree.segment_name('0', number)}.tmp"
        body = STYP
        for k in range(1, 5):  # four parts of 0.5 s
            body += chunk(12) if k < 4 else chunk(14)
            growing.write_bytes(body)
            now[0] = start + (number - 1) * 2.0 + k * 0.5 + late
            index.update([growing.name])
        growing.rename(dash / tree.segment_name("0", number))
    assert index.clock.least_lag == pytest.approx(0.1)
    assert index.clock.drift_s == pytest.approx(2.5)


def test_index_reports_a_segment_begun_before_its_first_bytes(tmp_path):
    index, tree = _tree(tmp_path)
    (tmp_path / "dash" / tree.segment_name("0", 1)).write_bytes(STYP + chunk(50))
    assert index.scan()
    (tmp_path / "dash" / f"{tree.segment_name('0', 2)}.tmp").write_bytes(b"")
    assert index.scan()  # the playlist's open segment moved on: a change
    assert index.playlist(tree.renditions[0]).open_msn == 2
    assert not index.scan()


def test_origin_makes_a_playlist_once_per_change(tmp_path):
    _, tree = _tree(tmp_path)
    origin = Origin(tmp_path, tree)
    growing = tmp_path / "dash" / f"{tree.segment_name('0', 1)}.tmp"
    growing.write_bytes(STYP + chunk(13))
    rendition = tree.renditions[0]
    assert origin.current(rendition) is None  # no scan yet: nothing known
    assert origin.index.scan()
    asyncio.run(origin._changed())
    first = origin.current(rendition)
    assert first is not None and len(first[0].open_parts) == 1
    assert first[1] == first[0].text()
    growing.write_bytes(STYP + chunk(13) + chunk(13))
    assert origin.current(rendition) is first  # the same until the scan finds the change
    assert origin.index.scan()
    asyncio.run(origin._changed())
    assert len(origin.current(rendition)[0].open_parts) == 2


def test_index_forgets_segments_the_packager_deleted(tmp_path):
    index, tree = _tree(tmp_path)
    for n in (1, 2):
        (tmp_path / "dash" / tree.segment_name("0", n)).write_bytes(STYP + chunk(50))
    index.scan()
    (tmp_path / "dash" / tree.segment_name("0", 1)).unlink()
    assert index.scan()
    assert [s.msn for s in index.playlist(tree.renditions[0]).segments] == [2]


def test_tree_names_round_trip(tmp_path):
    _, tree = _tree(tmp_path)
    assert tree.parse_name(tree.segment_name("3", 12)) == ("3", 12, None, False)
    assert tree.parse_name(tree.part_name("3", 12, 2)) == ("3", 12, 2, False)
    assert tree.parse_name(tree.segment_name("3", 12) + ".tmp") == ("3", 12, None, True)
    assert tree.parse_name("U-3-00012.m4s") is None  # another stream's
