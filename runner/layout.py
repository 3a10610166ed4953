"""The raw-data layout of a run: what each trial leaves behind, and how the report finds it.

    RUN_DIR/run.json                  scenario name, file, planned trials (in run order)
    RUN_DIR/scenario.toml             the scenario file as it was when the run started
    RUN_DIR/trials/<key>/trial.json   condition, player, transport, status (ok | failed),
                                      reason, timings, capacity_bps (sum of the rates of the
                                      paths in use), sender (which side sends the bulk data)
    RUN_DIR/trials/<key>/profile.json the profile as built (after the condition's overrides)
    RUN_DIR/trials/<key>/summary.json collector summary (video) + per-path bytes from play_session
    RUN_DIR/trials/<key>/events.json  collector events of the session, in seq order (video)
    RUN_DIR/trials/<key>/session.json the collector's session record (video)
    RUN_DIR/trials/<key>/access.log   nginx's access log (JSON lines) (video)
    RUN_DIR/trials/<key>/iperf.json   iperf3 -J output (iperf)
    RUN_DIR/trials/<key>/samples-client.csv, samples-server.csv   kernel samples (sampler.FIELDS)
    RUN_DIR/trials/<key>/samples-{client,server}-mptcp.csv         MPTCP connections' own sockets
    RUN_DIR/trials/<key>/mptcp-counters.json  nstat MPTcpExt* of both namespaces, before/after
    RUN_DIR/trials/<key>/pcap/*.pcap.gz  packet headers per interface (with --pcap)
    RUN_DIR/report/                   written by `mpstream report`

A trial folder without trial.json was interrupted; a resumed run does it again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TRIALS = "trials"
TRIAL_JSON = "trial.json"
RUN_JSON = "run.json"


def write_json(path: Path, data: Any) -> None:
    # Written to a temporary name first: a crash never leaves half a trial.json behind.
    tmp = path.with_suffix(path.suffix + ".part")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
    tmp.replace(path)


def read_json(path: Path, default: Any = None) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return default


@dataclass
class TrialRecord:
    """One trial folder as the report sees it."""

    dir: Path
    meta: dict
    summary: dict = field(default_factory=dict)
    events: list[dict] = field(default_factory=list)
    iperf: dict | None = None
    session: dict = field(default_factory=dict)  # the collector's session record
    profile: dict = field(default_factory=dict)  # the network profile as built

    @property
    def key(self) -> str:
        return self.meta["key"]

    @property
    def condition(self) -> str:
        return self.meta["condition"]["label"]

    @property
    def ok(self) -> bool:
        return self.meta.get("status") == "ok"

    @property
    def samples_client(self) -> Path:
        return self.dir / "samples-client.csv"

    @property
    def samples_server(self) -> Path:
        return self.dir / "samples-server.csv"

    def samples_mptcp(self, host: str) -> Path:
        """The MPTCP connections' own sockets of `host` (client or server)."""
        return self.dir / f"samples-{host}-mptcp.csv"


def trial_dir(run_dir: Path, key: str) -> Path:
    return Path(run_dir) / TRIALS / key


def finished_keys(run_dir: Path) -> dict[str, str]:
    """key -> status of every trial that finished (ok or failed)."""
    out = {}
    for meta_path in sorted((Path(run_dir) / TRIALS).glob(f"*/{TRIAL_JSON}")):
        meta = read_json(meta_path, {})
        if meta.get("status") in ("ok", "failed"):
            out[meta_path.parent.name] = meta["status"]
    return out


def load_trials(run_dir: Path) -> list[TrialRecord]:
    """Every finished trial of a run, in the order they ran."""
    records = []
    for meta_path in (Path(run_dir) / TRIALS).glob(f"*/{TRIAL_JSON}"):
        d = meta_path.parent
        meta = read_json(meta_path, {})
        if meta.get("status") not in ("ok", "failed"):
            continue
        records.append(
            TrialRecord(
                dir=d,
                meta=meta,
                summary=read_json(d / "summary.json", {}) or {},
                events=read_json(d / "events.json", []) or [],
                iperf=read_json(d / "iperf.json"),
                session=read_json(d / "session.json", {}) or {},
                profile=read_json(d / "profile.json", {}) or {},
            )
        )
    records.sort(key=lambda r: (r.meta.get("order", 0), r.key))
    return records
