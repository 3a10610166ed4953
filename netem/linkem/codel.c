/* CoDel at the queue's head (RFC 8289, section 5, as its pseudocode reads).
 *
 * A packet's sojourn time is how long it waited in the queue. Nothing is dropped while the
 * sojourn time dips below target at least once per interval (a good queue: a burst that
 * drains). Once it has stayed above target for a whole interval, CoDel enters the dropping
 * state: it drops one packet, then the next at interval/sqrt(count) later, count growing by
 * one a drop, until a packet's sojourn time falls below target. Re-entering soon after leaving
 * (within 16 intervals) resumes from the previous drop rate instead of starting over. */
#include "codel.h"

#include <math.h>
#include <stdlib.h>

#include "aqm.h"
#include "link.h"

#define CODEL_MAXPACKET 1500u   /* a queue holding no more than one MTU is never "standing" */

/* Its parameters, a LINK's "codel_target_ms" and "codel_interval_ms" with RFC 8289's defaults:
 * the acceptable standing delay and the window it must persist over. */
enum { TARGET, INTERVAL };
static const struct aqm_param PARAMS[] = {
    [TARGET] = {"codel_target_ms", 5.0, 0.001, 60000},
    [INTERVAL] = {"codel_interval_ms", 100.0, 0.001, 60000},
};

static uint64_t param_ns(const struct link *l, int which)
{
    return (uint64_t)(aqm_params(l)[which] * (double)NS_PER_MS + 0.5);
}

static uint64_t codel_control_law(const struct link *l, uint64_t t, uint32_t count)
{
    return t + (uint64_t)((double)param_ns(l, INTERVAL) / sqrt((double)count));
}

struct codel_result {
    struct packet *p;
    bool ok_to_drop;
};

static struct codel_result codel_dodequeue(struct link *l, struct codel *c, uint64_t now)
{
    struct codel_result r = {aqm_queue_pop(l), false};
    if (!r.p) {
        c->first_above_time = 0;
        return r;
    }
    uint64_t sojourn = now - r.p->enq;
    if (sojourn < param_ns(l, TARGET) || aqm_queue_bytes(l) <= CODEL_MAXPACKET) {
        c->first_above_time = 0;
    } else if (c->first_above_time == 0) {
        c->first_above_time = now + param_ns(l, INTERVAL);
    } else if (now >= c->first_above_time) {
        r.ok_to_drop = true;
    }
    return r;
}

/* In the dropping state: drop while the schedule says so and sojourns stay above target. */
static struct codel_result codel_keep_dropping(struct link *l, struct codel *c,
                                               struct codel_result r, uint64_t now)
{
    if (!r.ok_to_drop)
        c->dropping = false;
    while (c->dropping && now >= c->drop_next) {
        aqm_drop(l, r.p);
        c->count++;
        r = codel_dodequeue(l, c, now);
        if (!r.ok_to_drop)
            c->dropping = false;
        else
            c->drop_next = codel_control_law(l, c->drop_next, c->count);
    }
    return r;
}

/* Entering the dropping state: one drop now, the next by the control law. */
static struct codel_result codel_start_dropping(struct link *l, struct codel *c, uint64_t now)
{
    struct codel_result r = codel_dodequeue(l, c, now);
    c->dropping = true;
    uint32_t delta = c->count - c->lastcount;
    c->count = 1;
    if (delta > 1 && now - c->drop_next < 16 * param_ns(l, INTERVAL))
        c->count = delta;
    c->drop_next = codel_control_law(l, now, c->count);
    c->lastcount = c->count;
    return r;
}

static struct packet *codel_dequeue(struct link *l, void *state, uint64_t now)
{
    struct codel *c = state;
    struct codel_result r = codel_dodequeue(l, c, now);
    if (!r.p) {
        c->dropping = false;
        return NULL;
    }
    if (c->dropping) {
        r = codel_keep_dropping(l, c, r, now);
    } else if (r.ok_to_drop) {
        aqm_drop(l, r.p);
        r = codel_start_dropping(l, c, now);
    }
    return r.p;
}

static void *codel_start(const struct link *l, uint64_t now)
{
    (void)l;
    (void)now;
    return aqm_state_new(sizeof(struct codel));
}

const struct aqm_ops aqm_codel = {
    .name = "codel", AQM_PARAMS(PARAMS), .start = codel_start, .stop = free,
    .dequeue = codel_dequeue,
};
