/* The emulator's configuration file: reading, validation (errors name the field and the rule),
 * and the queue default. */
#ifndef LINKEM_CONFIG_H
#define LINKEM_CONFIG_H

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "link.h"

enum { DIR_A_TO_B = 0, DIR_B_TO_A = 1, N_DIRS = 2 };

/* Which LINK fields an object sets (events change only the fields they name). */
enum {
    FIELD_RATE = 1 << 0,
    FIELD_TRACE = 1 << 1,
    FIELD_DELAY = 1 << 2,
    FIELD_JITTER = 1 << 3,
    FIELD_LOSS = 1 << 4,
    FIELD_QUEUE_BYTES = 1 << 5,
    FIELD_QUEUE_PACKETS = 1 << 6,
    FIELD_DOWN = 1 << 7,
    FIELD_AQM = 1 << 8,
};
/* A discipline's parameter (aqm.h), by its slot. */
#define FIELD_AQM_PARAM(slot) (1u << (9 + (slot)))
_Static_assert(9 + AQM_MAX_PARAMS <= 32, "a patch's fields are the bits of an unsigned");

struct link_patch {
    unsigned fields;
    struct link_params v;   /* queue_* = -1 for null */
};

struct event {
    double at_s;
    unsigned dirs;          /* bit DIR_A_TO_B, bit DIR_B_TO_A */
    struct link_patch set;
};

struct config {
    char tun[N_DIRS][IFNAMSIZ];   /* [0] = tun_a, [1] = tun_b */
    uint64_t seed;
    struct link_params link[N_DIRS];  /* as configured: queue_* = -1 when null */
    struct event *events;         /* sorted by at_s, ties in file order */
    size_t n_events;
    char *stats_path;             /* NULL when not wanted */
    char *delay_log;              /* queueing-delay windows, JSON lines; NULL when not wanted */
    struct trace **traces;        /* every trace file named, loaded once */
    size_t n_traces;
};

/* Reads and validates path. On error returns -1 with a message naming the field in err. */
int config_load(const char *path, struct config *cfg, char *err, size_t errlen);
void config_free(struct config *cfg);

/* Applies an event's fields on top of params. */
void link_patch_apply(const struct link_patch *patch, struct link_params *params);

/* The params the model runs with: when neither queue limit is set, a byte limit sized for TCP
 * (see DEFAULT QUEUE in config.c). rtt_ms is the sum of both directions' delays. */
struct link_params link_params_resolve(const struct link_params *configured, double rtt_ms);

#endif
