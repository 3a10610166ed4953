// Recomputes every decision a session's rule of ours made, from the inputs its abr_decision
// events recorded, with the same functions the page ran (docs/abr.md, "Replaying a session").
//
//   node player/replay-abr.mjs EVENTS.json      (a trial's events.json, or the collector's
//                                                 GET /sessions/ID reply; - reads stdin)
//
// Prints {"decisions": N, "mismatches": [...]} and exits 1 when a recorded choice differs from
// the recomputed one, 2 on bad input.
import { readFileSync } from 'node:fs';
import { replayDecision } from './src/abr/engine.js';

function readEvents(path) {
  const text = readFileSync(path === '-' ? 0 : path, 'utf8');
  const parsed = JSON.parse(text);
  const events = Array.isArray(parsed) ? parsed : parsed.events;
  if (!Array.isArray(events)) throw new TypeError('expected a list of events, or an object with "events"');
  return events;
}

function main(argv) {
  if (argv.length !== 1) {
    process.stderr.write('usage: node player/replay-abr.mjs EVENTS.json (or - for stdin)\n');
    return 2;
  }
  let events;
  try {
    events = readEvents(argv[0]);
  } catch (err) {
    process.stderr.write(`${argv[0]}: ${err.message}\n`);
    return 2;
  }
  const mismatches = [];
  let decisions = 0;
  for (const event of events) {
    if (event.type !== 'abr_decision') continue;
    decisions += 1;
    const again = replayDecision(event.data);
    if (again.index !== event.data.index) {
      mismatches.push({ seq: event.seq, recorded: event.data.index, recomputed: again.index });
    }
  }
  process.stdout.write(`${JSON.stringify({ decisions, mismatches })}\n`);
  return mismatches.length ? 1 : 0;
}

process.exitCode = main(process.argv.slice(2));
