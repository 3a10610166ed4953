"""Link traces: where a trace name is found, the published ones fetched on first use, and
synthetic ones made here.

A trace is a Mahimahi packet-delivery file: one timestamp (ms from the start) a line, each an
opportunity to deliver one 1500-byte packet; it wraps around when it ends. Path *i* of a profile
names one as `trace = "NAME"` (NAME.up / NAME.down) or by file path.

The cellular traces of Winstein et al. (NSDI 2013) are distributed with Mahimahi under the GPL-3;
this MIT project does not ship them. `mpstream traces fetch` downloads them from a pinned commit
of the Mahimahi repository, checks each file's SHA-256 and keeps them in a cache. A name is
looked up, in order, in:
  1. the directories of MPSTREAM_TRACES (':'-separated), when it is set: instead of the cache,
     and where `fetch` writes;
  2. the cache, $XDG_CACHE_HOME/mpstream/traces (~/.cache/mpstream/traces);
  3. /usr/share/mahimahi/traces, where a distribution's mahimahi package installs them.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import requests

from mpstream.errors import UserError

# Packets the trace format delivers per opportunity.
TRACE_PACKET_BYTES = 1500
SYSTEM_DIR = Path("/usr/share/mahimahi/traces")
# The Mahimahi repository's traces/ at a fixed commit; MPSTREAM_TRACES_URL points at a mirror.
PINNED_COMMIT = "ae477d437615b972217498ba52be07db17a15618"
PINNED_URL = f"https://raw.githubusercontent.com/ravinet/mahimahi/{PINNED_COMMIT}/traces"
FETCH_TIMEOUT_S = 60


@dataclass(frozen=True)
class PublishedTrace:
    name: str
    description: str
    sha256: dict[str, str]  # "down" / "up" -> hex digest of NAME.down / NAME.up
    # The downlink's period (its last timestamp), s: where a slice of it may start
    # (netem/tracepairs.py); None: not known here.
    seconds: float | None = None

    def files(self) -> list[str]:
        return [f"{self.name}.{direction}" for direction in self.sha256]

    def folder(self) -> Path | None:
        """The folder of its files on this machine; None when one of them is not found
        (`mpstream traces fetch NAME` brings them)."""
        found = [find(name) for name in self.files()]
        return found[0].parent if found[0] is not None and None not in found else None


PUBLISHED = {
    t.name: t
    for t in [
        PublishedTrace(
            "TMobile-LTE-short", "T-Mobile LTE, stationary, 140 s, 16.7 Mbit/s down",
            {"down": "4f33dce8dd811b5702272af64aaf64d3913719919abd776edf1e0f7c0965da43",
             "up": "1c0d1bf5417b07597724fd64afe676af3c1f337a4ccdde90106bf96b1bcf18b2"}, 139.986),
        PublishedTrace(
            "Verizon-LTE-short", "Verizon LTE, stationary, 140 s, 5.0 Mbit/s down",
            {"down": "c918436fbd6246af134c76585d9395881fdd27203c59a8902b9a7c675b8a8e3e",
             "up": "f6cd9049f58d70f12545772a3482ded085b6d50f06a2f4ff4afcfb6fe7976dcc"}, 140.0),
        PublishedTrace(
            "ATT-LTE-driving-2016", "AT&T LTE, driving (2016), 120 s, 4.6 Mbit/s down",
            {"down": "24a40538340de991e0a6595aefc381b11a3da0446176e69b51750707a57b0344",
             "up": "ebb3d53674b77be4ed920ad91c4513a496e04e30da839e2ca8a627cb7269071e"}, 120.002),
        PublishedTrace(
            "ATT-LTE-driving", "AT&T LTE, driving",
            {"down": "73c58f41bf7a3f0fac82810ca61307521be1cf6b77a0e98093fd340bddfd161f",
             "up": "d58a640b9bccd131a421bff6eaf727aba324d9258b35009655bbf68e087b9b29"}),
        PublishedTrace(
            "TMobile-UMTS-driving", "T-Mobile UMTS, driving, 928 s, 2.0 Mbit/s down",
            {"down": "c97a74e7e6cf593d93b59f73db614bc6186bef510531636ad9961a3b9fc18024",
             "up": "f2dc7c8e57f4cf525fefaff2d68c18a9118fd1382ce9c240b1d324a2a60f8a65"}, 928.424),
        PublishedTrace(
            "Verizon-EVDO-driving", "Verizon EV-DO, driving, 1062 s, 0.5 Mbit/s down",
            {"down": "60c9cd7b5d8be7d89d3807052a043f54787958f04cfd4c6c16fcdac6e2c3b9da",
             "up": "6055d60d234030035f59475dc1d39d99e7c2817b9fa5d485f1f0710b1aae2075"}, 1062.016),
    ]
}


def _env_dirs() -> list[Path] | None:
    value = os.environ.get("MPSTREAM_TRACES")
    if value is None:
        return None
    return [Path(p).expanduser() for p in value.split(":") if p]


def cache_dir() -> Path:
    """Where `fetch` writes: the first MPSTREAM_TRACES directory, else the user's cache."""
    dirs = _env_dirs()
    if dirs:
        return dirs[0]
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "mpstream" / "traces"


def search_dirs() -> list[Path]:
    dirs = _env_dirs()
    return [*(dirs if dirs is not None else [cache_dir()]), SYSTEM_DIR]


def find(name: str, suffix: str | None = None, first: list[Path] | None = None) -> Path | None:
    """The file of trace NAME (NAME.SUFFIX preferred, as Mahimahi names a direction), looked up
    in `first` and then in search_dirs(); an absolute NAME is taken as it is."""
    bases = [*(first or []), *search_dirs()]
    candidates: list[Path] = []
    for base in bases:
        plain = Path(name) if Path(name).is_absolute() else base / name
        if suffix:
            candidates.append(plain.with_name(f"{plain.name}.{suffix}"))
        candidates.append(plain)
    for candidate in candidates:
        if candidate.is_file():
            return candidate.resolve()
    return None


def not_found_message(name: str, first: list[Path] | None = None) -> str:
    looked = ", ".join(str(b) for b in [*(first or []), *search_dirs()])
    message = f"trace file {name!r} not found (looked in {looked})"
    if name in PUBLISHED:
        message += f"; fetch it with `mpstream traces fetch {name}`"
    return message


def mean_bps(trace: Path) -> float:
    """Mean capacity over one period of the trace, in bit/s."""
    stamps = [int(line) for line in trace.read_text().split()]
    if not stamps or stamps[-1] <= 0:
        raise UserError(f"{trace}: not a packet-delivery trace (no positive timestamp)")
    return len(stamps) * TRACE_PACKET_BYTES * 8 / (stamps[-1] / 1000)


def fetch(names: list[str], base_url: str | None = None, dest: Path | None = None) -> list[Path]:
    """Download the published traces NAMES into the cache, each file checked against its pinned
    SHA-256 before it is put in place (a partial or altered download is never kept)."""
    unknown = [n for n in names if n not in PUBLISHED]
    if unknown:
        raise UserError(
            f"no published trace named {', '.join(unknown)}: "
            f"choose from {', '.join(PUBLISHED)} (`mpstream list traces`)"
        )
    base_url = (base_url or os.environ.get("MPSTREAM_TRACES_URL") or PINNED_URL).rstrip("/")
    dest = dest or cache_dir()
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for name in names:
        trace = PUBLISHED[name]
        for direction, digest in trace.sha256.items():
            target = dest / f"{name}.{direction}"
            if target.is_file() and _sha256(target) == digest:
                written.append(target)
                continue
            written.append(_download(f"{base_url}/{target.name}", target, digest))
    return written


def _download(url: str, target: Path, digest: str) -> Path:
    try:
        response = requests.get(url, timeout=FETCH_TIMEOUT_S)
        response.raise_for_status()
    except requests.RequestException as exc:
        raise UserError(
            f"could not download {url}: {exc}. Without network access, copy the Mahimahi "
            f"traces into {target.parent} (or point MPSTREAM_TRACES at a directory that has "
            "them, or MPSTREAM_TRACES_URL at a mirror)."
        ) from exc
    got = hashlib.sha256(response.content).hexdigest()
    if got != digest:
        raise UserError(
            f"{url}: SHA-256 {got} is not the pinned {digest}; the file was not kept. "
            "Check MPSTREAM_TRACES_URL, or report the source as changed."
        )
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    with os.fdopen(fd, "wb") as out:
        out.write(response.content)
    os.replace(tmp, target)
    return target


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def synthetic(mean_bps: float, seconds: float, seed: int = 0, swing: float = 0.5,
              period_s: float = 10.0) -> list[int]:
    """Timestamps of a made-up varying link whose mean over the whole trace is `mean_bps`
    (exactly, up to one packet): a rate that swings by ±swing around the mean with the given
    period, plus seeded noise. For tests and experiments that need a trace of known shape."""
    total_ms = _check_length(mean_bps, seconds)
    rng = random.Random(seed)
    weights = [
        max(0.0, 1 + swing * math.sin(2 * math.pi * t / (period_s * 1000)) + rng.gauss(0, 0.2))
        for t in range(1, total_ms + 1)
    ]
    return _stamps(weights, mean_bps, seconds)


def cellular_like(mean_bps: float, seconds: float, cov: float, autocorr: float,
                  seed: int = 0) -> list[int]:
    """Timestamps of a made-up link with the second-scale statistics of a measured cellular
    one: each second's rate is log-normal with coefficient of variation `cov`, and successive
    seconds are correlated by `autocorr` (an AR(1) process of the log-rate whose correlation,
    once exponentiated, is `autocorr`); the mean over the trace is `mean_bps`. Within a second
    the packets are spread evenly."""
    total_ms = _check_length(mean_bps, seconds)
    if not (cov > 0 and 0 <= autocorr < 1):
        raise UserError("a cellular-like trace needs --cov > 0 and 0 <= --autocorr < 1")
    var = math.log(1 + cov * cov)  # of the log-rate
    # corr(e^X_t, e^X_t+1) = (e^(var·phi) − 1) / (e^var − 1) for an AR(1) X with coefficient phi
    phi = math.log(1 + autocorr * math.expm1(var)) / var
    rng = random.Random(seed)
    x = rng.gauss(0, math.sqrt(var))
    per_second = []
    for _ in range(math.ceil(total_ms / 1000)):
        per_second.append(math.exp(x - var / 2))
        x = phi * x + math.sqrt(1 - phi * phi) * rng.gauss(0, math.sqrt(var))
    weights = [per_second[(t - 1) // 1000] for t in range(1, total_ms + 1)]
    return _stamps(weights, mean_bps, seconds)


# A WiFi link's shape over a trace: the rate, as a fraction of the link's good rate, at times
# (s) between which it moves linearly; 0 is an outage. Each draws its timing from `rng`, so
# that a seed gives one trace and a set of seeds a set of different ones.
Envelope = list[tuple[float, float]]


def _steady(rng: random.Random, seconds: float) -> Envelope:
    """In range the whole time: only the fast fading of the noise."""
    return [(0.0, 1.0), (seconds, 1.0)]


def _fade(rng: random.Random, seconds: float) -> Envelope:
    """One fade: the rate falls within 2-5 s to 5-25% of its good rate, stays there 8-20 s (a
    wall between the user and the access point) and comes back as fast."""
    start, ramp = rng.uniform(0.2, 0.55) * seconds, rng.uniform(2, 5)
    hold, depth = rng.uniform(8, 20), rng.uniform(0.05, 0.25)
    return [(0.0, 1.0), (start, 1.0), (start + ramp, depth), (start + ramp + hold, depth),
            (start + 2 * ramp + hold, 1.0), (seconds, 1.0)]


def _walk(rng: random.Random, seconds: float) -> Envelope:
    """A walk out of range and back: the rate falls to nothing over 10-20 s, the link is out
    of range for 4-12 s, then comes back over 8-15 s."""
    start, down = rng.uniform(0.25, 0.45) * seconds, rng.uniform(10, 20)
    out, back = rng.uniform(4, 12), rng.uniform(8, 15)
    return [(0.0, 1.0), (start, 1.0), (start + down, 0.0), (start + down + out, 0.0),
            (start + down + out + back, 1.0), (seconds, 1.0)]


def _outages(rng: random.Random, seconds: float) -> Envelope:
    """Two to four short outages of 0.5-3 s each (a roaming hand-off, a microwave oven), at
    times apart from the trace's first and last 5 s; the rate is good between them."""
    points: Envelope = [(0.0, 1.0)]
    starts = sorted(rng.uniform(5, max(5.0, seconds - 8)) for _ in range(rng.randint(2, 4)))
    for start in starts:
        start = max(start, points[-1][0] + 0.5)
        end = start + rng.uniform(0.5, 3)
        points += [(start, 1.0), (start + 0.001, 0.0), (end, 0.0), (end + 0.001, 1.0)]
    return [*points, (max(seconds, points[-1][0]), 1.0)]


WIFI_SHAPES: dict[str, Callable[[random.Random, float], Envelope]] = {
    "steady": _steady, "fade": _fade, "walk": _walk, "outages": _outages}


def wifi_like(shape: str, rate_bps: float, seconds: float, seed: int = 0, noise: float = 0.15,
              fading: int = 0) -> list[int]:
    """Timestamps of a made-up WiFi link of good rate `rate_bps` in one of WIFI_SHAPES: the
    shape's envelope (its timing drawn from `seed`) times fast fading, a factor drawn every
    100 ms around 1 with spread `noise` from `seed` and `fading` (the two directions of one
    link: one envelope, fading of their own). Its mean is what the envelope leaves of the rate."""
    if shape not in WIFI_SHAPES:
        raise UserError(f"no WiFi shape {shape!r}: choose one of {', '.join(WIFI_SHAPES)}")
    total_ms = _check_length(rate_bps, seconds)
    envelope = WIFI_SHAPES[shape](random.Random(f"{shape}/{seed}"), seconds)
    rng = random.Random(f"{shape}/{seed}/fading/{fading}")
    factors = [max(0.0, 1 + rng.gauss(0, noise)) for _ in range(math.ceil(total_ms / 100))]
    weights = [_at(envelope, t / 1000) * factors[(t - 1) // 100] for t in range(1, total_ms + 1)]
    mean = rate_bps * sum(weights) / total_ms
    return _stamps(weights, max(mean, TRACE_PACKET_BYTES * 8 / seconds), seconds)


def _at(envelope: Envelope, t_s: float) -> float:
    """The envelope's value at `t_s`, linear between its points."""
    for (t0, v0), (t1, v1) in itertools.pairwise(envelope):
        if t0 <= t_s <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (t_s - t0) / (t1 - t0)
    return envelope[-1][1]


def window(stamps: list[int], offset_ms: int, length_ms: int) -> list[int]:
    """The trace as it plays from `offset_ms` for `length_ms` (wrapping as the emulator wraps
    it: opportunity t recurs at t + k × period), as a trace of period `length_ms` of its own:
    a trace started at an offset, which the emulator (always starting at 0) can replay."""
    period = stamps[-1]
    if period <= 0 or length_ms < 1:
        raise UserError("a trace window needs a trace with a positive period and a length")
    out = []
    first = offset_ms // period
    for k in range(first, (offset_ms + length_ms) // period + 1):
        base = k * period
        out += [base + t - offset_ms for t in stamps
                if offset_ms <= base + t < offset_ms + length_ms]
    return [*out, length_ms]


def merged(*traces_: list[int]) -> list[int]:
    """Traces of one period as one link that delivers what they all do: the sum of their
    capacities, opportunity by opportunity."""
    periods = {t[-1] for t in traces_}
    if len(periods) != 1:
        raise UserError(f"traces of different periods ({sorted(periods)} ms) have no sum")
    return sorted(itertools.chain(*traces_))


def outage_s(stamps: list[int], gap_ms: int = 500) -> float:
    """Seconds of the trace's period spent in gaps of at least `gap_ms` without a delivery
    opportunity: its outages (a gap that short leaves a player's buffer whole)."""
    gaps = (b - a for a, b in itertools.pairwise([0, *stamps]))
    return sum(g for g in gaps if g >= gap_ms) / 1000


def _check_length(mean_bps: float, seconds: float) -> int:
    total_ms = round(seconds * 1000)
    if total_ms < 1 or round(mean_bps * seconds / (TRACE_PACKET_BYTES * 8)) < 1:
        raise UserError("a synthetic trace needs a positive duration and rate")
    return total_ms


def _stamps(weights: list[float], mean_bps: float, seconds: float) -> list[int]:
    """Packet opportunities spread over the milliseconds in proportion to `weights` (one per
    ms), as many as `mean_bps` delivers in `seconds`, the last at the trace's end (the format's
    period is its last timestamp)."""
    total_ms = len(weights)
    packets = round(mean_bps * seconds / (TRACE_PACKET_BYTES * 8))
    scale = packets / sum(weights)
    stamps: list[int] = []
    owed = 0.0
    for t, w in enumerate(weights, start=1):
        owed += w * scale
        n = int(owed)
        owed -= n
        stamps.extend([t] * n)
    return [*stamps[: packets - 1], total_ms]


def rate_statistics(stamps: list[int]) -> dict[str, float]:
    """Per-second rate statistics of a trace: mean (bit/s), coefficient of variation and lag-1
    autocorrelation, as `cellular_like` takes them."""
    seconds = max(1, math.ceil(stamps[-1] / 1000))
    counts = [0] * seconds
    for t in stamps:
        counts[min((t - 1) // 1000, seconds - 1)] += 1
    rates = [c * TRACE_PACKET_BYTES * 8 for c in counts]
    mean = sum(rates) / len(rates)
    dev = [r - mean for r in rates]
    var = sum(d * d for d in dev) / len(dev)
    lag = sum(a * b for a, b in itertools.pairwise(dev))
    return {"mean_bps": mean, "cov": math.sqrt(var) / mean if mean else 0.0,
            "autocorr": lag / (var * len(dev)) if var else 0.0}


def write(path: Path, stamps: list[int]) -> Path:
    path.write_text("".join(f"{t}\n" for t in stamps))
    return path
