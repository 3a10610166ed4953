/* Configuration: JSON file -> struct config, strictly validated. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

/* Largest integer a double carries exactly. */
#define MAX_EXACT_INT 9007199254740992.0

struct ctx {
    struct config *cfg;
    char *err;
    size_t errlen;
};

static int field_error(struct ctx *c, const char *field, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, c->errlen, "%s: %s", field, msg);
    return -1;
}

static int check_keys(struct ctx *c, const struct json_value *obj, const char *where,
                      const char *const *allowed)
{
    for (size_t i = 0; i < obj->count; i++) {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            ok |= strcmp(obj->keys[i], *a) == 0;
        if (!ok) {
            char field[160];
            snprintf(field, sizeof field, "%s%s%s", where, *where ? "." : "", obj->keys[i]);
            char list[256] = "";
            for (const char *const *a = allowed; *a; a++) {
                strncat(list, *a, sizeof list - strlen(list) - 1);
                if (a[1])
                    strncat(list, ", ", sizeof list - strlen(list) - 1);
            }
            return field_error(c, field, "unknown key (allowed: %s)", list);
        }
    }
    return 0;
}

static const struct trace *trace_for(struct ctx *c, const char *field, const char *path)
{
    struct config *cfg = c->cfg;
    for (size_t i = 0; i < cfg->n_traces; i++)
        if (strcmp(cfg->traces[i]->path, path) == 0)
            return cfg->traces[i];
    char msg[512];
    struct trace *t = trace_load(path, msg, sizeof msg);
    if (!t) {
        field_error(c, field, "%s", msg);
        return NULL;
    }
    struct trace **ts = realloc(cfg->traces, (cfg->n_traces + 1) * sizeof *ts);
    if (!ts) {
        trace_free(t);
        field_error(c, field, "out of memory");
        return NULL;
    }
    cfg->traces = ts;
    cfg->traces[cfg->n_traces++] = t;
    return t;
}

static int get_number(struct ctx *c, const char *field, const struct json_value *v,
                      double lo, double hi, double *out)
{
    if (v->type != JSON_NUMBER)
        return field_error(c, field, "must be a number (got %s)", json_type_name(v->type));
    if (!isfinite(v->number) || v->number < lo || v->number > hi)
        return field_error(c, field, "must be between %g and %g (got %g)", lo, hi, v->number);
    *out = v->number;
    return 0;
}

static int get_int(struct ctx *c, const char *field, const struct json_value *v, double lo,
                   double hi, int64_t *out)
{
    double d;
    if (get_number(c, field, v, lo, hi, &d) < 0)
        return -1;
    if (d != floor(d))
        return field_error(c, field, "must be a whole number (got %g)", d);
    *out = (int64_t)d;
    return 0;
}

/* Reads the LINK fields present in obj into patch. */
static int parse_link(struct ctx *c, const struct json_value *obj, const char *where,
                      struct link_patch *patch)
{
    static const char *const keys[] = {"rate_bps", "trace", "delay_ms", "jitter_ms", "loss",
                                       "queue_bytes", "queue_packets", "down", "aqm",
                                       "codel_target_ms", "codel_interval_ms", NULL};
    if (obj->type != JSON_OBJECT)
        return field_error(c, where, "must be an object (got %s)", json_type_name(obj->type));
    if (check_keys(c, obj, where, keys) < 0)
        return -1;
    char field[160];
    const struct json_value *v;
    struct link_params *p = &patch->v;
#define FIELD(name) (snprintf(field, sizeof field, "%s.%s", where, name), field)
    if ((v = json_get(obj, "rate_bps"))) {
        patch->fields |= FIELD_RATE;
        int64_t r = 0;
        if (v->type != JSON_NULL &&
            get_int(c, FIELD("rate_bps"), v, 1, 1e12, &r) < 0)
            return -1;
        p->rate_bps = (uint64_t)r;
    }
    if ((v = json_get(obj, "trace"))) {
        patch->fields |= FIELD_TRACE;
        p->trace = NULL;
        if (v->type == JSON_STRING) {
            if (!(p->trace = trace_for(c, FIELD("trace"), v->string)))
                return -1;
        } else if (v->type != JSON_NULL) {
            return field_error(c, FIELD("trace"), "must be a file path or null (got %s)",
                               json_type_name(v->type));
        }
    }
    if ((v = json_get(obj, "delay_ms"))) {
        patch->fields |= FIELD_DELAY;
        if (get_number(c, FIELD("delay_ms"), v, 0, 3.6e6, &p->delay_ms) < 0)
            return -1;
    }
    if ((v = json_get(obj, "jitter_ms"))) {
        patch->fields |= FIELD_JITTER;
        if (get_number(c, FIELD("jitter_ms"), v, 0, 3.6e6, &p->jitter_ms) < 0)
            return -1;
    }
    if ((v = json_get(obj, "loss"))) {
        patch->fields |= FIELD_LOSS;
        if (get_number(c, FIELD("loss"), v, 0, 1, &p->loss) < 0)
            return -1;
    }
    if ((v = json_get(obj, "queue_bytes"))) {
        patch->fields |= FIELD_QUEUE_BYTES;
        p->queue_bytes = -1;
        if (v->type != JSON_NULL &&
            get_int(c, FIELD("queue_bytes"), v, 0, MAX_EXACT_INT, &p->queue_bytes) < 0)
            return -1;
    }
    if ((v = json_get(obj, "queue_packets"))) {
        patch->fields |= FIELD_QUEUE_PACKETS;
        p->queue_packets = -1;
        if (v->type != JSON_NULL &&
            get_int(c, FIELD("queue_packets"), v, 0, MAX_EXACT_INT, &p->queue_packets) < 0)
            return -1;
    }
    if ((v = json_get(obj, "down"))) {
        patch->fields |= FIELD_DOWN;
        if (v->type != JSON_BOOL)
            return field_error(c, FIELD("down"), "must be true or false (got %s)",
                               json_type_name(v->type));
        p->down = v->boolean;
    }
    if ((v = json_get(obj, "aqm"))) {
        patch->fields |= FIELD_AQM;
        if (v->type == JSON_NULL || (v->type == JSON_STRING && !strcmp(v->string, "none")))
            p->codel = false;
        else if (v->type == JSON_STRING && !strcmp(v->string, "codel"))
            p->codel = true;
        else
            return field_error(c, FIELD("aqm"), "must be \"codel\", \"none\" or null");
    }
    if ((v = json_get(obj, "codel_target_ms"))) {
        patch->fields |= FIELD_CODEL_TARGET;
        if (get_number(c, FIELD("codel_target_ms"), v, 0.001, 60000, &p->codel_target_ms) < 0)
            return -1;
    }
    if ((v = json_get(obj, "codel_interval_ms"))) {
        patch->fields |= FIELD_CODEL_INTERVAL;
        if (get_number(c, FIELD("codel_interval_ms"), v, 0.001, 60000,
                       &p->codel_interval_ms) < 0)
            return -1;
    }
#undef FIELD
    return 0;
}

static int parse_tun(struct ctx *c, const struct json_value *root, const char *key, char *out)
{
    const struct json_value *v = json_get(root, key);
    if (!v)
        return field_error(c, key, "required (the name of an existing TUN device)");
    if (v->type != JSON_STRING)
        return field_error(c, key, "must be a string (got %s)", json_type_name(v->type));
    size_t n = strlen(v->string);
    if (n == 0 || n >= IFNAMSIZ || strchr(v->string, '/') || strchr(v->string, ' '))
        return field_error(c, key, "must be an interface name of 1 to %d characters without "
                           "'/' or spaces (got \"%s\")", IFNAMSIZ - 1, v->string);
    memcpy(out, v->string, n + 1);
    return 0;
}

static int compare_events(const void *a, const void *b)
{
    const struct event *x = a, *y = b;
    return (x->at_s > y->at_s) - (x->at_s < y->at_s);
}

static int parse_events(struct ctx *c, const struct json_value *v)
{
    static const char *const keys[] = {"at_s", "dir", "set", NULL};
    if (v->type != JSON_ARRAY)
        return field_error(c, "events", "must be an array (got %s)", json_type_name(v->type));
    struct config *cfg = c->cfg;
    cfg->events = calloc(v->count ? v->count : 1, sizeof *cfg->events);
    for (size_t i = 0; i < v->count; i++) {
        const struct json_value *e = v->items[i];
        char where[64], field[96];
        snprintf(where, sizeof where, "events[%zu]", i);
        if (e->type != JSON_OBJECT)
            return field_error(c, where, "must be an object (got %s)", json_type_name(e->type));
        if (check_keys(c, e, where, keys) < 0)
            return -1;
        struct event *ev = &cfg->events[i];
        const struct json_value *at = json_get(e, "at_s");
        snprintf(field, sizeof field, "%s.at_s", where);
        if (!at)
            return field_error(c, field, "required (seconds from the start of the event clock)");
        if (get_number(c, field, at, 0, 1e7, &ev->at_s) < 0)
            return -1;
        const struct json_value *dir = json_get(e, "dir");
        snprintf(field, sizeof field, "%s.dir", where);
        ev->dirs = (1u << DIR_A_TO_B) | (1u << DIR_B_TO_A);
        if (dir) {
            if (dir->type != JSON_STRING)
                return field_error(c, field, "must be \"both\", \"a_to_b\" or \"b_to_a\"");
            if (strcmp(dir->string, "a_to_b") == 0)
                ev->dirs = 1u << DIR_A_TO_B;
            else if (strcmp(dir->string, "b_to_a") == 0)
                ev->dirs = 1u << DIR_B_TO_A;
            else if (strcmp(dir->string, "both") != 0)
                return field_error(c, field, "must be \"both\", \"a_to_b\" or \"b_to_a\" "
                                   "(got \"%s\")", dir->string);
        }
        const struct json_value *set = json_get(e, "set");
        snprintf(field, sizeof field, "%s.set", where);
        if (!set)
            return field_error(c, field, "required (the LINK fields to change)");
        if (parse_link(c, set, field, &ev->set) < 0)
            return -1;
        if (ev->set.fields == 0)
            return field_error(c, field, "changes nothing (name at least one LINK field)");
        cfg->n_events++;
    }
    /* Insertion sort: stable, so events at the same time apply in file order. */
    for (size_t i = 1; i < cfg->n_events; i++) {
        struct event key = cfg->events[i];
        size_t j = i;
        while (j > 0 && compare_events(&cfg->events[j - 1], &key) > 0) {
            cfg->events[j] = cfg->events[j - 1];
            j--;
        }
        cfg->events[j] = key;
    }
    return 0;
}

static char *read_file(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n + 1 == cap) {
            cap *= 2;
            char *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                buf = NULL;
            }
            buf = b;
        }
    }
    fclose(f);
    if (!buf) {
        snprintf(err, errlen, "out of memory reading %s", path);
        return NULL;
    }
    buf[n] = '\0';
    if (strlen(buf) != n) {
        free(buf);
        snprintf(err, errlen, "%s: contains a NUL byte, not a JSON file", path);
        return NULL;
    }
    return buf;
}

static const struct link_params DEFAULT_LINK = {
    .rate_bps = 0, .trace = NULL, .delay_ms = 0, .jitter_ms = 0, .loss = 0,
    .queue_bytes = -1, .queue_packets = -1, .down = false,
    .codel = false, .codel_target_ms = 5.0, .codel_interval_ms = 100.0,
};

int config_load(const char *path, struct config *cfg, char *err, size_t errlen)
{
    static const char *const keys[] = {"tun_a", "tun_b", "seed", "a_to_b", "b_to_a",
                                       "events", "stats_path", "delay_log", NULL};
    memset(cfg, 0, sizeof *cfg);
    struct ctx c = {.cfg = cfg, .err = err, .errlen = errlen};
    char *text = read_file(path, err, errlen);
    if (!text)
        return -1;
    char jerr[200];
    struct json_value *root = json_parse(text, jerr, sizeof jerr);
    free(text);
    if (!root) {
        snprintf(err, errlen, "%s", jerr);
        return -1;
    }
    int rc = -1;
    const struct json_value *v;
    if (root->type != JSON_OBJECT) {
        field_error(&c, "(top level)", "must be an object");
        goto out;
    }
    if (check_keys(&c, root, "", keys) < 0 || parse_tun(&c, root, "tun_a", cfg->tun[0]) < 0 ||
        parse_tun(&c, root, "tun_b", cfg->tun[1]) < 0)
        goto out;
    if (strcmp(cfg->tun[0], cfg->tun[1]) == 0) {
        field_error(&c, "tun_b", "must differ from tun_a");
        goto out;
    }
    cfg->seed = 1;
    if ((v = json_get(root, "seed"))) {
        int64_t s;
        if (get_int(&c, "seed", v, 0, MAX_EXACT_INT, &s) < 0)
            goto out;
        cfg->seed = (uint64_t)s;
    }
    static const char *const dir_keys[N_DIRS] = {"a_to_b", "b_to_a"};
    for (int d = 0; d < N_DIRS; d++) {
        struct link_patch patch = {.v = DEFAULT_LINK};
        if ((v = json_get(root, dir_keys[d])) && parse_link(&c, v, dir_keys[d], &patch) < 0)
            goto out;
        cfg->link[d] = patch.v;
    }
    if ((v = json_get(root, "events")) && parse_events(&c, v) < 0)
        goto out;
    if ((v = json_get(root, "stats_path")) && v->type != JSON_NULL) {
        if (v->type != JSON_STRING || !*v->string) {
            field_error(&c, "stats_path", "must be a file path or null");
            goto out;
        }
        cfg->stats_path = strdup(v->string);
    }
    if ((v = json_get(root, "delay_log")) && v->type != JSON_NULL) {
        if (v->type != JSON_STRING || !*v->string) {
            field_error(&c, "delay_log", "must be a file path or null");
            goto out;
        }
        cfg->delay_log = strdup(v->string);
    }
    rc = 0;
out:
    json_free(root);
    if (rc < 0)
        config_free(cfg);
    return rc;
}

void config_free(struct config *cfg)
{
    for (size_t i = 0; i < cfg->n_traces; i++)
        trace_free(cfg->traces[i]);
    free(cfg->traces);
    free(cfg->events);
    free(cfg->stats_path);
    free(cfg->delay_log);
    memset(cfg, 0, sizeof *cfg);
}

void link_patch_apply(const struct link_patch *patch, struct link_params *p)
{
    const struct link_params *v = &patch->v;
    if (patch->fields & FIELD_RATE) p->rate_bps = v->rate_bps;
    if (patch->fields & FIELD_TRACE) p->trace = v->trace;
    if (patch->fields & FIELD_DELAY) p->delay_ms = v->delay_ms;
    if (patch->fields & FIELD_JITTER) p->jitter_ms = v->jitter_ms;
    if (patch->fields & FIELD_LOSS) p->loss = v->loss;
    if (patch->fields & FIELD_QUEUE_BYTES) p->queue_bytes = v->queue_bytes;
    if (patch->fields & FIELD_QUEUE_PACKETS) p->queue_packets = v->queue_packets;
    if (patch->fields & FIELD_DOWN) p->down = v->down;
    if (patch->fields & FIELD_AQM) p->codel = v->codel;
    if (patch->fields & FIELD_CODEL_TARGET) p->codel_target_ms = v->codel_target_ms;
    if (patch->fields & FIELD_CODEL_INTERVAL) p->codel_interval_ms = v->codel_interval_ms;
}

/* DEFAULT QUEUE. A drop-tail queue much shorter than the bandwidth-delay product keeps a
 * single TCP flow below the link rate: after a loss, CUBIC (Reno) shrinks its window to 0.7
 * (0.5) of what the path held, and the link idles unless the queue covered the difference.
 * The default therefore holds one BDP of the configured round trip (both directions' delays),
 * but never less than 20 ms at the link rate nor 32 full-size packets: senders burst (a
 * busy host sends late, then a window at once), and at 10 Mbit/s over 10 ms a 16-packet
 * queue let one cubic flow reach only 86-95% on this machine, 32 packets 96.5% every time. */
#define DEFAULT_QUEUE_MIN_MS 20.0
#define DEFAULT_QUEUE_MIN_PACKETS 32

struct link_params link_params_resolve(const struct link_params *configured, double rtt_ms)
{
    struct link_params p = *configured;
    if (p.queue_bytes >= 0 || p.queue_packets >= 0)
        return p;
    uint64_t rate = p.trace ? trace_mean_bps(p.trace) : p.rate_bps;
    if (rate == 0)
        return p;  /* unlimited rate: nothing ever waits */
    double ms = rtt_ms > DEFAULT_QUEUE_MIN_MS ? rtt_ms : DEFAULT_QUEUE_MIN_MS;
    double bytes = (double)rate / 8.0 * ms / 1000.0;
    double floor_bytes = DEFAULT_QUEUE_MIN_PACKETS * 1500.0;
    p.queue_bytes = (int64_t)(bytes > floor_bytes ? bytes : floor_bytes);
    return p;
}
