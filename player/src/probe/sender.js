// Delivers a session's records to the collector: creates the session, numbers events (`seq`),
// sends them in batches and retries until each batch is acknowledged. The queue is mirrored
// into storage (localStorage in the page), so a collector that is down for a while, or a
// reload of the page, loses nothing; re-sent events are deduplicated by the collector on seq.

export const MAX_BATCH_EVENTS = 500;
// The collector takes at most 1 MiB a batch; stay well below with room for the envelope.
export const MAX_BATCH_BYTES = 900 * 1024;
// sendBeacon payloads are limited (64 KiB in Chromium, across pending beacons).
export const MAX_BEACON_BYTES = 60 * 1024;

const RETRYABLE_STATUS = new Set([408, 425, 429, 500, 502, 503, 504]);

export class CollectorRejected extends Error {}

function jsonSize(value) {
  return new TextEncoder().encode(JSON.stringify(value)).length;
}

/** Splits events into consecutive batches that respect an event count and a byte size. */
export function splitBatches(events, maxEvents, maxBytes) {
  const batches = [];
  let current = [];
  let size = 0;
  for (const event of events) {
    const eventSize = jsonSize(event) + 1;
    if (current.length && (current.length >= maxEvents || size + eventSize > maxBytes)) {
      batches.push(current);
      current = [];
      size = 0;
    }
    current.push(event);
    size += eventSize;
  }
  if (current.length) batches.push(current);
  return batches;
}

// Records a controller waits for: the path policy fast-start lets the slower paths carry data
// once the first frame is on screen (mpstream/transports/pathpolicy.py), and a one-second batch would
// keep them back for up to that long.
const PROMPT_TYPES = new Set(['startup']);

export class EventSender {
  /**
   * @param {object} o
   * @param {string} o.collector base URL of the API, e.g. "/api/v1"
   * @param {object} o.session the session record (docs/qoe-events.md)
   * @param {Function} o.fetch fetch(url, init) → Promise<Response>
   * @param {object|null} o.storage a localStorage-like object, or null
   * @param {Function|null} o.beacon navigator.sendBeacon-like (url, Blob) → boolean, or null
   */
  constructor({
    collector,
    session,
    fetch,
    storage = null,
    beacon = null,
    flushIntervalMs = 1000,
    retryBaseMs = 250,
    retryMaxMs = 4000,
    requestTimeoutMs = 5000,
    setTimeout: setTimer = globalThis.setTimeout.bind(globalThis),
    clearTimeout: clearTimer = globalThis.clearTimeout.bind(globalThis),
  }) {
    this.collector = collector;
    this.session = session;
    this.fetch = fetch;
    this.storage = storage;
    this.beacon = beacon;
    this.flushIntervalMs = flushIntervalMs;
    this.retryBaseMs = retryBaseMs;
    this.retryMaxMs = retryMaxMs;
    this.requestTimeoutMs = requestTimeoutMs;
    this.setTimer = setTimer;
    this.clearTimer = clearTimer;

    this.key = `mpstream.events.${session.id}`;
    const saved = this.load();
    this.queue = saved.queue;
    this.nextSeq = saved.nextSeq;
    this.sessionCreated = false;
    this.sending = null;
    this.timer = null;
    this.failures = 0;
    this.lastError = null;
    this.rejected = [];
    this.acknowledged = 0;
    this.stopped = false;
  }

  load() {
    if (!this.storage) return { queue: [], nextSeq: 0 };
    try {
      const saved = JSON.parse(this.storage.getItem(this.key) || 'null');
      if (saved && Array.isArray(saved.queue) && Number.isInteger(saved.nextSeq)) return saved;
    } catch {
      // A corrupt entry is ignored: it cannot be delivered anyway.
    }
    return { queue: [], nextSeq: 0 };
  }

  persist() {
    if (!this.storage) return;
    try {
      this.storage.setItem(this.key, JSON.stringify({ queue: this.queue, nextSeq: this.nextSeq }));
    } catch {
      // Storage full or unavailable: the in-memory queue still holds everything.
    }
  }

  get pending() {
    return this.queue.length;
  }

  /**
   * Numbers a record and queues it; delivery happens on the next flush, at once for a record
   * something on the server side acts on (PROMPT_TYPES).
   */
  push({ t_ms, type, data }) {
    const event = { seq: this.nextSeq, t_ms, type, data };
    this.nextSeq += 1;
    this.queue.push(event);
    this.persist();
    if (PROMPT_TYPES.has(type) && this.timer !== null) {
      this.clearTimer(this.timer);
      this.timer = null;
    }
    this.schedule(PROMPT_TYPES.has(type) ? 0 : this.flushIntervalMs);
    return event;
  }

  schedule(delayMs) {
    if (this.stopped || this.timer !== null) return;
    this.timer = this.setTimer(() => {
      this.timer = null;
      this.flush();
    }, delayMs);
  }

  async request(path, body) {
    const controller = typeof AbortController === 'function' ? new AbortController() : null;
    const timer = controller ? this.setTimer(() => controller.abort(), this.requestTimeoutMs) : null;
    try {
      return await this.fetch(`${this.collector}${path}`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
        signal: controller ? controller.signal : undefined,
      });
    } finally {
      if (timer !== null) this.clearTimer(timer);
    }
  }

  async createSession() {
    const response = await this.request('/sessions', this.session);
    if (response.ok) {
      this.sessionCreated = true;
      return;
    }
    const text = await response.text().catch(() => '');
    if (RETRYABLE_STATUS.has(response.status)) {
      throw new Error(`collector answered ${response.status} to the session record`);
    }
    throw new CollectorRejected(`collector rejected the session record (${response.status}): ${text.slice(0, 300)}`);
  }

  async sendBatch(batch) {
    const id = encodeURIComponent(this.session.id);
    const response = await this.request(`/sessions/${id}/events`, { events: batch });
    if (response.ok) return;
    if (response.status === 404) {
      // The collector does not know the session (its store was reset): create it again.
      this.sessionCreated = false;
      throw new Error('collector does not know the session; creating it again');
    }
    const text = await response.text().catch(() => '');
    if (RETRYABLE_STATUS.has(response.status)) {
      throw new Error(`collector answered ${response.status} to an event batch`);
    }
    throw new CollectorRejected(`collector rejected an event batch (${response.status}): ${text.slice(0, 300)}`);
  }

  /** Sends everything queued; resolves when done or when an attempt failed (a retry is scheduled). */
  flush() {
    if (this.sending) return this.sending;
    this.sending = this.flushOnce().finally(() => {
      this.sending = null;
    });
    return this.sending;
  }

  async flushOnce() {
    try {
      if (!this.sessionCreated) await this.createSession();
      while (this.queue.length) {
        const [batch] = splitBatches(this.queue, MAX_BATCH_EVENTS, MAX_BATCH_BYTES);
        try {
          await this.sendBatch(batch);
          this.acknowledged += batch.length;
        } catch (err) {
          if (!(err instanceof CollectorRejected)) throw err;
          // A batch the collector refuses would be refused forever: keep it aside, go on.
          this.rejected.push({ error: err.message, events: batch });
          this.lastError = err.message;
        }
        const sent = new Set(batch.map((e) => e.seq));
        this.queue = this.queue.filter((e) => !sent.has(e.seq));
        this.persist();
      }
      this.failures = 0;
    } catch (err) {
      this.failures += 1;
      this.lastError = err && err.name === 'AbortError' ? 'collector did not answer in time' : String(err.message || err);
      if (err instanceof CollectorRejected) {
        this.stopped = true;
        return;
      }
      const delay = Math.min(this.retryMaxMs, this.retryBaseMs * 2 ** Math.min(this.failures - 1, 10));
      this.schedule(delay);
    }
  }

  /**
   * Flushes until the queue is empty or `timeoutMs` has passed; resolves to the number of
   * events not acknowledged.
   */
  async drain(timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline && !this.stopped) {
      await this.flush();
      if (this.sessionCreated && this.queue.length === 0) return 0;
      await new Promise((resolve) => this.setTimer(resolve, Math.min(250, Math.max(0, deadline - Date.now()))));
    }
    return this.queue.length;
  }

  /**
   * Last-chance delivery when the page is hidden or closed: beacons survive the page. Events
   * stay queued (and stored) until a normal batch is acknowledged, so nothing is lost if a
   * beacon is not delivered; duplicates are dropped by the collector.
   */
  beaconFlush() {
    if (!this.beacon) return false;
    const post = (path, body) =>
      this.beacon(`${this.collector}${path}`, new Blob([JSON.stringify(body)], { type: 'application/json' }));
    let ok = true;
    if (!this.sessionCreated) ok = post('/sessions', this.session) && ok;
    const id = encodeURIComponent(this.session.id);
    for (const batch of splitBatches(this.queue, MAX_BATCH_EVENTS, MAX_BEACON_BYTES - 64)) {
      ok = post(`/sessions/${id}/events`, { events: batch }) && ok;
    }
    return ok;
  }
}
