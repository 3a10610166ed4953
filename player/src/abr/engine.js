// One session's adaptation rule of our own, shared by both players' extension points (a custom
// rule in dash.js, an abrController in hls.js). The rules are pure functions; this keeps what
// they need between decisions (the past downloads, the last choice, RobustMPC's last
// prediction), asks the rule once per downloaded segment, and records each decision with the
// exact inputs it was given, so a session replays offline (`replayDecision`, docs/abr.md).
// Each rule is asked through its module's decide(inputs, params) (rules/NAME.js), by the name
// the catalog gives it (rules.js, written from catalog.json when the bundle is built).
import { ruleInputs } from './catalog.js';
import { DEFAULT_BUFFER_TARGET_S } from './common.js';
import { PathWatch } from './paths.js';
import { RULES } from './rules.js';

export const OUR_RULES = Object.keys(RULES);
// Past downloads a decision is given and records: the rules look at the last 5 at most.
export const PAST_KEPT = 10;
// Before any segment has told its duration.
const FALLBACK_SEGMENT_S = 4;

function finiteOrNull(value) {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** The decision a recorded `abr_decision` event's inputs give (the same call the session made). */
export function replayDecision(data) {
  const rule = RULES[data.rule];
  if (!rule) throw new RangeError(`rule: not one of ours (${OUR_RULES.join(', ')}), got ${data.rule}`);
  return rule(data.inputs, data.params);
}

export class AbrEngine {
  /**
   * @param {object} options
   * @param {string} options.name one of OUR_RULES
   * @param {object} [options.params] the rule's parameters (catalog.json) and bufferTargetS
   * @param {(data: object) => void} options.emit receives each decision (an abr_decision event)
   */
  constructor({ name, params = {}, emit }) {
    if (!RULES[name]) throw new RangeError(`abr: not one of ours (${OUR_RULES.join(', ')}), got ${name}`);
    this.name = name;
    this.params = { ...params, bufferTargetS: params.bufferTargetS ?? DEFAULT_BUFFER_TARGET_S };
    this.emit = emit;
    this.past = [];
    this.previous = null;
    this.prediction = null; // RobustMPC's prediction for the download that follows its decision
    this.segmentS = null;
    this.downloads = 0;
    this.last = null; // { key, decision }: one decision per downloaded segment
    this.decisions = 0;
    // A rule that reads the paths (catalog.json: "inputs": ["paths"]) is given them as the
    // page last heard them from the collector (session/paths.js).
    this.watch = ruleInputs(name).includes('paths') ? new PathWatch() : null;
  }

  /** Whether the rule reads the transport's per-path figures (the page then asks for them). */
  get wantsPaths() {
    return this.watch !== null;
  }

  /** The collector's answer of the paths (GET .../paths) at `tMs`; `spared` (paths.js). */
  pathsSeen(answer, tMs = performance.now(), spared = []) {
    if (this.watch) this.watch.seen(answer, tMs, spared);
  }

  /** A media segment arrived (the probe's segment record). */
  downloaded(segment) {
    if (!segment || !(segment.kind === 'video' || segment.kind === 'muxed')) return;
    if (segment.duration_s > 0) this.segmentS = segment.duration_s;
    this.past.push({
      bytes: segment.bytes,
      t_request: segment.t_request,
      t_done: segment.t_done,
      predicted_bps: this.prediction,
    });
    if (this.past.length > PAST_KEPT) this.past.shift();
    this.downloads += 1;
    this.prediction = null;
  }

  /**
   * The rung to fetch next, from `ladderBps` (bit/s, lowest first) and `bufferS` (seconds
   * buffered ahead). Asked again before the next download, it answers the same.
   */
  decide({ ladderBps, bufferS, segmentS = null, nowMs = performance.now() }) {
    const key = `${this.downloads}|${ladderBps.join(',')}`;
    if (this.last && this.last.key === key) return this.last.decision;
    const inputs = {
      ladder_bps: ladderBps.slice(),
      buffer_s: Math.max(0, bufferS),
      segment_s: finiteOrNull(segmentS) ?? this.segmentS ?? FALLBACK_SEGMENT_S,
      previous: this.previous !== null && this.previous < ladderBps.length ? this.previous : null,
      past: this.past.map((d) => ({ ...d })),
      ...(this.watch ? { paths: this.watch.snapshot(nowMs) } : {}),
    };
    const data = { rule: this.name, inputs, params: { ...this.params } };
    const decision = replayDecision(data);
    this.previous = decision.index;
    this.prediction = finiteOrNull(decision.predictionBps);
    this.decisions += 1;
    this.last = { key, decision };
    this.emit({
      ...data,
      index: decision.index,
      bitrate: decision.bitrate,
      estimate_bps: finiteOrNull(decision.estimateBps ?? decision.rateMapBps),
    });
    return decision;
  }
}
