"""The kinds as plugins: a scenario's workload kind and a condition's network kind are names
registered by the modules of runner/workloads/ and runner/sites/, an unknown one refused with the
kinds there are; a competitor speaks any registered transport, and trial.json records it."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from mpstream.errors import UserError
from mpstream.netem.competitors import with_transports
from mpstream.netem.profile import CompetitorSpec, profile_from_dict
from mpstream.netem.topology import Topology
from mpstream.runner.record import SCHEMA_VERSION, TrialRecord, migrate
from mpstream.runner.run import run_scenario
from mpstream.runner.scenario import parse_scenario
from mpstream.runner.sites import site_class, site_kinds
from mpstream.runner.workloads import workload_for, workload_kinds
from mpstream.transports.base import get_transport
from tests.unit.test_runner_scenario import PROFILE, _raw


@pytest.fixture
def base(tmp_path: Path) -> Path:
    (tmp_path / "p.toml").write_text(PROFILE)
    return tmp_path


def test_the_registries_hold_the_shipped_kinds():
    assert {"video", "iperf"} <= set(workload_kinds())
    assert {"emulated", "real"} <= set(site_kinds())
    assert workload_for("video").plays_video and not workload_for("iperf").plays_video
    assert site_class("emulated").movable and not site_class("real").movable


def test_an_unknown_workload_kind_is_refused_with_the_kinds_there_are(base):
    with pytest.raises(UserError, match=r"kind: .*no workload kind 'nope'; choose one of "
                                        r"video, iperf|kind: .*iperf, video"):
        parse_scenario(_raw(kind="nope"), base_dir=base)


def test_an_unknown_network_kind_is_refused_with_the_kinds_there_are(base):
    raw = _raw(conditions=[{"label": "a", "kind": "satellite", "profile": "p.toml"}])
    with pytest.raises(UserError, match=r"no network kind 'satellite'; choose one of .*"
                                        r"emulated.*real"):
        parse_scenario(raw, base_dir=base)


def test_a_trial_record_of_an_unknown_kind_is_refused():
    with pytest.raises(ValidationError, match="no workload kind 'chat'"):
        TrialRecord.model_validate({"key": "r00-a", "round": 0, "order": 0, "kind": "chat",
                                    "condition": {"label": "a", "profile": "p"},
                                    "started_at": "2026-01-01T00:00:00+00:00"})


def test_a_network_kinds_own_fields_are_its_sites_to_check(base):
    raw = _raw(conditions=[{"label": "a", "profile": "p.toml", "url": "http://x/m.mpd"}])
    with pytest.raises(UserError, match="`url` and `interfaces` go with kind = \"real\""):
        parse_scenario(raw, base_dir=base)
    raw = _raw(conditions=[{"label": "a", "profile": "p.toml", "collector": "http://x/api/v1"}])
    with pytest.raises(UserError, match="`collector` goes with kind = \"real\""):
        parse_scenario(raw, base_dir=base)
    raw = _raw(kind="iperf", media=None, conditions=[
        {"label": "w", "kind": "real", "url": "http://192.0.2.1/m.mpd", "interfaces": "eth0"}])
    with pytest.raises(UserError, match="real conditions play video"):
        parse_scenario(raw, base_dir=base)


def test_a_competitor_speaks_any_registered_transport(tmp_path):
    both = profile_from_dict({"paths": [{"rate": "10mbit"}], "competitors": [
        {"transport": "quic", "paths": [{"via": 0}]},
        # `mode` is the older spelling of mptcp and tcp.
        {"mode": "mptcp", "paths": [{"via": 0}]}]})
    assert [t.name for _, t in with_transports(both)] == ["quic", "mptcp"]
    # Only a user whose transport asks for MPTCP gets its host set up for it.
    assert [u.mptcp for u in Topology(both, "unit", emulated=True).competitors] == [False, True]
    with pytest.raises(ValidationError, match="disagree"):
        CompetitorSpec.model_validate({"mode": "tcp", "transport": "quic", "paths": [{"via": 0}]})


def test_a_competitors_unknown_transport_is_refused_where_it_is_looked_up(tmp_path):
    """The profile holds the name only: the topology and the scenario look it up, and refuse
    an unknown one as the profile's own error."""
    refused = (r"profile (custom|\S+p.toml) is invalid: competitors.0.transport: no transport "
               r"'carrier-pigeon'; choose one of mptcp, tcp")
    pigeon = {"transport": "carrier-pigeon", "paths": [{"via": 0}]}
    profile = profile_from_dict({"paths": [{"rate": "10mbit"}], "competitors": [pigeon]})
    with pytest.raises(UserError, match=refused):
        Topology(profile, "unit", emulated=True)
    (tmp_path / "p.toml").write_text(PROFILE + '[[competitors]]\ntransport = "carrier-pigeon"\n'
                                     'paths = [{ via = 0 }]\n')
    with pytest.raises(UserError, match="condition 'a': " + refused):
        parse_scenario(_raw(conditions=[{"label": "a", "profile": "p.toml"}]),
                       base_dir=tmp_path)


def test_an_older_records_competitors_get_their_transport():
    old = {"schema_version": 2, "competitors": [
        {"host": "user1", "name": "m", "mptcp": True},
        {"host": "user2", "name": "t", "mptcp": False, "cross_traffic": True}]}
    new = migrate(old)
    assert new["schema_version"] == SCHEMA_VERSION
    assert new["competitors"] == [
        {"host": "user1", "name": "m", "transport": "mptcp"},
        {"host": "user2", "name": "t", "transport": "tcp", "cross_traffic": True}]


def test_a_media_dir_that_is_no_media_tree_is_refused_before_the_run_folder(base):
    (base / "not-media").mkdir()
    scenario = parse_scenario(_raw(media={"dir": "not-media"}), base_dir=base)
    out = base / "run"
    with pytest.raises(UserError, match="is not a media tree"):
        run_scenario(scenario, out, plan_only=True)
    assert not out.exists()


def test_two_users_with_a_gateway_on_the_one_server_are_refused(tmp_path):
    (tmp_path / "p.toml").write_text(PROFILE + '[[competitors]]\ntransport = "quic"\n'
                                     'paths = [{ via = 0 }]\n')
    scenario = parse_scenario(_raw(conditions=[
        {"label": "hop", "profile": "p.toml", "transport": "mpquic"},
        {"label": "kernel", "profile": "p.toml"}]), base_dir=tmp_path)
    site = site_class("emulated")
    hop, kernel = scenario.all_conditions()
    assert site.refusals(scenario.resolved(hop)) == [
        "2 users speak transports that run a gateway on the server host (mpquic, quic): one "
        "user at most may"]
    assert site.refusals(scenario.resolved(kernel)) == []


def _docs_example() -> str:
    """The workload docs/architecture.md shows under "Adding a workload", as it is written."""
    page = (Path(__file__).parents[2] / "docs" / "architecture.md").read_text()
    section = page.split("### Adding a workload", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.fixture
def ping_plugin(tmp_path: Path):
    """The docs' example dropped as one file into a folder the workload registry searches, as
    a file in runner/workloads/ would be; removed again afterwards."""
    import sys

    from mpstream.runner import workloads
    from mpstream.runner.metrics import metric
    (tmp_path / "ping.py").write_text(_docs_example())
    registry = workloads.WORKLOADS
    workloads.__path__.append(str(tmp_path))
    registry.path.append(str(tmp_path))
    registry.loaded = False
    try:
        yield registry
    finally:
        workloads.__path__.remove(str(tmp_path))
        registry.path.remove(str(tmp_path))
        registry.items.pop("ping", None)
        metric._TRIAL.unregister("ping_rtt_ms")
        sys.modules.pop("mpstream.runner.workloads.ping", None)


def test_the_docs_example_workload_is_one_file_and_nothing_else_names_it(ping_plugin, base,
                                                                          tmp_path):
    from mpstream.runner.layout import TrialData
    from mpstream.runner.metrics.metric import metric_label
    assert "ping" in workload_kinds()
    scenario = parse_scenario(_raw(kind="ping"), base_dir=base)
    assert scenario.kind == "ping" and workload_for(scenario.kind).tools == ("ping",)
    record = TrialRecord.model_validate({
        "key": "r00-a", "round": 0, "order": 0, "kind": "ping",
        "condition": {"label": "a", "profile": "p"},
        "started_at": "2026-01-01T00:00:00+00:00"})
    assert record.kind == "ping"
    # Its figure: computed from the trial's own file, shown with the label it declared.
    trial = tmp_path / "trial"
    trial.mkdir()
    (trial / "ping.txt").write_text(
        "5 packets transmitted, 5 received, 0% packet loss, time 4005ms\n"
        "rtt min/avg/max/mdev = 20.101/20.412/21.003/0.311 ms\n")
    assert workload_for("ping").metrics(TrialData(trial, record)) == {"ping_rtt_ms": 20.412}
    assert metric_label("ping_rtt_ms") == ("mean round trip", "ms")


def test_a_transport_is_one_module_in_the_transports_folder(tmp_path):
    """A module dropped into a folder of mpstream/transports/ registers its transport once
    the registry loads the folder: nothing else names it."""
    import sys

    import mpstream.transports as folder
    from mpstream.transports import base as transport
    (tmp_path / "pigeon.py").write_text(
        "from mpstream.transports.base import Transport, register\n\n\n"
        "class Pigeon(Transport):\n"
        "    name = 'pigeon'\n    label = 'pigeon'\n    kernel_mptcp = False\n"
        "    network_mode = 'tcp'\n\n\n"
        "register(Pigeon())\n")
    folder.__path__.append(str(tmp_path))
    try:
        transport.TRANSPORTS.load(again=True)
        assert transport.get_transport("pigeon").label == "pigeon"
    finally:
        folder.__path__.remove(str(tmp_path))
        transport.TRANSPORTS.unregister("pigeon")
        sys.modules.pop("mpstream.transports.pigeon", None)


def test_a_folders_helpers_are_no_plugins_and_plugins_keep_the_folders_order(tmp_path,
                                                                             monkeypatch):
    """A registry imports the folder's plugins but not its interface or the helpers they share,
    and lists the plugins in the folder's order even when one was imported first (as importing
    a helper inside a plugin's package imports that plugin)."""
    import importlib
    import sys

    from mpstream.registry import Registry
    folder = tmp_path / "kinds"
    (folder / "zebra").mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "base.py").write_text("import kinds\n"
                                    "from mpstream.registry import Registry\n"
                                    "KINDS = Registry('kinds', kinds.__path__, 'kind', "
                                    "lambda k: k.name, not_plugins=('base', 'shared'))\n")
    (folder / "shared.py").write_text("raise AssertionError('a helper imported as a plugin')\n")
    for name, home in (("alpha", folder / "alpha.py"), ("zebra", folder / "zebra" / "__init__.py")):
        home.write_text(f"from kinds.base import KINDS\nclass Kind:\n    name = {name!r}\n"
                        "KINDS.register(Kind())\n")
    (folder / "zebra" / "helper.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        importlib.import_module("kinds.zebra.helper")  # registers zebra before the folder loads
        registry: Registry = importlib.import_module("kinds.base").KINDS
        assert list(registry.items) == ["zebra"]
        assert registry.names() == ["alpha", "zebra"]
        assert "kinds.shared" not in sys.modules
    finally:
        for name in [m for m in sys.modules if m == "kinds" or m.startswith("kinds.")]:
            del sys.modules[name]


def test_the_shipped_transports_keep_their_order_whatever_is_imported_first():
    import subprocess
    import sys
    listed = subprocess.run(
        [sys.executable, "-c", "import mpstream.transports.mphttp.rangeplan\n"
         "from mpstream.transports.hop import programs\n"
         "from mpstream.transports.base import TRANSPORTS\n"
         "print(' '.join(TRANSPORTS.names()))"],
        capture_output=True, text=True, check=True).stdout.split()
    assert listed == ["mptcp", "tcp", "mpquic", "quic", "mptcp-hop", "tcp-hop", "mphttp"]


def test_an_mphttp_scheduler_is_one_class_and_its_register_call():
    """What adding a scheduler to mphttp touches: its class and `register`, in one module;
    the transport and its proxy's --scheduler then offer it by name."""
    from mpstream.transports.mphttp import schedulers
    from mpstream.transports.mphttp.program import parse_args

    class Halves(schedulers.Even):
        name = "halves"
        summary = "every gap split in two, whatever the paths"

    schedulers.register(Halves())
    try:
        assert get_transport("mphttp").schedulers()["halves"] == Halves.summary
        assert parse_args(["--scheduler", "halves", "--path", "0,10.1.0.2"]).scheduler \
            == "halves"
    finally:
        schedulers.SCHEDULERS.unregister("halves")


@pytest.mark.parametrize("check_s", [0, 1])
def test_a_real_condition_checks_its_paths_around_the_trial_unless_check_s_is_0(
        monkeypatch, tmp_path, check_s):
    from mpstream.netem import pathcheck
    from mpstream.runner.scenario import expand_trials

    checked = []
    monkeypatch.setattr(pathcheck, "check_paths", lambda *a, **kw: checked.append(a) or {
        "url": a[0], "probe_url": a[0], "seconds": kw["seconds"], "interfaces": [],
        "aggregate": None, "errors": []})
    url = "http://192.0.2.1/m.mpd"
    scenario = parse_scenario(_raw(media=None, conditions=[
        {"label": "w", "kind": "real", "url": url, "interfaces": "eth0", "check_s": check_s}]),
        base_dir=tmp_path)
    trial = expand_trials(scenario, 1)[0]
    site = site_class("real")(scenario.resolved(trial.condition), trial, tmp_path, "t", False)
    record = TrialRecord(key=trial.key, round=0, order=0, kind="video",
                         condition=trial.condition, started_at="2026-01-01T00:00:00+00:00")
    with site.around(record):
        pass
    assert record.url == url
    assert len(checked) == (2 if check_s else 0)
    assert (record.path_checks is None) == (not check_s)
