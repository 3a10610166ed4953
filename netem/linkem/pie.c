/* PIE (RFC 8033, section 4): drops arriving packets at random, with a probability that a
 * controller recomputes every T_UPDATE from the queueing delay: up by how far the delay is above
 * the target (alpha) and by how fast it grows (beta), down when it falls. A burst that clears
 * within MAX_BURST is never dropped from, nor is a queue whose delay stays under half the
 * target while the probability is low.
 *
 * The RFC estimates the delay from the dequeue rate for hardware that cannot stamp packets;
 * this link stamps each packet on arrival, so the delay is measured: how long the packet at the
 * queue's head has waited. The controller runs on model time, caught up at each arrival and
 * departure (the only moments its result is used, and the queue cannot change in between), so
 * it is exact under a fake clock and costs nothing while the link is idle. */
#include "pie.h"

#include <stdlib.h>

#include "aqm.h"
#include "link.h"

/* Its parameters, a LINK's "pie_target_ms" and "pie_tupdate_ms" with RFC 8033's defaults: the
 * target queueing delay (the RFC's QDELAY_REF) and how often the drop probability is
 * recomputed (T_UPDATE). */
enum { TARGET, TUPDATE };
static const struct aqm_param PARAMS[] = {
    [TARGET] = {"pie_target_ms", 15.0, 0.001, 60000},
    [TUPDATE] = {"pie_tupdate_ms", 15.0, 0.001, 60000},
};

/* The rest, the RFC's defaults. */
#define ALPHA 0.125                    /* per second of delay above target */
#define BETA 1.25                      /* per second of delay growth */
#define MAX_BURST (150 * NS_PER_MS)
#define MEAN_PKTSIZE 1500u             /* a queue of two such packets is never dropped from */

static double seconds(uint64_t ns)
{
    return (double)ns / (double)NS_PER_S;
}

static uint64_t param_ns(const struct link *l, int which)
{
    return (uint64_t)(aqm_params(l)[which] * (double)NS_PER_MS + 0.5);
}

/* How long the packet at the head has waited at time t (0: the queue is empty). */
static uint64_t queue_delay_at(const struct link *l, uint64_t t)
{
    const struct packet *head = aqm_queue_head(l);
    return head && t > head->enq ? t - head->enq : 0;
}

/* Section 4.2's auto-tuning: the lower the drop probability, the smaller its steps, so that a
 * light load is not answered with a burst of drops. */
static double tuned(double p, double drop_prob)
{
    static const struct { double below, divisor; } STEPS[] = {
        {0.000001, 2048}, {0.00001, 512}, {0.0001, 128}, {0.001, 32}, {0.01, 8}, {0.1, 2}};
    for (size_t i = 0; i < sizeof STEPS / sizeof STEPS[0]; i++)
        if (drop_prob < STEPS[i].below)
            return p / STEPS[i].divisor;
    return p;
}

static void pie_update(const struct link *l, struct pie *s, uint64_t qdelay)
{
    uint64_t target = param_ns(l, TARGET), tupdate = param_ns(l, TUPDATE);
    double p = ALPHA * (seconds(qdelay) - seconds(target)) +
               BETA * (seconds(qdelay) - seconds(s->qdelay_old));
    s->drop_prob += tuned(p, s->drop_prob);
    if (qdelay == 0 && s->qdelay_old == 0)
        s->drop_prob *= 0.98;    /* idle: decay what is left */
    if (s->drop_prob < 0)
        s->drop_prob = 0;
    if (s->drop_prob > 1)
        s->drop_prob = 1;
    s->burst_allowance = s->burst_allowance > tupdate ? s->burst_allowance - tupdate : 0;
    if (s->drop_prob == 0 && qdelay < target / 2 && s->qdelay_old < target / 2)
        s->burst_allowance = MAX_BURST;
    s->qdelay_old = qdelay;
}

/* Runs every update due by now. An empty queue with nothing left to decay stays so: those
 * updates are skipped at once. */
static void pie_catch_up(struct link *l, struct pie *s, uint64_t now)
{
    uint64_t tupdate = param_ns(l, TUPDATE);
    while (s->next_update <= now) {
        bool at_rest = s->drop_prob == 0 && s->qdelay_old == 0 &&
                       s->burst_allowance == MAX_BURST && !aqm_queue_head(l);
        if (at_rest) {
            s->next_update += ((now - s->next_update) / tupdate + 1) * tupdate;
            return;
        }
        pie_update(l, s, queue_delay_at(l, s->next_update));
        s->next_update += tupdate;
    }
}

/* Section 4.1: random drops, but none within the burst allowance, none while the delay was
 * under half the target and the probability low, none from a queue of two packets or less. */
static bool pie_admit(struct link *l, void *state, const struct packet *p, uint64_t now)
{
    (void)p;
    struct pie *s = state;
    pie_catch_up(l, s, now);
    if (s->burst_allowance > 0)
        return true;
    if (s->qdelay_old < param_ns(l, TARGET) / 2 && s->drop_prob < 0.2)
        return true;
    if (aqm_queue_bytes(l) <= 2 * MEAN_PKTSIZE)
        return true;
    return aqm_random(l) >= s->drop_prob;
}

static struct packet *pie_dequeue(struct link *l, void *state, uint64_t now)
{
    pie_catch_up(l, state, now);
    return aqm_queue_pop(l);
}

static void *pie_start(const struct link *l, uint64_t now)
{
    struct pie *s = aqm_state_new(sizeof *s);
    s->burst_allowance = MAX_BURST;
    s->next_update = now + param_ns(l, TUPDATE);
    return s;
}

const struct aqm_ops aqm_pie = {
    .name = "pie", AQM_PARAMS(PARAMS), .start = pie_start, .stop = free, .admit = pie_admit,
    .dequeue = pie_dequeue,
};
