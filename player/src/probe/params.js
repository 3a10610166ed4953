// Query parameters of the player page (see docs/qoe-events.md and the README's Player section).
// A bad parameter is reported by name, the way the rest of mpstream reports bad input.
import { defaultRule, playerRules } from '../abr/catalog.js';

export const PLAYERS = ['hlsjs', 'dashjs'];
// A transport's registered name (mpstream.transports): mptcp, tcp, … or unknown. It is what the
// session asked for; what carried it is measured (session/transport.js).
export const TRANSPORT_NAME = /^[a-z0-9][a-z0-9_-]{0,15}$/;
// Who can tell what carried the requests: the server (it looks each connection up in its kernel),
// or the carrier, a program beside the browser (the QUIC hop, mphttp) whose own connections are
// all the server sees.
export const SEEN_BY = ['server', 'carrier'];
// Which video codec family the player may use: auto lets the player pick among what the browser
// decodes; avc / hevc keep only that family's representations.
export const CODECS = ['auto', 'avc', 'hevc'];
export const SESSION_ID_RULE = /^[A-Za-z0-9_-]{1,64}$/;

const DEFAULT_SOURCES = { hlsjs: '/media/hls/master.m3u8', dashjs: '/media/dash/manifest.mpd' };
const DEFAULT_STARTUP_TIMEOUT_S = 30;
// After the end record: how long unsent events may take to reach the collector (s).
const DEFAULT_REPORT_TIMEOUT_S = 15;

function randomSessionId() {
  const bytes = new Uint8Array(8);
  globalThis.crypto.getRandomValues(bytes);
  return 'web-' + Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

function playerForSource(src) {
  const path = src.split('?')[0].toLowerCase();
  if (path.endsWith('.mpd')) return 'dashjs';
  if (path.endsWith('.m3u8')) return 'hlsjs';
  return null;
}

/** The adaptation rules `player` supports, by name (abr/catalog.json; docs/abr.md). */
export function abrNames(player) {
  return Object.keys(playerRules(player));
}

// abr=NAME (default: the player's own default rule) and abr_param=KEY=VALUE, repeated, for the
// rule's numeric parameters the catalog lists.
function abrOf(params, player, errors) {
  const rules = playerRules(player);
  let abr = params.get('abr') || defaultRule(player);
  if (!rules[abr]) {
    errors.push(`abr=${abr}: ${player} supports ${abrNames(player).join(', ')}`);
    abr = defaultRule(player);
  }
  const abrParams = {};
  for (const raw of params.getAll('abr_param')) {
    const [key, value, ...rest] = raw.split('=');
    const allowed = (rules[abr] || {}).params || [];
    if (rest.length || value === undefined || !allowed.includes(key)) {
      errors.push(`abr_param=${raw}: give KEY=VALUE with KEY one of ${abr}'s parameters (${allowed.join(', ') || 'none'})`);
    } else if (!(Number.isFinite(Number(value)) && Number(value) >= 0 && value.trim() !== '')) {
      errors.push(`abr_param=${raw}: the value must be a number ≥ 0`);
    } else {
      abrParams[key] = Number(value);
    }
  }
  return { abr, abrParams };
}

function positiveNumber(params, name, errors) {
  const raw = params.get(name);
  if (raw === null || raw === '') return null;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) {
    errors.push(`${name}=${raw}: must be a number of seconds greater than 0`);
    return null;
  }
  return value;
}

// A playback rate within [low, high] (a live player's catch-up bounds); null when absent.
function rateWithin(params, name, low, high, errors) {
  const raw = params.get(name);
  if (raw === null || raw === '') return null;
  const value = Number(raw);
  if (!Number.isFinite(value) || value < low || value > high || (low === 0 && value === 0)) {
    errors.push(`${name}=${raw}: must be a playback rate from ${low} to ${high}`);
    return null;
  }
  return value;
}

/**
 * Reads the page's configuration from a query string. Returns {config, errors}; config is
 * complete (defaults filled in) even when errors is not empty, so the page can still show it.
 */
export function parseParams(search) {
  const params = new URLSearchParams(search);
  const errors = [];

  let src = params.get('src') || null;
  let player = params.get('player') || null;
  if (player !== null && !PLAYERS.includes(player)) {
    errors.push(`player=${player}: must be one of ${PLAYERS.join(', ')}`);
    player = null;
  }
  if (player === null && src !== null) {
    player = playerForSource(src);
    if (player === null) {
      errors.push(`src=${src}: give player=hlsjs or player=dashjs (the URL ends neither in .m3u8 nor .mpd)`);
    }
  }
  player = player || 'dashjs';
  src = src || DEFAULT_SOURCES[player];

  let session = params.get('session');
  if (session === null || session === '') {
    session = randomSessionId();
  } else if (!SESSION_ID_RULE.test(session)) {
    errors.push(`session=${session}: must match ${SESSION_ID_RULE.source}`);
  }

  const scenario = params.get('scenario') || null;
  if (scenario !== null && scenario.length > 200) {
    errors.push('scenario: at most 200 characters');
  }

  let trial = null;
  const rawTrial = params.get('trial');
  if (rawTrial !== null && rawTrial !== '') {
    if (!/^\d+$/.test(rawTrial)) {
      errors.push(`trial=${rawTrial}: must be an integer ≥ 0`);
    } else {
      trial = Number(rawTrial);
    }
  }

  let transport = params.get('transport') || 'unknown';
  if (!TRANSPORT_NAME.test(transport)) {
    errors.push(`transport=${transport}: must be a transport's name (lowercase letters, digits, - or _; e.g. mptcp, tcp)`);
    transport = 'unknown';
  }

  let seenBy = params.get('seen_by') || 'server';
  if (!SEEN_BY.includes(seenBy)) {
    errors.push(`seen_by=${seenBy}: must be one of ${SEEN_BY.join(', ')}`);
    seenBy = 'server';
  }

  let codec = params.get('codec') || 'auto';
  if (!CODECS.includes(codec)) {
    errors.push(`codec=${codec}: must be one of ${CODECS.join(', ')}`);
    codec = 'auto';
  }

  const collector = (params.get('collector') || '/api/v1').replace(/\/+$/, '');
  const duration = positiveNumber(params, 'duration', errors);
  const startupTimeout = positiveNumber(params, 'startup_timeout', errors) ?? DEFAULT_STARTUP_TIMEOUT_S;
  const reportTimeout = positiveNumber(params, 'report_timeout', errors) ?? DEFAULT_REPORT_TIMEOUT_S;
  // How far ahead the player may buffer (s); the library's own default when absent.
  const buffer = positiveNumber(params, 'buffer', errors);
  // Live streams: how far behind the live edge to play (s); the library's default when absent.
  const targetLatency = positiveNumber(params, 'target_latency', errors);
  // Live catch-up (player/livesync.py): the fastest playback rate while behind the target, the
  // slowest while ahead of it (dash.js), how far past the target (s) to jump to the edge
  // instead; null: the adapters' defaults.
  const catchupMaxRate = rateWithin(params, 'catchup_max_rate', 1, 4, errors);
  const catchupMinRate = rateWithin(params, 'catchup_min_rate', 0, 1, errors);
  const maxDrift = positiveNumber(params, 'max_drift', errors);
  const { abr, abrParams } = abrOf(params, player, errors);
  // The paths the session's path policy spares (metered ones under backup or deadline), by the
  // client's address on each: a rule that reads the paths does not let them lift the rung
  // (abr/rules/multipath.js).
  const spared = [];
  for (const raw of (params.get('spared') || '').split(',').filter((s) => s !== '')) {
    if (!/^[0-9A-Fa-f.:]{2,45}$/.test(raw)) {
      errors.push(`spared=${params.get('spared')}: must be the client's addresses of the paths, separated by commas (e.g. 10.1.1.2)`);
      break;
    }
    spared.push(raw);
  }

  // Where a carrier beside the browser answers with its own per-path figures (mphttp's proxy),
  // for the multipath rule; absent: the collector's, when the server sees the paths.
  let pathsUrl = params.get('paths_url') || null;
  if (pathsUrl !== null && !/^(https?:\/\/[^\s/]+)?\/\S*$/.test(pathsUrl)) {
    errors.push(`paths_url=${pathsUrl}: must be an http(s) URL or a path on the page's server (e.g. http://127.0.0.1:8081/.well-known/mpstream/paths)`);
    pathsUrl = null;
  }

  return {
    config: { src, player, session, scenario, trial, transport, seenBy, codec, collector, duration, startupTimeout, reportTimeout, buffer, targetLatency, catchupMaxRate, catchupMinRate, maxDrift, abr, abrParams, spared, pathsUrl },
    errors,
  };
}
