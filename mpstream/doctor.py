"""`mpstream doctor`: what this machine has and lacks for mpstream, each missing thing with the
command that fixes it. Exit status 1 when something required is missing.

It reads and never changes: sysctls are read from /proc/sys, programs are asked their versions,
and the probes that create something (a network namespace; each coupled congestion control not
in use, registered with the kernel) remove it at once. The parts add their own checks through
mpstream/hooks.py (the server's nginx, the emulator's coupled congestion controls).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import click
from rich.console import Console

from mpstream import hooks
from mpstream.errors import EXIT_FAILED
from mpstream.output import console_for, json_option, print_json
from mpstream.paths import BUILD_DIR, REPO_ROOT, program_env
from mpstream.paths import program as path_program
from mpstream.transports.hop.programs import BUILD_COMMAND as HOP_BUILD_COMMAND
from mpstream.transports.hop.programs import HOP_BINARY

PROC_SYS = Path("/proc/sys")
OS_RELEASE = Path("/etc/os-release")
MIN_KERNEL = (5, 6)
INSTALL = "make setup (as root: it installs scripts/system-packages.txt)"


@dataclass
class Finding:
    area: str
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True

    @property
    def status(self) -> str:
        if self.ok:
            return "ok"
        return "MISSING" if self.required else "warning"


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _sysctl(key: str, proc_sys: Path) -> str | None:
    return _read(proc_sys / key.replace(".", "/"))


def _version(argv: list[str], pattern: str) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20,
                              env=program_env())
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.search(pattern, done.stdout + done.stderr)
    return match.group(1) if match else None


def os_release(path: Path = OS_RELEASE) -> dict[str, str]:
    fields = {}
    for line in (_read(path) or "").splitlines():
        key, _, value = line.partition("=")
        fields[key] = value.strip('"')
    return fields


def check_kernel(proc_sys: Path = PROC_SYS, release: str | None = None) -> list[Finding]:
    release = release or platform.release()
    numbers = tuple(int(n) for n in re.findall(r"\d+", release)[:2])
    found = [Finding("kernel", "version", numbers >= MIN_KERNEL, release,
                     "a Linux kernel 5.6 or later with CONFIG_MPTCP=y")]
    enabled = _sysctl("net.mptcp.enabled", proc_sys)
    if enabled is None:
        found.append(Finding("kernel", "MPTCP", False, "no /proc/sys/net/mptcp: not built in",
                             "a kernel built with CONFIG_MPTCP=y (Debian's and Ubuntu's are)"))
        return found
    found.append(Finding("kernel", "MPTCP enabled", enabled == "1",
                         f"net.mptcp.enabled = {enabled}", "sysctl -w net.mptcp.enabled=1"))
    # 6.15+ names the path manager (net.mptcp.path_manager); older kernels have pm_type 0/1.
    pm = _sysctl("net.mptcp.path_manager", proc_sys)
    pms = _sysctl("net.mptcp.available_path_managers", proc_sys)
    if pm is None:
        pm_type = _sysctl("net.mptcp.pm_type", proc_sys)
        pm = {"0": "kernel", "1": "userspace"}.get(pm_type or "", "kernel")
    found.append(Finding("kernel", "MPTCP path manager", pm == "kernel",
                         f"{pm}" + (f" (available: {pms})" if pms else ""),
                         "sysctl -w net.mptcp.path_manager=kernel (mpstream sets its endpoints "
                         "through the in-kernel path manager)"))
    schedulers = _sysctl("net.mptcp.available_schedulers", proc_sys)
    found.append(Finding("kernel", "MPTCP schedulers", True, schedulers or "default (not listed)",
                         required=False))
    ccs = (_sysctl("net.ipv4.tcp_available_congestion_control", proc_sys) or "").split()
    missing_cc = [cc for cc in ("reno", "cubic") if cc not in ccs]
    found.append(Finding("kernel", "congestion controls", not missing_cc,
                         " ".join(ccs) + (" (bbr loads on use)" if "bbr" not in ccs else ""),
                         "a kernel with tcp_cubic and tcp_reno"))
    return found


def check_privileges(tun: Path = Path("/dev/net/tun")) -> list[Finding]:
    root = os.geteuid() == 0
    found = [Finding("host", "root", root, "uid 0" if root else f"uid {os.geteuid()}",
                     "run as root (sudo): namespaces, interfaces and MPTCP endpoints need it")]
    found.append(Finding("host", "TUN device", tun.exists(), str(tun),
                         "modprobe tun (the link emulator reads packets from TUN devices)"))
    found.append(_namespace_probe() if root else Finding(
        "host", "network namespaces", False, "not tried without root", "run as root"))
    return found


def _namespace_probe() -> Finding:
    name = f"mps-doctor-{os.getpid()}"
    if shutil.which("ip") is None:
        return Finding("host", "network namespaces", False, "no `ip` program",
                       "apt-get install iproute2")
    made = subprocess.run(["ip", "netns", "add", name], capture_output=True, text=True)
    if made.returncode != 0:
        return Finding("host", "network namespaces", False, made.stderr.strip(),
                       "a kernel with CONFIG_NET_NS and permission to create namespaces")
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    return Finding("host", "network namespaces", True, "created and removed one")


# program -> (area, what it is for, version argv, version pattern, Debian package, required);
# node and npm have no package: scripts/install-node.sh brings them from PyPI if need be.
PROGRAMS: list[tuple[str, str, list[str], str, str, bool]] = [
    ("ffmpeg", "encoder", ["ffmpeg", "-version"], r"ffmpeg version (\S+)", "ffmpeg", True),
    ("nginx", "server", ["nginx", "-v"], r"nginx/(\S+)", "nginx-light", True),
    ("mptcpize", "server", ["mptcpize", "--version"], r"(\d+\.\d+\S*)", "mptcpize", True),
    ("initdb", "server", [], "", "postgresql", False),
    ("curl", "server", ["curl", "--version"], r"curl (\S+)", "curl", True),
    ("ip", "netem", ["ip", "-V"], r"iproute2-([\w.]+)", "iproute2", True),
    ("ping", "netem", [], "", "iputils-ping", True),
    ("iperf3", "netem", ["iperf3", "--version"], r"iperf (\S+)", "iperf3", True),
    ("gcc", "build", ["gcc", "--version"], r"\) (\S+)", "gcc", True),
    ("make", "build", ["make", "--version"], r"Make (\S+)", "make", True),
    ("node", "build", ["node", "--version"], r"v(\S+)", "", True),
    ("npm", "build", ["npm", "--version"], r"(\S+)", "", True),
]


def find_program(program: str) -> str | None:
    if program == "initdb":  # Debian keeps it out of PATH, per PostgreSQL version
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        return str(found[-1]) if found else shutil.which("initdb")
    # /usr/sbin is not on every user's PATH (nginx lives there).
    sbin = Path("/usr/sbin") / program
    return path_program(program) or (str(sbin) if sbin.exists() else None)


def check_programs() -> list[Finding]:
    found = []
    for program, area, argv, pattern, package, required in PROGRAMS:
        path = find_program(program)
        if path is None:
            # node and npm come from PyPI where the system has none (no Debian package).
            fix = f"apt-get install {package}" if package else "make node"
            found.append(Finding(area, program, False, "not found", fix, required))
            continue
        version = _version([path, *argv[1:]], pattern) if argv else None
        found.append(Finding(area, program, True, version or path, required=required))
    return found


def check_ffmpeg_encoders() -> list[Finding]:
    if shutil.which("ffmpeg") is None:
        return []
    done = subprocess.run(["ffmpeg", "-hide_banner", "-encoders"], capture_output=True,
                          text=True, timeout=20)
    missing = [e for e in ("libx264", "libx265", "aac") if e not in done.stdout]
    return [Finding("encoder", "ffmpeg encoders", not missing,
                    "libx264 libx265 aac" if not missing else f"lacks {' '.join(missing)}",
                    "an ffmpeg built with libx264 and libx265 (Debian's is)")]


def _is_snap_wrapper(path: str) -> bool:
    try:
        head = Path(path).read_bytes()[:4096]
    except OSError:
        return False
    return b"/snap/" in head or Path(path).resolve().as_posix().startswith("/snap/")


def check_browsers(release: dict[str, str] | None = None) -> list[Finding]:
    release = release if release is not None else os_release()
    ubuntu = release.get("ID") == "ubuntu"
    chromium = os.environ.get("MPSTREAM_CHROMIUM") or shutil.which("chromium") \
        or shutil.which("chromium-browser")
    found = []
    if chromium is None:
        fix = ("Ubuntu's chromium is a snap, which cannot be started inside a network "
               "namespace: install a Debian-style build and point MPSTREAM_CHROMIUM at it, or "
               "use --browser firefox" if ubuntu else "apt-get install chromium")
        found.append(Finding("player", "Chromium", False, "not found", fix))
    elif _is_snap_wrapper(chromium):
        found.append(Finding(
            "player", "Chromium", False, f"{chromium} is a snap",
            "a snap's confinement keeps it out of mpstream's network namespaces: point "
            "MPSTREAM_CHROMIUM at a non-snap Chromium, or use --browser firefox"))
    else:
        version = _version([chromium, "--version"], r"Chromium (\S+)")
        found.append(Finding("player", "Chromium", True, version or chromium))
    firefox = shutil.which("firefox-esr") or shutil.which("firefox")
    if firefox is None:
        found.append(Finding("player", "Firefox (HEVC)", False, "not found",
                             "apt-get install firefox-esr (the browser that decodes HEVC)",
                             required=False))
    else:
        version = _version([firefox, "--version"], r"Firefox (\S+)")
        found.append(Finding("player", "Firefox (HEVC)", True, version or firefox,
                             required=False))
    return found


def check_build(build_dir: Path = BUILD_DIR, repo: Path = REPO_ROOT) -> list[Finding]:
    found = [Finding("build", "Python", sys.version_info[:2] >= (3, 11),
                     platform.python_version(), "Python 3.11, 3.12 or 3.13")]
    for what, path in (("link emulator", build_dir / "mpstream-linkem"),
                       ("player page", repo / "player" / "dist" / "index.html")):
        found.append(Finding("build", what, path.exists(), str(path) if path.exists()
                             else "not built", "make setup"))
    hop = build_dir / HOP_BINARY.name
    found.append(Finding("build", "QUIC hop (transports quic, mpquic)", hop.exists(),
                         str(hop) if hop.exists() else "not built",
                         f"{HOP_BUILD_COMMAND} (needs cargo, Rust 1.88 or newer)", required=False))
    return found


def check_distribution(release: dict[str, str] | None = None) -> list[Finding]:
    release = release if release is not None else os_release()
    name = release.get("PRETTY_NAME", "unknown")
    tested = release.get("ID") == "debian" and release.get("VERSION_ID") in ("12", "13")
    note = "tested" if tested else "not tested here (docs/distributions.md)"
    if release.get("ID") == "ubuntu":
        note = ("not tested here; Chromium is a snap on Ubuntu: see docs/distributions.md")
    return [Finding("host", "distribution", True, f"{name}: {note}", required=False)]


CHECKS: list[Callable[[], list[Finding]]] = [
    check_distribution, check_kernel, check_privileges, check_programs, check_ffmpeg_encoders,
    check_browsers, check_build,
]


def diagnose() -> list[Finding]:
    """The core's checks, then those the parts add (mpstream/hooks.py)."""
    return [finding for check in [*CHECKS, *hooks.functions(hooks.DOCTOR)]
            for finding in check()]


def print_findings(findings: list[Finding], console: Console) -> None:
    style = {"ok": "green", "MISSING": "bold red", "warning": "yellow"}
    for f in findings:
        console.print(f"[{style[f.status]}]{f.status:>7}[/]  {f.area:<8} {f.name}: ",
                      end="", highlight=False)
        console.print(f.detail, markup=False, highlight=False)
        if not f.ok and f.fix:
            console.print(f"{'':>18}fix: {f.fix}", markup=False, highlight=False)


@click.command()
@json_option
def doctor(as_json: bool) -> None:
    """What this machine has and lacks for mpstream, and the command that fixes each gap.
    Exits 1 when a required thing is missing."""
    console = console_for(as_json, highlight=False)
    findings = diagnose()
    print_findings(findings, console)
    missing = [f for f in findings if not f.ok and f.required]
    if as_json:
        print_json({"ok": not missing, "install": INSTALL,
                    "checks": [{**asdict(f), "status": f.status} for f in findings]})
    if missing:
        console.print(f"{len(missing)} required thing(s) missing: "
                      + ", ".join(f.name for f in missing) + f". Most are fixed by {INSTALL}.")
        sys.exit(EXIT_FAILED)
    console.print("everything mpstream needs is here")
