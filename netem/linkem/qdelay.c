/* The queueing-delay recorder; see qdelay.h. */
#include "qdelay.h"

#include <math.h>
#include <string.h>

unsigned qdelay_bucket(uint64_t ns)
{
    if (ns < QDELAY_FLOOR_NS)
        return 0;
    double b = 1.0 + floor(QDELAY_PER_OCTAVE * log2((double)ns / (double)QDELAY_FLOOR_NS));
    return b >= QDELAY_BUCKETS - 1 ? QDELAY_BUCKETS - 1 : (unsigned)b;
}

double qdelay_bucket_ms(unsigned b)
{
    if (b == 0)
        return QDELAY_FLOOR_NS / 2 / 1e6;
    return QDELAY_FLOOR_NS / 1e6 * exp2(((double)b - 0.5) / QDELAY_PER_OCTAVE);
}

double qdelay_percentile_ms(const uint64_t *hist, double q)
{
    uint64_t total = 0;
    for (unsigned b = 0; b < QDELAY_BUCKETS; b++)
        total += hist[b];
    if (total == 0)
        return NAN;
    /* The smallest value with at least q of the samples at or below it (nearest rank). */
    uint64_t rank = (uint64_t)ceil(q * (double)total);
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned b = 0; b < QDELAY_BUCKETS; b++) {
        seen += hist[b];
        if (seen >= rank)
            return qdelay_bucket_ms(b);
    }
    return qdelay_bucket_ms(QDELAY_BUCKETS - 1);
}

void qdelay_init(struct qdelay *q, uint64_t now)
{
    qdelay_emit_fn emit = q->emit;
    void *ctx = q->ctx;
    memset(q, 0, sizeof *q);
    q->emit = emit;
    q->ctx = ctx;
    q->w.start = q->cap_mark = now;
}

static void count_capacity(struct qdelay *q, uint64_t t, uint64_t rate_bps)
{
    if (t <= q->cap_mark)
        return;
    q->w.capacity_bits += (double)rate_bps * (double)(t - q->cap_mark) / 1e9;
    q->cap_mark = t;
}

static void close_window(struct qdelay *q)
{
    if (q->emit && (q->w.packets || q->w.capacity_bits > 0))
        q->emit(q->ctx, &q->w);
}

void qdelay_advance(struct qdelay *q, uint64_t t, uint64_t rate_bps)
{
    while (t >= q->w.start + QDELAY_WINDOW_NS) {
        uint64_t end = q->w.start + QDELAY_WINDOW_NS;
        count_capacity(q, end, rate_bps);
        close_window(q);
        memset(&q->w, 0, sizeof q->w);
        q->w.start = end;
        /* A long idle spell with no capacity emits nothing: skip to the window of t. */
        if (rate_bps == 0 && t >= end + QDELAY_WINDOW_NS) {
            q->w.start = end + (t - end) / QDELAY_WINDOW_NS * QDELAY_WINDOW_NS;
            q->cap_mark = q->w.start;
        }
    }
    count_capacity(q, t, rate_bps);
}

void qdelay_add_capacity(struct qdelay *q, double bits)
{
    q->w.capacity_bits += bits;
}

void qdelay_sample(struct qdelay *q, uint64_t sojourn_ns, uint32_t len)
{
    unsigned b = qdelay_bucket(sojourn_ns);
    q->w.packets++;
    q->w.bytes += len;
    q->w.sum_ns += sojourn_ns;
    if (sojourn_ns > q->w.max_ns)
        q->w.max_ns = sojourn_ns;
    q->w.hist[b]++;
    q->packets++;
    q->sum_ns += sojourn_ns;
    if (sojourn_ns > q->max_ns)
        q->max_ns = sojourn_ns;
    q->hist[b]++;
}

void qdelay_flush(struct qdelay *q, uint64_t now, uint64_t rate_bps)
{
    qdelay_advance(q, now, rate_bps);
    close_window(q);
    memset(&q->w, 0, sizeof q->w);
    q->w.start = q->cap_mark = now;
}
