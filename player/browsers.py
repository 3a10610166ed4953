"""The headless browsers a session can play in, behind one small page interface.

Chromium: Debian's build, driven by Playwright over `--remote-debugging-pipe`; the executable
Playwright starts is a wrapper that enters the client namespace (`ip netns exec`) and, for
MPTCP, `mptcpize run`, then exec's Chromium, so every socket it opens lives there.

Firefox: Debian's firefox-esr, driven by puppeteer-core over WebDriver BiDi (player/driver/).
Playwright cannot drive it (it needs its own patched Firefox, which cannot be downloaded here);
geckodriver + Selenium could, but geckodriver would have to be built from crates.io with a newer
Rust than Debian 12 ships, and Selenium wants to fetch drivers itself. puppeteer-core is one
pinned npm package, talks BiDi to the Debian binary as it is, and runs on the Node.js the player
build already needs. BiDi is a websocket on localhost, so the driver (node) runs inside the
client namespace and starts Firefox there; Firefox is wrapped in `mptcpize run` for MPTCP. The
driver speaks JSON lines on stdin/stdout with this module.

Both give a `Page` with the same few calls (goto, wait_for, evaluate, sleep, screenshot) and
raise `BrowserTimeout` / `BrowserGone`, so session.py plays the same way in either.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shlex
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from mpstream.errors import UserError
from mpstream.network import Wrapper, in_netns
from mpstream.paths import program
from mpstream.proc import pid_alive, stop
from mpstream.scratch import session_tempdir

BROWSERS = ("chromium", "firefox")
CHROMIUM = os.environ.get("MPSTREAM_CHROMIUM", "/usr/bin/chromium")
# Debian's firefox-esr; elsewhere a non-snap `firefox` on PATH.
FIREFOX = (os.environ.get("MPSTREAM_FIREFOX") or shutil.which("firefox-esr")
           or shutil.which("firefox") or "/usr/bin/firefox-esr")
DRIVER_DIR = Path(__file__).resolve().parent / "driver"
DRIVER_SCRIPT = DRIVER_DIR / "drive.mjs"
# Started by Playwright and puppeteer as "the browser"; it exec's the command in STARTER_VARIABLE.
BROWSER_STARTER = Path(__file__).resolve().parent / "browser-in-netns"
STARTER_VARIABLE = "MPSTREAM_BROWSER_COMMAND"
VIEWPORT = {"width": 1280, "height": 720}
LAUNCH_TIMEOUT_S = 60.0

# Playwright adds --headless, --no-sandbox (it runs as root here), --remote-debugging-pipe and
# a fresh temporary --user-data-dir itself; these keep Chromium quiet, local and autoplaying.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",  # HTTP over TCP (MPTCP) only: QUIC would bypass what is measured
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--autoplay-policy=no-user-gesture-required",
]

# Firefox's counterparts: autoplay allowed, fine-grained page clocks, HTTP/3 off (QUIC would
# bypass what is measured), and none of its own background traffic (updates, telemetry,
# captive-portal and connectivity probes, safe browsing, prefetches) in the measured namespace.
# puppeteer adds its own automation preferences on top.
FIREFOX_PREFS: dict[str, Any] = {
    "media.autoplay.default": 0,
    "media.autoplay.blocking_policy": 0,
    "network.http.http3.enable": False,
    "network.dns.disablePrefetch": True,
    "network.prefetch-next": False,
    "network.predictor.enabled": False,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "app.update.enabled": False,
    "app.normandy.enabled": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "datareporting.healthreport.uploadEnabled": False,
    "toolkit.telemetry.enabled": False,
    "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False,
    "extensions.update.enabled": False,
    "browser.shell.checkDefaultBrowser": False,
    # performance.now() and Resource Timing are clamped to whole milliseconds by default (a
    # fingerprinting defence); a measuring page wants them as fine as Chromium's.
    "privacy.reduceTimerPrecision": False,
}


class BrowserError(Exception):
    """The page or the browser failed a call (e.g. a script threw)."""


class BrowserTimeout(BrowserError):
    """A wait on the page ran out of time (the browser is still there)."""


class BrowserGone(BrowserError):
    """The browser (or its driver) exited: killed, crashed or closed under us."""


class Page(Protocol):
    browser: str
    console: list[str]

    def goto(self, url: str, timeout_s: float) -> None: ...
    def wait_for(self, expression: str, timeout_s: float, polling_ms: int = 250) -> None: ...
    def evaluate(self, expression: str) -> Any: ...
    def sleep(self, seconds: float) -> None: ...
    def screenshot(self, path: Path) -> None: ...


def executable(browser: str) -> str:
    return {"chromium": CHROMIUM, "firefox": FIREFOX}[browser]


def check_browser(browser: str) -> None:
    """The browser (and for Firefox its driver) is installed, or a UserError saying how to."""
    if browser not in BROWSERS:
        raise UserError(f"browser {browser!r}: choose one of {', '.join(BROWSERS)}")
    if browser == "chromium" and not Path(CHROMIUM).exists():
        raise UserError(f"Chromium is not installed at {CHROMIUM}: run `make setup` (Debian "
                        "package chromium) or point MPSTREAM_CHROMIUM at a Chromium binary")
    if browser == "firefox":
        if not Path(FIREFOX).exists():
            raise UserError(f"Firefox is not installed at {FIREFOX}: run `make setup` (Debian "
                            "package firefox-esr) or point MPSTREAM_FIREFOX at a Firefox binary")
        if not (DRIVER_DIR / "node_modules" / "puppeteer-core").is_dir():
            raise UserError(f"the Firefox driver is not installed ({DRIVER_DIR}/node_modules "
                            "is missing): run `make player-driver`")
        if program("node") is None:
            raise UserError("node is missing (it runs the Firefox driver): run `make setup`")


def browser_starter_env(netns: str | None, wrap: Wrapper | None,
                        target: str | None = None) -> dict[str, str]:
    """The environment in which BROWSER_STARTER exec's the browser (`target`, default Chromium)
    inside `netns` (when given) wrapped by a transport's `wrap` (e.g. `mptcpize run`)."""
    browser = [target or CHROMIUM]
    argv = in_netns(netns, wrap(browser) if wrap is not None else browser)
    return {**os.environ, STARTER_VARIABLE: shlex.join(argv)}


# --- Chromium (Playwright) ---


class _PlaywrightPage:
    browser = "chromium"

    def __init__(self, page: Any):
        self._page = page
        self.console: list[str] = []
        page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"[:500]))

    def _call(self, fn, *args, **kw):
        from playwright.sync_api import Error as PlaywrightError
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        try:
            return fn(*args, **kw)
        except PlaywrightTimeout as exc:
            raise BrowserTimeout(str(exc).splitlines()[0]) from exc
        except PlaywrightError as exc:
            text = str(exc).splitlines()[0]
            if self._page.is_closed() or not self._page.context.browser.is_connected():
                raise BrowserGone(f"Chromium exited during the session: {text}") from exc
            raise BrowserError(text) from exc

    def goto(self, url: str, timeout_s: float) -> None:
        self._call(self._page.goto, url, wait_until="load", timeout=timeout_s * 1000)

    def wait_for(self, expression: str, timeout_s: float, polling_ms: int = 250) -> None:
        self._call(self._page.wait_for_function, expression, timeout=timeout_s * 1000,
                   polling=polling_ms)

    def evaluate(self, expression: str) -> Any:
        return self._call(self._page.evaluate, expression)

    def sleep(self, seconds: float) -> None:
        self._call(self._page.wait_for_timeout, seconds * 1000)

    def screenshot(self, path: Path) -> None:
        self._call(self._page.screenshot, path=str(path))


class KeptPlaywright:
    """One Playwright driver (its node process) kept for the Chromium sessions that the thread
    which made it opens, where each would start one of its own (about half a second each): a
    run's trials in one worker process. It starts with the first session that needs it (a run
    that opens no browser starts none). Each session still launches a browser of its own, with
    a fresh profile, in its own namespace; the driver keeps nothing of a browser once it is
    closed. `stop` ends it; the next session starts a new one (after a trial that failed, which
    may have been the driver's doing)."""

    def __init__(self) -> None:
        # Playwright's sync API is bound to the thread that started it, and no other driver
        # can start in that thread while it runs.
        self.thread = threading.get_ident()
        self._manager: Any = None
        self.pw: Any = None

    def driver(self) -> Any:
        """The running driver, started now if there is none."""
        if self.pw is None:
            from playwright.sync_api import sync_playwright

            self._manager = sync_playwright()
            self.pw = self._manager.__enter__()
        return self.pw

    def stop(self) -> None:
        if self._manager is not None:
            manager, self._manager, self.pw = self._manager, None, None
            with contextlib.suppress(Exception):  # a driver that died has nothing to stop
                manager.__exit__(None, None, None)


_KEPT: list[KeptPlaywright] = []


@contextlib.contextmanager
def using(kept: KeptPlaywright) -> Iterator[KeptPlaywright]:
    """Inside the block, Chromium sessions opened by the thread that made `kept` use its
    driver."""
    _KEPT.append(kept)
    try:
        yield kept
    finally:
        _KEPT.remove(kept)


@contextlib.contextmanager
def kept_playwright() -> Iterator[KeptPlaywright]:
    """Inside the block, Chromium sessions opened by this thread share one Playwright driver,
    stopped on the way out."""
    kept = KeptPlaywright()
    try:
        with using(kept):
            yield kept
    finally:
        kept.stop()


@contextlib.contextmanager
def _playwright() -> Iterator[Any]:
    """The kept driver of this thread, else one of its own for this session."""
    from playwright.sync_api import sync_playwright

    kept = next((k for k in _KEPT if k.thread == threading.get_ident()), None)
    if kept is not None:
        yield kept.driver()
        return
    with sync_playwright() as pw:
        yield pw


@contextlib.contextmanager
def chromium_in_namespace(netns: str | None, *, wrap: Wrapper | None = None) -> Iterator[Any]:
    """Headless Chromium (a Playwright Browser) whose every socket lives in `netns`, and is
    wrapped by a transport's `wrap` when given; closed on the way out."""
    from playwright.sync_api import Error as PlaywrightError

    # Chromium's own temporary files (its singleton lock's folder, which a killed browser
    # leaves behind) go to a folder of this session's, which `mpstream clean` removes after
    # a kill.
    with session_tempdir("chromium") as tmp, _playwright() as pw:
        env: dict[str, str | float | bool] = {**browser_starter_env(netns, wrap),
                                              "TMPDIR": tmp}
        try:
            browser = pw.chromium.launch(executable_path=str(BROWSER_STARTER), headless=True,
                                         args=CHROMIUM_FLAGS, timeout=LAUNCH_TIMEOUT_S * 1000,
                                         env=env)
        except PlaywrightError as exc:
            raise UserError(f"Chromium did not start{_where(netns)}: "
                            f"{str(exc).splitlines()[0]}") from exc
        try:
            yield browser
        finally:
            with contextlib.suppress(PlaywrightError):
                browser.close()


@contextlib.contextmanager
def _chromium(netns: str | None, wrap: Wrapper | None) -> Iterator[_PlaywrightPage]:
    with chromium_in_namespace(netns, wrap=wrap) as browser:
        yield _PlaywrightPage(browser.new_page(viewport=VIEWPORT))


# --- Firefox (puppeteer-core over WebDriver BiDi, in player/driver/) ---


class FirefoxDriver:
    """The node process of player/driver/drive.mjs and the Firefox it started."""

    browser = "firefox"

    def __init__(self, netns: str | None, wrap: Wrapper | None, workdir: Path):
        self.console: list[str] = []
        self.firefox_pid: int | None = None
        self.version: str | None = None
        self._replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._next_id = 0
        self._gone: str | None = None
        options = {"executablePath": str(BROWSER_STARTER), "prefs": FIREFOX_PREFS,
                   "launchTimeoutMs": int(LAUNCH_TIMEOUT_S * 1000)}
        argv = in_netns(netns, [program("node") or "node", str(DRIVER_SCRIPT),
                                json.dumps(options)])
        # Firefox's temporary profile goes under workdir (removed with it, also after a kill);
        # HOME too, so nothing is written to the user's own ~/.mozilla.
        env = {**browser_starter_env(None, wrap, target=FIREFOX), "TMPDIR": str(workdir),
               "HOME": str(workdir), "MOZ_CRASHREPORTER_DISABLE": "1"}
        self._stderr = (workdir / "driver.log").open("w")
        # A session of its own: a Ctrl-C meant for mpstream reaches the driver only through
        # close() below, which shuts Firefox down in order.
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, text=True, env=env,
                                     start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            event = message.get("event")
            if event == "console":
                self.console.append(str(message.get("text", ""))[:500])
            elif event == "disconnected":
                self._gone = "Firefox exited (killed or crashed) during the session"
            else:
                self._replies.put(message)
        self._replies.put(None)  # end of output: the driver exited

    def _next(self, timeout_s: float) -> dict[str, Any]:
        try:
            message = self._replies.get(timeout=timeout_s)
        except queue.Empty:
            raise BrowserGone(f"the Firefox driver did not answer within {timeout_s:g} s") from None
        if message is None:
            self._replies.put(None)
            raise BrowserGone(self._gone or f"the Firefox driver exited ({self._exit_text()})")
        return message

    def _exit_text(self) -> str:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(2)
        log = Path(self._stderr.name).read_text(errors="replace").strip().splitlines()
        tail = f"; {log[-1][:300]}" if log else ""
        return f"exit status {self.proc.returncode}{tail}"

    def start(self) -> None:
        ready = self._next(LAUNCH_TIMEOUT_S + 15)
        if ready.get("event") != "ready":
            raise UserError(f"Firefox did not start: {ready.get('error') or ready}")
        self.firefox_pid = ready.get("pid")
        self.version = ready.get("version")

    def call(self, op: str, timeout_s: float, **args: Any) -> Any:
        if self._gone:
            raise BrowserGone(self._gone)
        self._next_id += 1
        command = {"id": self._next_id, "op": op, **args}
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(command) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise BrowserGone(self._gone or f"the Firefox driver exited "
                                            f"({self._exit_text()})") from None
        while True:
            reply = self._next(timeout_s + 30)
            if reply.get("id") == self._next_id:
                break
        if reply.get("ok"):
            return reply.get("value")
        if reply.get("timeout"):
            raise BrowserTimeout(reply.get("error", "timeout"))
        # A call that failed because Firefox went away: the driver says so right after.
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(1)
        if self._gone or self.proc.poll() is not None:
            raise BrowserGone(self._gone or f"Firefox exited during the session "
                                            f"({reply.get('error')})")
        raise BrowserError(f"Firefox: {reply.get('error')}")

    def close(self) -> None:
        """Closes Firefox through the driver, then makes sure nothing of either is left."""
        with contextlib.suppress(OSError, ValueError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()  # the driver closes the browser and exits
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(20)
        stop(self.proc, timeout=5)
        # Firefox runs in a process group of its own (puppeteer starts it detached).
        if self.firefox_pid and pid_alive(self.firefox_pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.firefox_pid, signal.SIGKILL)
        self._stderr.close()


class _FirefoxPage:
    browser = "firefox"

    def __init__(self, driver: FirefoxDriver):
        self._driver = driver
        self.console = driver.console

    def goto(self, url: str, timeout_s: float) -> None:
        self._driver.call("goto", timeout_s, url=url, timeoutMs=int(timeout_s * 1000))

    def wait_for(self, expression: str, timeout_s: float, polling_ms: int = 250) -> None:
        self._driver.call("wait", timeout_s, expression=expression,
                          timeoutMs=int(timeout_s * 1000), pollingMs=polling_ms)

    def evaluate(self, expression: str) -> Any:
        return self._driver.call("evaluate", 60, expression=expression)

    def sleep(self, seconds: float) -> None:
        self._driver.call("sleep", seconds, ms=int(seconds * 1000))

    def screenshot(self, path: Path) -> None:
        self._driver.call("screenshot", 60, path=str(path))


@contextlib.contextmanager
def _firefox(netns: str | None, wrap: Wrapper | None) -> Iterator[_FirefoxPage]:
    with session_tempdir("firefox") as tmp:
        driver = FirefoxDriver(netns, wrap, Path(tmp))
        try:
            try:
                driver.start()
            except BrowserGone as exc:
                raise UserError(f"Firefox did not start{_where(netns)}: {exc}") from exc
            driver.call("open", 60, viewport=VIEWPORT)
            yield _FirefoxPage(driver)
        finally:
            driver.close()


def _where(netns: str | None) -> str:
    return f" in namespace {netns}" if netns else ""


@contextlib.contextmanager
def open_page(browser: str, netns: str | None, *,
              wrap: Wrapper | None = None) -> Iterator[Page]:
    """A page of headless `browser` whose every socket lives in `netns` (None: this one), and
    speaks the transport whose `wrap` is given (e.g. MPTCP); the browser, its driver and
    temporary files go on the way out."""
    check_browser(browser)
    opener = _chromium if browser == "chromium" else _firefox
    with opener(netns, wrap) as page:
        yield page
