// The adaptation rules of docs/abr.md: pure functions of (ladder, buffer, past downloads) that
// return the chosen rung and the values that chose it.
export { bba0, bba0RateMap } from './bba0.js';
export { rateBased } from './rate-based.js';
export { planQoe, robustEstimate, robustMpc } from './robust-mpc.js';
export { harmonicMean, throughputBps } from './common.js';
