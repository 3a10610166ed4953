// The adaptation rules' catalog (catalog.json; docs/abr.md) as the page reads it: each player's
// own rules and its default, and ours, which every player offers after its own. The command line,
// the scenarios and the events' model read the same file (mpstream/qoe/abrcatalog.py).
import CATALOG from './catalog.json' with { type: 'json' };

/** The rules `player` supports by name (its own first, then ours): { about, params? } each. */
export function playerRules(player) {
  return { ...CATALOG.players[player].rules, ...CATALOG.ours };
}

/** The rule `player` runs when none is asked for. */
export function defaultRule(player) {
  return CATALOG.players[player].default;
}

/** What a rule of ours reads beyond the decision's usual inputs (catalog.json: "inputs"). */
export function ruleInputs(name) {
  return CATALOG.ours[name]?.inputs ?? [];
}
