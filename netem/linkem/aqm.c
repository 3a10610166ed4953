/* The registry of queue disciplines (aqm.h), their parameters, and the plain drop-tail one. */
#include "aqm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "link.h"

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

/* ---- parameters: slots in registry order ---- */

/* The slot of aqm's first parameter. */
static size_t first_slot(const struct aqm_ops *aqm)
{
    size_t slot = 0;
    for (size_t i = 0; i < N_DISCIPLINES && REGISTRY[i] != aqm; i++)
        slot += REGISTRY[i]->n_params;
    return slot;
}

size_t aqm_n_params(void)
{
    size_t n = first_slot(NULL);
    if (n > AQM_MAX_PARAMS) {
        fprintf(stderr, "the disciplines have %zu parameters, more than AQM_MAX_PARAMS (%d)\n",
                n, AQM_MAX_PARAMS);
        abort();
    }
    return n;
}

const struct aqm_param *aqm_param_at(size_t slot)
{
    for (size_t i = 0; i < N_DISCIPLINES; i++) {
        if (slot < REGISTRY[i]->n_params)
            return &REGISTRY[i]->params[slot];
        slot -= REGISTRY[i]->n_params;
    }
    return NULL;
}

void aqm_param_defaults(double values[AQM_MAX_PARAMS])
{
    size_t n = aqm_n_params();
    for (size_t slot = 0; slot < AQM_MAX_PARAMS; slot++)
        values[slot] = slot < n ? aqm_param_at(slot)->def : 0;
}

const struct aqm_ops *aqm_of_key(const char *key)
{
    for (size_t i = 0; i < N_DISCIPLINES; i++) {
        size_t n = strlen(REGISTRY[i]->name);
        if (strncmp(key, REGISTRY[i]->name, n) == 0 && key[n] == '_')
            return REGISTRY[i];
    }
    return NULL;
}

int aqm_param_slot(const char *key)
{
    size_t n = aqm_n_params();
    for (size_t slot = 0; slot < n; slot++)
        if (strcmp(aqm_param_at(slot)->key, key) == 0)
            return (int)slot;
    return -1;
}

void aqm_param_names(const struct aqm_ops *aqm, char *buf, size_t len)
{
    size_t used = (size_t)snprintf(buf, len, "%s", aqm->n_params ? "" : "none");
    for (size_t i = 0; i < aqm->n_params && used < len; i++)
        used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
                                 aqm->params[i].key);
}

void aqm_list(FILE *f)
{
    fprintf(f, "{");
    for (size_t i = 0; i < N_DISCIPLINES; i++) {
        const struct aqm_ops *aqm = REGISTRY[i];
        fprintf(f, "%s\"%s\": {", i ? ", " : "", aqm->name);
        for (size_t j = 0; j < aqm->n_params; j++) {
            const struct aqm_param *p = &aqm->params[j];
            fprintf(f, "%s\"%s\": {\"default\": %.17g, \"min\": %.17g, \"max\": %.17g}",
                    j ? ", " : "", p->key, p->def, p->lo, p->hi);
        }
        fprintf(f, "}");
    }
    fprintf(f, "}\n");
}

const double *aqm_params(const struct link *l)
{
    return l->p.aqm_param + first_slot(l->p.aqm);
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
