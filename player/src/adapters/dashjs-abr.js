// The adaptation rule of a dash.js session (docs/abr.md): one of dash.js's own, chosen through
// its public settings (streaming.abr.rules.*.active), or one of ours as a custom quality-switch
// rule (addABRCustomRule) with every built-in rule off, so that ours alone decides.
import dashjs from 'dashjs';
import { AbrEngine } from '../abr/engine.js';

// The main rules dash.js runs for each of its named strategies; its safety rules
// (insufficient buffer, switch history, dropped frames, abandonment) keep their defaults.
const OWN = {
  dynamic: { throughputRule: true, bolaRule: true, l2ARule: false, loLPRule: false },
  throughput: { throughputRule: true, bolaRule: false, l2ARule: false, loLPRule: false },
  bola: { throughputRule: false, bolaRule: true, l2ARule: false, loLPRule: false },
  l2a: { throughputRule: false, bolaRule: false, l2ARule: true, loLPRule: false },
  lolp: { throughputRule: false, bolaRule: false, l2ARule: false, loLPRule: true },
};
const SAFETY = ['insufficientBufferRule', 'switchHistoryRule', 'droppedFramesRule', 'abandonRequestsRule'];
const CUSTOM_RULE = 'MpstreamAbrRule';

/** The name of dash.js's strategy its settings select (the inverse of OWN), or null. */
export function ownStrategyOf(rules) {
  for (const [name, active] of Object.entries(OWN)) {
    if (Object.entries(active).every(([rule, on]) => Boolean(rules[rule]?.active) === on)) return name;
  }
  return null;
}

function ourRule(engine, bufferAhead) {
  function MpstreamAbrRule() {
    const context = this.context;
    const SwitchRequest = dashjs.FactoryMaker.getClassFactoryByName('SwitchRequest');
    function getSwitchRequest(rulesContext) {
      const request = SwitchRequest(context).create();
      if (rulesContext.getMediaType() !== 'video') return request; // audio: dash.js keeps its one rendition
      const reps = rulesContext.getAbrController()
        .getPossibleVoRepresentationsFilteredBySettings(rulesContext.getMediaInfo(), true)
        .slice()
        .sort((a, b) => a.bandwidth - b.bandwidth);
      if (!reps.length) return request;
      const current = rulesContext.getRepresentation();
      const decision = engine.decide({
        ladderBps: reps.map((rep) => rep.bandwidth),
        bufferS: bufferAhead(),
        segmentS: current && current.segmentDuration,
      });
      request.representation = reps[decision.index];
      request.priority = SwitchRequest.PRIORITY.STRONG;
      request.reason = { rule: engine.name, index: decision.index };
      request.rule = CUSTOM_RULE;
      return request;
    }
    return { getSwitchRequest, reset() {} };
  }
  MpstreamAbrRule.__dashjs_factory_name = CUSTOM_RULE;
  return dashjs.FactoryMaker.getClassFactory(MpstreamAbrRule);
}

/**
 * Configures `player` for `abr` (a catalog name) and returns `report()`: what the player says
 * it runs, read back from its settings and custom rules after configuration.
 */
export function configureAbr(player, { abr, params, bufferTargetS, bufferAhead, probe }) {
  const settingsRules = {};
  let engine = null;
  if (OWN[abr]) {
    for (const [rule, on] of Object.entries(OWN[abr])) settingsRules[rule] = { active: on };
  } else {
    engine = new AbrEngine({ name: abr, params: { ...params, bufferTargetS }, emit: (data) => probe.abrDecision(data) });
    for (const rule of [...Object.keys(OWN.dynamic), ...SAFETY]) settingsRules[rule] = { active: false };
    player.addABRCustomRule('qualitySwitchRules', CUSTOM_RULE, ourRule(engine, bufferAhead));
  }
  // dash.js's fast switching re-downloads, after an up-switch, segments already buffered at the
  // lower rung. Our rules model one download per segment, each decision for the next one: with
  // them it is off. dash.js's own rules keep it (on for on-demand streams, its default).
  const buffer = engine ? { buffer: { fastSwitchEnabled: false } } : {};
  player.updateSettings({ streaming: { abr: { rules: settingsRules }, ...buffer } });
  return {
    engine,
    report() {
      const rules = player.getSettings().streaming.abr.rules;
      const active = Object.keys(rules).filter((rule) => rules[rule]?.active);
      const custom = (player.getABRCustomRules() || []).map((r) => r.rulename);
      const name = custom.includes(CUSTOM_RULE) && active.length === 0 ? engine?.name : ownStrategyOf(rules);
      const fastSwitch = player.getSettings().streaming.buffer.fastSwitchEnabled === false ? [] : ['fastSwitch'];
      return { name: name || 'unknown', player_rules: [...active, ...custom, ...fastSwitch], params: engine ? engine.params : {} };
    },
  };
}
