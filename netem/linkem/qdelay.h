/* The queueing-delay recorder of one link direction: each packet's sojourn time (from its
 * arrival at the queue to its last bit leaving the rate server: the wait plus its own
 * transmission, the delay a sender inflicts on itself) and the link's capacity, aggregated
 * into fixed windows (100 ms) so that a long trial at a high rate stays small, plus one
 * histogram over the link's whole life. Like the link model it takes every time from the
 * caller ("now", ns), so a fake clock tests it.
 *
 * Histogram buckets are logarithmic, 8 per octave above 50 us (each about 9% wide):
 *   bucket 0: below 50 us;  bucket b >= 1: [50 us * 2^((b-1)/8), 50 us * 2^(b/8)).
 * A percentile is reported as its bucket's geometric middle (within 4.5% of the truth);
 * max and mean are exact. */
#ifndef LINKEM_QDELAY_H
#define LINKEM_QDELAY_H

#include <stdbool.h>
#include <stdint.h>

#define QDELAY_BUCKETS 200
#define QDELAY_FLOOR_NS 50000ULL
#define QDELAY_PER_OCTAVE 8
#define QDELAY_WINDOW_NS 100000000ULL /* 100 ms */

struct qdelay_window {
    uint64_t start;               /* window start (model time, ns) */
    uint64_t packets, bytes;      /* packets that left the rate server in the window */
    double capacity_bits;         /* what the link could have carried in the window */
    uint64_t sum_ns, max_ns;
    uint64_t hist[QDELAY_BUCKETS];
};

struct qdelay;
/* Called with each closed window that saw a packet or had capacity. */
typedef void (*qdelay_emit_fn)(void *ctx, const struct qdelay_window *w);

struct qdelay {
    struct qdelay_window w;       /* the open window */
    uint64_t cap_mark;            /* capacity is counted up to here */
    uint64_t packets, sum_ns, max_ns;  /* the whole life */
    uint64_t hist[QDELAY_BUCKETS];
    qdelay_emit_fn emit;          /* NULL: windows are not kept */
    void *ctx;
};

void qdelay_init(struct qdelay *q, uint64_t now);
/* Runs the window clock up to t; the link carried capacity at rate_bps (0: none, e.g. down,
 * unlimited or trace-driven) since the last call. Closes (and emits) every window that ends
 * by t. */
void qdelay_advance(struct qdelay *q, uint64_t t, uint64_t rate_bps);
/* A trace's delivery opportunity at t (call qdelay_advance(q, t, 0) first). */
void qdelay_add_capacity(struct qdelay *q, double bits);
/* A packet of len bytes left the rate server after sojourn_ns (call qdelay_advance first). */
void qdelay_sample(struct qdelay *q, uint64_t sojourn_ns, uint32_t len);
/* Emits the open window as it is (at exit). */
void qdelay_flush(struct qdelay *q, uint64_t now, uint64_t rate_bps);

unsigned qdelay_bucket(uint64_t ns);
/* The bucket's representative value in ms (its geometric middle; bucket 0: 25 us). */
double qdelay_bucket_ms(unsigned b);
/* The q-quantile (0..1) of a histogram in ms; NAN when it is empty. */
double qdelay_percentile_ms(const uint64_t *hist, double q);

#endif
