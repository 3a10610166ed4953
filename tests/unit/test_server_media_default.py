"""`mpstream serve` with no --media: it finds the tree `encode` or `demo` made, or says which
command makes one."""

import os
import time

import pytest

from mpstream.errors import UserError
from mpstream.server import cli


def tree(path):
    path.mkdir(parents=True)
    (path / "media.json").write_text("{}")
    return path


@pytest.fixture
def repo(tmp_path, monkeypatch):
    root = tmp_path / "repo"
    root.mkdir()
    monkeypatch.setattr(cli, "REPO_ROOT", root)
    monkeypatch.setattr(cli, "MEDIA_CACHE", root / "media" / "cache")
    return root


def test_encode_default_in_the_working_directory_comes_first(tmp_path, repo):
    here = tree(tmp_path / "work" / "media" / "default")
    tree(repo / "media" / "default")
    assert cli.find_media(tmp_path / "work") == here


def test_then_the_repository_default_then_the_newest_cached_encode(tmp_path, repo):
    old = tree(repo / "media" / "cache" / "aaa")
    new = tree(repo / "media" / "cache" / "bbb")
    past = time.time() - 100
    os.utime(old / "media.json", (past, past))
    assert cli.find_media(tmp_path) == new
    default = tree(repo / "media" / "default")
    assert cli.find_media(tmp_path) == default


def test_no_tree_names_the_commands_that_make_one(tmp_path, repo):
    (tmp_path / "media" / "default").mkdir(parents=True)  # a directory, but not a media tree
    with pytest.raises(UserError) as info:
        cli.find_media(tmp_path)
    assert "`mpstream encode sample`" in str(info.value) and "make demo" in str(info.value)
    assert "--media DIR" in str(info.value)
