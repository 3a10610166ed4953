"""A run's trials on a Ray cluster: the one module that imports Ray.

Each host (a Ray node offering one `mpstream_host` unit, see hosts.py) runs one trial at
a time: a trial is a task asking for that unit. Tasks are handed out in the plan's order, never
more at once than there are hosts, so trials start in plan order. On the host the task writes a
copy of run.json into a scratch folder, runs `mpstream trial` there (the same one-trial command
a local run uses) and returns the trial's folder as a tar archive, which the driver unpacks into
trials/.KEY.part/ and renames to trials/KEY/: a half-copied trial never looks finished.

The media tree travels once per host: by content hash, into the host's cache (a tree at the
run's own path counts when its hash matches: hosts that share a file system copy nothing).

With `--balance-hosts` the trials go in lanes, one per host: round r to host r mod the number
of hosts (`balanced_lanes`), so that every host runs every condition equally often.

Failures: a trial that fails is a result (its trial.json says why) and is not run again. A task
whose host died (its Ray node lost) is run again on another host by Ray (`max_retries`, which
counts system failures only), or, in a balanced lane, by the driver on the lanes that take the
lost host's trials. A trial still running its duration plus a margin after it started
is stopped like Ctrl-C and recorded as failed ("timeout"). Interrupted, the driver cancels its
tasks, which stop their trials the same way, and the run resumes later like a local one.

Before the first trial every host describes itself (kernel, MPTCP, mpstream version, `doctor`
verdict); a host whose version or verdict differs from this machine's refuses the run.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import logging
import os
import shutil
import sys
import tarfile
import tempfile
import time
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from mpstream.errors import UserError
from mpstream.runner.cluster.hosts import (
    CACHE_ENV,
    HOST_RESOURCE,
    HostFacts,
    existing_token,
    facts_of_this_host,
    ray_environment,
)

# Ray reads its authentication settings (token mode, the token's file) once, when it is
# imported: they are set first, here.
os.environ.update({k: v for k, v in ray_environment().items() if k.startswith("RAY_")})
os.environ.pop("RAY_AUTH_TOKEN", None)

import ray
from ray.exceptions import GetTimeoutError, RayError, RayTaskError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from mpstream.runner.layout import (
    RUN_JSON,
    TRIAL_JSON,
    RunScenario,
    install_trial_dir,
    read_json,
    write_json,
)
from mpstream.runner.process import TEARDOWN_TIMEOUT_S, Finished, Started, run_trial_process
from mpstream.runner.record import TrialRecord, load_record, this_host
from mpstream.runner.scenario import Trial
from mpstream.runner.trial import failed_record, load_plan

# Times Ray runs a trial again when the host running it is lost (not when the trial fails).
HOST_RETRIES = 3
# A run with no host left for this long gives up rather than wait for one forever.
NO_HOSTS_GIVE_UP_S = 120.0
CONNECT_TIMEOUT_S = 30


# --- the driver -------------------------------------------------------------------------------


def connect(address: str, node_address: str | None = None) -> None:
    """Joins the cluster at `address` as its driver, with the token; a cluster that does not
    accept the token (or is not there) is an error that says so."""
    existing_token()
    # Ray waits for the head quite a while by default; a refused token looks the same.
    os.environ.setdefault("RAY_gcs_rpc_server_connect_timeout_s", str(CONNECT_TIMEOUT_S))
    try:
        ray.init(address=address, _node_ip_address=node_address, namespace="mpstream",
                 logging_level=logging.ERROR, log_to_driver=False,
                 configure_logging=True)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UserError(f"cannot join the cluster at {address} as its driver: {exc}. Is the "
                        "head there, and is this machine's token (`mpstream cluster head` "
                        "made it) the head's?") from None


def host_nodes() -> list[dict]:
    return [n for n in ray.nodes() if n.get("Alive") and n["Resources"].get(HOST_RESOURCE)]


@ray.remote(num_cpus=0, max_retries=0)
def _describe_host() -> dict:
    facts = facts_of_this_host()
    facts.address = ray.util.get_node_ip_address()
    return facts.model_dump()


# Each host's facts with the reason it is refused (None: it may run this machine's trials).
HostRows = list[tuple[HostFacts, str | None]]


def describe_hosts() -> tuple[HostFacts, HostRows]:
    """This machine's facts, and each host's (asked at the same time)."""
    nodes = host_nodes()
    refs = [_describe_host.options(scheduling_strategy=NodeAffinitySchedulingStrategy(
        n["NodeID"], soft=False)).remote() for n in nodes]
    here = facts_of_this_host()
    rows = []
    for node, ref in zip(nodes, refs, strict=True):
        try:
            facts = HostFacts.model_validate(ray.get(ref, timeout=180))
        except (RayError, GetTimeoutError) as exc:
            facts = HostFacts(host=node["NodeManagerAddress"], kernel="?", mptcp="?",
                              version="?", doctor=f"did not answer: {exc}")
        facts.node_id = node["NodeID"]
        rows.append((facts, facts.refusal(here)))
    return here, sorted(rows, key=lambda r: r[0].host)


def cluster_status(address: str, node_address: str | None) -> tuple[HostFacts, HostRows]:
    connect(address, node_address)
    try:
        return describe_hosts()
    finally:
        ray.shutdown()


def check_hosts() -> list[HostFacts]:
    """The hosts that will run the trials; an error naming each refused host and why."""
    _, rows = describe_hosts()
    if not rows:
        raise UserError(f"the cluster has no hosts (Ray nodes with the {HOST_RESOURCE} "
                        "resource): start them with `mpstream cluster join`")
    refused = [f"{facts.host}: {why}" for facts, why in rows if why]
    if refused:
        raise UserError("host(s) refused before any trial ran: " + "; ".join(refused)
                        + ". Install the head's mpstream there (and what `mpstream doctor` "
                        "asks for), or take the host out with `mpstream cluster down` on it")
    return [facts for facts, _ in rows]


@dataclass
class MediaShipment:
    """The run's media tree as its hosts get it: its content hash, its path here, and (in a
    list, so that a task fetches it only when its host lacks the tree) the archive."""

    digest: str
    path: str
    archive: list


def ship_media(media_dir: Path) -> MediaShipment:
    return MediaShipment(tree_digest(media_dir), str(media_dir),
                         [ray.put(tar_bytes(media_dir))])


@dataclass
class Lane:
    """Trials handed out in plan order: to any free host, or (balanced) to one host only."""

    queue: deque[Trial]
    node_id: str | None = None
    host: str = ""
    lost: bool = False  # its host is gone: its trials go to the other lanes

    def options(self, trial: Trial) -> dict:
        options: dict = {"name": f"trial {trial.key}"}
        if self.node_id is not None:
            # Its own host only, and no retry by Ray: a lost host's trial goes to another lane.
            options.update(max_retries=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
                self.node_id, soft=False))
        return options


def balanced_lanes(trials: list[Trial], hosts: list[HostFacts]) -> list[Lane]:
    """Whole rounds to hosts, round r to host r mod H, so that every host runs every condition
    as often as the others (exactly, when the rounds are a multiple of the hosts)."""
    lanes = [Lane(deque(), h.node_id, h.host) for h in sorted(hosts, key=lambda h: h.host)]
    for trial in trials:
        lanes[trial.round % len(lanes)].queue.append(trial)
    return [lane for lane in lanes if lane.queue]


class RayTrials:
    """The trials on the cluster whose head is at `address`: see the module's docstring.
    With `balance`, whole rounds go to hosts (`balanced_lanes`)."""

    def __init__(self, address: str, margin_s: float, node_address: str | None = None,
                 balance: bool = False):
        self.address, self.margin_s, self.node_address = address, margin_s, node_address
        self.balance = balance

    def run(self, run_dir: Path, trials: list[Trial], started: Started,
            finished: Finished) -> None:
        if not trials:
            return
        connect(self.address, self.node_address)
        try:
            hosts = check_hosts()
            lanes = balanced_lanes(trials, hosts) if self.balance else [Lane(deque(trials))]
            self._schedule(Path(run_dir), lanes, started, finished)
        finally:
            ray.shutdown()

    def _schedule(self, run_dir: Path, lanes: list[Lane], started: Started,
                  finished: Finished) -> None:
        run = read_json(run_dir / RUN_JSON)
        run_bytes = json.dumps(run).encode()
        media = ship_media(Path(run["media_dir"])) if run.get("media_dir") else None
        ran = RunScenario.of(run)
        limit_s = float(ran.duration_s or 0) + self.margin_s
        kind = ran.kind
        running: dict[ray.ObjectRef, tuple[Trial, Lane]] = {}
        lost: dict[str, int] = {}  # key -> times the host running it was lost
        no_hosts_since: float | None = None
        try:
            while any(lane.queue for lane in lanes) or running:
                # One trial per host: never more tasks out than hosts (or than its one host
                # for a balanced lane), so that they start in the plan's order; a host that
                # joins mid-run gets the next trial.
                hosts = int(ray.cluster_resources().get(HOST_RESOURCE, 0))
                lanes = _rehome(lanes)
                for lane in lanes:
                    if lane.lost:
                        continue
                    room = (hosts - len(running) if lane.node_id is None
                            else 1 - sum(1 for _, held in running.values() if held is lane))
                    for _ in range(max(0, min(room, len(lane.queue)))):
                        trial = lane.queue.popleft()
                        ref = _trial_on_host.options(**lane.options(trial)).remote(
                            run_bytes, run_dir.name, trial.key, media, limit_s)
                        running[ref] = (trial, lane)
                        started(trial.key)
                if running:
                    ready, _ = ray.wait(list(running), num_returns=1, timeout=2.0)
                else:
                    ready = []
                    time.sleep(2.0)
                for ref in ready:
                    trial, lane = running.pop(ref)
                    record = _collect(run_dir, kind, trial, ref, lane, lost)
                    if record is not None:
                        finished(trial.key, record)
                no_hosts_since = _no_hosts_since(no_hosts_since, hosts)
        except KeyboardInterrupt:
            _cancel(running)
            raise


def _rehome(lanes: list[Lane]) -> list[Lane]:
    """Balanced lanes whose host is gone give their trials to the other lanes (the least
    loaded first), or to a new lane of any host when none is left."""
    if all(lane.node_id is None for lane in lanes):
        return lanes
    alive = {n["NodeID"] for n in host_nodes()}
    for lane in lanes:
        if lane.node_id is not None and lane.node_id not in alive:
            lane.lost = True
    lost = [lane for lane in lanes if lane.lost and lane.queue]
    if not lost:
        return lanes
    live = [lane for lane in lanes if not lane.lost] or [Lane(deque())]
    for lane in lost:
        print(f"host {lane.host} is gone: its trials go to the other hosts (the run is no "
              "longer balanced)", file=sys.stderr, flush=True)
        while lane.queue:
            min(live, key=lambda other: len(other.queue)).queue.append(lane.queue.popleft())
    return [*lanes, *(lane for lane in live if lane not in lanes)]


def _no_hosts_since(since: float | None, hosts: int) -> float | None:
    if hosts > 0:
        return None
    now = time.monotonic()
    if since is not None and now - since > NO_HOSTS_GIVE_UP_S:
        raise UserError(f"no host left in the cluster for {NO_HOSTS_GIVE_UP_S:.0f} s: the run "
                        "stops here; resume it when hosts have joined again")
    return since or now


def _collect(run_dir: Path, kind: str, trial: Trial, ref: ray.ObjectRef, lane: Lane,
             lost: dict[str, int]) -> TrialRecord | None:
    """The trial's folder from its host into the run folder; a task that could not bring one
    back is recorded as a failed trial with the reason. None: the trial of a balanced lane
    whose host was lost, queued again (first) for the lanes that take the host's trials."""
    try:
        host, archive, media_note = ray.get(ref)
    except RayTaskError as exc:
        reason = f"cluster: the trial's task failed: {exc.cause or exc}"
    except RayError as exc:
        lost[trial.key] = lost.get(trial.key, 0) + 1
        if lane.node_id is not None and lost[trial.key] <= HOST_RETRIES:
            lane.lost = True  # Ray's own retries are off for a pinned task: this is the host
            lane.queue.appendleft(trial)
            return None
        reason = (f"cluster: its host was lost {HOST_RETRIES + 1} times "
                  f"({type(exc).__name__}: {str(exc)[:300]})")
    else:
        if media_note:
            print(f"{host}: {media_note}", file=sys.stderr, flush=True)
        tdir = install_trial_dir(run_dir, trial.key, lambda part: untar(archive, part))
        record = load_record(tdir / TRIAL_JSON)
        if record is None:
            raise UserError(f"host {host} sent trial {trial.key} back without its "
                            f"{TRIAL_JSON}")
        return record
    record = failed_record(kind, trial, reason)
    install_trial_dir(run_dir, trial.key,
                      lambda part: write_json(part / TRIAL_JSON, record.model_dump(mode="json")))
    return record


def _cancel(running: dict[ray.ObjectRef, tuple[Trial, Lane]]) -> None:
    """Stops the running trials as Ctrl-C would (each tears its network down), waits for
    that, then forces what is left."""
    for ref in running:
        ray.cancel(ref)
    with contextlib.suppress(Exception):
        ray.wait(list(running), num_returns=len(running), timeout=TEARDOWN_TIMEOUT_S + 10)
    for ref in running:
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=True)


# --- on a host ----------------------------------------------------------------------------------


@ray.remote(num_cpus=0, resources={HOST_RESOURCE: 1}, max_retries=HOST_RETRIES,
            retry_exceptions=False)
def _trial_on_host(run_bytes: bytes, run_name: str, key: str, media: MediaShipment | None,
                   limit_s: float) -> tuple[str, bytes, str]:
    """One trial on this host in a scratch copy of the run folder; its folder as a tar, and
    what it took to have the media here when that was a copy."""
    run = json.loads(run_bytes)
    note = ""
    if media is not None:
        media_dir, note = media_here(media)
        run["media_dir"] = str(media_dir)
    scratch = Path(tempfile.mkdtemp(prefix="trial-", dir=_ensure(host_cache() / "runs")))
    try:
        run_dir = scratch / run_name  # the name makes the trial's session id, as it would here
        run_dir.mkdir()
        write_json(run_dir / RUN_JSON, run)
        try:
            record = run_trial_process(run_dir, key, timeout_s=limit_s, die_with_parent=True)
        except UserError as exc:  # it ended without a record: that is this trial's result
            plan = load_plan(run_dir)
            record = failed_record(plan.scenario.kind, plan.trial(key), str(exc),
                                   host=this_host())
            tdir = _ensure(run_dir / "trials" / key)
            write_json(tdir / TRIAL_JSON, record.model_dump(mode="json"))
        return this_host(), tar_bytes(run_dir / "trials" / key), note
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def host_cache() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "mpstream" / "host")


def _ensure(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def media_here(media: MediaShipment) -> tuple[Path, str]:
    """The run's media tree on this host: at the run's own path when that tree has the same
    content, else in the cache by its hash, fetched (once per host) when it is not there; and
    a note when it was fetched."""
    cache = _ensure(host_cache() / "media")
    cached = cache / media.digest
    if (cache / f"{media.digest}.ok").is_file():
        return cached, ""
    same_path = Path(media.path)
    if (same_path / "media.json").is_file() and _known_digest(same_path, cache) == media.digest:
        return same_path, ""
    archive = ray.get(media.archive[0])
    unpacking = cache / f".{media.digest}.{uuid.uuid4().hex}"
    untar(archive, unpacking)
    if cached.exists():
        shutil.rmtree(cached)
    unpacking.rename(cached)
    (cache / f"{media.digest}.ok").touch()
    return cached, (f"media tree {media.digest[:12]} copied to {cached} "
                    f"({len(archive) / 1e6:.1f} MB)")


def _known_digest(tree: Path, cache: Path) -> str:
    """The content hash of a tree, hashed again only when a file's size or time changed."""
    index_path = cache / "verified.json"
    index = read_json(index_path, {}) or {}
    stamp = hashlib.sha256(json.dumps(
        [(str(p.relative_to(tree)), p.stat().st_size, p.stat().st_mtime_ns)
         for p in _files(tree)]).encode()).hexdigest()
    known = index.get(str(tree))
    if known and known.get("stamp") == stamp:
        return str(known["digest"])
    digest = tree_digest(tree)
    index[str(tree)] = {"stamp": stamp, "digest": digest}
    write_json(index_path, index)
    return digest


# --- trees as bytes -----------------------------------------------------------------------------


def _files(tree: Path) -> list[Path]:
    return sorted(p for p in tree.rglob("*") if p.is_file())


def tree_digest(tree: Path) -> str:
    """sha256 of every file's relative path and content: equal trees, equal digests."""
    total = hashlib.sha256()
    for path in _files(tree):
        total.update(str(path.relative_to(tree)).encode() + b"\0")
        with path.open("rb") as fh:
            total.update(hashlib.file_digest(fh, "sha256").digest())
    return total.hexdigest()


def tar_bytes(tree: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(tree, arcname=".")
    return buf.getvalue()


def untar(data: bytes, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
        tar.extractall(into, filter="data")


# --- the driver as a process of its own (a local cluster's, inside its head) ---------------


def drive(argv: list[str]) -> int:
    """`python -m mpstream.runner.cluster.raytrials RUN_DIR --address A KEY...`: the planned
    trials of RUN_DIR on the cluster, one JSON line on stdout as each is handed out and as each
    is in the run folder."""
    from mpstream.proc import die_with_parent, signals_interrupt

    parser = argparse.ArgumentParser(prog="python -m mpstream.runner.cluster.raytrials")
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("keys", nargs="+")
    parser.add_argument("--address", required=True)
    parser.add_argument("--node-address", default=None)
    parser.add_argument("--margin", type=float, required=True)
    parser.add_argument("--balance-hosts", action="store_true")
    args = parser.parse_args(argv)
    # A `run` killed with -9 stops its driver too, which then stops its trials.
    die_with_parent()

    def say(event: str, key: str) -> None:
        print(json.dumps({"event": event, "key": key}), flush=True)

    plan = load_plan(args.run_dir)
    by_key = {t.key: t for t in [plan.trial(k) for k in args.keys]}
    runner = RayTrials(args.address, args.margin, args.node_address, args.balance_hosts)
    try:
        with signals_interrupt(once=True):
            runner.run(args.run_dir, list(by_key.values()), lambda k: say("started", k),
                       lambda k, _record: say("finished", k))
    except KeyboardInterrupt:
        return 130
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code or 2
    return 0


if __name__ == "__main__":
    sys.exit(drive(sys.argv[1:]))
