"""`mpstream play`: one headless playback session, over an emulated topology (--media with
--profile) or from any manifest's URL over this host's own interfaces (--url)."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click
from rich.console import Console
from rich.table import Table

from mpstream.errors import UserError
from mpstream.player.abr import describe_rules, parse_abr_params, resolve_abr
from mpstream.player.browsers import BROWSERS, check_browser
from mpstream.player.codecs import CODECS, check_codec
from mpstream.player.session import MANIFESTS, PlayRequest, PlayResult, play_session
from mpstream.progress import Working, working
from mpstream.transports.base import TRANSPORTS, Transport, for_network_mode, get_transport
from mpstream.transports.pathpolicy import POLICIES, DeadlineMarks, acts
from mpstream.transports.pathpolicy import check_for as check_policy_for
from mpstream.transports.pathpolicy import fit_profile as fit_policy

# What --json prints at least (issue: the player), in this order.
JSON_FIELDS = (
    "session", "player", "browser", "transport", "scheduler", "path_policy", "codec", "abr",
    "abr_decisions",
    "startup_delay_ms", "stall_count",
    "stall_ms", "segments", "mean_download_rate_bps", "mean_bitrate_bps", "dropped_frames",
    "total_frames", "errors", "paths", "metered_bytes", "metered_share", "metered_cost",
    "proof",
)  # fmt: skip


def _check_media(media: Path, player: str) -> None:
    manifest = media / MANIFESTS[player].removeprefix("/media/")
    if not manifest.is_file():
        raise UserError(f"--media {media}: {manifest} is missing; make the media tree with "
                        f"`mpstream encode ... --out {media}`")


def _fmt_rate(bps: Any) -> str:
    return "–" if bps is None else f"{bps / 1e6:.2f} Mbit/s"


def _transport_label(name: object) -> str:
    """A transport's label for people (MPTCP, TCP); its name as given when none is known."""
    return TRANSPORTS.get(str(name)).label if str(name) in TRANSPORTS else str(name)


def _print_human(result: dict[str, Any], console: Console) -> None:
    table = Table(title=f"session {result.get('session')}", show_header=False)
    rows = [
        ("player", f"{result.get('player')} in {result.get('browser')} over "
                   f"{_transport_label(result.get('transport'))}"),
        ("codec", result.get("codec") or "–"),
        ("adaptation", f"{result.get('abr') or '–'}"
                       + (f" ({result['abr_decisions']} decisions)"
                          if result.get("abr_decisions") else "")),
        ("startup delay", f"{result.get('startup_delay_ms')} ms"),
        ("stalls", f"{result.get('stall_count')} ({result.get('stall_ms')} ms)"),
        ("rebuffer ratio", str(result.get("rebuffer_ratio"))),
        ("segments", str(result.get("segments"))),
        ("mean download rate", _fmt_rate(result.get("mean_download_rate_bps"))),
        ("mean bitrate", _fmt_rate(result.get("mean_bitrate_bps"))),
        ("quality switches", str(result.get("switches"))),
        ("dropped / total frames",
         f"{result.get('dropped_frames')} / {result.get('total_frames')}"),
        ("errors", str(result.get("errors"))),
        ("played", f"{result.get('played_s')} s"),
    ]
    proof = result.get("proof")
    if isinstance(proof, dict) and proof:
        rows.append(("on the wire (client)",
                     ", ".join(f"{n} {name}" for name, n in proof.items())))
    if result.get("metered_share") is not None:
        cost = result.get("metered_cost")
        rows.append(("metered paths", f"{int(result.get('metered_bytes') or 0):,} bytes "
                     f"({float(result['metered_share']):.0%})"
                     + (f", cost {cost:.4f}" if cost is not None else "")
                     + f"; policy {result.get('path_policy')}, "
                     f"{len(result.get('path_policy_toggles') or [])} toggles"))
    if result.get("live_latency_samples"):
        rows.append(("latency to live", f"mean {result['live_latency_mean_s']:.2f} s,"
                     f" p95 {result['live_latency_p95_s']:.2f} s"))
    for key, value in rows:
        table.add_row(key, value)
    console.print(table)
    paths = Table(title="bytes per client path (kernel counters)")
    for column in ("path", "address", "received", "sent", "share"):
        paths.add_column(column, justify="right" if column != "address" else "left")
    for p in result["paths"]:
        paths.add_row(str(p["index"]), p["address"], f"{p['rx_bytes']:,}", f"{p['tx_bytes']:,}",
                      f"{p['rx_share']:.0%}")
    console.print(paths)
    used = sum(1 for p in result["paths"] if p["rx_share"] >= 0.05)
    console.print(f"paths carrying media: {used} of {len(result['paths'])}")


def _list_abr(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """--list-abr: the rules each player supports, then exit."""
    if not value or ctx.resilient_parsing:
        return
    table = Table(title="adaptation rules (--abr NAME; --abr-param KEY=VALUE; docs/abr.md)")
    for column in ("player", "name", "whose", "parameters", "what it does"):
        table.add_column(column)
    for row in describe_rules():
        table.add_row(*row)
    Console().print(table)
    ctx.exit(0)


def _list_schedulers(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """--list-schedulers: each transport's path schedulers, then exit."""
    if not value or ctx.resilient_parsing:
        return
    table = Table(title="path schedulers (--scheduler NAME; a scenario condition's "
                        "scheduler; docs/schedulers.md)")
    for column in ("transport", "name", "default", "what it does"):
        table.add_column(column)
    for transport in TRANSPORTS.values():
        try:
            found = transport.schedulers()
        except UserError as exc:  # e.g. the QUIC hop not built: say so, list the others
            table.add_row(transport.name, "?", "", str(exc))
            continue
        for i, (name, what) in enumerate(found.items()):
            table.add_row(transport.name, name, "yes" if i == 0 else "", what)
        if not found:
            table.add_row(transport.name, "-", "", "one path, or none to choose")
    Console(width=max(Console().width, 120)).print(table)
    ctx.exit(0)


def _abr_choice(player: str, abr: str | None, pairs: tuple[str, ...]
                ) -> tuple[str, tuple[tuple[str, float], ...]]:
    chosen = resolve_abr(player, abr)
    return chosen, tuple(parse_abr_params(player, chosen, pairs).items())


def _player_for(url: str, player: str | None) -> str:
    if player:
        return player
    path = urlsplit(url).path.lower()
    if path.endswith(".mpd"):
        return "dashjs"
    if path.endswith(".m3u8"):
        return "hlsjs"
    raise UserError(f"--url {url}: ends neither in .mpd nor .m3u8; say which player plays it "
                    "(--player dashjs or --player hlsjs)")


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
              help="The browser's sockets: mptcp (under mptcpize) or plain tcp. "
                   "Default: the profile's mode (mptcp with --url).")
@click.option("--scheduler", default=None,
              help="The transport's path scheduler (which bytes go on which path) [default: the "
                   "transport's own]; see --list-schedulers.")
@click.option("--list-schedulers", is_flag=True, expose_value=False, is_eager=True,
              callback=_list_schedulers, help="List each transport's path schedulers and exit.")
@click.option("--deployment", default=None, metavar="NAME|FILE",
              help="What the server and client run over the paths (congestion control, kernel "
                   "settings, nginx's options, path manager): a preset (see `mpstream "
                   "deployments`) or a TOML file, e.g. one `mpstream tune` wrote "
                   "[default: kernel-default]; with --profile.")
@click.option("--path-policy", "path_policy", type=click.Choice(list(POLICIES)), default=None,
              help="When the profile's metered paths (cellular) carry data: always, backup "
                   "(only when the others fail) or deadline (MP-DASH: when the player's buffer "
                   "runs low) [default: always]; docs/cellular.md.")
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
@click.option("--abr", default=None,
              help="Adaptation rule: the player's own (dash.js: dynamic, throughput, bola, l2a, "
                   "lolp; hls.js: ewma) or ours (bba0, robustmpc, rate-based) "
                   "[default: the player's default]; see --list-abr.")
@click.option("--abr-param", "abr_params", multiple=True, metavar="KEY=VALUE",
              help="A numeric parameter of the rule (repeatable), e.g. horizon=3 for robustmpc.")
@click.option("--list-abr", is_flag=True, expose_value=False, is_eager=True, callback=_list_abr,
              help="List the adaptation rules each player supports, and exit.")
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
def play(media: Path | None, profile: str | None, url: str | None, interfaces: str | None,
         collector_url: str | None, player: str | None, browser: str, codec: str,
         transport: str | None, scheduler: str | None, deployment: str | None,
         path_policy: str | None, deadline_marks: str | None, duration_s: float,
         buffer_s: float | None, target_latency_s: float | None,
         abr: str | None, abr_params: tuple[str, ...], report_timeout_s: float | None,
         session_id: str | None,
         scenario: str | None, trial: int | None, name: str, screenshot: Path | None,
         as_json: bool) -> None:
    """Play one session in a headless browser, over the PROFILE's emulated paths (--media,
    --profile) or from --url over this host's own interfaces, and print the collector's
    summary with the bytes each path carried."""
    check_browser(browser)
    marks = _deadline_marks(deadline_marks)
    prof = None
    # What the session runs is decided and checked before anything is built; `setting` is what
    # the kind of network adds to the request.
    setting: dict[str, Any]
    if url is not None:
        _check_real(media, profile, deployment)
        player = _player_for(url, player)
        rule, rule_params = _abr_choice(player, abr, abr_params)
        chosen = _real_transport(transport, scheduler, path_policy)
        setting = {"manifest_path": url, "collector_url": collector_url}
    else:
        media, profile, player = _check_emulated(media, profile, player, transport, scheduler,
                                                 interfaces, collector_url)
        # Before anything is built: a rule this player does not have is refused here.
        rule, rule_params = _abr_choice(player, abr, abr_params)
        # Before anything is built: a codec this browser cannot decode is refused here. (With
        # --url the page refuses it, from the manifest it loads, before playing.)
        check_codec(browser, codec, media, player)
        prof, chosen, held = _emulated_choice(profile, transport, scheduler, path_policy,
                                              deployment)
        _check_low_latency(media, chosen)
        setting = {"path_policy": path_policy or prof.deployment.path_policy,
                   "metered": prof.metered_paths(), "held_paths": held, "deadline_marks": marks}
    session_id = session_id or f"play-{player}-{chosen.name}-{time.strftime('%Y%m%dT%H%M%S')}"
    request = PlayRequest(
        player=player, transport=chosen, duration_s=duration_s, session_id=session_id,
        scenario=scenario, trial=trial, screenshot=screenshot, buffer_s=buffer_s,
        target_latency_s=target_latency_s, browser=browser, codec=codec, abr=rule,
        abr_params=rule_params, report_timeout_s=report_timeout_s, **setting)
    if prof is None:
        _output(_play_real(request, interfaces), session_id, as_json)
    else:
        assert media is not None
        _output(_play_emulated(request, prof, media, name, as_json), session_id, as_json,
                deployment=prof.deployment.name)


def _check_real(media: Path | None, profile: str | None, deployment: str | None) -> None:
    """Refuses what --url (a server elsewhere) does not go with."""
    if media is not None or profile is not None:
        raise UserError("--url plays from a server elsewhere: leave out --media and --profile")
    if deployment is not None:
        raise UserError("--deployment: mpstream changes nothing of a real host or of a "
                        "server elsewhere; a deployment applies to an emulated --profile")


def _check_emulated(media: Path | None, profile: str | None, player: str | None,
                    transport: str | None, scheduler: str | None, interfaces: str | None,
                    collector_url: str | None) -> tuple[Path, str, str]:
    """An emulated session's media, profile and player, all given and the media playable."""
    if interfaces is not None or collector_url is not None:
        raise UserError("--interfaces and --collector go with --url (a real server); with "
                        "--profile the topology's paths are used")
    # A scheduler the transport lacks is refused first, whatever else is missing: its names are
    # what the user needs to know next.
    _check_scheduler(transport, scheduler, profile)
    if media is None or profile is None or player is None:
        raise UserError("give --media DIR --profile PROFILE --player P (an emulated session), "
                        "or --url URL (a real one)")
    _check_media(media, player)
    return media, profile, player


def _play_real(request: PlayRequest, interfaces: str | None) -> PlayResult:
    """The session from the server at the request's URL, over this host's interfaces."""
    from mpstream.player.real import play_url

    with working("play", seconds=request.duration_s) as progress:
        progress.step(f"{request.player} over {request.transport.name} from "
                      f"{request.manifest_path}, {request.duration_s:g} s")
        return play_url(request.manifest_path, interfaces, request)


def _play_emulated(request: PlayRequest, prof: Any, media: Path, name: str,
                   as_json: bool) -> PlayResult:
    """The session over the profile's topology, from nginx and the collector serving `media`
    in its server namespace."""
    from mpstream.server.stack import ServerStack

    console = Console(stderr=True)
    with working("play", steps=3, console=console) as progress, \
            _up(prof, name, progress) as topo:
        if not as_json:
            console.print(f"topology {topo.name} up: {len(topo.paths)} path(s); serving {media}")
        progress.step("starting nginx and the collector")
        with ServerStack(media.resolve(), netns=topo.server_ns, host=topo.server_addr,
                         mptcp=request.transport.kernel_mptcp,
                         send=prof.deployment.server.nginx) as stack:
            topo.start_events()
            progress.step(f"playing {request.duration_s:g} s ({request.player} over "
                          f"{request.transport.name})")
            return play_session(topo, stack, request)


def _check_low_latency(media: Path, chosen: Transport) -> None:
    """Refuses a low-latency live tree (its live.json says so) over a transport that cannot
    carry its growing segments."""
    from mpstream.manifests.lltree import read_low_latency

    refusal = chosen.refuses_low_latency()
    if refusal and read_low_latency(media) is not None:
        raise UserError(f"--media {media} is a low-latency live stream: {refusal}")


def _real_transport(transport: str | None, scheduler: str | None,
                    path_policy: str | None) -> Transport:
    """The transport of a session from a server elsewhere (mptcp unless told), refused where it
    would need mpstream to change the host's own settings or to run something on the server."""
    chosen = get_transport(transport or "mptcp").with_scheduler(scheduler)
    if scheduler is not None and chosen.kernel_mptcp:
        raise UserError(f"--scheduler {scheduler}: on a real host the kernel's MPTCP "
                        "scheduler is the host's own setting (sysctl net.mptcp.scheduler), "
                        "which mpstream does not change: leave out --scheduler")
    if acts(path_policy):
        raise UserError(f"--path-policy {path_policy}: a real host's interfaces say nothing "
                        "of which is metered, and mpstream does not change a host's MPTCP "
                        "endpoints: play over an emulated --profile")
    if chosen.runs_on_server:
        raise UserError(f"transport {chosen.name} runs a gateway on the server host, and "
                        "mpstream runs nothing on a server elsewhere: use --profile")
    return chosen


def _check_scheduler(transport: str | None, scheduler: str | None,
                     profile: str | None) -> None:
    """Refuses a scheduler the session's transport (as told, or the profile's mode) lacks."""
    from mpstream.netem.profile import load_profile

    if scheduler is not None and transport is not None:
        get_transport(transport).with_scheduler(scheduler)
    elif scheduler is not None and profile is not None:
        for_network_mode(load_profile(profile).mode).with_scheduler(scheduler)


def _emulated_choice(profile: str, transport: str | None, scheduler: str | None,
                     path_policy: str | None, deployment: str | None = None
                     ) -> tuple[Any, Transport, list[int]]:
    """The profile as the chosen transport and path policy run it, that transport and the
    paths the policy holds back; refused
    when the profile has competing users (a scenario's) or a CC the transport cannot use."""
    from mpstream.netem.profile import load_profile

    prof = load_profile(profile, deployment=deployment)
    path_policy = path_policy or prof.deployment.path_policy
    if prof.competitors:
        raise UserError(f"profile {prof.name} has competing clients: they play (or download) "
                        "in scenarios, where each user's figures are recorded: put the profile "
                        "in a scenario and use `mpstream run`")
    chosen = (get_transport(transport) if transport else for_network_mode(prof.mode)
              ).with_scheduler(scheduler)
    prof = chosen.fit_profile(prof)
    check_policy_for(path_policy, chosen, prof)
    prof, held = fit_policy(prof, path_policy)
    refusal = chosen.refuses_cc(prof.cc)
    if refusal:
        raise UserError(f"profile {prof.name}: {refusal}")
    return prof, chosen, held


@contextlib.contextmanager
def _up(prof: Any, name: str, progress: Working) -> Iterator[Any]:
    """The profile's topology, said on the progress line while it comes up."""
    from mpstream.netem.topology import Topology

    progress.step(f"bringing up {len(prof.paths)} path(s) of {prof.name}")
    with Topology.up(prof, name=name) as topo:
        yield topo


def _deadline_marks(text: str | None) -> DeadlineMarks:
    """--deadline-marks LOW,HIGH as the deadline policy's marks."""
    if text is None:
        return DeadlineMarks()
    try:
        low, high = (float(x) for x in text.split(","))
    except ValueError:
        raise UserError(f"--deadline-marks {text!r}: give LOW,HIGH in seconds, e.g. 4,10"
                        ) from None
    return DeadlineMarks(low_s=low, high_s=high)


def _output(played: PlayResult, session_id: str, as_json: bool,
            deployment: str | None = None) -> None:
    result = played.as_json()
    if deployment is not None:
        result["deployment"] = deployment
    if as_json:
        ordered = {key: result.get(key) for key in JSON_FIELDS}
        ordered.update({k: v for k, v in result.items() if k not in ordered})
        click.echo(json.dumps(ordered, indent=2))
    else:
        _print_human(result, Console())
    if played.failure:
        raise UserError(f"session {session_id} failed: {played.failure}", exit_code=1)
