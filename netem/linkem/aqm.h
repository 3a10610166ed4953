/* Queue disciplines: what decides, besides the drop-tail limit, which packets of a link's queue
 * are dropped. Each is one object of operations in a file of its own (codel.c, pie.c), with its
 * parameters, their defaults and ranges, listed by name in aqm.c's registry, which is all a new
 * one touches: the config reads its parameters from the table it gives (config.c), --check and
 * --list-aqms print them (main.c, aqm_list). The link (link.c) reaches its discipline only
 * through these operations. */
#ifndef LINKEM_AQM_H
#define LINKEM_AQM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct link;
struct packet;

/* Every discipline's parameters together, at most (a link holds a value for each, so that an
 * event may switch the discipline or set a parameter of one not running). */
#define AQM_MAX_PARAMS 16

/* One number a config's LINK may give a discipline. */
struct aqm_param {
    const char *key;      /* the LINK key: the discipline's name, "_", then what it is */
    double def;           /* its value where a config gives none */
    double lo, hi;        /* the range a config may give */
};

struct aqm_ops {
    const char *name;     /* as a config's "aqm" names it */
    const struct aqm_param *params;    /* its parameters (AQM_PARAMS), NULL when none */
    size_t n_params;
    /* Its state for link l from time now on (NULL when it keeps none); stop frees it. */
    void *(*start)(const struct link *l, uint64_t now);
    void (*stop)(void *state);
    /* A packet that fits under the drop-tail limit arrives at now: false drops it (counted as
     * an AQM drop by the link). NULL: every such packet joins the queue. */
    bool (*admit)(struct link *l, void *state, const struct packet *p, uint64_t now);
    /* The packet the rate server takes next at now, NULL when none is queued; it may drop
     * packets from the queue's head on the way (aqm_drop). */
    struct packet *(*dequeue)(struct link *l, void *state, uint64_t now);
};

/* In an aqm_ops initializer: its parameters, a static array of struct aqm_param. */
#define AQM_PARAMS(table) .params = (table), .n_params = sizeof(table) / sizeof((table)[0])

/* Drop-tail only: the discipline of a link whose config names none. */
extern const struct aqm_ops aqm_none;

/* The discipline of that name, or NULL. */
const struct aqm_ops *aqm_find(const char *name);
/* The registered names, quoted and comma-separated, for error messages. */
void aqm_names(char *buf, size_t len);

/* The parameters of every discipline, one after another in registry order: slot i of a link's
 * aqm_param holds the value of aqm_param_at(i). */
size_t aqm_n_params(void);
const struct aqm_param *aqm_param_at(size_t slot);
/* Every slot's default. */
void aqm_param_defaults(double values[AQM_MAX_PARAMS]);
/* The discipline whose name and "_" begin key (NULL: none does), and that key's slot among
 * its parameters (-1: not one of them). */
const struct aqm_ops *aqm_of_key(const char *key);
int aqm_param_slot(const char *key);
/* A discipline's parameter keys, comma-separated, for error messages ("none" without any). */
void aqm_param_names(const struct aqm_ops *aqm, char *buf, size_t len);
/* Every discipline and its parameters as JSON (mpstream-linkem --list-aqms):
 * {"NAME": {"KEY": {"default": D, "min": LO, "max": HI}, ...}, ...}. */
void aqm_list(FILE *f);

/* A discipline's state, zeroed (exits when out of memory, as the link does). */
void *aqm_state_new(size_t size);

/* What a discipline may do to its link (link.c; aqm_params in aqm.c). */
struct packet *aqm_queue_pop(struct link *l);
const struct packet *aqm_queue_head(const struct link *l);
uint64_t aqm_queue_bytes(const struct link *l);
void aqm_drop(struct link *l, struct packet *p);
/* Uniform in [0, 1), from the link's seeded generator: a run repeats exactly. */
double aqm_random(struct link *l);
/* The current values of the running discipline's parameters, in the order of its params. */
const double *aqm_params(const struct link *l);

#endif
