/* The per-direction link model; see link.h for the pipeline and its rules. */
#include "link.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- seeded PRNG (splitmix64: tiny, fast, good enough for drop decisions and jitter) ---- */

static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static double rng_unit(uint64_t *state)
{
    return (double)(rng_next(state) >> 11) * 0x1.0p-53;
}

struct packet *packet_new(const void *data, uint32_t len)
{
    struct packet *p = malloc(sizeof *p + len);
    if (!p) {
        perror("malloc");
        exit(1);
    }
    p->next = NULL;
    p->t = 0;
    p->len = len;
    p->left = len;
    if (data)
        memcpy(p->data, data, len);
    return p;
}

/* ---- packet FIFO helpers ---- */

static void fifo_push(struct packet **head, struct packet **tail, struct packet *p)
{
    p->next = NULL;
    if (*tail)
        (*tail)->next = p;
    else
        *head = p;
    *tail = p;
}

static struct packet *fifo_pop(struct packet **head, struct packet **tail)
{
    struct packet *p = *head;
    if (p) {
        *head = p->next;
        if (!*head)
            *tail = NULL;
        p->next = NULL;
    }
    return p;
}

static void free_list(struct packet *p)
{
    while (p) {
        struct packet *n = p->next;
        free(p);
        p = n;
    }
}

enum server_mode { SERVER_UNLIMITED, SERVER_FIXED, SERVER_TRACE };

static enum server_mode mode_of(const struct link_params *p)
{
    if (p->trace)
        return SERVER_TRACE;
    return p->rate_bps ? SERVER_FIXED : SERVER_UNLIMITED;
}

/* ---- stage: drop-tail queue ---- */

static bool queue_has_room(const struct link *l, uint32_t len)
{
    if (l->p.queue_bytes >= 0 && l->q_bytes + len > (uint64_t)l->p.queue_bytes)
        return false;
    if (l->p.queue_packets >= 0 && l->q_packets + 1 > (uint64_t)l->p.queue_packets)
        return false;
    return true;
}

static void queue_push(struct link *l, struct packet *p, uint64_t now)
{
    p->enq = now;
    fifo_push(&l->q_head, &l->q_tail, p);
    l->q_bytes += p->len;
    l->q_packets++;
    if (l->q_bytes > l->st.max_queue_bytes)
        l->st.max_queue_bytes = l->q_bytes;
    if (l->q_packets > l->st.max_queue_packets)
        l->st.max_queue_packets = l->q_packets;
}

static struct packet *fifo_queue_pop(struct link *l)
{
    struct packet *p = fifo_pop(&l->q_head, &l->q_tail);
    if (p) {
        l->q_bytes -= p->len;
        l->q_packets--;
    }
    return p;
}

/* ---- what a queue discipline may do (aqm.h) ---- */

struct packet *aqm_queue_pop(struct link *l)
{
    return fifo_queue_pop(l);
}

const struct packet *aqm_queue_head(const struct link *l)
{
    return l->q_head;
}

uint64_t aqm_queue_bytes(const struct link *l)
{
    return l->q_bytes;
}

void aqm_drop(struct link *l, struct packet *p)
{
    l->st.dropped_aqm_packets++;
    l->st.dropped_aqm_bytes += p->len;
    free(p);
}

double aqm_random(struct link *l)
{
    return rng_unit(&l->rng);
}

static void aqm_start(struct link *l, uint64_t now)
{
    l->aqm_state = l->p.aqm->start ? l->p.aqm->start(l, now) : NULL;
}

static void aqm_stop(struct link *l)
{
    if (l->p.aqm->stop)
        l->p.aqm->stop(l->aqm_state);
    l->aqm_state = NULL;
}

/* The packet the rate server takes next at time t. */
static struct packet *queue_pop(struct link *l, uint64_t t)
{
    return l->p.aqm->dequeue(l, l->aqm_state, t);
}

/* ---- stage: delay line ---- */

/* Jitter without reordering. Independent per-packet draws cannot be used: at high packet
 * rates "never overtake" would push almost every packet to the largest recent draw, so the
 * mean delay would creep towards delay + jitter. Instead the jitter offset walks towards a
 * target drawn uniformly from [-jitter, +jitter], changing by at most the time since the
 * previous packet (slope 1), then draws the next target. Consecutive releases therefore never
 * cross, the offset stays within the bounds with mean zero, and packets further apart than
 * the whole range get independent uniform draws, as tc netem gives them. */
static double jitter_offset_ns(struct link *l, uint64_t t)
{
    double range = l->p.jitter_ms * (double)NS_PER_MS;
    double step = (double)(t - l->jitter_t);
    l->jitter_t = t;
    if (!l->jitter_active || step >= 2.0 * range) {
        l->jitter_active = true;
        l->jitter_offset = (2.0 * rng_unit(&l->rng) - 1.0) * range;
        l->jitter_target = (2.0 * rng_unit(&l->rng) - 1.0) * range;
        return l->jitter_offset;
    }
    for (;;) {
        double dist = l->jitter_target - l->jitter_offset;
        if (fabs(dist) > step) {
            l->jitter_offset += dist > 0 ? step : -step;
            break;
        }
        l->jitter_offset = l->jitter_target;
        step -= fabs(dist);
        l->jitter_target = (2.0 * rng_unit(&l->rng) - 1.0) * range;
        if (step <= 0)
            break;
    }
    return l->jitter_offset;
}

/* What the window clock counts as capacity per second while time passes: a fixed rate when
 * up (a trace counts its opportunities one by one; unlimited has no capacity to speak of). */
static uint64_t capacity_rate(const struct link *l)
{
    return !l->p.down && !l->p.trace ? l->p.rate_bps : 0;
}

/* A packet leaves the rate server at t: its sojourn is recorded, then it enters the wire. */
static void delay_push(struct link *l, struct packet *p, uint64_t t)
{
    qdelay_advance(&l->qd, t, capacity_rate(l));
    qdelay_sample(&l->qd, t - p->enq, p->len);
    double d_ns = l->p.delay_ms * (double)NS_PER_MS;
    if (l->p.jitter_ms > 0)
        d_ns += jitter_offset_ns(l, t);
    else
        l->jitter_active = false;
    uint64_t release = t + (d_ns > 0 ? (uint64_t)(d_ns + 0.5) : 0);
    /* A wire does not reorder: a packet never overtakes the previous one (this matters only
     * when an event shortens the delay; the jitter walk never crosses by itself). */
    if (release < l->last_release)
        release = l->last_release;
    l->last_release = release;
    p->t = release;
    fifo_push(&l->d_head, &l->d_tail, p);
}

static void delay_deliver_due(struct link *l, uint64_t now)
{
    while (l->d_head && l->d_head->t <= now) {
        struct packet *p = fifo_pop(&l->d_head, &l->d_tail);
        l->st.packets_out++;
        l->st.bytes_out += p->len;
        l->deliver(l->ctx, p, now);
    }
}

/* ---- stage: rate server, fixed rate ---- */

/* Serialisation time of len bytes at the current rate, exact over a busy period: the
 * sub-nanosecond remainder is carried to the next packet. */
static uint64_t tx_time_ns(struct link *l, uint32_t len)
{
    uint64_t num = (uint64_t)len * 8 * NS_PER_S + l->rate_carry;
    l->rate_carry = num % l->p.rate_bps;
    return num / l->p.rate_bps;
}

static void fixed_start(struct link *l, struct packet *p, uint64_t t)
{
    l->serving = p;
    l->serve_done = t + tx_time_ns(l, p->len);
}

static void fixed_advance(struct link *l, uint64_t now)
{
    while (l->serving && l->serve_done <= now) {
        uint64_t t = l->serve_done;
        delay_push(l, l->serving, t);
        l->serving = NULL;
        struct packet *next = queue_pop(l, t);
        if (next)
            fixed_start(l, next, t);
        else
            l->rate_carry = 0;
    }
}

/* ---- stage: rate server, trace (Mahimahi delivery opportunities) ---- */

static uint64_t trace_next_opportunity(const struct link *l)
{
    return l->trace_base + l->p.trace->ms[l->trace_idx] * NS_PER_MS;
}

/* One opportunity carries up to 1500 bytes: the rest of a partly carried packet, then whole
 * or partial packets from the queue. Nothing queued: the opportunity is wasted. */
static void trace_use_opportunity(struct link *l, uint64_t t)
{
    uint32_t budget = TRACE_OPPORTUNITY_BYTES;
    qdelay_advance(&l->qd, t, 0);
    if (!l->p.down)
        qdelay_add_capacity(&l->qd, TRACE_OPPORTUNITY_BYTES * 8.0);
    while (budget) {
        if (!l->serving) {
            l->serving = queue_pop(l, t);
            if (!l->serving)
                break;
            l->serving->left = l->serving->len;
        }
        uint32_t take = l->serving->left < budget ? l->serving->left : budget;
        budget -= take;
        l->serving->left -= take;
        if (l->serving->left == 0) {
            delay_push(l, l->serving, t);
            l->serving = NULL;
        }
    }
    if (++l->trace_idx == l->p.trace->count) {
        l->trace_idx = 0;
        l->trace_base += l->p.trace->period_ms * NS_PER_MS;
    }
}

static void trace_advance(struct link *l, uint64_t now)
{
    while (trace_next_opportunity(l) <= now)
        trace_use_opportunity(l, trace_next_opportunity(l));
}

/* ---- the pipeline ---- */

void link_init(struct link *l, const struct link_params *p, uint64_t seed, uint64_t now,
               link_deliver_fn deliver, void *ctx)
{
    memset(l, 0, sizeof *l);
    l->p = *p;
    l->rng = seed;
    l->now = now;
    l->deliver = deliver;
    l->ctx = ctx;
    l->trace_base = now;
    aqm_start(l, now);
    qdelay_init(&l->qd, now);
}

void link_on_window(struct link *l, qdelay_emit_fn emit, void *ctx)
{
    l->qd.emit = emit;
    l->qd.ctx = ctx;
}

void link_flush_window(struct link *l, uint64_t now)
{
    link_advance(l, now);
    qdelay_flush(&l->qd, l->now, capacity_rate(l));
}

void link_free(struct link *l)
{
    free_list(l->q_head);
    free_list(l->d_head);
    free(l->serving);
    l->q_head = l->q_tail = l->d_head = l->d_tail = l->serving = NULL;
    aqm_stop(l);
}

void link_advance(struct link *l, uint64_t now)
{
    if (now < l->now)
        now = l->now;
    l->now = now;
    switch (mode_of(&l->p)) {
    case SERVER_FIXED: fixed_advance(l, now); break;
    case SERVER_TRACE: trace_advance(l, now); break;
    case SERVER_UNLIMITED: break;
    }
    qdelay_advance(&l->qd, now, capacity_rate(l));
    delay_deliver_due(l, now);
}

void link_enqueue(struct link *l, struct packet *pkt, uint64_t now)
{
    link_advance(l, now);
    now = l->now;
    pkt->enq = now;
    l->st.packets_in++;
    l->st.bytes_in += pkt->len;
    if (l->p.down) {
        l->st.dropped_down_packets++;
        l->st.dropped_down_bytes += pkt->len;
        free(pkt);
        return;
    }
    if (l->p.loss > 0 && rng_unit(&l->rng) < l->p.loss) {
        l->st.dropped_loss_packets++;
        l->st.dropped_loss_bytes += pkt->len;
        free(pkt);
        return;
    }
    enum server_mode mode = mode_of(&l->p);
    if (mode == SERVER_UNLIMITED) {
        delay_push(l, pkt, now);
        delay_deliver_due(l, now);
        return;
    }
    if (mode == SERVER_FIXED && !l->serving && !l->q_head) {
        fixed_start(l, pkt, now);
        link_advance(l, now);  /* a zero-length serialisation is possible at huge rates */
        return;
    }
    if (!queue_has_room(l, pkt->len)) {
        l->st.dropped_queue_packets++;
        l->st.dropped_queue_bytes += pkt->len;
        free(pkt);
        return;
    }
    if (l->p.aqm->admit && !l->p.aqm->admit(l, l->aqm_state, pkt, now)) {
        aqm_drop(l, pkt);
        return;
    }
    queue_push(l, pkt, now);
}

/* The model itself never needs a wake-up: link_advance() catches up exactly whenever it is
 * called. Wake-ups are for I/O, i.e. for packets leaving the delay line. A packet still in the
 * rate server leaves it at a known time (or, with a trace, at an opportunity) and the delay
 * line no earlier than delay - jitter after that, so that is when to look again; for links
 * without jitter it is exactly its release. This saves one wake-up per packet against waking
 * at each end of serialisation. */
static uint64_t earliest_release_after(const struct link *l, uint64_t t)
{
    double lb_ms = l->p.delay_ms - l->p.jitter_ms;
    return t + (lb_ms > 0 ? (uint64_t)(lb_ms * (double)NS_PER_MS + 0.5) : 0);
}

uint64_t link_next_deadline(const struct link *l)
{
    uint64_t d = UINT64_MAX;
    if (l->d_head)
        d = l->d_head->t;
    uint64_t served = UINT64_MAX;
    switch (mode_of(&l->p)) {
    case SERVER_FIXED:
        if (l->serving)
            served = l->serve_done;
        break;
    case SERVER_TRACE:
        /* Opportunities with nothing to carry are wasted; they need no wake-up. */
        if (l->serving || l->q_head)
            served = trace_next_opportunity(l);
        break;
    case SERVER_UNLIMITED:
        break;
    }
    if (served != UINT64_MAX) {
        uint64_t r = earliest_release_after(l, served);
        /* never before the packet ahead of it in the delay line */
        if (r < l->last_release)
            r = l->last_release;
        if (r < d)
            d = r;
    }
    return d;
}

static void drop_held_while_down(struct link *l)
{
    struct packet *p;
    while ((p = fifo_queue_pop(l)) != NULL || (p = l->serving) != NULL) {
        if (p == l->serving)
            l->serving = NULL;
        l->st.dropped_down_packets++;
        l->st.dropped_down_bytes += p->len;
        free(p);
    }
    l->rate_carry = 0;
}

void link_restart_trace(struct link *l, uint64_t now)
{
    l->trace_base = now;
    l->trace_idx = 0;
}

void link_set_params(struct link *l, const struct link_params *p, uint64_t now)
{
    link_advance(l, now);
    now = l->now;
    enum server_mode old_mode = mode_of(&l->p);
    const struct trace *old_trace = l->p.trace;
    bool was_down = l->p.down;
    /* Another discipline starts afresh, with the new parameters; the same one keeps its state
     * across events. */
    bool new_aqm = p->aqm != l->p.aqm;
    if (new_aqm)
        aqm_stop(l);
    l->p = *p;
    if (new_aqm)
        aqm_start(l, now);
    enum server_mode mode = mode_of(&l->p);

    if (l->p.down && !was_down)
        drop_held_while_down(l);
    if (mode != old_mode && l->serving) {
        /* A packet half-way through another kind of server starts over in the new one. */
        struct packet *s = l->serving;
        l->serving = NULL;
        s->next = l->q_head;
        l->q_head = s;
        if (!l->q_tail)
            l->q_tail = s;
        l->q_bytes += s->len;
        l->q_packets++;
        l->rate_carry = 0;
    }
    if (mode == SERVER_TRACE && l->p.trace != old_trace)
        link_restart_trace(l, now);
    if (mode == SERVER_UNLIMITED) {
        struct packet *q;
        while ((q = fifo_queue_pop(l)) != NULL)
            delay_push(l, q, now);
    }
    if (mode == SERVER_FIXED && !l->serving) {
        struct packet *q = queue_pop(l, now);
        if (q)
            fixed_start(l, q, now);
    }
    link_advance(l, now);
}

/* ---- traces ---- */

struct trace *trace_load(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errlen, "cannot read trace file %s: %s", path, strerror(errno));
        return NULL;
    }
    struct trace *t = calloc(1, sizeof *t);
    size_t cap = 0;
    char line[128];
    unsigned lineno = 0;
    while (fgets(line, sizeof line, f)) {
        lineno++;
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == '\n' || *s == '\r' || *s == '\0')
            continue;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
            end++;
        if (*s == '-' || end == s || *end != '\0' || errno) {
            snprintf(err, errlen, "trace file %s line %u: expected a timestamp in ms "
                     "(a non-negative integer)", path, lineno);
            goto fail;
        }
        if (t->count && v < t->ms[t->count - 1]) {
            snprintf(err, errlen, "trace file %s line %u: timestamps must not decrease",
                     path, lineno);
            goto fail;
        }
        if (t->count == cap) {
            cap = cap ? cap * 2 : 4096;
            uint64_t *ms = realloc(t->ms, cap * sizeof *ms);
            if (!ms) {
                snprintf(err, errlen, "out of memory reading %s", path);
                goto fail;
            }
            t->ms = ms;
        }
        t->ms[t->count++] = v;
    }
    fclose(f);
    f = NULL;
    if (t->count == 0 || t->ms[t->count - 1] == 0) {
        snprintf(err, errlen, "trace file %s: needs at least one timestamp above 0 ms "
                 "(the last one is the period)", path);
        goto fail;
    }
    t->period_ms = t->ms[t->count - 1];
    t->path = strdup(path);
    return t;
fail:
    if (f)
        fclose(f);
    trace_free(t);
    return NULL;
}

void trace_free(struct trace *t)
{
    if (!t)
        return;
    free(t->ms);
    free(t->path);
    free(t);
}

uint64_t trace_mean_bps(const struct trace *t)
{
    return (uint64_t)((double)t->count * TRACE_OPPORTUNITY_BYTES * 8 * 1000 /
                      (double)t->period_ms);
}
