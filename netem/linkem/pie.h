/* PIE, Proportional Integral controller Enhanced (RFC 8033): the discipline "pie" (aqm.h), its
 * target delay and update interval a LINK's pie_target_ms and pie_tupdate_ms (the RFC's 15 ms
 * and 15 ms by default), the rest the RFC's defaults (pie.c). */
#ifndef LINKEM_PIE_H
#define LINKEM_PIE_H

#include <stdint.h>

/* Its state per link, which the tests read. */
struct pie {
    double drop_prob;             /* the probability an arriving packet is dropped */
    uint64_t qdelay_old;          /* the queueing delay at the previous update, ns */
    uint64_t burst_allowance;     /* ns of congestion still let through without drops */
    uint64_t next_update;         /* when the drop probability is next recomputed */
};

#endif
