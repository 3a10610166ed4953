"""The parts of cluster runs that need no cluster: which --cluster values mean what, the
scenarios a cluster refuses, trial folders installed whole, the hosts' facts compared, media
trees known by their content."""

from pathlib import Path

import pytest

from mpstream.errors import UserError
from mpstream.runner.cluster import raytrials
from mpstream.runner.cluster.hosts import CACHE_ENV, HostFacts
from mpstream.runner.cluster.local import local_hosts
from mpstream.runner.layout import (
    TRIAL_JSON,
    install_trial_dir,
    load_trials,
    remove_partial_trials,
    write_json,
)
from mpstream.runner.run import run_scenario
from mpstream.runner.scenario import expand_trials, load_scenario, parse_scenario
from mpstream.runner.trial import failed_record

IPERF = {"name": "c", "kind": "iperf", "trials": 1, "duration_s": 2,
         "conditions": [{"label": "a", "profile": "thesis-bandwidth-balanced"}]}


def test_cluster_values():
    assert local_hosts("local:2") == 2
    assert local_hosts("10.0.0.1:6379") is None
    for bad in ("local", "local:0", "local:99"):
        with pytest.raises(UserError, match="local:N"):
            local_hosts(bad)


def test_trials_bound_to_this_machine_are_refused_before_anything(tmp_path):
    live = load_scenario("live")
    with pytest.raises(UserError, match=r"\[live\].*without --cluster"):
        run_scenario(live, tmp_path / "live", cluster="local:2")
    real = parse_scenario({
        "name": "r", "conditions": [{"label": "wan", "kind": "real",
                                     "url": "http://192.0.2.1/m.mpd", "interfaces": "eth0"}]},
        base_dir=tmp_path)
    with pytest.raises(UserError, match=r'wan are kind = "real".*without --cluster'):
        run_scenario(real, tmp_path / "real", cluster="10.0.0.1:6379")
    assert not (tmp_path / "live").exists() and not (tmp_path / "real").exists()


def test_a_trial_folder_from_elsewhere_is_whole_or_absent(tmp_path):
    scenario = parse_scenario(IPERF, base_dir=tmp_path)
    trial = expand_trials(scenario)[0]
    record = failed_record("iperf", trial, "lost", host="h1")

    def half(part: Path) -> None:
        write_json(part / TRIAL_JSON, record.model_dump(mode="json"))
        raise OSError("the coordinator died here")

    with pytest.raises(OSError):
        install_trial_dir(tmp_path, trial.key, half)
    assert (tmp_path / "trials" / f".{trial.key}.part" / TRIAL_JSON).is_file()
    assert load_trials(tmp_path) == []  # a half-copied trial is not a finished one
    assert remove_partial_trials(tmp_path) == [tmp_path / "trials" / f".{trial.key}.part"]
    (tmp_path / "trials" / trial.key).mkdir()
    (tmp_path / "trials" / trial.key / "left-by-an-interrupted-try").touch()
    install_trial_dir(tmp_path, trial.key,
                      lambda part: write_json(part / TRIAL_JSON, record.model_dump(mode="json")))
    [done] = load_trials(tmp_path)
    assert done.record.reason == "lost" and done.record.host == "h1"
    assert sorted(p.name for p in done.dir.iterdir()) == [TRIAL_JSON]
    assert sorted(p.name for p in (tmp_path / "trials").iterdir()) == [trial.key]


def test_a_host_differing_from_the_head_is_refused_with_the_reason():
    head = HostFacts(host="head", kernel="6.18", mptcp="enabled", version="0.1.0", doctor="ok")
    same = head.model_copy(update={"host": "h1", "kernel": "6.1"})
    assert same.refusal(head) is None  # another kernel is shown, not refused
    other = head.model_copy(update={"host": "h2", "version": "0.2.0",
                                    "doctor": "missing: Chromium"})
    assert other.refusal(head) == ("mpstream 0.2.0, the head has 0.1.0; doctor says "
                                   "'missing: Chromium', on the head 'ok'")


def test_media_trees_are_known_by_content(tmp_path, monkeypatch):
    tree = tmp_path / "media"
    (tree / "dash").mkdir(parents=True)
    (tree / "media.json").write_text("{}")
    (tree / "dash" / "seg1.m4s").write_bytes(b"x" * 1000)
    digest = raytrials.tree_digest(tree)
    copy = tmp_path / "copy"
    raytrials.untar(raytrials.tar_bytes(tree), copy)
    assert raytrials.tree_digest(copy) == digest
    (copy / "dash" / "seg1.m4s").write_bytes(b"y" * 1000)
    assert raytrials.tree_digest(copy) != digest

    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    # The tree at the run's own path with the same content is used where it is; no archive
    # is fetched (there is none to fetch here).
    shipment = raytrials.MediaShipment(digest, str(tree), archive=[])
    assert raytrials.media_here(shipment) == (tree, "")
    # Known now, by the files' sizes and times: not hashed again...
    monkeypatch.setattr(raytrials, "tree_digest", lambda _tree: pytest.fail("hashed again"))
    assert raytrials.media_here(shipment) == (tree, "")
    monkeypatch.undo()
    # ...until a file changes: then it is hashed again and no longer the run's tree.
    (tree / "media.json").write_text('{"changed": 1}')
    assert raytrials._known_digest(tree, tmp_path / "cache" / "media") != digest
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    # A tree cached earlier by its hash wins.
    cached = tmp_path / "cache" / "media" / digest
    raytrials.untar(raytrials.tar_bytes(tree), cached)
    (tmp_path / "cache" / "media" / f"{digest}.ok").touch()
    assert raytrials.media_here(raytrials.MediaShipment(digest, "/nowhere", [])) == (cached, "")


def test_a_host_without_the_tree_unpacks_the_shipped_archive_once(tmp_path, monkeypatch):
    # What a host that does not share the run's file system does (a real testbed's host; a
    # local cluster's hosts see the run's own path): the archive the driver put in Ray's object
    # store is fetched (ray.get faked here) and unpacked into the cache under its hash, once.
    tree = tmp_path / "media"
    (tree / "hls").mkdir(parents=True)
    (tree / "media.json").write_text("{}")
    (tree / "hls" / "seg0.ts").write_bytes(b"z" * 4000)
    digest = raytrials.tree_digest(tree)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    fetched = []
    monkeypatch.setattr(raytrials.ray, "get", lambda ref: fetched.append(ref) or ref)
    shipment = raytrials.MediaShipment(digest, str(tmp_path / "elsewhere"),
                                       archive=[raytrials.tar_bytes(tree)])
    where, note = raytrials.media_here(shipment)
    assert where == tmp_path / "cache" / "media" / digest
    assert raytrials.tree_digest(where) == digest
    assert note.startswith(f"media tree {digest[:12]} copied to {where}")
    assert raytrials.media_here(shipment) == (where, "") and len(fetched) == 1
