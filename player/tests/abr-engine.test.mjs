// The stateful side of our rules in a session (abr/engine.js) and the dash.js strategy names;
// the players themselves run them in the e2e tests (tests/e2e/test_player_abr.py).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ABR_DIR, currentRulesModule, rulesModule } from '../abr-rules.mjs';
import catalog from '../src/abr/catalog.json' with { type: 'json' };
import { playerRules } from '../src/abr/catalog.js';
import { AbrEngine, OUR_RULES, PAST_KEPT, replayDecision } from '../src/abr/engine.js';
import { bba0 } from '../src/abr/rules/bba0.js';
import { rateBased } from '../src/abr/rules/rate-based.js';
import { robustMpc } from '../src/abr/rules/robustmpc.js';

const M = 1e6;
const LADDER = [0.5 * M, 1 * M, 2 * M, 4 * M];
// A segment record as the probe makes it: `mbps` over one second.
const segment = (mbps, t0, kind = 'video') => ({ kind, bytes: (mbps * M) / 8, t_request: t0, t_done: t0 + 1000, duration_s: 2 });

function session(name, params = {}) {
  const events = [];
  const engine = new AbrEngine({ name, params, emit: (data) => events.push(data) });
  return { engine, events };
}

test('the catalog names our rules once, every player offers them after its own, and each is in the engine', () => {
  assert.deepEqual(OUR_RULES, Object.keys(catalog.ours));
  for (const [player, entry] of Object.entries(catalog.players)) {
    assert.deepEqual(Object.keys(playerRules(player)), [...Object.keys(entry.rules), ...OUR_RULES], player);
    assert.ok(entry.rules[entry.default], `${player}'s default is one of its own rules`);
  }
});

test('rules.js is what the catalog and the rule modules make it (make player-bundle writes it)', () => {
  assert.equal(readFileSync(join(ABR_DIR, 'rules.js'), 'utf8'), currentRulesModule(),
    'player/src/abr/rules.js is stale: `make player-bundle` writes it from catalog.json');
});

test('a rule of the catalog without its module, or a module the catalog does not name, is refused', () => {
  assert.throws(() => rulesModule(['bba0', 'newrule'], ['bba0.js']),
    /catalog\.json names newrule among our rules, but player\/src\/abr\/rules\/ has no newrule\.js/);
  assert.throws(() => rulesModule(['bba0'], ['bba0.js', 'stray.js']),
    /player\/src\/abr\/rules\/stray\.js: a rule module that catalog\.json does not name/);
  assert.match(rulesModule(['bba0', 'rate-based'], ['rate-based.js', 'bba0.js']),
    /import \{ decide as rule_rate_based \} from '\.\/rules\/rate-based\.js';[^]*'rate-based': rule_rate_based,/);
  // the same from a folder: a catalog naming a rule whose module is missing
  const dir = mkdtempSync(join(tmpdir(), 'abr-'));
  try {
    mkdirSync(join(dir, 'rules'));
    writeFileSync(join(dir, 'catalog.json'), JSON.stringify({ players: {}, ours: { scratch: { about: 'x' } } }));
    assert.throws(() => currentRulesModule(dir), /has no scratch\.js/);
    writeFileSync(join(dir, 'rules', 'scratch.js'), 'export function decide() {}\n');
    assert.match(currentRulesModule(dir), /'scratch': rule_scratch/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('one decision per downloaded segment: asked again before the next download, the same answer and no event', () => {
  const { engine, events } = session('rate-based');
  const first = engine.decide({ ladderBps: LADDER, bufferS: 0 });
  assert.equal(first.index, 0, 'no download yet: the lowest rung');
  assert.equal(engine.decide({ ladderBps: LADDER, bufferS: 3 }), first);
  assert.equal(events.length, 1);
  engine.downloaded(segment(2.5, 0));
  const second = engine.decide({ ladderBps: LADDER, bufferS: 2 });
  assert.equal(second.index, 2, '2.5 Mbit/s affords the 2 Mbit/s rung');
  assert.equal(events.length, 2);
  engine.downloaded({ ...segment(8, 1000), kind: 'audio' });
  engine.downloaded({ ...segment(8, 1000), kind: 'init' });
  engine.decide({ ladderBps: LADDER, bufferS: 2 });
  assert.equal(events.length, 2, 'audio and init segments are not downloads of the ladder');
});

test('every recorded decision replays to the same choice from its own inputs', () => {
  for (const name of OUR_RULES) {
    const { engine, events } = session(name, name === 'bba0' ? { bufferTargetS: 20 } : {});
    const rates = [1.2, 3.1, 0.7, 5.0, 2.2, 2.4, 0.9, 6.5, 4.4, 1.1, 3.3, 2.0];
    rates.forEach((mbps, i) => {
      engine.decide({ ladderBps: LADDER, bufferS: (i * 1.7) % 19, segmentS: 2 });
      engine.downloaded(segment(mbps, i * 1000));
    });
    assert.equal(events.length, rates.length, name);
    for (const data of JSON.parse(JSON.stringify(events))) {
      const again = replayDecision(data);
      assert.equal(again.index, data.index, `${name}: ${JSON.stringify(data.inputs)}`);
      assert.equal(again.bitrate, data.bitrate);
    }
    assert.ok(new Set(events.map((e) => e.index)).size > 1, `${name} moved along the ladder`);
    assert.ok(events.at(-1).inputs.past.length <= PAST_KEPT);
  }
});

test('the recorded inputs are what the pure rules are given', () => {
  const { engine, events } = session('bba0', { bufferTargetS: 30 });
  engine.decide({ ladderBps: LADDER, bufferS: 20 });
  assert.deepEqual(events[0].inputs, { ladder_bps: LADDER, buffer_s: 20, segment_s: 4, previous: null, past: [] });
  const direct = bba0({ ladder: LADDER.map((bitrate) => ({ bitrate })), bufferS: 20, previous: null, bufferTargetS: 30 });
  assert.equal(events[0].index, direct.index);
  assert.equal(events[0].estimate_bps, direct.rateMapBps);

  const rb = session('rate-based');
  [1, 2, 4].forEach((mbps, i) => rb.engine.downloaded(segment(mbps, i * 1000)));
  rb.engine.decide({ ladderBps: LADDER, bufferS: 5 });
  const expected = rateBased({ ladder: LADDER.map((bitrate) => ({ bitrate })), past: [segment(1, 0), segment(2, 1000), segment(4, 2000)] });
  assert.equal(rb.events[0].index, expected.index);
  assert.equal(rb.events[0].estimate_bps, expected.estimateBps);
});

test("RobustMPC's prediction is stored on the download that follows it, so its error discount works", () => {
  const { engine, events } = session('robustmpc');
  engine.downloaded(segment(4, 0));
  engine.decide({ ladderBps: LADDER, bufferS: 6, segmentS: 2 });
  assert.equal(events[0].inputs.past[0].predicted_bps, null, 'a download before any decision has no prediction');
  engine.downloaded(segment(1, 1000)); // predicted 4 Mbit/s, got 1: an error of 300 %
  engine.decide({ ladderBps: LADDER, bufferS: 6, segmentS: 2 });
  assert.equal(events[1].inputs.past[1].predicted_bps, 4 * M);
  const direct = robustMpc({
    ladder: LADDER.map((bitrate) => ({ bitrate })), bufferS: 6, segmentS: 2, bufferMaxS: 30,
    past: [segment(4, 0), { ...segment(1, 1000), predictedBps: 4 * M }], previous: events[0].index,
  });
  assert.equal(direct.maxError, 3);
  assert.equal(events[1].index, direct.index);
  assert.equal(events[1].estimate_bps, direct.estimateBps);
});

test('the previous rung is forgotten when the ladder shrinks under it', () => {
  const { engine, events } = session('bba0', { bufferTargetS: 30 });
  engine.decide({ ladderBps: LADDER, bufferS: 29 });
  assert.equal(events[0].index, 3);
  engine.downloaded(segment(3, 0));
  engine.decide({ ladderBps: LADDER.slice(0, 2), bufferS: 29 });
  assert.equal(events[1].inputs.previous, null);
  assert.equal(events[1].index, 1);
});

test('an unknown rule is refused by name', () => {
  assert.throws(() => new AbrEngine({ name: 'bola', emit() {} }), { message: `abr: not one of ours (${Object.keys(catalog.ours).join(', ')}), got bola` });
  assert.throws(() => replayDecision({ rule: 'x', inputs: {}, params: {} }), /rule: not one of ours/);
});
