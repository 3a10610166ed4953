// Drives Debian's Firefox ESR for `mpstream play --browser firefox` (player/browsers.py).
//
// Playwright needs its own patched Firefox; Debian's build speaks WebDriver BiDi, which
// puppeteer-core drives without downloading a browser. BiDi is a websocket on localhost, so this
// script runs inside the client's network namespace, beside the browser it starts.
//
// Usage: node drive.mjs '<json options>'  (executablePath, viewport, prefs, launchTimeoutMs)
// stdin:  one JSON command a line: {"id": 1, "op": "goto", ...}
// stdout: one JSON message a line: replies {"id": 1, "ok": true, "value": ...} or
//         {"id": 1, "ok": false, "error": "...", "timeout": bool}; events {"event": "ready", ...},
//         {"event": "console", "text": "..."}, {"event": "disconnected"}.
// The script exits when stdin closes (after closing the browser) or when the browser goes away.
import readline from 'node:readline';
import puppeteer from 'puppeteer-core';

const options = JSON.parse(process.argv[2] || '{}');
let browser = null;
let page = null;
let closing = false;

function send(message) {
  process.stdout.write(`${JSON.stringify(message)}\n`);
}

function describe(err) {
  return String((err && err.message) || err).split('\n')[0].slice(0, 1000);
}

async function closeBrowser() {
  if (closing || !browser) return;
  closing = true;
  try {
    await browser.close();
  } catch (err) {
    process.stderr.write(`closing Firefox: ${describe(err)}\n`);
    const child = browser.process();
    if (child && child.exitCode === null) child.kill('SIGKILL');
  }
}

const OPS = {
  async open({ viewport }) {
    page = await browser.newPage();
    if (viewport) await page.setViewport(viewport);
    page.on('console', (msg) => send({ event: 'console', text: `${msg.type()}: ${msg.text()}`.slice(0, 500) }));
    page.on('pageerror', (err) => send({ event: 'console', text: `pageerror: ${describe(err)}` }));
    return null;
  },
  async goto({ url, timeoutMs }) {
    await page.goto(url, { waitUntil: 'load', timeout: timeoutMs });
    return null;
  },
  async wait({ expression, timeoutMs, pollingMs }) {
    await page.waitForFunction(expression, { timeout: timeoutMs, polling: pollingMs || 'raf' });
    return null;
  },
  async evaluate({ expression }) {
    return page.evaluate(expression);
  },
  async sleep({ ms }) {
    await new Promise((resolve) => setTimeout(resolve, ms));
    return null;
  },
  async screenshot({ path }) {
    await page.screenshot({ path });
    return null;
  },
};

async function handle(line) {
  let command;
  try {
    command = JSON.parse(line);
  } catch (err) {
    send({ id: null, ok: false, error: `not JSON: ${describe(err)}`, timeout: false });
    return;
  }
  const op = OPS[command.op];
  if (!op) {
    send({ id: command.id, ok: false, error: `unknown op ${command.op}`, timeout: false });
    return;
  }
  try {
    const value = await op(command);
    send({ id: command.id, ok: true, value: value === undefined ? null : value });
  } catch (err) {
    send({ id: command.id, ok: false, error: describe(err), timeout: err && err.name === 'TimeoutError' });
  }
}

async function main() {
  try {
    browser = await puppeteer.launch({
      browser: 'firefox',
      executablePath: options.executablePath,
      headless: true,
      args: options.args || [],
      extraPrefsFirefox: options.prefs || {},
      timeout: options.launchTimeoutMs || 60000,
      protocolTimeout: options.protocolTimeoutMs || 180000,
      // The caller (Python) owns signals: it asks for a close, or kills the browser itself.
      handleSIGINT: false,
      handleSIGTERM: false,
      handleSIGHUP: false,
    });
  } catch (err) {
    send({ event: 'failed', error: describe(err) });
    process.exit(2);
  }
  browser.on('disconnected', () => {
    if (closing) return;
    send({ event: 'disconnected' });
    const child = browser.process();
    if (child && child.exitCode === null) child.kill('SIGKILL');
    // Let puppeteer remove its temporary profile before leaving.
    setTimeout(() => process.exit(3), 500);
  });
  const child = browser.process();
  send({ event: 'ready', pid: child ? child.pid : null, version: await browser.version() });

  // One command at a time, in order: the caller waits for each reply.
  const lines = readline.createInterface({ input: process.stdin });
  let queue = Promise.resolve();
  lines.on('line', (line) => {
    if (line.trim()) queue = queue.then(() => handle(line));
  });
  lines.on('close', () => {
    queue.then(closeBrowser).then(() => process.exit(0));
  });
}

main();
