/* Queue disciplines: what decides, besides the drop-tail limit, which packets of a link's queue
 * are dropped. Each is one object of operations in a file of its own (codel.c, pie.c), listed
 * by name in aqm.c's registry, which is all a new one touches. The link (link.c) reaches its
 * discipline only through these operations. */
#ifndef LINKEM_AQM_H
#define LINKEM_AQM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct link;
struct packet;

struct aqm_ops {
    const char *name;     /* as a config's "aqm" names it */
    /* Its state for one link from time now on (NULL when it keeps none); stop frees it. */
    void *(*start)(uint64_t now);
    void (*stop)(void *state);
    /* A packet that fits under the drop-tail limit arrives at now: false drops it (counted as
     * an AQM drop by the link). NULL: every such packet joins the queue. */
    bool (*admit)(struct link *l, void *state, const struct packet *p, uint64_t now);
    /* The packet the rate server takes next at now, NULL when none is queued; it may drop
     * packets from the queue's head on the way (aqm_drop). */
    struct packet *(*dequeue)(struct link *l, void *state, uint64_t now);
};

/* Drop-tail only: the discipline of a link whose config names none. */
extern const struct aqm_ops aqm_none;

/* The discipline of that name, or NULL. */
const struct aqm_ops *aqm_find(const char *name);
/* The registered names, quoted and comma-separated, for error messages. */
void aqm_names(char *buf, size_t len);

/* A discipline's state, zeroed (exits when out of memory, as the link does). */
void *aqm_state_new(size_t size);

/* What a discipline may do to its link (link.c). */
struct packet *aqm_queue_pop(struct link *l);
const struct packet *aqm_queue_head(const struct link *l);
uint64_t aqm_queue_bytes(const struct link *l);
void aqm_drop(struct link *l, struct packet *p);
/* Uniform in [0, 1), from the link's seeded generator: a run repeats exactly. */
double aqm_random(struct link *l);

#endif
