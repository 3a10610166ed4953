"""`mpstream play` without a browser or a network: its options become the one-trial scenario a
scenario file with the same settings is (so that `play` and `run` cannot drift), the session
request the trial sends the page follows from it, and what the command refuses it refuses before
anything is built. The sessions themselves run in tests/e2e/test_player_cli.py and
tests/e2e/test_real_hosts.py."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from mpstream.errors import UserError
from mpstream.player import session
from mpstream.runner.play import Played, PlayOptions, _show, play, play_scenario
from mpstream.runner.record import TrialRecord
from mpstream.runner.scenario import Scenario, Trial, expand_trials, parse_scenario
from mpstream.runner.workloads.base import SessionNames, TrialContext
from mpstream.runner.workloads.video import play_request
from mpstream.transports.base import get_transport


def _options(*args: str) -> PlayOptions:
    return PlayOptions(**play.make_context("play", list(args)).params)


def _from_file(text: str) -> Scenario:
    return parse_scenario(tomllib.loads(text), base_dir=Path.cwd())


def _request(scenario: Scenario, trial: Trial, names: SessionNames) -> session.PlayRequest:
    """The request the trial's video workload sends the page (the network's parts aside)."""
    ctx = TrialContext(network=None, transport=get_transport("mptcp"), scenario=scenario,
                       trial=trial, tdir=Path("trial"), session=names, media_dir=None,
                       site=None, watch=None, resolved=scenario.resolved(trial.condition))
    return play_request(ctx, trial.player or "dashjs", trial.browser or "chromium", "/m.mpd")


@pytest.fixture
def media(tmp_path, monkeypatch):
    """A media tree with both manifests, and a profile with a metered path, in the folder the
    command runs from (a scenario file's, which it runs from too)."""
    monkeypatch.chdir(tmp_path)
    for manifest in ("dash/manifest.mpd", "hls/master.m3u8"):
        (tmp_path / manifest).parent.mkdir()
        (tmp_path / manifest).write_text("")
    (tmp_path / "cell.toml").write_text('mode = "mptcp"\n[[paths]]\nrate = "20mbit"\n'
                                        '[[paths]]\nrate = "5mbit"\nmetered = true\n')
    return tmp_path


CASES = {
    "emulated, every setting": (
        ["--profile", "cell.toml", "--player", "hlsjs", "--browser", "firefox",
         "--codec", "avc", "--transport", "mptcp", "--scheduler", "redundant",
         "--deployment", "mptcp-tuned", "--path-policy", "deadline", "--deadline-marks", "3,9",
         "--duration", "12", "--buffer", "20", "--target-latency", "4", "--abr", "robustmpc",
         "--abr-param", "horizon=3", "--report-timeout", "30"],
        """
        name = "play"
        trials = 1
        players = ["hlsjs"]
        browsers = ["firefox"]
        codecs = ["avc"]
        abrs = ["robustmpc"]
        abr_params = { robustmpc = { horizon = 3 } }
        duration_s = 12
        buffer_s = 20
        target_latency_s = 4
        report_timeout_s = 30
        media = { dir = "MEDIA" }

        [[conditions]]
        label = "play"
        profile = "cell.toml"
        transport = "mptcp"
        scheduler = "redundant"
        deployment = "mptcp-tuned"
        path_policy = "deadline"
        deadline_marks = [3, 9]
        """),
    # play's own default duration (30 s) is the scenario's, and the rest are a scenario's own
    # defaults; the deployment's path policy applies in both.
    "emulated, the defaults": (
        ["--profile", "thesis-bandwidth-balanced", "--player", "dashjs"],
        """
        name = "play"
        trials = 1
        players = ["dashjs"]
        duration_s = 30
        media = { dir = "MEDIA" }

        [[conditions]]
        label = "play"
        profile = "thesis-bandwidth-balanced"
        """),
    "a server elsewhere": (
        ["--url", "http://192.0.2.1:8080/media/hls/master.m3u8", "--interfaces", "eth0,eth1:backup",
         "--collector", "http://192.0.2.1:8080/api/v1", "--transport", "tcp"],
        """
        name = "play"
        trials = 1
        players = ["hlsjs"]
        duration_s = 30

        [[conditions]]
        label = "play"
        kind = "real"
        url = "http://192.0.2.1:8080/media/hls/master.m3u8"
        interfaces = "eth0,eth1:backup"
        collector = "http://192.0.2.1:8080/api/v1"
        transport = "tcp"
        check_s = 0
        """),
}


@pytest.mark.parametrize("case", list(CASES))
def test_play_runs_the_trial_a_scenario_file_with_its_settings_runs(media, case):
    args, toml = CASES[case]
    with_media = [] if "--url" in args else ["--media", str(media)]
    played = play_scenario(_options(*with_media, *args))
    filed = _from_file(toml.replace("MEDIA", str(media)))
    assert played.model_dump() == filed.model_dump()
    assert expand_trials(played) == expand_trials(filed)
    [trial] = expand_trials(played)
    names = SessionNames("s-1")
    assert _request(played, trial, names) == _request(filed, trial, names)


def test_a_deployments_path_policy_is_plays_and_runs_alike(media):
    played = play_scenario(_options("--media", str(media), "--profile", "thesis-bandwidth-"
                                     "unbalanced", "--player", "dashjs", "--deployment",
                                     "mptcp-tuned"))
    assert played.conditions[0].path_policy == "fast-start"


def test_parameters_of_the_players_default_rule_reach_the_page(media):
    """--abr-param without --abr sets the player's default rule's parameters, as it always
    did; a scenario file says the same with abr_params.default."""
    played = play_scenario(_options("--media", str(media), "--profile", "thesis-bandwidth-"
                                    "balanced", "--player", "hlsjs", "--abr-param",
                                    "abrEwmaFastVoD=2"))
    assert played.abrs == ["default"]
    assert played.abr_params == {"default": {"abrEwmaFastVoD": 2.0}}
    [trial] = expand_trials(played)
    request = _request(played, trial, SessionNames("s-1"))
    assert (request.abr, request.abr_params) == ("ewma", (("abrEwmaFastVoD", 2.0),))
    # No parameters: the page's own default, named by no parameter.
    plain = play_scenario(_options("--media", str(media), "--profile", "thesis-bandwidth-"
                                   "balanced", "--player", "hlsjs"))
    assert _request(plain, trial, SessionNames("s-1")).abr is None


def test_play_passes_report_timeout_and_its_names_to_the_page(monkeypatch):
    """--report-timeout reaches the request, and so the page's report_timeout parameter (the
    e2e collector-down test plays with it); unset, the page keeps its own default. The session
    is named and labelled as told, and its screenshot taken only when asked for."""
    asked = []
    monkeypatch.setattr("mpstream.runner.play._play",
                        lambda scenario, o, names: asked.append((scenario, names)))
    monkeypatch.setattr("mpstream.runner.play._show", lambda *a: None)
    for extra in (["--report-timeout", "40", "--session", "s-9", "--scenario", "a label",
                   "--trial", "2", "--screenshot", "shot.png"], []):
        result = CliRunner().invoke(play, ["--url", "http://127.0.0.1:9/m.mpd", *extra])
        assert result.exception is None, result.output
    requests = [_request(scenario, expand_trials(scenario)[0], names)
                for scenario, names in asked]
    assert [r.report_timeout_s for r in requests] == [40.0, None]
    assert "report_timeout=40" in session.page_url("http://h", requests[0])
    assert "report_timeout" not in session.page_url("http://h", requests[1])
    assert (requests[0].session_id, requests[0].scenario, requests[0].trial,
            requests[0].screenshot) == ("s-9", "a label", 2, Path("shot.png"))
    assert requests[1].session_id.startswith("play-dashjs-mptcp-")
    assert (requests[1].scenario, requests[1].trial, requests[1].screenshot) == (None, None, None)


def _record(**fields) -> TrialRecord:
    return TrialRecord.model_validate({
        "key": "r00-play-dashjs", "round": 0, "order": 0, "kind": "video",
        "condition": {"label": "play", "profile": "thesis-bandwidth-balanced"},
        "started_at": "2026-01-01T00:00:00+00:00", **fields})


def test_a_failed_session_is_shown_then_exits_1_saying_why(capsys):
    result = {"session": "s-1", "failure": "no frame within 30 s", "paths": []}
    with pytest.raises(UserError, match="session s-1 failed: no frame within 30 s") as failed:
        _show(Played(_record(status="failed", reason="player: no frame within 30 s",
                             deployment="kernel-default"), result, None), "s-1", as_json=True)
    assert failed.value.exit_code == 1
    assert '"deployment": "kernel-default"' in capsys.readouterr().out


def test_a_trial_that_never_played_says_its_reason_as_the_command_would_have():
    refused = Played(_record(status="failed", reason="the player page did not load"), None, None)
    with pytest.raises(UserError, match="the player page did not load") as said:
        _show(refused, "s-1", as_json=False)
    assert said.value.exit_code == 2
    broke = Played(_record(status="failed", reason="KeyError: 'x'"), None, "Traceback ...\n")
    with pytest.raises(UserError, match="KeyError") as said:
        _show(broke, "s-1", as_json=False)
    assert said.value.exit_code == 1


def test_play_refuses_a_media_tree_without_the_manifest(tmp_path):
    result = CliRunner().invoke(play, ["--media", str(tmp_path), "--player", "dashjs",
                                       "--profile", "thesis-bandwidth-balanced"])
    assert isinstance(result.exception, UserError)
    assert "dash/manifest.mpd is missing" in str(result.exception)


def test_play_refuses_a_profile_with_competing_clients_before_building_it(media):
    result = CliRunner().invoke(play, ["--media", str(media), "--player", "dashjs",
                                       "--profile", "shared-bottleneck"])
    assert isinstance(result.exception, UserError)
    assert "has competing clients" in str(result.exception)
    assert "mpstream run" in str(result.exception)
