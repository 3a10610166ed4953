/* The registry of queue disciplines (aqm.h), and the plain drop-tail one. */
#include "aqm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One entry a discipline: its name here is its ops object's, aqm_NAME, in NAME.c. */
#define DISCIPLINES(X) X(none) X(codel) X(pie)

#define DECLARE(name) extern const struct aqm_ops aqm_##name;
DISCIPLINES(DECLARE)
#define ENTRY(name) &aqm_##name,
static const struct aqm_ops *const REGISTRY[] = {DISCIPLINES(ENTRY)};
#define N_DISCIPLINES (sizeof REGISTRY / sizeof REGISTRY[0])

static struct packet *fifo_dequeue(struct link *l, void *state, uint64_t now)
{
    (void)state;
    (void)now;
    return aqm_queue_pop(l);
}

const struct aqm_ops aqm_none = {.name = "none", .dequeue = fifo_dequeue};

const struct aqm_ops *aqm_find(const char *name)
{
    for (size_t i = 0; i < N_DISCIPLINES; i++)
        if (strcmp(REGISTRY[i]->name, name) == 0)
            return REGISTRY[i];
    return NULL;
}

void aqm_names(char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < N_DISCIPLINES && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s\"%s\"", i ? ", " : "",
                                 REGISTRY[i]->name);
}

void *aqm_state_new(size_t size)
{
    void *state = calloc(1, size);
    if (!state) {
        perror("calloc");
        exit(1);
    }
    return state;
}
