"""`mpstream play`: one headless playback session, over an emulated topology (--media with
--profile) or from any manifest's URL over this host's own interfaces (--url).

A session is one trial of the runner, so that `play` and `run` cannot drift: the options become
a scenario of one condition and one trial (`play_scenario`, the one place they are mapped), and
that trial runs through the condition's site (runner/sites/) and the video workload as each
trial of `mpstream run` does (runner/trial.py), in a folder of this process's that goes when the
session ends. What the command refuses it refuses first, in its options' words, before anything
is built; then it prints the session the trial recorded (its summary.json)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import click
from rich.console import Console

from mpstream import phases
from mpstream.deployment import load_deployment, preset_names
from mpstream.errors import UserError, warn
from mpstream.player.abr import DEFAULT as ABR_DEFAULT
from mpstream.player.abr import catalog, default_abr, parse_abr_params, resolve_abr
from mpstream.player.browsers import BROWSERS, check_browser
from mpstream.player.codecs import CODECS, check_codec
from mpstream.player.session import MANIFESTS
from mpstream.player.show import print_session
from mpstream.proc import signals_interrupt
from mpstream.progress import working
from mpstream.runner.layout import read_json, trial_dir
from mpstream.runner.listing import print_kind
from mpstream.runner.record import TrialRecord
from mpstream.runner.resolved import ResolvedCondition
from mpstream.runner.scenario import Scenario, expand_trials, resolve_scenario, validate_scenario
from mpstream.runner.trial import run_trial
from mpstream.runner.workloads import workload_for
from mpstream.runner.workloads.base import SessionNames
from mpstream.scratch import session_tempdir
from mpstream.transports.base import TRANSPORTS, Transport, for_network_mode, get_transport
from mpstream.transports.pathpolicy import DEFAULT_POLICY, POLICIES, DeadlineMarks, check_for

if TYPE_CHECKING:
    from mpstream.netem.profile import Profile

# The name of the scenario, of its one condition and of the run its trial belongs to.
PLAY = "play"


@dataclass(frozen=True)
class PlayOptions:
    """The command's options, as click parses them."""

    media: Path | None
    profile: str | None
    url: str | None
    interfaces: str | None
    collector_url: str | None
    player: str | None
    browser: str
    codec: str
    transport: str | None
    scheduler: str | None
    deployment: str | None
    path_policy: str | None
    deadline_marks: str | None
    duration_s: float
    buffer_s: float | None
    target_latency_s: float | None
    abr: str | None
    abr_params: tuple[str, ...]
    report_timeout_s: float | None
    session_id: str | None
    scenario: str | None
    trial: int | None
    name: str
    screenshot: Path | None
    as_json: bool


def play_scenario(o: PlayOptions) -> Scenario:
    """The scenario a `play` runs: each option on the field of the same meaning of the scenario
    or of its one condition, here and nowhere else. A scenario file with these fields runs the
    same trial in `mpstream run` (tests/unit/test_play.py). Its condition is resolved here,
    once. Refused here: a URL no player is known for, deadline marks that are not two numbers,
    a rule (or its parameters) the player lacks, a profile or deployment that is not valid."""
    player = _player_of(o)
    marks = _deadline_marks(o.deadline_marks)
    condition: dict[str, Any] = {
        "label": PLAY, "transport": o.transport, "scheduler": o.scheduler,
        "path_policy": o.path_policy,
        "deadline_marks": None if marks is None else (marks.low_s, marks.high_s)}
    if o.url is None:
        condition.update(profile=o.profile, deployment=o.deployment)
    else:
        # No path checks around the session (check_s 0): `mpstream paths check` is for that.
        condition.update(kind="real", url=o.url, interfaces=o.interfaces,
                         collector=o.collector_url, check_s=0)
    abr = o.abr or ABR_DEFAULT
    params = parse_abr_params(player, resolve_abr(player, o.abr), o.abr_params)
    fields = {
        "name": PLAY, "trials": 1, "conditions": [condition],
        "media": None if o.media is None else {"dir": o.media},
        "players": [player], "browsers": [o.browser], "codecs": [o.codec], "abrs": [abr],
        "abr_params": {abr: params} if params else {},
        "duration_s": o.duration_s, "buffer_s": o.buffer_s,
        "target_latency_s": o.target_latency_s, "report_timeout_s": o.report_timeout_s}
    # Relative files (the media, a profile, a deployment) are the caller's, from here; they are
    # read as the condition resolves, once.
    return resolve_scenario(validate_scenario(fields, base_dir=Path.cwd(), origin=PLAY))


def _player_of(o: PlayOptions) -> str:
    """The player asked for (an emulated session must ask: _check_emulated); with --url and
    none asked for, the one its manifest's name says."""
    if o.player is not None:
        return o.player
    path = urlsplit(o.url or "").path.lower()
    if path.endswith(".mpd"):
        return "dashjs"
    if path.endswith(".m3u8"):
        return "hlsjs"
    raise UserError(f"--url {o.url}: ends neither in .mpd nor .m3u8; say which player plays it "
                    "(--player dashjs or --player hlsjs)")


def _deadline_marks(text: str | None) -> DeadlineMarks | None:
    """--deadline-marks LOW,HIGH as the deadline policy's marks (None: its defaults)."""
    if text is None:
        return None
    try:
        low, high = (float(x) for x in text.split(","))
    except ValueError:
        raise UserError(f"--deadline-marks {text!r}: give LOW,HIGH in seconds, e.g. 4,10"
                        ) from None
    return DeadlineMarks(low_s=low, high_s=high)


# --- the command ---------------------------------------------------------------------------


# The help of the options that name a registered thing is written from its registry, so that
# `play --help` cannot drift from what the command accepts.


class HelpFromRegistries(click.Option):
    """An option whose help is made from the registries when help is shown, not when this
    module is imported (the path policy's reads every deployment preset)."""

    def __init__(self, *args: Any, make_help: Callable[[], str], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.make_help = make_help

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        self.help = self.help or self.make_help()
        return super().get_help_record(ctx)


def _transport_help() -> str:
    each = "; ".join(f"{t.name}: {t.summary}" for t in TRANSPORTS.values())
    return (f"How the browser reaches the server ({each}) [default: the profile's mode; mptcp "
            "with --url]; docs/quic.md, docs/mphttp.md.")


def _deployment_help() -> str:
    return ("What the server and client run over the paths (congestion control, kernel "
            "settings, nginx's options, path manager, a path policy): a preset "
            f"({', '.join(preset_names())}; `mpstream list deployments`) or a TOML file, e.g. "
            "one `mpstream tune` wrote [default: kernel-default]; with --profile.")


def _path_policy_help() -> str:
    each = "; ".join(f"{name}: {summary}" for name, summary in POLICIES.items())
    # A preset that brings a policy changes this option's default: say which.
    brought = [f"{d.name} brings {d.path_policy}"
               for d in map(load_deployment, preset_names()) if d.path_policy]
    unless = f", unless --deployment brings one ({'; '.join(brought)})" if brought else ""
    return (f"When held-back paths carry data ({each}) [default: {DEFAULT_POLICY}{unless}]; "
            "docs/cellular.md.")


def _abr_help() -> str:
    rules = catalog()
    each = "; ".join(f"{player}: " + ", ".join(
        name + (" (default)" if name == default_abr(player) else "") for name in by_name)
        for player, by_name in rules.items())
    ours = dict.fromkeys(r.name for by_name in rules.values() for r in by_name.values()
                         if r.kind == "mpstream")
    return (f"Adaptation rule: the player's own or ours ({', '.join(ours)}), by player: {each}; "
            "docs/abr.md.")


def _list_abr(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """--list-abr, kept for scripts: `mpstream list abr`, then exit."""
    if value and not ctx.resilient_parsing:
        warn("`mpstream play --list-abr` is now `mpstream list abr`")
        print_kind("abr")
        ctx.exit(0)


def _list_schedulers(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """--list-schedulers, kept for scripts: `mpstream list schedulers`, then exit."""
    if value and not ctx.resilient_parsing:
        warn("`mpstream play --list-schedulers` is now `mpstream list schedulers`")
        print_kind("schedulers")
        ctx.exit(0)


@click.command()
@click.option("--media", "media", type=click.Path(path_type=Path, file_okay=False),
              help="Media tree made by `mpstream encode` (hls/ and dash/ inside); with --profile.")
@click.option("--profile", help="Netem profile: a preset name or a file; with --media.")
@click.option("--url", help="Play this HLS playlist or DASH MPD instead, from any server, over "
                            "this host's interfaces (no emulated topology).")
@click.option("--interfaces", help="With --url: IF1,IF2[:backup],... for MPTCP; the first carries "
                                   "the initial subflow [default: the route to the server's].")
@click.option("--collector", "collector_url",
              help="With --url: post QoE events to this collector API (e.g. "
                   "http://HOST:8080/api/v1) instead of one on loopback.")
@click.option("--player", type=click.Choice(["dashjs", "hlsjs"]),
              help="dashjs plays the MPD, hlsjs the HLS master playlist "
                   "[default with --url: from its ending].")
@click.option("--browser", type=click.Choice(list(BROWSERS)), default="chromium",
              show_default=True,
              help="Headless browser: Debian's Chromium (no HEVC) or Firefox ESR (HEVC too).")
@click.option("--codec", type=click.Choice(list(CODECS)), default="auto", show_default=True,
              help="Video codec family to play: auto lets the player pick among what the "
                   "browser decodes; avc or hevc keep only that family (refused up front if the "
                   "browser cannot decode it).")
@click.option("--transport", type=click.Choice(TRANSPORTS.names()), default=None,
              cls=HelpFromRegistries, make_help=_transport_help)
# The schedulers are not named here: the QUIC hop's come from its program, built on first use.
@click.option("--scheduler", default=None,
              help="The transport's path scheduler (which bytes go on which path) [default: the "
                   "transport's own]; `mpstream list schedulers` names each transport's.")
@click.option("--list-schedulers", is_flag=True, expose_value=False, is_eager=True, hidden=True,
              callback=_list_schedulers, help="List each transport's path schedulers and exit.")
@click.option("--deployment", default=None, metavar="NAME|FILE", cls=HelpFromRegistries,
              make_help=_deployment_help)
@click.option("--path-policy", "path_policy", type=click.Choice(list(POLICIES)), default=None,
              cls=HelpFromRegistries, make_help=_path_policy_help)
@click.option("--deadline-marks", "deadline_marks", default=None, metavar="LOW,HIGH",
              help="The deadline policy's buffer marks in seconds: the metered path joins "
                   "below LOW and leaves at or above HIGH [default: 4,10].")
@click.option("--duration", "duration_s", type=click.FloatRange(min=1), default=30.0,
              show_default=True, help="Seconds to play, from the play request.")
@click.option("--buffer", "buffer_s", type=click.FloatRange(min=1), default=None,
              help="How far ahead the player may buffer, in seconds (default: the library's).")
@click.option("--target-latency", "target_latency_s", type=click.FloatRange(min=0, min_open=True),
              default=None, help="Live streams: seconds behind the live edge to play"
              " (default: the library's).")
@click.option("--abr", default=None, cls=HelpFromRegistries, make_help=_abr_help)
@click.option("--abr-param", "abr_params", multiple=True, metavar="KEY=VALUE",
              help="A numeric parameter of the rule (repeatable), e.g. horizon=3 for robustmpc.")
@click.option("--list-abr", is_flag=True, expose_value=False, is_eager=True, callback=_list_abr,
              hidden=True, help="List the adaptation rules each player supports, and exit.")
@click.option("--report-timeout", "report_timeout_s", type=click.FloatRange(min=1), default=None,
              metavar="SECONDS",
              help="How long the page keeps sending unsent events after the session ends "
                   "while the collector does not take them, before it records "
                   "collector_unreachable [default: 15] (a collector far away, --collector).")
@click.option("--session", "session_id", default=None, help="Session id (default: generated).")
@click.option("--scenario", default=None, help="Scenario label stored with the session.")
@click.option("--trial", type=click.IntRange(min=0), default=None, help="Trial number.")
@click.option("--name", default="play", show_default=True, help="Topology name.")
@click.option("--screenshot", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Save a screenshot of the page (with its HUD) during playback.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def play(**options: Any) -> None:
    """Play one session in a headless browser, over the PROFILE's emulated paths (--media,
    --profile) or from --url over this host's own interfaces, and print the collector's
    summary with the bytes each path carried."""
    o = PlayOptions(**options)
    check_browser(o.browser)
    if o.url is not None:
        _check_real(o)
        scenario = play_scenario(o)
        chosen = _real_transport(scenario.resolved(scenario.conditions[0]))
        progress = _real_progress(o, scenario.players[0], chosen)
    else:
        _check_emulated(o)
        scenario = play_scenario(o)
        assert o.media is not None
        # Before anything is built: a codec this browser cannot decode is refused here. (With
        # --url the page refuses it, from the manifest it loads, before playing.)
        check_codec(o.browser, o.codec, o.media, scenario.players[0])
        profile, chosen = _emulated_choice(scenario)
        progress = _emulated_progress(o, scenario.players[0], profile, chosen)
    session_id = o.session_id or \
        f"play-{scenario.players[0]}-{chosen.name}-{time.strftime('%Y%m%dT%H%M%S')}"
    names = SessionNames(session_id, scenario=o.scenario, trial=o.trial,
                         screenshot=o.screenshot)
    with progress:
        played = _play(scenario, o, names)
    _show(played, session_id, o.as_json)


# --- what is refused before anything is built ------------------------------------------------


def _check_real(o: PlayOptions) -> None:
    """Refuses what --url (a server elsewhere) does not go with."""
    if o.media is not None or o.profile is not None:
        raise UserError("--url plays from a server elsewhere: leave out --media and --profile")
    if o.deployment is not None:
        raise UserError("--deployment: mpstream changes nothing of a real host or of a "
                        "server elsewhere; a deployment applies to an emulated --profile")


def _check_emulated(o: PlayOptions) -> None:
    """An emulated session's media, profile and player, all given and the media playable."""
    if o.interfaces is not None or o.collector_url is not None:
        raise UserError("--interfaces and --collector go with --url (a real server); with "
                        "--profile the topology's paths are used")
    # A scheduler the transport lacks is refused first, whatever else is missing: its names are
    # what the user needs to know next.
    _check_scheduler(o.transport, o.scheduler, o.profile)
    if o.media is None or o.profile is None or o.player is None:
        raise UserError("give --media DIR --profile PROFILE --player P (an emulated session), "
                        "or --url URL (a real one)")
    manifest = o.media / MANIFESTS[o.player].removeprefix("/media/")
    if not manifest.is_file():
        raise UserError(f"--media {o.media}: {manifest} is missing; make the media tree with "
                        f"`mpstream encode ... --out {o.media}`")


def _check_scheduler(transport: str | None, scheduler: str | None,
                     profile: str | None) -> None:
    """Refuses a scheduler the session's transport (as told, or the profile's mode) lacks."""
    from mpstream.netem.profile import load_profile

    if scheduler is not None and transport is not None:
        get_transport(transport).with_scheduler(scheduler)
    elif scheduler is not None and profile is not None:
        for_network_mode(load_profile(profile).mode).with_scheduler(scheduler)


def _real_transport(resolved: ResolvedCondition) -> Transport:
    """The transport of a session from a server elsewhere (mptcp unless told), refused where it
    would need mpstream to change the host's own settings or to run something on the server."""
    chosen = resolved.transport
    refusal = chosen.scheduler_refusal()
    if refusal:
        raise UserError(refusal)
    if chosen.scheduler is not None and chosen.kernel_mptcp:
        raise UserError(f"--scheduler {chosen.scheduler}: on a real host the kernel's MPTCP "
                        "scheduler is the host's own setting (sysctl net.mptcp.scheduler), "
                        "which mpstream does not change: leave out --scheduler")
    policy = resolved.path_policy
    if policy.acts:
        raise UserError(f"--path-policy {policy.name}: a real host's interfaces say nothing of "
                        "which is metered, and mpstream does not change a host's MPTCP "
                        "endpoints: play over an emulated --profile")
    if chosen.runs_on_server:
        raise UserError(f"transport {chosen.name} runs a gateway on the server host, and "
                        "mpstream runs nothing on a server elsewhere: use --profile")
    return chosen


def _emulated_choice(scenario: Scenario) -> tuple[Profile, Transport]:
    """The profile as the condition resolved, and its transport; refused when its path policy
    cannot run there, the profile has competing users (a scenario's) or a CC the transport
    cannot use."""
    resolved = scenario.resolved(scenario.conditions[0])
    profile, chosen = resolved.network, resolved.transport
    assert profile is not None  # an emulated condition's
    check_for(resolved.path_policy, chosen, profile)
    if profile.competitors:
        raise UserError(f"profile {profile.name} has competing clients: they play (or download) "
                        "in scenarios, where each user's figures are recorded: put the profile "
                        "in a scenario and use `mpstream run`")
    refusal = chosen.cc_refusal(profile.cc)
    if refusal:
        raise UserError(f"profile {profile.name}: {refusal}")
    # What the video workload refuses of a run's condition (mphttp on a low-latency stream)
    refusal = workload_for("video").refusal(scenario, resolved)
    if refusal:
        raise UserError(refusal)
    return profile, chosen


# --- the trial, and what it shows ----------------------------------------------------------


@contextlib.contextmanager
def _emulated_progress(o: PlayOptions, player: str, profile: Profile,
                       transport: Transport) -> Iterator[None]:
    """The progress line of a session over an emulated topology, moved on as the trial passes
    its phases."""
    console = Console(stderr=True)
    paths = f"{len(profile.paths)} path(s)"
    steps = {phases.NETWORK_UP: "starting nginx and the collector",
             phases.SERVERS_UP: f"playing {o.duration_s:g} s ({player} over {transport.name})"}
    with working("play", steps=3, console=console) as progress:
        progress.step(f"bringing up {paths} of {profile.name}")

        def passed(phase: str) -> None:
            if phase == phases.NETWORK_UP and not o.as_json:
                console.print(f"topology {o.name} up: {paths}; serving {o.media}")
            if phase in steps:
                progress.step(steps[phase])

        with phases.told(passed):
            yield


@contextlib.contextmanager
def _real_progress(o: PlayOptions, player: str, transport: Transport) -> Iterator[None]:
    """The progress line of a session from a server elsewhere, over its duration."""
    with working("play", seconds=o.duration_s) as progress:
        progress.step(f"{player} over {transport.name} from {o.url}, {o.duration_s:g} s")
        yield


@dataclass(frozen=True)
class Played:
    """What the trial left: its record, the session's flat object (None: the trial never got
    to play it) and the traceback of an error no one expected (None: none)."""

    record: TrialRecord
    result: dict[str, Any] | None
    traceback: str | None


def _play(scenario: Scenario, o: PlayOptions, names: SessionNames) -> Played:
    """The scenario's one trial, in a folder of this process's (`mpstream clean` knows it) that
    goes when the trial ends, on Ctrl-C and SIGTERM too: those tear the trial down as they do
    a run's, and a second one does not cut the teardown short."""
    [trial] = expand_trials(scenario)
    with session_tempdir("play") as folder, signals_interrupt(once=True):
        record = run_trial(scenario, trial, run_id=PLAY, run_dir=Path(folder),
                           media_dir=o.media.resolve() if o.media else None, topo_name=o.name,
                           session=names)
        tdir = trial_dir(Path(folder), trial.key)
        error = tdir / "error.txt"
        return Played(record, read_json(tdir / "summary.json"),
                      error.read_text() if error.is_file() else None)


def _show(played: Played, session_id: str, as_json: bool) -> None:
    """The session as the trial recorded it, with the deployment it ran over; a session that
    failed (or a trial that did) exits 1 saying why."""
    record, result = played.record, played.result
    if result is None:
        # Nothing played: the trial's reason, as the command would have said it had it run the
        # session itself (a user's error; or one no one expected, with its traceback).
        if played.traceback is not None:
            click.echo(played.traceback, err=True, nl=False)
            raise UserError(record.reason or "", exit_code=1)
        raise UserError(record.reason or f"session {session_id} did not start")
    if record.deployment is not None:
        result["deployment"] = record.deployment
    print_session(result, as_json)
    failure = result.get("failure") or (record.reason if record.status != "ok" else None)
    if failure:
        raise UserError(f"session {session_id} failed: {failure}", exit_code=1)
