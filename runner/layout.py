"""The raw-data layout of a run: what each trial leaves behind, and how the report finds it.

    RUN_DIR/run.json                  the scenario (as loaded), what each condition resolved
                                      to (`resolved`: network, deployment, transport, path
                                      policy, paths), its file, the planned trials in run
                                      order, the media, the trace pairs as drawn (`pair_set`)
                                      and each trial's (`plan_pairs`): all `mpstream trial`
                                      needs
    RUN_DIR/scenario.toml             the scenario file as it was when the run started
    RUN_DIR/trials/<key>/trial.json   the trial record (runner/record.py, docs/trial.schema.json)
    RUN_DIR/trials/<key>/trial.log    what `mpstream trial` printed
    RUN_DIR/trials/<key>/profile.json the profile as the topology built it (the condition's
                                      network with its deployment, as the policy starts it)
    RUN_DIR/trials/<key>/pair.json    the trial's trace pair (a scenario with `pairs`): its
                                      WiFi shape, rate and seed, its cellular trace and offset
    RUN_DIR/trials/<key>/summary.json collector summary (video) + per-path bytes from play_session
    RUN_DIR/trials/<key>/events.json  collector events of the session, in seq order (video)
    RUN_DIR/trials/<key>/session.json the collector's session record (video)
    RUN_DIR/trials/<key>/access.log   nginx's access log (JSON lines) (video)
    RUN_DIR/trials/<key>/iperf.json   iperf3 -J output (iperf)
    RUN_DIR/trials/<key>/iperf-user1.json  iperf3 -J output of each competing client (iperf)
    RUN_DIR/trials/<key>/user1/       each competing client's summary.json, session.json and
                                      events.json (video)
    RUN_DIR/trials/<key>/samples-client.csv, samples-server.csv   kernel samples (sampler.FIELDS)
    RUN_DIR/trials/<key>/samples-{client,server}-mptcp.csv         MPTCP connections' own sockets
    RUN_DIR/trials/<key>/mptcp-counters.json  nstat MPTcpExt* of both namespaces, before/after
    RUN_DIR/trials/<key>/link-stats.json  each emulated link's own counts, per direction (a_to_b
                                      up, b_to_a down), over the topology's life: packets in
                                      and out, dropped by the queue, the AQM, random loss or
                                      a down link (netem/linkem); emulated networks only
    RUN_DIR/trials/<key>/pcap/*.pcap.gz  packet headers per interface (with --pcap)
    RUN_DIR/cluster.log               what the driver of a `--cluster local:N` run said
    RUN_DIR/report/                   written by `mpstream report`

A trial folder without trial.json was interrupted; a resumed run does it again. A trial that ran
elsewhere (a cluster's host) arrives in trials/.<key>.part/ and is renamed to trials/<key>/ once
whole; a `.`-folder is never a finished trial.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpstream.jsonlines import read_json_lines
from mpstream.runner.record import TrialRecord, load_record
from mpstream.runner.samplers.kernel import SampleRow, read_samples
from mpstream.runner.samplers.quic import quic_path_samples

TRIALS = "trials"
CLOCK_JSON = "clock.json"  # the trial clock's origin (runner/metrics/evidence.py)
TRIAL_JSON = "trial.json"
PAIR_JSON = "pair.json"  # the trial's trace pair, as it played it (runner/trial.py)
# The socket of the collector a local run starts once for all its trials (runner/process.py),
# handed to each trial process; a trial run without it starts its own.
RUN_COLLECTOR_ENV = "MPSTREAM_RUN_COLLECTOR"
LINK_STATS_JSON = "link-stats.json"
# Each emulated link's queueing delay and capacity per 100 ms window (<link>.jsonl).
QUEUE_DELAY_DIR = "queue-delay"
RUN_JSON = "run.json"


def competitor_iperf_name(host: str) -> str:
    """The file of a competing client's transfer in a trial folder."""
    return f"iperf-{host}.json"


def write_json(path: Path, data: Any, *, sort_keys: bool = True) -> None:
    # Written to a temporary name first: a crash never leaves half a trial.json behind.
    tmp = path.with_suffix(path.suffix + ".part")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=sort_keys, default=str))
    tmp.replace(path)


def read_json(path: Path, default: Any = None) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return default


@dataclass(frozen=True)
class RunScenario:
    """What readers of run.json need of the scenario it ran: its `scenario_spec` (the whole
    scenario, written once), or in a run folder of an older mpstream the same fields at
    run.json's top level."""

    name: str | None
    description: str
    kind: str
    duration_s: float | None
    conditions: list[dict[str, Any]]
    baseline: str | None = None
    baseline_abr: str | None = None

    @classmethod
    def of(cls, run: dict[str, Any]) -> RunScenario:
        spec = run.get("scenario_spec")
        if spec is None:  # older run.json: the scenario's fields beside the plan's
            spec = {**run, "name": run.get("scenario")}
        return cls(name=spec.get("name"), description=spec.get("description") or "",
                   kind=spec.get("kind") or "video", duration_s=spec.get("duration_s"),
                   conditions=list(spec.get("conditions") or []),
                   baseline=spec.get("baseline"), baseline_abr=spec.get("baseline_abr"))


class TrialData:
    """One finished trial folder, each of its files read once, on first use, and shared by the
    metrics, the evidence, the figures and the report. Files given to the constructor (tests)
    are taken as they are."""

    def __init__(self, dir: Path, record: TrialRecord, **given: Any):
        self.dir = Path(dir)
        self.record = record
        self._cache: dict[str, Any] = dict(given)

    def _once(self, name: str, load: Callable[[], Any]) -> Any:
        if name not in self._cache:
            self._cache[name] = load()
        return self._cache[name]

    @property
    def key(self) -> str:
        return self.record.key

    @property
    def condition(self) -> str:
        return self.record.condition.label

    @property
    def ok(self) -> bool:
        return self.record.ok

    @property
    def summary(self) -> dict[str, Any]:
        return self._once("summary", lambda: read_json(self.dir / "summary.json", {}) or {})

    @property
    def events(self) -> list[dict[str, Any]]:
        return self._once("events", lambda: read_json(self.dir / "events.json", []) or [])

    @property
    def iperf(self) -> dict[str, Any] | None:
        return self._once("iperf", lambda: read_json(self.dir / "iperf.json"))

    def competitor_iperf(self, host: str) -> dict[str, Any] | None:
        """iperf3's output of the competing client `host` (None: it has none)."""
        return self._once(f"iperf-{host}",
                          lambda: read_json(self.dir / competitor_iperf_name(host)))

    def competitor_events(self, host: str) -> list[dict[str, Any]]:
        """The collector's events of the competing client `host`'s session (video)."""
        return self._once(f"events-{host}",
                          lambda: read_json(self.dir / host / "events.json", []) or [])

    @property
    def session(self) -> dict[str, Any]:
        """The collector's session record."""
        return self._once("session", lambda: read_json(self.dir / "session.json", {}) or {})

    @property
    def profile(self) -> dict[str, Any]:
        """The network profile as built."""
        return self._once("profile", lambda: read_json(self.dir / "profile.json", {}) or {})

    @property
    def access_log(self) -> list[dict[str, Any]]:
        """nginx's access log lines (JSON), unreadable lines skipped."""
        return self._once("access_log", lambda: read_json_lines(self.dir / "access.log"))

    def samples(self, host: str) -> list[SampleRow]:
        """The kernel samples of `host` (client or server): its TCP sockets and subflows."""
        path = self.dir / f"samples-{host}.csv"
        return self._once(f"samples-{host}",
                          lambda: read_samples(path) if path.is_file() else [])

    def mptcp_samples(self, host: str) -> list[SampleRow] | None:
        """The MPTCP connections' own sockets of `host`; None when not sampled."""
        path = self.dir / f"samples-{host}-mptcp.csv"
        return self._once(f"samples-{host}-mptcp",
                          lambda: read_samples(path) if path.is_file() else None)

    @property
    def sender_samples(self) -> list[SampleRow]:
        return self.path_samples(self.record.sender)

    @property
    def link_stats(self) -> dict[str, Any]:
        """Each emulated link's own counts by its label (path<i>: the client's path i), {}
        when the trial kept none (a real network, or a run from before they were kept)."""
        return self._once("link-stats", lambda: read_json(self.dir / LINK_STATS_JSON, {}) or {})

    @property
    def t0_unix(self) -> float | None:
        """The trial clock's origin in Unix time (the samples' t_s = 0)."""
        clock = read_json(self.dir / CLOCK_JSON)
        return float(clock["t0_unix"]) if clock else None

    @property
    def quic_samples(self) -> dict[str, list[SampleRow]] | None:
        """host -> the QUIC hop's per-path statistics as sample rows (runner/samplers/quic.py);
        None for a trial that did not run over QUIC."""
        def load() -> dict[str, list[SampleRow]] | None:
            t0 = self.t0_unix
            rows = quic_path_samples(self.dir, self.record, t0) if t0 is not None else {}
            return rows if any(rows.values()) else None
        return self._once("quic-samples", load)

    def path_samples(self, host: str) -> list[SampleRow]:
        """What carried the trial's bytes on each path, as seen by `host`: the kernel's TCP
        sockets and MPTCP subflows, or for a trial over QUIC the hop's QUIC paths."""
        quic = self.quic_samples
        return quic.get(host, []) if quic is not None else self.samples(host)

    @property
    def receiver_column(self) -> str:
        """The receiver's count of delivered bytes: what the client received when the server
        sends, what the client's sender saw acknowledged otherwise."""
        return "bytes_received" if self.record.sender == "server" else "bytes_acked"


def trial_dir(run_dir: Path, key: str) -> Path:
    return Path(run_dir) / TRIALS / key


def trial_log(run_dir: Path, key: str) -> Path:
    """Where a running trial's output goes; it becomes the trial folder's trial.log."""
    return Path(run_dir) / TRIALS / f".{key}.log"


def install_trial_dir(run_dir: Path, key: str, fill: Callable[[Path], None]) -> Path:
    """Makes trials/<key>/ whole or not at all: `fill` writes into trials/.<key>.part/, which
    then replaces whatever an interrupted attempt left at trials/<key>/."""
    final = trial_dir(run_dir, key)
    part = final.with_name(f".{key}.part")
    if part.exists():
        shutil.rmtree(part)
    part.mkdir(parents=True)
    fill(part)
    if final.exists():
        shutil.rmtree(final)
    part.rename(final)
    return final


def remove_partial_trials(run_dir: Path) -> list[Path]:
    """What a coordinator killed while it wrote a trial left (trials/.<key>.part/)."""
    gone = [p for p in (Path(run_dir) / TRIALS).glob(".*.part") if p.is_dir()]
    for path in gone:
        shutil.rmtree(path)
    return gone


def finished_keys(run_dir: Path) -> dict[str, str]:
    """key -> status of every trial that finished (ok or failed)."""
    return {t.key: t.record.status for t in load_trials(run_dir)}


def load_trials(run_dir: Path) -> list[TrialData]:
    """Every finished trial of a run, in the order they ran (files are read when used)."""
    trials = []
    for path in (Path(run_dir) / TRIALS).glob(f"*/{TRIAL_JSON}"):
        if path.parent.name.startswith("."):
            continue  # half-copied from a host
        record = load_record(path)
        if record is not None:
            trials.append(TrialData(path.parent, record))
    trials.sort(key=lambda t: (t.record.order, t.key))
    return trials
