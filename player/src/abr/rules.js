// Written by player/abr-rules.mjs from catalog.json ("ours") when the bundle is built
// (`make player-bundle`): do not edit. Our rules by name, each its module's decide(inputs, params).
import { decide as rule_bba0 } from './rules/bba0.js';
import { decide as rule_robustmpc } from './rules/robustmpc.js';
import { decide as rule_rate_based } from './rules/rate-based.js';
import { decide as rule_multipath } from './rules/multipath.js';

export const RULES = {
  'bba0': rule_bba0,
  'robustmpc': rule_robustmpc,
  'rate-based': rule_rate_based,
  'multipath': rule_multipath,
};
