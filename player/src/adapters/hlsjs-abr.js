// The adaptation rule of an hls.js session (docs/abr.md): hls.js's own EWMA estimator with its
// documented knobs, or one of ours as the `abrController` class hls.js is configured with.
import Hls from 'hls.js';
import { playerRules } from '../abr/catalog.js';
import { AbrEngine } from '../abr/engine.js';

// hls.js's documented ABR options, the parameters the catalog gives `ewma`: what it reads back
// from the player's config.
export const EWMA_KNOBS = playerRules('hlsjs').ewma.params;

/**
 * An abrController class whose every choice is `engine`'s. It extends hls.js's own controller
 * so the rest of hls.js (its bandwidth estimate, its events) finds what it expects; what
 * chooses a level is replaced, and so is the controller's emergency switch-down (abandoning a
 * slow fragment), which is a rule of its own.
 */
function controllerFor(engine, bufferAhead) {
  const Base = Hls.DefaultConfig.abrController;
  return class MpstreamAbrController extends Base {
    constructor(hls) {
      super(hls);
      this._abandonRulesCheck = () => {};
      this.ruleName = engine.name;
    }

    choose() {
      const hls = this.hls;
      if (!hls || !hls.levels || !hls.levels.length) return 0;
      const levels = hls.levels
        .map((level, index) => ({ bitrate: level.bitrate, index, target: level.details?.targetduration }))
        .filter((l, i) => i >= hls.minAutoLevel && i <= hls.maxAutoLevel && l.bitrate > 0)
        .sort((a, b) => a.bitrate - b.bitrate);
      if (!levels.length) return hls.minAutoLevel;
      const decision = engine.decide({
        ladderBps: levels.map((l) => l.bitrate),
        bufferS: bufferAhead(),
        segmentS: levels.find((l) => l.target > 0)?.target ?? null,
      });
      return levels[decision.index].index;
    }

    get firstAutoLevel() {
      return this.choose();
    }

    get forcedAutoLevel() {
      return -1;
    }

    get nextAutoLevel() {
      return this.choose();
    }

    // hls.js sets this after its own error handling and emergency rules; only our rule chooses.
    set nextAutoLevel(_level) {}
  };
}

/**
 * The hls.js config fragment for `abr` (a catalog name) and `report(hls)`: what the player says
 * it runs, read back from the instance after configuration.
 */
export function abrConfig({ abr, params, bufferTargetS, bufferAhead, probe }) {
  if (abr === 'ewma') {
    const knobs = Object.fromEntries(EWMA_KNOBS.filter((k) => params[k] !== undefined).map((k) => [k, params[k]]));
    return {
      engine: null,
      config: knobs,
      report: (hls) => {
        const own = hls.abrController.constructor === Hls.DefaultConfig.abrController;
        return {
          name: own ? 'ewma' : 'unknown',
          player_rules: [own ? 'AbrController' : 'another abrController'],
          params: Object.fromEntries(EWMA_KNOBS.map((k) => [k, hls.config[k]])),
        };
      },
    };
  }
  const engine = new AbrEngine({ name: abr, params: { ...params, bufferTargetS }, emit: (data) => probe.abrDecision(data) });
  return {
    engine,
    config: { abrController: controllerFor(engine, bufferAhead) },
    report: (hls) => ({
      name: hls.abrController.ruleName || 'unknown',
      player_rules: [hls.abrController.ruleName ? `MpstreamAbrController(${hls.abrController.ruleName})` : 'another abrController'],
      params: engine.params,
    }),
  };
}
