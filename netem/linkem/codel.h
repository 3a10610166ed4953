/* CoDel (RFC 8289) at the queue's head: the discipline "codel" (aqm.h), its target and interval
 * a LINK's codel_target_ms and codel_interval_ms (codel.c). */
#ifndef LINKEM_CODEL_H
#define LINKEM_CODEL_H

#include <stdbool.h>
#include <stdint.h>

/* Its state per link (RFC 8289, section 5), which the tests read. */
struct codel {
    uint64_t first_above_time;    /* 0: sojourn not (continuously) above target */
    uint64_t drop_next;
    uint32_t count, lastcount;
    bool dropping;
};

#endif
