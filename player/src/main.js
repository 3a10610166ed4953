// The player page. One playback session's life, step by step:
//   load  (session/load.js)   read the page parameters, load the player library, make the probe
//                             and the collector's sender; `window.mpstream` reports from here on
//   play  (session/play.js)   follow the media element: first frame, stalls, periodic samples;
//         (session/transport.js) and what carries the requests, as the server measures it
//         (session/paths.js) and, for a rule that reads them, what each path carries
//   ready                     the collector's session record and the first transport answer
//                             are in before the play request, so that the page's own requests
//                             to the collector (same origin, same connections) never compete
//                             with the manifest and the first segment for a connection
//   start (session/start.js)  the play request: t=0 of startup delay and of the duration
//   end   (session/end.js)    duration reached, stream ended, fatal error or page closed: stop
//                             the player, send the end record, drain what is unsent
// The watchers of `play` are in place before `start`, so no early event is missed.
import { showProblem } from './problem.js';
import { loadSession } from './session/load.js';
import { watchPlayback } from './session/play.js';
import { collectorReady, startPlayback } from './session/start.js';
import { watchPaths } from './session/paths.js';
import { watchTransport } from './session/transport.js';
import { watchPageClose } from './session/end.js';

async function main() {
  const session = await loadSession(location.search);
  if (!session) return; // bad page parameters: shown on the page and in window.mpstream
  watchPlayback(session);
  watchPageClose(session);
  await collectorReady(session, Promise.all([watchTransport(session), watchPaths(session)]));
  if (session.finishing) return; // the page was closed meanwhile
  startPlayback(session);
}

main().catch((err) => {
  console.error(err);
  showProblem(`player failed: ${err.message || err}`);
  if (window.mpstream) {
    window.mpstream.state = 'done';
    window.mpstream.failure = `player failed: ${err.message || err}`;
  }
});
