"""`mpstream serve`: nginx (MPTCP) + the QoE collector until Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import urlencode

import click
from pydantic import ValidationError
from rich.console import Console

from mpstream.cli import COLLECTOR_APP_KEY
from mpstream.deployment import load_deployment
from mpstream.errors import UserError
from mpstream.paths import BUILD_DIR, DEFAULT_MEDIA, MEDIA_CACHE, REPO_ROOT
from mpstream.sending import SendOptions
from mpstream.server.app import default_database_url
from mpstream.server.stack import APP_SPEC, ServerStack

# Where the app with the run pages finds its results folder.
RESULTS_ENV = "MPSTREAM_RESULTS_DIR"


# The manifests a media tree offers the player page, with the player that opens each.
MANIFESTS = (("hls/master.m3u8", "hlsjs"), ("dash/manifest.mpd", "dashjs"))


def find_media(cwd: Path | None = None) -> Path:
    """The tree to serve when --media is not given: what `mpstream encode` wrote by default
    (media/default here, or in the repository), else the newest tree `mpstream demo` or
    `mpstream run` encoded (media/cache/*)."""
    cwd = cwd or Path.cwd()
    for candidate in (cwd / DEFAULT_MEDIA, REPO_ROOT / DEFAULT_MEDIA):
        if (candidate / "media.json").is_file():
            return candidate
    cached = sorted(MEDIA_CACHE.glob("*/media.json"), key=lambda p: p.stat().st_mtime)
    if cached:
        return cached[-1].parent
    raise UserError(
        f"no media tree to serve: none in {cwd / DEFAULT_MEDIA} or {MEDIA_CACHE}. Make one with "
        "`mpstream encode sample` (it writes media/default) or `make demo`, or pass --media DIR."
    )


def resolve_netns(name: str) -> str:
    """A namespace name, or a topology's name standing for its server namespace."""
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    present = {line.split()[0] for line in listed.splitlines() if line.strip()}
    if name in present:
        return name
    from mpstream.netem.teardown import netns_name

    server_ns = netns_name(name, "server")
    if server_ns in present:
        return server_ns
    raise UserError(
        f"no network namespace {name!r} (nor a topology {name!r} with a namespace "
        f"{server_ns!r}): start one with `mpstream netem up PROFILE --name {name}`."
    )


def _namespace_address(netns: str) -> str:
    done = subprocess.run(
        ["ip", "-n", netns, "-j", "-4", "addr", "show", "scope", "global"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise UserError(
            f"network namespace {netns!r} does not exist ({done.stderr.strip()}): "
            "start a topology with `mpstream netem up PROFILE` and pass its server namespace."
        )
    for link in json.loads(done.stdout or "[]"):
        for addr in link.get("addr_info", []):
            return addr["local"]
    raise UserError(f"network namespace {netns!r} has no IPv4 address to serve on.")


def no_manifest(media: Path) -> str:
    """What to say of a media folder with neither manifest a player page can open."""
    return (f"{media} has no {' nor '.join(rel for rel, _ in MANIFESTS)}, so there is no "
            f"player URL to open: serve a tree `mpstream encode` wrote (`mpstream encode "
            f"sample --out DIR`, then --media DIR)")


def player_urls(stack: ServerStack, media: Path) -> list[str]:
    out = []
    for rel, player in MANIFESTS:
        if (media / rel).is_file():
            query = urlencode({"src": f"/media/{rel}", "player": player})
            out.append(f"{stack.player_url}?{query}")
    return out


def parse_listen(text: str) -> tuple[str, int]:
    """ADDR:PORT or [IPv6]:PORT → (address, port), with an error naming what is wrong."""
    import ipaddress

    addr, sep, port = text.rpartition(":")
    addr = addr.removeprefix("[").removesuffix("]")
    try:
        ipaddress.ip_address(addr)
        number = int(port)
    except ValueError:
        number = -1
    if not sep or not 0 < number < 65536:
        raise UserError(f"--listen {text!r}: give ADDR:PORT, e.g. 192.0.2.10:8080 or "
                        "[2001:db8::1]:8080")
    return addr, number


def run_pages_app(results: Path | None) -> tuple[str, dict[str, str]]:
    """The collector app to run and its environment: with the run pages of `results` when the
    `mpstream` command composed them (mpstream/cli.py), else the collector alone."""
    app = click.get_current_context().meta.get(COLLECTOR_APP_KEY)
    if app is None:
        return APP_SPEC, {}
    if results is not None and not results.is_dir():
        raise UserError(f"--results {results}: no such folder; give the folder that holds "
                        "the run folders (`mpstream run --out` writes one there)")
    folder = results if results is not None else REPO_ROOT / "results"
    return app, {RESULTS_ENV: str(folder.resolve())}


class _Stop(Exception):
    pass


def _raise_stop(signum: int, _frame: object) -> None:
    raise _Stop(signal.Signals(signum).name)


@click.command()
@click.option(
    "--media", type=click.Path(path_type=Path),
    help="Media tree made by `mpstream encode` (served under /media/) [default: media/default, "
    "else the newest tree `mpstream demo` encoded].",
)
@click.option(
    "--netns",
    help="Run in this network namespace, or in the server namespace of this topology name.",
)
@click.option("--host", help="Address to listen on [default: 127.0.0.1, or the namespace's].")
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True)
@click.option("--listen", "listens", multiple=True, metavar="ADDR:PORT",
              help="Listen on this address (repeatable: each of a multi-homed host's addresses); "
                   "instead of --host/--port.")
@click.option("--announce", "announce", multiple=True, metavar="ADDR",
              help="Announce this address of the host to MPTCP clients (a `signal` endpoint, "
                   "for the time serve runs; repeatable); nginx listens on it too.")
@click.option(
    "--database-url", envvar="DATABASE_URL",
    help="SQLAlchemy URL of the QoE database [default: $DATABASE_URL, else SQLite under results/].",
)
@click.option("--tcp", "plain_tcp", is_flag=True, help="Serve plain TCP instead of MPTCP.")
@click.option("--tcp-nopush/--no-tcp-nopush", default=False, show_default=True,
              help="nginx tcp_nopush (TCP_CORK around sendfile). Off: under MPTCP a corked "
                   "subflow stalls the whole connection for up to 200 ms "
                   "(docs/penalties/startup.md).")
@click.option("--tcp-nodelay/--no-tcp-nodelay", default=True, show_default=True,
              help="nginx tcp_nodelay (TCP_NODELAY on keep-alive connections).")
@click.option("--results", type=click.Path(path_type=Path), default=None,
              help="Show the run folders here (`mpstream run` writes them) at /runs/ and "
                   "/api/runs [default: results/].")
@click.option("--sndbuf", metavar="SIZE",
              help="nginx's socket send buffer (listen sndbuf=, e.g. 4m) [default: autotuned].")
@click.option("--deployment", default=None, metavar="NAME|FILE",
              help="Serve with a deployment's nginx options (its server.nginx; see `mpstream "
                   "deployments`) instead of the three above. Its kernel settings are the "
                   "host's own, which serve does not change: `netem up --deployment` sets them "
                   "in a topology.")
@click.pass_context
def serve(
    ctx: click.Context,
    media: Path | None, netns: str | None, host: str | None, port: int,
    database_url: str | None, plain_tcp: bool, listens: tuple[str, ...],
    announce: tuple[str, ...], tcp_nopush: bool, tcp_nodelay: bool, sndbuf: str | None,
    results: Path | None, deployment: str | None,
) -> None:
    """Serve media, the player and the QoE collector; prints the URLs; Ctrl-C stops both."""
    from mpstream.netem.hostnet import announced

    console = Console()
    try:
        send = SendOptions(tcp_nopush=tcp_nopush, tcp_nodelay=tcp_nodelay, sndbuf=sndbuf)
    except ValidationError as exc:
        reason = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise UserError(f"--sndbuf: {reason}") from None
    if deployment is not None:
        given = [f"--{name.replace('_', '-')}" for name in ("tcp_nopush", "tcp_nodelay", "sndbuf")
                 if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE]
        if given:
            raise UserError(f"--deployment sets nginx's options: leave out {', '.join(given)} "
                            "(or change them in the deployment's [server.nginx])")
        send = load_deployment(deployment).server.nginx
    media = _media_to_serve(media, console)
    app, app_env = run_pages_app(results)
    if netns:
        netns = resolve_netns(netns)
    host, port, addresses = _listen_on(host, port, listens, announce, netns, plain_tcp)
    database_url = database_url or default_database_url()
    previous = signal.signal(signal.SIGTERM, _raise_stop)
    try:
        with announced(list(announce)), ServerStack(
            media.resolve(), netns=netns, host=host, port=port, database_url=database_url,
            mptcp=not plain_tcp, workdir=BUILD_DIR / "serve" / str(port),
            also_listen=tuple(a for a in addresses if a != (host, port)), send=send,
            collector_app=app, collector_env=app_env,
        ) as stack:
            _say_ready(console, stack, media, app_env, announce,
                       f"{stack.mptcp_method if not plain_tcp else 'tcp'}"
                       f"{f' in namespace {netns}' if netns else ''} · database {database_url}")
            _watch(stack)
    except (KeyboardInterrupt, _Stop):
        console.print("stopped nginx and the collector", highlight=False)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _media_to_serve(media: Path | None, console: Console) -> Path:
    """--media, else the tree found (said on the console); refused when it is not a folder,
    warned of when it holds no manifest."""
    if media is None:
        media = find_media()
        console.print(f"media      {media}", highlight=False)
    if not media.is_dir():
        raise UserError(
            f"media directory {media} does not exist: make one with `mpstream encode sample "
            f"--out {media}` (or `make demo`), or pass --media DIR."
        )
    if not any((media / rel).is_file() for rel, _ in MANIFESTS):
        console.print(f"[yellow]warning[/]    {no_manifest(media)}", highlight=False)
    return media


def _listen_on(host: str | None, port: int, listens: tuple[str, ...],
               announce: tuple[str, ...], netns: str | None, plain_tcp: bool
               ) -> tuple[str, int, list[tuple[str, int]]]:
    """The main address and port, and every address nginx listens on (--listen's, and the
    announced ones, which must accept the clients' joins)."""
    addresses = [parse_listen(text) for text in listens]
    if addresses and host is not None:
        raise UserError("give either --listen ADDR:PORT (repeatable) or --host/--port, not both")
    if announce and (plain_tcp or netns):
        raise UserError("--announce is for MPTCP in the namespace serve runs in: drop --tcp, "
                        "and run `ip netns exec NS mpstream serve ...` instead of --netns")
    if addresses:
        host, port = addresses[0]
    if host is None:
        host = _namespace_address(netns) if netns else "127.0.0.1"
    for addr in announce:
        if all(a != addr for a, _ in [(host, port), *addresses]):
            addresses.append((addr, port))
    return host, port, addresses


def _say_ready(console: Console, stack: ServerStack, media: Path, app_env: dict[str, str],
               announce: tuple[str, ...], transport: str) -> None:
    """The URLs to open, what serves them, and that serving has begun."""
    for url in player_urls(stack, media):
        console.print(f"player     {url}", highlight=False, soft_wrap=True)
    console.print(f"dashboard  {stack.dashboard_url}", highlight=False)
    if app_env:
        console.print(f"runs       {stack.base_url}/runs/ ({app_env[RESULTS_ENV]})",
                      highlight=False, soft_wrap=True)
    console.print(f"API        {stack.api_url}", highlight=False)
    console.print(f"transport  {transport}", highlight=False)
    for h, p in stack.also_listen:
        console.print(f"also on    {h}:{p}", highlight=False)
    if announce:
        console.print(f"announced  {', '.join(announce)} (MPTCP signal endpoints)",
                      highlight=False)
    console.print("ready; Ctrl-C stops nginx and the collector", highlight=False)


def _watch(stack: ServerStack) -> None:
    """Until stopped: fails when nginx or the collector exits."""
    while True:
        for name, proc in (("nginx", stack.nginx), ("collector", stack.collector)):
            if proc is not None and proc.poll() is not None:
                raise UserError(
                    f"{name} exited unexpectedly (code {proc.returncode}); "
                    f"see the logs in {stack.workdir}/logs."
                )
        time.sleep(0.5)
