"""The test sessions' media cache (tests/mediacache.py): an entry is made once and each session
gets its own copy; a change to the encoder's sources makes a new entry; old entries go."""

import pytest

from tests import mediacache


def _sources(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    for folder in mediacache.SOURCES:
        (root / folder).mkdir(parents=True)
        (root / folder / "code.py").write_text("x = 1\n")
    monkeypatch.setattr(mediacache, "ROOT", root)
    monkeypatch.setenv("MPSTREAM_CACHE", str(tmp_path / "cache"))
    return root


def test_an_entry_is_made_once_and_each_session_gets_a_copy(tmp_path, monkeypatch):
    _sources(tmp_path, monkeypatch)
    made = []

    def make(folder):
        made.append(folder)
        folder.mkdir(parents=True)
        (folder / "media.json").write_text("{}")

    first = mediacache.cached_media(tmp_path / "a", make, "tiny", 30.0)
    (first / "media.json").write_text("changed by a test")  # the cache's entry is not touched
    second = mediacache.cached_media(tmp_path / "b", make, "tiny", 30.0)
    assert len(made) == 1
    assert (second / "media.json").read_text() == "{}"
    assert [p.name for p in mediacache.cache_dir().iterdir()] == [mediacache.key("tiny", 30.0)]


def test_a_change_to_the_encoder_or_the_arguments_makes_a_new_entry(tmp_path, monkeypatch):
    root = _sources(tmp_path, monkeypatch)
    before = mediacache.key("tiny", 30.0)
    assert mediacache.key("tiny", 16.0) != before
    (root / "encoder" / "code.py").write_text("x = 2\n")
    assert mediacache.key("tiny", 30.0) != before


def test_a_failed_encode_leaves_no_entry_and_old_entries_go(tmp_path, monkeypatch):
    root = _sources(tmp_path, monkeypatch)

    def broken(folder):
        raise RuntimeError("ffmpeg failed")

    with pytest.raises(RuntimeError):
        mediacache.cached_media(tmp_path / "x", broken, "tiny")
    assert list(mediacache.cache_dir().iterdir()) == []
    for n in range(mediacache.KEEP + 2):
        (root / "manifests" / "code.py").write_text(f"x = {n}\n")
        mediacache.cached_media(tmp_path / f"s{n}", lambda f: f.mkdir(parents=True), "tiny")
    assert len(list(mediacache.cache_dir().iterdir())) == mediacache.KEEP
