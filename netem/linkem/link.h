/* The link model of one direction: a pipeline of small stages, each with one job,
 *
 *     arrival -> down gate -> loss -> drop-tail queue -> rate server -> delay line -> delivery
 *                                      (+ its queue discipline, aqm.h)
 *
 * It knows nothing of file descriptors or clocks: the caller passes "now" (ns on any monotonic
 * time base) into every call and asks for the next deadline, so the same code runs under the
 * real event loop (main.c) and under a fake clock (test_link.c). All internal times are exact
 * model times, never "when the caller happened to wake up": a late wake-up delays the I/O, not
 * the schedule, so lateness never accumulates. */
#ifndef LINKEM_LINK_H
#define LINKEM_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "aqm.h"
#include "qdelay.h"

#define NS_PER_MS 1000000ULL
#define NS_PER_S 1000000000ULL
/* Mahimahi's unit of delivery: one opportunity carries up to this many bytes. */
#define TRACE_OPPORTUNITY_BYTES 1500u

struct packet {
    struct packet *next;
    uint64_t t;          /* delay line: release time */
    uint64_t enq;        /* arrival at the link (the disciplines' and the recorder's sojourn) */
    uint32_t len;
    uint32_t left;       /* trace server: bytes still to be carried */
    unsigned char data[];
};

/* A Mahimahi packet-delivery trace: opportunity timestamps in ms, non-decreasing, repeating
 * with a period equal to the last timestamp. */
struct trace {
    char *path;
    uint64_t *ms;
    size_t count;
    uint64_t period_ms;
};

struct link_params {
    uint64_t rate_bps;            /* 0 = unlimited (ignored while trace is set) */
    const struct trace *trace;    /* NULL = fixed rate */
    double delay_ms;
    double jitter_ms;
    double loss;                  /* probability 0..1 */
    int64_t queue_bytes;          /* -1 = no byte limit */
    int64_t queue_packets;        /* -1 = no packet limit */
    bool down;
    const struct aqm_ops *aqm;    /* the queue discipline (aqm.h), never NULL: aqm_none */
    double aqm_param[AQM_MAX_PARAMS];  /* every discipline's parameters, by slot (aqm.h) */
};

struct link_stats {
    uint64_t packets_in, bytes_in;
    uint64_t packets_out, bytes_out;
    uint64_t dropped_queue_packets, dropped_queue_bytes;
    uint64_t dropped_loss_packets, dropped_loss_bytes;
    uint64_t dropped_down_packets, dropped_down_bytes;
    uint64_t max_queue_bytes, max_queue_packets;
    uint64_t dropped_aqm_packets, dropped_aqm_bytes;
};

/* Called for each packet leaving the delay line; the callee owns the packet (free() it). */
typedef void (*link_deliver_fn)(void *ctx, struct packet *pkt, uint64_t now);

struct link {
    struct link_params p;
    link_deliver_fn deliver;
    void *ctx;
    uint64_t rng;
    uint64_t now;                 /* latest time the model has been advanced to */

    /* drop-tail queue: packets waiting for the rate server */
    struct packet *q_head, *q_tail;
    uint64_t q_bytes, q_packets;
    void *aqm_state;              /* the discipline's own (p.aqm->start) */

    /* rate server: the packet being serialised (fixed rate) or carried (trace) */
    struct packet *serving;
    uint64_t serve_done;          /* fixed rate: when the serving packet's last bit is out */
    uint64_t rate_carry;          /* fixed rate: ns*rate remainder, keeps timing exact */
    uint64_t trace_base;          /* trace: time of the current period's start */
    size_t trace_idx;             /* trace: next opportunity */

    /* delay line: FIFO with non-decreasing release times (jitter never reorders) */
    struct packet *d_head, *d_tail;
    uint64_t last_release;
    bool jitter_active;           /* jitter walk state (see jitter_offset_ns in link.c) */
    uint64_t jitter_t;
    double jitter_offset, jitter_target;

    struct link_stats st;
    struct qdelay qd;             /* each packet's queueing delay, and the capacity */
};

void link_init(struct link *l, const struct link_params *p, uint64_t seed, uint64_t now,
               link_deliver_fn deliver, void *ctx);
/* Frees every packet still held. */
void link_free(struct link *l);

/* A packet arrives at time now (ownership passes to the link). */
void link_enqueue(struct link *l, struct packet *pkt, uint64_t now);
/* Runs the model up to now, delivering every packet due by then. */
void link_advance(struct link *l, uint64_t now);
/* When to call link_advance() next so that no packet leaves the delay line late (the model
 * itself catches up exactly whenever advanced); UINT64_MAX when nothing is in flight. */
uint64_t link_next_deadline(const struct link *l);

/* New parameters from now on (an event). Going down drops what is queued and being served
 * (counted as dropped while down); packets already in the delay line are in flight on the
 * wire and still arrive. A new rate applies from the next packet the server takes; a new
 * delay to packets leaving the server from now on. */
void link_set_params(struct link *l, const struct link_params *p, uint64_t now);
/* Queueing-delay windows go to emit(ctx, window) as they close (qdelay.h). */
void link_on_window(struct link *l, qdelay_emit_fn emit, void *ctx);
/* Closes the open queueing-delay window (at exit). */
void link_flush_window(struct link *l, uint64_t now);
/* Restarts the trace from its first opportunity at time now. */
void link_restart_trace(struct link *l, uint64_t now);

struct packet *packet_new(const void *data, uint32_t len);

/* Loads a Mahimahi trace; on error returns NULL with a message in err. */
struct trace *trace_load(const char *path, char *err, size_t errlen);
void trace_free(struct trace *t);
/* Mean capacity of the trace in bit/s. */
uint64_t trace_mean_bps(const struct trace *t);

#endif
