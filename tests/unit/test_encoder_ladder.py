"""Ladders are data files: built-ins load, user files load, mistakes name the field."""

import pytest

from mpstream.encoder.ladder import builtin_ladders, load_ladder
from mpstream.errors import UserError


def test_builtin_ladders_load_and_cover_both_codecs():
    assert {"tiny", "standard", "thesis"} <= set(builtin_ladders())
    for name in ("tiny", "standard", "thesis"):
        ladder = load_ladder(name)
        assert ladder.name == name
        assert ladder.rungs_for("avc") and ladder.rungs_for("hevc")


def test_tiny_is_small_and_standard_reaches_1080p():
    assert load_ladder("tiny").top.height <= 360
    assert load_ladder("standard").top.height == 1080


def test_thesis_ladder_uses_the_data_set_rates():
    ladder = load_ladder("thesis")
    by_height: dict[int, list[int]] = {}
    for rung in ladder.rungs:
        by_height.setdefault(rung.height, []).append(rung.bitrate_kbps)
    assert min(by_height[720]) == 2000 and max(by_height[720]) == 4000
    assert min(by_height[1080]) == 4000 and max(by_height[1080]) == 8000
    assert min(by_height[2160]) == 12000 and max(by_height[2160]) == 20000


def test_unknown_ladder_lists_the_builtins():
    with pytest.raises(UserError) as err:
        load_ladder("huge")
    assert "Unknown ladder 'huge'" in str(err.value)
    assert "tiny" in str(err.value) and "standard" in str(err.value)


def test_missing_ladder_file(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        load_ladder(tmp_path / "nope.toml")


def test_user_toml_and_yaml_ladders(tmp_path):
    toml = tmp_path / "mine.toml"
    toml.write_text(
        '[[rungs]]\nname = "a"\nwidth = 320\nheight = 180\nbitrate_kbps = 300\n'
        '[[rungs]]\nname = "b"\nwidth = 640\nheight = 360\nbitrate_kbps = 900\n'
        'codecs = ["avc"]\n'
    )
    ladder = load_ladder(toml)
    assert ladder.name == "mine"  # defaults to the file name
    assert [r.name for r in ladder.rungs_for("hevc")] == ["a"]
    yml = tmp_path / "mine.yaml"
    yml.write_text("name: y\nrungs:\n  - {name: a, width: 320, height: 180, bitrate_kbps: 300}\n")
    assert load_ladder(yml).rungs[0].bitrate == 300_000


def test_toml_syntax_error_is_reported(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[[rungs]\nname = ")
    with pytest.raises(UserError, match=r"not valid TOML"):
        load_ladder(bad)


@pytest.mark.parametrize(
    ("rung", "field"),
    [
        ('name = "a"\nwidth = 321\nheight = 180\nbitrate_kbps = 300', "rungs.0.width"),
        ('name = "a"\nwidth = 320\nheight = 180', "rungs.0.bitrate_kbps"),
        ('name = "a"\nwidth = 320\nheight = 180\nbitrate_kbps = -5', "rungs.0.bitrate_kbps"),
        ('name = "a"\nwidth = 320\nheight = 180\nbitrate_kbps = 300\nfps = 30', "rungs.0.fps"),
        ('name = "a b"\nwidth = 320\nheight = 180\nbitrate_kbps = 300', "rungs.0.name"),
        ('name = "a"\nwidth = 320\nheight = 180\nbitrate_kbps = 300\ncodecs = ["vp9"]',
         "rungs.0.codecs"),
    ],
)
def test_schema_errors_name_the_field(tmp_path, rung, field):
    bad = tmp_path / "bad.toml"
    bad.write_text(f"[[rungs]]\n{rung}\n")
    with pytest.raises(UserError) as err:
        load_ladder(bad)
    assert "malformed" in str(err.value) and field in str(err.value)


def test_rungs_must_share_an_aspect_ratio_and_cover_both_codecs(tmp_path):
    mixed = tmp_path / "mixed.toml"
    mixed.write_text(
        '[[rungs]]\nname = "a"\nwidth = 320\nheight = 180\nbitrate_kbps = 300\n'
        '[[rungs]]\nname = "b"\nwidth = 640\nheight = 480\nbitrate_kbps = 900\n'
    )
    with pytest.raises(UserError, match="aspect ratio"):
        load_ladder(mixed)
    avc_only = tmp_path / "avc.toml"
    avc_only.write_text(
        '[[rungs]]\nname = "a"\nwidth = 320\nheight = 180\nbitrate_kbps = 300\ncodecs = ["avc"]\n'
    )
    with pytest.raises(UserError, match="hevc"):
        load_ladder(avc_only)
