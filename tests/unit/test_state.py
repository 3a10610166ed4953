"""One state root: topologies and host changes are recorded in their own folders under it, and
`clean` still finds what an older version left where it used to keep it (topologies right in
/run/mpstream, host changes in /run/mpstream-hostnet), leaving live owners' records alone.
Records only, no namespaces: the root is moved to a temporary folder."""

import json
import os

from mpstream import state
from mpstream.netem import hostnet, teardown

DEAD = 2**22 + 7  # above the kernel's largest pid


def record(path, **fields):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(fields))


def test_each_kind_has_its_folder_under_the_root(tmp_path, monkeypatch):
    monkeypatch.setenv(state.ENV, str(tmp_path / "mps"))
    assert teardown.state_dir() == tmp_path / "mps" / "topologies"
    assert hostnet.state_dir() == tmp_path / "mps" / "host-changes"
    monkeypatch.delenv(state.ENV)
    assert teardown.state_dir().parent == hostnet.state_dir().parent == state.DEFAULT_ROOT


def test_clean_finds_what_an_older_version_left(tmp_path, monkeypatch):
    root = tmp_path / "mpstream"
    monkeypatch.setenv(state.ENV, str(root))
    tag = f"old{os.getpid()}"
    # The older layout: topology records and emulator folders right in the root.
    record(root / f"{tag}dead.json", owner_pid=DEAD)
    record(root / f"{tag}dead" / "path0.json")
    record(root / f"{tag}live.json", owner_pid=os.getpid())
    record(root / "topologies" / f"{tag}new.json", owner_pid=DEAD)

    sweep = teardown.clean_stale(f"{tag}*")
    assert [r.name for r in sweep.removed] == [f"{tag}dead", f"{tag}new"]
    assert sweep.removed[0].state == [root / f"{tag}dead.json", root / f"{tag}dead"]
    assert sweep.in_use == {f"{tag}live": os.getpid()}
    assert sorted(p.name for p in root.iterdir()) == [f"{tag}live.json", "topologies"]
    assert list((root / "topologies").iterdir()) == []

    # The older place of host changes: beside the root.
    here = hostnet.netns_id()
    record(tmp_path / "mpstream-hostnet" / "1-1.json", owner_pid=DEAD, netns=here,
           purpose="old", changes=[])
    record(root / "host-changes" / "2-2.json", owner_pid=DEAD, netns=here, purpose="new",
           changes=[])
    record(root / "host-changes" / "3-3.json", owner_pid=os.getpid(), netns=here,
           purpose="live", changes=[])
    (root / "host-changes" / f"{DEAD}-4.tmp").write_text("{")
    out = hostnet.clean()
    assert sorted(u["purpose"] for u in out["undone"]) == ["new", "old"]
    assert out["live"] == 1 and out["partial"] == [str(root / "host-changes" / f"{DEAD}-4.tmp")]
    assert list((tmp_path / "mpstream-hostnet").iterdir()) == []
    assert [p.name for p in (root / "host-changes").iterdir()] == ["3-3.json"]


def test_clean_leaves_a_folder_of_another_kind_of_record_in_the_root(tmp_path, monkeypatch):
    """A newer version's kind of record (say, clusters/) in the root is no old topology: only
    a folder beside its record or holding emulator configurations is."""
    root = tmp_path / "mpstream"
    monkeypatch.setenv(state.ENV, str(root))
    tag = f"kind{os.getpid()}"
    record(root / tag / "head.json", owner_pid=DEAD)
    record(root / f"{tag}old" / "path0.json")  # an old topology's emulator folder, no record
    sweep = teardown.clean_stale(f"{tag}*")
    assert [r.name for r in sweep.removed] == [f"{tag}old"]
    assert (root / tag / "head.json").exists()
    assert not (root / f"{tag}old").exists()
