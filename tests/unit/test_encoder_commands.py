"""The shape of the ffmpeg commands: one decode for all rungs, each rung scaled once and
encoded once per codec, aligned closed GOPs, packaging without re-encoding."""

from fractions import Fraction
from pathlib import Path

from mpstream.encoder.commands import (
    dash_command,
    encode_command,
    gop_frames,
    hls_command,
    intermediates,
)
from mpstream.encoder.ladder import load_ladder
from mpstream.encoder.sources import Source

SOURCE = Source(label="clip", input_args=("-i", "clip.mp4"), audio_map="0:a:0",
                fps=Fraction(25), duration=30.0)


def _values(argv: list[str], flag: str) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv) if a == flag]


def test_one_decode_feeds_every_rung_of_both_codecs():
    ladder = load_ladder("standard")
    argv = encode_command("ffmpeg", SOURCE, ladder, 4.0, Path("/w"))
    assert _values(argv, "-i") == ["clip.mp4"]  # the source is opened (decoded) once
    (graph,) = _values(argv, "-filter_complex")
    assert graph.count("[0:v:0]") == 1
    # each rung is scaled exactly once, then split between its codecs
    for rung in ladder.rungs:
        assert graph.count(f"scale={rung.width}:{rung.height}") == 1
    encoders = _values(argv, "-c:v")
    assert encoders.count("libx264") == len(ladder.rungs_for("avc"))
    assert encoders.count("libx265") == len(ladder.rungs_for("hevc"))
    assert _values(argv, "-c:a") == ["aac"]
    outputs = [a for a in argv if a.startswith("/w/")]
    assert len(outputs) == len(set(outputs)) == len(intermediates(ladder, Path("/w")))


def test_keyframes_only_at_segment_boundaries():
    argv = encode_command("ffmpeg", SOURCE, load_ladder("tiny"), 2.0, Path("/w"))
    assert set(_values(argv, "-force_key_frames")) == {"expr:gte(t,n_forced*2)"}
    assert set(_values(argv, "-g")) == {"50"}
    assert set(_values(argv, "-keyint_min")) == {"50"}
    assert set(_values(argv, "-sc_threshold")) == {"0"}  # x264 scene cuts off
    for params in _values(argv, "-x265-params"):
        assert "scenecut=0" in params and "open-gop=0" in params and "keyint=50" in params
    assert set(_values(argv, "-tag:v")) == {"hvc1"}


def test_capped_vbr_rates_follow_the_ladder():
    ladder = load_ladder("tiny")
    argv = encode_command("ffmpeg", SOURCE, ladder, 2.0, Path("/w"))
    rates = _values(argv, "-b:v")
    assert rates[: len(ladder.rungs)] == [f"{r.bitrate_kbps}k" for r in ladder.rungs]
    peak = ladder.encoding.peak_factor
    assert _values(argv, "-maxrate")[0] == f"{round(ladder.rungs[0].bitrate_kbps * peak)}k"


def test_a_silent_source_gets_a_tone():
    silent = Source(label="s", input_args=("-i", "s.mp4"), audio_map=None, fps=Fraction(30),
                    duration=10.0)
    argv = encode_command("ffmpeg", silent, load_ladder("tiny"), 2.0, Path("/w"))
    assert any(a.startswith("sine=") for a in argv)
    assert "1:a:0" in _values(argv, "-map")


def test_gop_length_rounds_up_for_fractional_rates():
    assert gop_frames(2.0, Fraction(25)) == 50
    assert gop_frames(2.0, Fraction(30000, 1001)) == 60
    assert gop_frames(0.01, Fraction(25)) == 1


def test_packaging_copies_and_shares_the_avc_encodes():
    ladder = load_ladder("tiny")
    items = intermediates(ladder, Path("/w"))
    hls = hls_command("ffmpeg", items, 2.0, Path("/o/hls"))
    dash = dash_command("ffmpeg", items, 2.0, Path("/o/dash"))
    for argv in (hls, dash):
        assert "-c:v" not in argv and "-filter_complex" not in argv
        assert set(_values(argv, "-c")) == {"copy"}
    avc_files = {str(i.path) for i in items if i.kind == "avc"}
    assert avc_files <= set(_values(hls, "-i")) and avc_files <= set(_values(dash, "-i"))
    (sets,) = _values(dash, "-adaptation_sets")
    assert sets == "id=0,streams=0,1,2 id=1,streams=3,4,5 id=2,streams=6"
