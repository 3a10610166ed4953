"""A trial's record, `trials/<key>/trial.json`: what ran, on which network and transport, with
what outcome. Readers use the model's fields, never a dict with defaults spelled at each read.

The record is versioned (`schema_version`); `load_record` migrates a record of an earlier version
(those written before the field existed are version 1) to this one, so old run folders still
load. The checked-in JSON Schema, docs/trial.schema.json, is generated from the model; after a
change run `make trial-schema` (tests/unit/test_trial_record.py fails while it is stale).
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mpstream.errors import UserError
from mpstream.paths import REPO_ROOT
from mpstream.player.livesync import LiveSync
from mpstream.runner.scenario import Condition
from mpstream.runner.workloads import WorkloadKind
from mpstream.transports.pathpolicy import POLICIES

SCHEMA_VERSION = 3
SCHEMA_FILE = REPO_ROOT / "docs" / "trial.schema.json"
REGENERATE = "make trial-schema"
# The name a cluster gives the host a trial runs on (`mpstream cluster head|join --name`, the
# hosts of `--cluster local:N`); without it, the machine's hostname.
HOST_ENV = "MPSTREAM_HOST"


class PathLabel(BaseModel):
    """One client path as the trial's tables name it."""

    index: int
    name: str
    client_addr: str | None = None


class PolicyToggle(BaseModel):
    """One change of a held path's role by the path policy (mpstream/transports/pathpolicy.py)."""

    t_s: float = Field(description="seconds since the session's controller started")
    t_unix: float
    path: int
    action: Literal["backup", "nobackup"] = Field(description="nobackup: the metered path "
                                                  "carries data from now on; backup: held back")
    reason: str
    buffer_s: float | None = Field(default=None, description="the player's buffer level then")


class CompetitorLabel(BaseModel):
    """A competing client of the trial's network: its host (files: iperf-<host>.json or
    <host>/), its label, the transport it spoke (a registered name), and whether it was cross
    traffic (a scheduled bulk download) rather than a user doing what the client did."""

    host: str
    name: str
    transport: str
    cross_traffic: bool = False


class MediaFacts(BaseModel):
    """What the scores need of the encoded media and the probe does not record."""

    frame_rate: float | None = None
    top_bitrate_bps: float | None = None


class Measurement(BaseModel):
    """One timed download of `paths check`: over one interface, or all of them together
    (`transport` and each interface's received bytes)."""

    interface: str | None = None
    address: str | None = None
    transport: str | None = None
    rtt_ms: float | None = None
    throughput_bps: float | None = None
    bytes: int | None = None
    seconds: float | None = None
    error: str | None = None
    interface_rx_bytes: dict[str, int] | None = None


class PathCheck(BaseModel):
    """What `paths check` measured of a real network (netem/pathcheck.py)."""

    url: str
    probe_url: str
    seconds: float
    interfaces: list[Measurement] = Field(default_factory=list)
    aggregate: Measurement | None = None
    errors: list[str] = Field(default_factory=list)


class TrialRecord(BaseModel):
    """trial.json. `status` is ok, or failed with `reason`; a trial folder without it was
    interrupted (a resumed run does that trial again)."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    key: str
    round: int
    order: int
    kind: WorkloadKind = Field(default="video", description="the trial's workload: a kind "
                               "registered in runner/workloads/ (video, iperf)")
    condition: Condition
    player: str | None = None
    browser: str | None = None
    codec: str | None = None
    abr: str | None = Field(default=None, description="the adaptation rule the scenario asked "
                            "for (default: the player's own default); summary.json's `abr` is "
                            "what the player reported")
    pair: str | None = Field(default=None, description="the WiFi x cellular trace pair the "
                             "trial played (a scenario with `pairs`; pair.json beside has its "
                             "traces), by name")
    host: str | None = Field(default=None, description="the host the trial ran on: its name in "
                             "the cluster ($MPSTREAM_HOST), else its hostname")
    started_at: str
    load_avg_1m: float | None = Field(default=None, description="the machine's one-minute load "
                                      "average when the trial started (a busy machine's "
                                      "timings are noisier)")
    finished_at: str | None = None
    elapsed_s: float | None = Field(default=None, description="the whole trial, seconds")
    phases: dict[str, float] = Field(default_factory=dict, description="seconds per step of "
                                     "the trial (mpstream/phases.py), adding up to about "
                                     "elapsed_s: network_up, servers_up, page_ready, playback, "
                                     "results, torn_down")
    playback_s: float | None = Field(default=None, description="the playback phase: from the "
                                     "player page loaded to the session's end; elapsed_s less "
                                     "this is the trial's overhead")
    status: Literal["ok", "failed"] = "failed"
    reason: str = ""
    # Which side sends the bulk data: both kinds send it from the server (iperf3 runs
    # reversed, -R), so the emulated downlink is the bottleneck, as for video.
    sender: Literal["server", "client"] = "server"
    transport: str | None = None
    scheduler: str | None = Field(default=None, description="the transport's path scheduler "
                                  "(which bytes go on which path); None where there is none to "
                                  "choose")
    deployment: str | None = Field(default=None, description="what the server and client ran "
                                   "(a preset of `mpstream deployments` or a file's name)")
    deployment_settings: dict[str, Any] = Field(default_factory=dict, description="every "
                                                "setting of that deployment, flat, as applied")
    path_policy: str | None = Field(default=None, description="when the paths it holds back "
                                    "(metered ones, or a user's slower ones) carry data: one of "
                                    f"{', '.join(POLICIES)} (mpstream/transports/pathpolicy.py)")
    metered_paths: list[int] = Field(default_factory=list, description="the profile's metered "
                                     "paths (cellular)")
    metered_bytes: int | None = Field(default=None, description="bytes the metered paths "
                                      "carried, both directions")
    metered_share: float | None = Field(default=None, description="the metered paths' share of "
                                        "the bytes all client paths carried")
    metered_cost: float | None = Field(default=None, description="metered bytes times each "
                                       "metered path's cost_per_gb (None: no price given)")
    path_policy_toggles: list[PolicyToggle] = Field(default_factory=list)
    redundant_bytes: int | None = Field(default=None, description="bytes the transport sent "
                                        "more than once on purpose (a scheduler's re-injected "
                                        "copies, a range asked again); None where it never does")
    transport_implementation: str | None = Field(
        default=None, description="what carried the transport when its name does not say "
        "(the QUIC library and the multipath draft it implements)")
    capacity_bps: float | None = Field(default=None, description="sum of the nominal rates of the "
                                       "paths in use (None: unknown, unlimited or real)")
    paths: list[PathLabel] = Field(default_factory=list)
    paths_in_use: list[int] = Field(default_factory=list)
    competitors: list[CompetitorLabel] = Field(
        default_factory=list, description="the network's other users, each with its own "
        "transfer (iperf) or player (video) at the same time as the trial's")
    session_id: str | None = None
    url: str | None = Field(default=None, description="a real network's manifest URL")
    path_checks: dict[str, PathCheck] | None = Field(
        default=None, description="a real network's `paths check` before and after the trial")
    media: MediaFacts | None = None
    events_started_unix: float | None = Field(
        default=None, description="the wall clock of the profile's t=0 (its timed events)")
    path_bytes: list[dict[str, int]] | None = None
    path_bytes_error: str | None = None
    proof: dict[str, int] | None = Field(
        default=None,
        description="what the transport counted on the wire (e.g. MP_CAPABLE, MP_JOIN)")
    player_failure: str | None = Field(
        default=None, description="why a session that did start broke off later")
    live_sync: LiveSync | None = Field(
        default=None, description="what the player was told of the live stream it joined: "
        "its target latency and how it catches up (player/livesync.py; Scenario.live_sync)")

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def this_host() -> str:
    return os.environ.get(HOST_ENV) or socket.gethostname()


def migrate(raw: dict[str, Any]) -> dict[str, Any]:
    """A record of any earlier version as this version's fields."""
    version = raw.get("schema_version", 1)
    if version > SCHEMA_VERSION:
        raise UserError(f"trial record version {version} is newer than this mpstream "
                        f"({SCHEMA_VERSION}): upgrade mpstream to read it")
    out = dict(raw)
    # Version 1 had no version, host or proof fields; everything else is as in version 2.
    if version <= 2:
        # Version 2's competitors said whether each spoke MPTCP (`mptcp`), which was one of
        # two transports then: mptcp or tcp.
        out["competitors"] = [
            {**{k: v for k, v in c.items() if k != "mptcp"},
             "transport": "mptcp" if c.get("mptcp") else "tcp"} if "transport" not in c else c
            for c in raw.get("competitors") or []]
    out["schema_version"] = SCHEMA_VERSION
    return out


def load_record(path: Path) -> TrialRecord | None:
    """The record in `path` (migrated), None when there is none; an error names the file."""
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise UserError(f"{path}: not JSON ({exc}); remove it to run that trial again") from None
    try:
        return TrialRecord.model_validate(migrate(raw))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise UserError(f"{path}: not a trial record: {where}: {first['msg']}") from None


def record_schema() -> dict[str, Any]:
    schema = TrialRecord.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://mpstream.invalid/trial.schema.json"
    return schema


def main(argv: list[str] | None = None) -> int:
    target = Path((argv if argv is not None else sys.argv[1:] or [str(SCHEMA_FILE)])[0])
    target.write_text(json.dumps(record_schema(), indent=2, sort_keys=True) + "\n")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
