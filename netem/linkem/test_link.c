/* Tests of the link model under a fake clock: exact times, exact counts.
 *
 *   linkem-test            run every test
 *   linkem-test NAME...    run the named tests
 *   linkem-test --list     print the test names
 *
 * Exit status 0 when every test selected passed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codel.h"
#include "config.h"
#include "link.h"
#include "pie.h"

#define MS(x) ((uint64_t)((x) * (double)NS_PER_MS))
#define MAX_RECS 400000

struct delivery {
    uint64_t now;    /* when the fake clock handed it over */
    uint64_t t;      /* model release time */
    uint64_t enq;    /* arrival at the link */
    uint32_t len;
};

static struct delivery recs[MAX_RECS];
static size_t n_recs;

static void record(void *ctx, struct packet *p, uint64_t now)
{
    (void)ctx;
    if (n_recs < MAX_RECS)
        recs[n_recs++] = (struct delivery){.now = now, .t = p->t, .enq = p->enq, .len = p->len};
    free(p);
}

#define CHECK(cond, ...)                                                             \
    do {                                                                             \
        if (!(cond)) {                                                               \
            printf("  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                 \
            printf(__VA_ARGS__);                                                     \
            printf("\n");                                                            \
            return 1;                                                                \
        }                                                                            \
    } while (0)

static struct link_params params(void)
{
    struct link_params p = {.queue_bytes = -1, .queue_packets = -1, .aqm = &aqm_none};
    aqm_param_defaults(p.aqm_param);
    return p;
}

/* A discipline's parameter by its LINK key (aborts on a key no discipline has). */
static double *param(struct link_params *p, const char *key)
{
    int slot = aqm_param_slot(key);
    if (slot < 0)
        abort();
    return &p->aqm_param[slot];
}

static void start(struct link *l, const struct link_params *p, uint64_t seed)
{
    n_recs = 0;
    link_init(l, p, seed, 0, record, NULL);
}

/* The event loop's job under a fake clock: wake exactly at each deadline up to end. */
static void run_until(struct link *l, uint64_t end)
{
    for (;;) {
        uint64_t d = link_next_deadline(l);
        if (d > end)
            break;
        link_advance(l, d);
    }
    link_advance(l, end);
}

static void arrive(struct link *l, uint64_t t, uint32_t len, int count)
{
    run_until(l, t);
    for (int i = 0; i < count; i++)
        link_enqueue(l, packet_new(NULL, len), t);
}

static int conserved(const struct link *l)
{
    const struct link_stats *s = &l->st;
    return s->packets_in == s->packets_out + s->dropped_queue_packets +
                                s->dropped_loss_packets + s->dropped_down_packets +
                                s->dropped_aqm_packets;
}

static char trace_path[64];

static const struct trace *write_trace(const char *content)
{
    static struct trace *t;
    trace_free(t);
    strcpy(trace_path, "/tmp/linkem-test-XXXXXX");
    int fd = mkstemp(trace_path);
    if (fd < 0 || write(fd, content, strlen(content)) != (ssize_t)strlen(content))
        abort();
    close(fd);
    char err[256];
    t = trace_load(trace_path, err, sizeof err);
    unlink(trace_path);
    if (!t) {
        printf("  trace_load: %s\n", err);
        abort();
    }
    return t;
}

/* ---- tests ---- */

static int test_fixed_rate_serialization(void)
{
    struct link l;
    struct link_params p = params();
    p.rate_bps = 12000000; /* 1500 bytes = 1 ms */
    start(&l, &p, 1);
    arrive(&l, 0, 1500, 10);
    run_until(&l, MS(100));
    CHECK(n_recs == 10, "delivered %zu", n_recs);
    for (size_t i = 0; i < n_recs; i++) {
        CHECK(recs[i].t == MS(i + 1), "packet %zu released at %llu ns", i,
              (unsigned long long)recs[i].t);
        CHECK(recs[i].now == recs[i].t, "packet %zu handed over late", i);
    }
    /* After idling, a packet starts serialising when it arrives, not at the old schedule. */
    arrive(&l, MS(200), 1500, 1);
    run_until(&l, MS(300));
    CHECK(n_recs == 11 && recs[10].t == MS(201), "after idle: %llu",
          (unsigned long long)recs[10].t);
    link_free(&l);
    return 0;
}

static int test_fixed_rate_exact_over_busy_period(void)
{
    /* 1000 x 1000 bytes at 7 Mbit/s: 8e6 bits take 8/7 s; per-packet rounding must not add up. */
    struct link l;
    struct link_params p = params();
    p.rate_bps = 7000000;
    start(&l, &p, 1);
    arrive(&l, 0, 1000, 1000);
    run_until(&l, 2 * NS_PER_S);
    CHECK(n_recs == 1000, "delivered %zu", n_recs);
    uint64_t expect = 8000000ULL * NS_PER_S / 7000000ULL;
    CHECK(recs[999].t == expect, "last at %llu, expected %llu",
          (unsigned long long)recs[999].t, (unsigned long long)expect);
    link_free(&l);
    return 0;
}

static int test_delay(void)
{
    struct link l;
    struct link_params p = params();
    p.delay_ms = 25;
    start(&l, &p, 1);
    arrive(&l, MS(3), 100, 1);
    run_until(&l, MS(27.999));
    CHECK(n_recs == 0, "delivered before its delay");
    run_until(&l, MS(100));
    CHECK(n_recs == 1 && recs[0].t == MS(28) && recs[0].now == MS(28), "released at %llu",
          (unsigned long long)recs[0].t);
    link_free(&l);

    /* Serialisation then propagation. */
    p.rate_bps = 12000000;
    p.delay_ms = 10;
    start(&l, &p, 1);
    arrive(&l, 0, 1500, 2);
    run_until(&l, MS(100));
    CHECK(n_recs == 2 && recs[0].t == MS(11) && recs[1].t == MS(12), "released at %llu, %llu",
          (unsigned long long)recs[0].t, (unsigned long long)recs[1].t);
    link_free(&l);
    return 0;
}

static int test_zero_delay_unlimited_is_immediate(void)
{
    struct link l;
    struct link_params p = params();
    start(&l, &p, 1);
    arrive(&l, MS(5), 1500, 3);
    CHECK(n_recs == 3 && recs[2].now == MS(5), "delivered %zu", n_recs);
    link_free(&l);
    return 0;
}

static int test_queue_packet_limit(void)
{
    struct link l;
    struct link_params p = params();
    p.rate_bps = 12000000;
    p.queue_packets = 5;
    start(&l, &p, 1);
    arrive(&l, 0, 1500, 10);  /* 1 on the wire, 5 waiting, 4 dropped */
    run_until(&l, MS(100));
    CHECK(n_recs == 6, "delivered %zu", n_recs);
    CHECK(l.st.dropped_queue_packets == 4, "dropped %llu",
          (unsigned long long)l.st.dropped_queue_packets);
    CHECK(l.st.max_queue_packets == 5, "max queue %llu",
          (unsigned long long)l.st.max_queue_packets);
    CHECK(conserved(&l), "packet accounting does not add up");
    link_free(&l);
    return 0;
}

static int test_queue_byte_limit(void)
{
    struct link l;
    struct link_params p = params();
    p.rate_bps = 12000000;
    p.queue_bytes = 4000;
    start(&l, &p, 1);
    arrive(&l, 0, 1500, 10);  /* 1 on the wire, 2 waiting (3000 B; a third would be 4500) */
    CHECK(l.st.dropped_queue_packets == 7, "dropped %llu",
          (unsigned long long)l.st.dropped_queue_packets);
    /* Small packets still fit in the remaining 1000 bytes. */
    arrive(&l, 0, 500, 3);
    CHECK(l.st.dropped_queue_packets == 8, "small packets: dropped %llu",
          (unsigned long long)l.st.dropped_queue_packets);
    CHECK(l.st.dropped_queue_bytes == 7 * 1500 + 500, "dropped bytes %llu",
          (unsigned long long)l.st.dropped_queue_bytes);
    run_until(&l, MS(100));
    CHECK(n_recs == 5, "delivered %zu", n_recs);
    CHECK(conserved(&l), "packet accounting does not add up");
    link_free(&l);
    return 0;
}

static uint64_t count_losses(double loss, uint64_t seed, int n)
{
    struct link l;
    struct link_params p = params();
    p.loss = loss;
    start(&l, &p, seed);
    for (int i = 0; i < n; i++)
        link_enqueue(&l, packet_new(NULL, 100), (uint64_t)i * 1000);
    uint64_t lost = l.st.dropped_loss_packets;
    int ok = conserved(&l) && l.st.packets_out + lost == (uint64_t)n;
    link_free(&l);
    return ok ? lost : UINT64_MAX;
}

static int test_loss_fraction_seeded(void)
{
    const int n = 200000;
    uint64_t a = count_losses(0.1, 42, n);
    CHECK(a != UINT64_MAX, "accounting");
    double frac = (double)a / n;
    /* sd of the fraction = sqrt(0.1*0.9/n) = 0.00067; allow 5 sd */
    CHECK(fabs(frac - 0.1) < 0.0034, "lost fraction %.5f", frac);
    CHECK(count_losses(0.1, 42, n) == a, "same seed, different drops");
    CHECK(count_losses(0.1, 43, n) != a, "different seed, same drops");
    CHECK(count_losses(0.0, 42, 10000) == 0, "loss 0 dropped packets");
    CHECK(count_losses(1.0, 42, 10000) == 10000, "loss 1 let packets through");
    double f2 = (double)count_losses(0.02, 7, n) / n;
    CHECK(fabs(f2 - 0.02) < 0.0016, "2%% loss: lost fraction %.5f", f2);
    return 0;
}

static int test_trace_opportunities_and_wrap(void)
{
    /* Opportunities at 1, 1, 3, 5 ms, period 5 ms: then 6, 6, 8, 10, 11, 11, ... */
    const struct trace *tr = write_trace("1\n1\n3\n5\n");
    CHECK(tr->count == 4 && tr->period_ms == 5, "parsed %zu lines, period %llu", tr->count,
          (unsigned long long)tr->period_ms);
    struct link l;
    struct link_params p = params();
    p.trace = tr;
    start(&l, &p, 1);
    arrive(&l, 0, 1500, 8);
    run_until(&l, MS(100));
    const double expect[] = {1, 1, 3, 5, 6, 6, 8, 10};
    CHECK(n_recs == 8, "delivered %zu", n_recs);
    for (size_t i = 0; i < 8; i++)
        CHECK(recs[i].t == MS(expect[i]), "packet %zu at %llu ns, expected %g ms", i,
              (unsigned long long)recs[i].t, expect[i]);
    link_free(&l);
    return 0;
}

static int test_trace_byte_accounting(void)
{
    const struct trace *tr = write_trace("1\n3\n5\n");
    struct link l;
    struct link_params p = params();
    p.trace = tr;

    /* Three 500-byte packets share one 1500-byte opportunity. */
    start(&l, &p, 1);
    arrive(&l, 0, 500, 3);
    run_until(&l, MS(100));
    CHECK(n_recs == 3 && recs[2].t == MS(1), "small packets: last at %llu",
          (unsigned long long)recs[2].t);
    link_free(&l);

    /* 1000 + 1000 bytes: the second rides half in the first opportunity, half in the next. */
    start(&l, &p, 1);
    arrive(&l, 0, 1000, 2);
    run_until(&l, MS(100));
    CHECK(n_recs == 2 && recs[0].t == MS(1) && recs[1].t == MS(3), "split: %llu, %llu",
          (unsigned long long)recs[0].t, (unsigned long long)recs[1].t);
    link_free(&l);

    /* A 4000-byte packet needs three opportunities. */
    start(&l, &p, 1);
    arrive(&l, 0, 4000, 1);
    run_until(&l, MS(100));
    CHECK(n_recs == 1 && recs[0].t == MS(5), "jumbo at %llu", (unsigned long long)recs[0].t);
    link_free(&l);
    return 0;
}

static int test_trace_wasted_when_idle(void)
{
    /* Opportunities 1, 3, 5 | 6, 8, 10 | 11, 13, 15 ... */
    const struct trace *tr = write_trace("1\n3\n5\n");
    struct link l;
    struct link_params p = params();
    p.trace = tr;
    start(&l, &p, 1);
    CHECK(link_next_deadline(&l) == UINT64_MAX, "an idle trace link wants wake-ups");
    arrive(&l, MS(2), 1500, 1);   /* the opportunity at 1 ms passed unused */
    arrive(&l, MS(12), 1500, 2);  /* 6, 8, 10, 11 wasted; next are 13 and 15 */
    run_until(&l, MS(100));
    CHECK(n_recs == 3, "delivered %zu", n_recs);
    CHECK(recs[0].t == MS(3) && recs[1].t == MS(13) && recs[2].t == MS(15),
          "at %llu, %llu, %llu", (unsigned long long)recs[0].t, (unsigned long long)recs[1].t,
          (unsigned long long)recs[2].t);
    link_free(&l);
    return 0;
}

static int test_trace_capacity_real_file(void)
{
    /* A trace file on disk (varying-5mbit.down in LINKEM_TRACES_DIR, written by the test
     * runner with a mean of exactly 5.0 Mbit/s): its mean capacity is read back, and a link
     * kept saturated for one period carries exactly one full packet per opportunity. */
    const char *dir = getenv("LINKEM_TRACES_DIR");
    if (!dir) {
        printf("  (skipped: LINKEM_TRACES_DIR not set)\n");
        return 0;
    }
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/varying-5mbit.down", dir);
    struct trace *tr = trace_load(path, err, sizeof err);
    CHECK(tr != NULL, "%s", err);
    uint64_t mean = trace_mean_bps(tr);
    CHECK(mean > 4950000 && mean < 5050000, "mean capacity %llu", (unsigned long long)mean);
    struct link l;
    struct link_params p = params();
    p.trace = tr;
    start(&l, &p, 1);
    uint64_t period = tr->period_ms * NS_PER_MS;
    for (uint64_t t = 0; t < period; t += MS(1)) {
        run_until(&l, t);
        while (l.q_packets < 1000)
            link_enqueue(&l, packet_new(NULL, 1500), t);
    }
    run_until(&l, period);
    /* Opportunities at 0 ms pass before the first packet arrives; the next period's 0 ms
     * ones fall exactly at `period` and are used instead: one period's worth in all. */
    CHECK(l.st.packets_out == tr->count, "carried %llu packets, trace has %zu opportunities",
          (unsigned long long)l.st.packets_out, tr->count);
    link_free(&l);
    trace_free(tr);
    return 0;
}

/* Delays of n packets sent every gap_ns with delay 10 ms, jitter 5 ms; fails on reordering. */
static int jitter_run(uint64_t gap_ns, int n, double *mean, double *sd, double *min, double *max)
{
    struct link l;
    struct link_params p = params();
    p.delay_ms = 10;
    p.jitter_ms = 5;
    start(&l, &p, 9);
    for (int i = 0; i < n; i++)
        arrive(&l, (uint64_t)i * gap_ns, 100, 1);
    run_until(&l, (uint64_t)n * gap_ns + MS(100));
    CHECK(n_recs == (size_t)n, "delivered %zu", n_recs);
    double sum = 0, sq = 0;
    *min = 1e18;
    *max = 0;
    for (int i = 0; i < n; i++) {
        double d = (double)(recs[i].t - (uint64_t)i * gap_ns) / 1e6;
        sum += d;
        sq += d * d;
        *min = d < *min ? d : *min;
        *max = d > *max ? d : *max;
        if (i)
            CHECK(recs[i].t >= recs[i - 1].t, "packet %d overtook its predecessor", i);
    }
    *mean = sum / n;
    *sd = sqrt(sq / n - *mean * *mean);
    link_free(&l);
    return 0;
}

static int test_jitter_never_reorders(void)
{
    double mean, sd, min, max;
    /* busy link: a packet every 0.1 ms */
    if (jitter_run(100000, 50000, &mean, &sd, &min, &max))
        return 1;
    CHECK(min >= 5.0 - 1e-6 && max <= 15.0 + 1e-6, "busy: delays in [%g, %g] ms", min, max);
    CHECK(max - min > 8, "busy: jitter barely varies the delay: [%g, %g]", min, max);
    CHECK(fabs(mean - 10) < 0.5, "busy: mean delay %g ms", mean);
    /* sparse packets (50 ms apart, more than the 10 ms range): independent uniform draws,
     * sd = 5 / sqrt(3) = 2.89 ms */
    if (jitter_run(MS(50), 4000, &mean, &sd, &min, &max))
        return 1;
    CHECK(fabs(mean - 10) < 0.25, "sparse: mean delay %g ms", mean);
    CHECK(fabs(sd - 2.89) < 0.2, "sparse: sd %g ms", sd);
    CHECK(min >= 5.0 - 1e-6 && max <= 15.0 + 1e-6, "sparse: delays in [%g, %g] ms", min, max);
    return 0;
}

static int test_down_drops_queue_keeps_flight(void)
{
    struct link l;
    struct link_params p = params();
    p.rate_bps = 12000000;
    p.delay_ms = 5;
    start(&l, &p, 1);
    arrive(&l, 0, 1500, 5);            /* serialised at 1, 2, 3, 4, 5 ms, arrive at 6, 7, ... */
    run_until(&l, MS(2.5));
    struct link_params down = p;
    down.down = true;
    link_set_params(&l, &down, MS(2.5));
    /* on the wire: packets 1 and 2 (left the server at 1 and 2 ms); lost: 3 (half
     * serialised) and 4, 5 (queued) */
    CHECK(l.st.dropped_down_packets == 3, "dropped %llu at down",
          (unsigned long long)l.st.dropped_down_packets);
    arrive(&l, MS(4), 1500, 2);
    CHECK(l.st.dropped_down_packets == 5, "arrivals while down: dropped %llu",
          (unsigned long long)l.st.dropped_down_packets);
    run_until(&l, MS(10));
    CHECK(n_recs == 2 && recs[0].t == MS(6) && recs[1].t == MS(7), "in flight: %zu", n_recs);
    link_set_params(&l, &p, MS(10));
    arrive(&l, MS(10), 1500, 1);
    run_until(&l, MS(100));
    CHECK(n_recs == 3 && recs[2].t == MS(16), "after up: %zu, %llu", n_recs,
          (unsigned long long)recs[n_recs - 1].t);
    CHECK(conserved(&l), "packet accounting does not add up");
    link_free(&l);
    return 0;
}

static int test_rate_change_event(void)
{
    struct link l;
    struct link_params p = params();
    p.rate_bps = 12000000;
    start(&l, &p, 1);
    arrive(&l, 0, 1500, 5);
    run_until(&l, MS(2.5));
    struct link_params slow = p;
    slow.rate_bps = 6000000;  /* 2 ms a packet from the next one on */
    link_set_params(&l, &slow, MS(2.5));
    run_until(&l, MS(100));
    const double expect[] = {1, 2, 3, 5, 7};
    CHECK(n_recs == 5, "delivered %zu", n_recs);
    for (int i = 0; i < 5; i++)
        CHECK(recs[i].t == MS(expect[i]), "packet %d at %llu", i, (unsigned long long)recs[i].t);
    link_free(&l);
    return 0;
}

static int test_mode_switches(void)
{
    /* fixed -> trace -> unlimited, with packets waiting at each switch */
    const struct trace *tr = write_trace("10\n20\n");
    struct link l;
    struct link_params p = params();
    p.rate_bps = 12000000;
    start(&l, &p, 1);
    arrive(&l, 0, 1500, 4);
    run_until(&l, MS(1.5));                  /* #1 out at 1 ms, #2 half serialised */
    struct link_params tp = params();
    tp.trace = tr;
    link_set_params(&l, &tp, MS(1.5));       /* trace starts now: opportunities 11.5, 21.5 */
    run_until(&l, MS(22));
    CHECK(n_recs == 3 && recs[1].t == MS(11.5) && recs[2].t == MS(21.5), "trace: %zu", n_recs);
    struct link_params un = params();
    link_set_params(&l, &un, MS(25));        /* the last one is released at once */
    CHECK(n_recs == 4 && recs[3].t == MS(25), "unlimited: %zu", n_recs);
    CHECK(conserved(&l), "packet accounting does not add up");
    link_free(&l);
    return 0;
}

static int test_default_queue(void)
{
    struct link_params p = params();
    p.rate_bps = 100000000;
    struct link_params r = link_params_resolve(&p, 40);
    CHECK(r.queue_bytes == 500000 && r.queue_packets == -1, "100 Mbit/s, 40 ms: %lld",
          (long long)r.queue_bytes);
    p.rate_bps = 100000000;
    r = link_params_resolve(&p, 2);  /* at least 20 ms at the rate */
    CHECK(r.queue_bytes == 250000, "100 Mbit/s, 2 ms: %lld", (long long)r.queue_bytes);
    p.rate_bps = 1000000;
    r = link_params_resolve(&p, 0);  /* at least 32 packets */
    CHECK(r.queue_bytes == 48000, "1 Mbit/s: %lld", (long long)r.queue_bytes);
    p.queue_packets = 50;
    r = link_params_resolve(&p, 0);
    CHECK(r.queue_bytes == -1 && r.queue_packets == 50, "an explicit limit was replaced");
    p = params();
    r = link_params_resolve(&p, 100);
    CHECK(r.queue_bytes == -1, "unlimited rate got a queue");
    return 0;
}

/* Loads a config written from json; returns config_load's result, the error in err. */
static int load_config(const char *json, struct config *cfg, char *err, size_t errlen)
{
    char path[] = "/tmp/linkem-config-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, json, strlen(json)) != (ssize_t)strlen(json))
        abort();
    close(fd);
    int rc = config_load(path, cfg, err, errlen);
    unlink(path);
    return rc;
}

static int test_config_events(void)
{
    /* Events come out sorted by time, ties in file order; patches change only their fields. */
    const char *json =
        "{\"tun_a\": \"ta\", \"tun_b\": \"tb\", \"seed\": 5,\n"
        " \"a_to_b\": {\"rate_bps\": 1000000, \"delay_ms\": 7.5, \"queue_packets\": 9},\n"
        " \"events\": [{\"at_s\": 3, \"dir\": \"b_to_a\", \"set\": {\"loss\": 0.5}},\n"
        "   {\"at_s\": 1, \"set\": {\"down\": true}},\n"
        "   {\"at_s\": 3, \"dir\": \"a_to_b\", \"set\": {\"rate_bps\": null, \"delay_ms\": 1}}]}";
    struct config cfg;
    char err[512];
    int rc = load_config(json, &cfg, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    CHECK(cfg.seed == 5 && strcmp(cfg.tun[0], "ta") == 0 && cfg.stats_path == NULL, "top level");
    CHECK(cfg.link[0].rate_bps == 1000000 && cfg.link[0].delay_ms == 7.5 &&
          cfg.link[0].queue_packets == 9 && cfg.link[0].queue_bytes == -1, "a_to_b");
    CHECK(cfg.link[1].rate_bps == 0 && cfg.link[1].queue_packets == -1, "b_to_a defaults");
    CHECK(cfg.n_events == 3, "%zu events", cfg.n_events);
    CHECK(cfg.events[0].at_s == 1 && cfg.events[0].dirs == 3, "first event");
    CHECK(cfg.events[1].at_s == 3 && cfg.events[1].dirs == 1u << DIR_B_TO_A, "tie order");
    CHECK(cfg.events[2].dirs == 1u << DIR_A_TO_B, "tie order");
    struct link_params p = cfg.link[0];
    link_patch_apply(&cfg.events[2].set, &p);
    CHECK(p.rate_bps == 0 && p.delay_ms == 1 && p.queue_packets == 9 && !p.down,
          "patched: rate %llu delay %g", (unsigned long long)p.rate_bps, p.delay_ms);
    link_patch_apply(&cfg.events[0].set, &p);
    CHECK(p.down && p.delay_ms == 1, "down patch");
    config_free(&cfg);
    return 0;
}

/* Every discipline's parameters: keys named after it, defaults within their range, the RFCs'
 * defaults where the config names none. */
static int test_aqm_params_registry(void)
{
    size_t n = aqm_n_params();
    CHECK(n >= 4 && n <= AQM_MAX_PARAMS, "%zu parameters", n);
    for (size_t slot = 0; slot < n; slot++) {
        const struct aqm_param *a = aqm_param_at(slot);
        const struct aqm_ops *owner = aqm_of_key(a->key);
        CHECK(owner && owner->params <= a && a < owner->params + owner->n_params,
              "%s is not named after its discipline", a->key);
        CHECK(aqm_param_slot(a->key) == (int)slot, "%s is given twice", a->key);
        CHECK(a->lo > 0 && a->lo <= a->def && a->def <= a->hi, "%s: default %g outside %g..%g",
              a->key, a->def, a->lo, a->hi);
    }
    CHECK(aqm_param_at(n) == NULL && aqm_param_slot("codel_target") == -1, "beyond the table");
    struct link_params p = params();
    CHECK(*param(&p, "codel_target_ms") == 5 && *param(&p, "codel_interval_ms") == 100,
          "CoDel's defaults (RFC 8289)");
    CHECK(*param(&p, "pie_target_ms") == 15 && *param(&p, "pie_tupdate_ms") == 15,
          "PIE's defaults (RFC 8033)");
    return 0;
}

/* A discipline's parameters in a config: read into their slots, the rest at their defaults;
 * an event's patch changes only the one it names; a key that names a discipline but none of
 * its parameters is refused with the ones it has. */
static int test_config_aqm_params(void)
{
    struct config cfg;
    char err[512];
    int rc = load_config(
        "{\"tun_a\": \"ta\", \"tun_b\": \"tb\",\n"
        " \"a_to_b\": {\"aqm\": \"pie\", \"pie_target_ms\": 5, \"codel_interval_ms\": 50},\n"
        " \"events\": [{\"at_s\": 1, \"set\": {\"pie_tupdate_ms\": 30}}]}", &cfg, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    struct link_params a = cfg.link[DIR_A_TO_B], b = cfg.link[DIR_B_TO_A];
    CHECK(a.aqm == aqm_find("pie") && *param(&a, "pie_target_ms") == 5 &&
          *param(&a, "pie_tupdate_ms") == 15, "a_to_b: pie %g/%g", *param(&a, "pie_target_ms"),
          *param(&a, "pie_tupdate_ms"));
    CHECK(*param(&a, "codel_interval_ms") == 50 && *param(&a, "codel_target_ms") == 5,
          "a_to_b: another discipline's parameter");
    CHECK(b.aqm == &aqm_none && *param(&b, "pie_target_ms") == 15, "b_to_a: defaults");
    link_patch_apply(&cfg.events[0].set, &a);
    CHECK(*param(&a, "pie_tupdate_ms") == 30 && *param(&a, "pie_target_ms") == 5 &&
          a.aqm == aqm_find("pie"), "patched: %g/%g", *param(&a, "pie_target_ms"),
          *param(&a, "pie_tupdate_ms"));
    config_free(&cfg);

    rc = load_config("{\"tun_a\": \"ta\", \"tun_b\": \"tb\", \"b_to_a\": {\"pie_alpha\": 1}}",
                     &cfg, err, sizeof err);
    CHECK(rc < 0 && strcmp(err, "b_to_a.pie_alpha: not a parameter of pie (its parameters: "
                                "pie_target_ms, pie_tupdate_ms)") == 0, "%s", rc ? err : "ok");
    rc = load_config("{\"tun_a\": \"ta\", \"tun_b\": \"tb\", \"events\": [{\"at_s\": 1, "
                     "\"set\": {\"none_x\": 1}}]}", &cfg, err, sizeof err);
    CHECK(rc < 0 && strstr(err, "events[0].set.none_x: ") && strstr(err, "none takes none"),
          "%s", rc ? err : "ok");
    rc = load_config("{\"tun_a\": \"ta\", \"tun_b\": \"tb\", \"a_to_b\": {\"pie_target_ms\": 0}}",
                     &cfg, err, sizeof err);
    CHECK(rc < 0 && strstr(err, "a_to_b.pie_target_ms: must be between 0.001 and 60000"), "%s",
          rc ? err : "ok");
    return 0;
}

static int test_wakeups_only_for_deliveries(void)
{
    /* Rate + delay, no jitter: every deadline the loop is given is a packet's release. */
    struct link l;
    struct link_params p = params();
    p.rate_bps = 12000000;
    p.delay_ms = 10;
    start(&l, &p, 1);
    arrive(&l, 0, 1500, 10);
    int wakeups = 0;
    uint64_t d;
    while ((d = link_next_deadline(&l)) != UINT64_MAX) {
        size_t before = n_recs;
        link_advance(&l, d);
        wakeups++;
        CHECK(n_recs == before + 1, "wake-up %d at %llu delivered %zu packets", wakeups,
              (unsigned long long)d, n_recs - before);
        CHECK(recs[n_recs - 1].t == d && d == MS(11 + n_recs - 1), "released at %llu",
              (unsigned long long)d);
    }
    CHECK(wakeups == 10, "%d wake-ups for 10 packets", wakeups);
    link_free(&l);
    return 0;
}

struct test {
    const char *name;
    int (*fn)(void);
};


/* ---- CoDel (RFC 8289) ----
 * A 1500-byte packet takes exactly 1 ms at 12 Mbit/s. N packets arrive together at t = 0: the
 * first is served at once, packet k (k >= 1) waits in the queue and is dequeued at k ms (one
 * ms later per packet dropped before it), its sojourn time being its dequeue time. */

static struct link_params codel_params(void)
{
    struct link_params p = params();
    p.rate_bps = 12000000;
    p.aqm = aqm_find("codel");
    *param(&p, "codel_target_ms") = 5.0;
    *param(&p, "codel_interval_ms") = 100.0;
    return p;
}

/* Steps the fake clock 1 ms at a time from where it is up to end_ms and records at which ms
 * each AQM drop from now on happened. */
static size_t codel_drop_times(struct link *l, int end_ms, int *times, size_t max)
{
    size_t n = 0;
    uint64_t seen = l->st.dropped_aqm_packets;
    for (int t = (int)(l->now / NS_PER_MS); t <= end_ms; t++) {
        run_until(l, MS(t));
        for (; seen < l->st.dropped_aqm_packets && n < max; seen++)
            times[n++] = t;
    }
    return n;
}

/* Drops begin only once the sojourn time has stayed above target for a whole interval: the
 * sojourn first reaches target (5 ms) at the dequeue at 5 ms, so the first drop is at 105 ms,
 * not before. Then each next drop follows the control law: interval / sqrt(count) after the
 * previous scheduled drop time, at the first dequeue at or after that time (dequeues fall on
 * whole ms here). */
static int test_codel_drop_schedule(void)
{
    struct link l;
    struct link_params p = codel_params();
    start(&l, &p, 1);
    arrive(&l, 0, 1500, 600);
    int times[64];
    size_t n = codel_drop_times(&l, 104, times, 64);
    CHECK(n == 0, "dropped %zu packets before 105 ms (first at %d ms)", n, n ? times[0] : -1);
    n = codel_drop_times(&l, 599, times, 64);
    CHECK(n >= 8, "only %zu drops in 600 ms of a standing queue", n);
    CHECK(times[0] == 105, "first drop at %d ms, want 105 (target reached at 5 ms + interval)",
          times[0]);
    double scheduled = 105.0;
    for (size_t i = 1; i < n; i++) {
        scheduled += 100.0 / sqrt((double)i);
        int want = (int)ceil(scheduled - 1e-9);
        CHECK(times[i] == want, "drop %zu at %d ms, want %d (interval/sqrt(%zu) after %.3f)",
              i + 1, times[i], want, i, scheduled - 100.0 / sqrt((double)i));
    }
    run_until(&l, MS(2000));
    CHECK(l.st.dropped_queue_packets == 0, "no tail drops: the queue has no limit");
    CHECK(conserved(&l), "packets conserved");
    link_free(&l);
    return 0;
}

/* A good queue is left alone: bursts that drain within an interval, however high the sojourn
 * time rises during them, never cause a drop; nor does a standing queue below target. */
static int test_codel_good_queue_no_drops(void)
{
    struct link l;
    struct link_params p = codel_params();
    start(&l, &p, 1);
    for (int b = 0; b < 10; b++)
        arrive(&l, MS(200 * b), 1500, 80);   /* sojourn up to 79 ms, drained by 80 ms */
    run_until(&l, MS(2000));
    CHECK(l.st.dropped_aqm_packets == 0, "%llu drops of a draining burst",
          (unsigned long long)l.st.dropped_aqm_packets);
    /* 4 packets every 4 ms on a 1 ms-a-packet link: sojourn 1..3 ms, always below target. */
    for (int t = 2000; t < 4000; t += 4)
        arrive(&l, MS(t), 1500, 4);
    run_until(&l, MS(4100));
    CHECK(l.st.dropped_aqm_packets == 0, "%llu drops below target",
          (unsigned long long)l.st.dropped_aqm_packets);
    CHECK(l.st.packets_out == l.st.packets_in, "everything delivered");
    link_free(&l);
    return 0;
}

/* Dropping stops as soon as a packet's sojourn falls below target, and a new episode soon
 * after (within 16 intervals) resumes near the previous drop rate (count = the previous
 * episode's drops beyond the first) instead of starting from 1. */
static int test_codel_leaves_and_resumes(void)
{
    struct link l;
    struct link_params p = codel_params();
    start(&l, &p, 1);
    arrive(&l, 0, 1500, 400);
    int times[64];
    size_t first = codel_drop_times(&l, 1000, times, 64);
    CHECK(first >= 4, "first episode dropped %zu", first);
    const struct codel *codel = l.aqm_state;
    CHECK(!codel->dropping, "still dropping after the queue drained");
    uint32_t count1 = codel->count;
    CHECK(count1 == first, "count %u after %zu drops", count1, first);
    /* The second standing queue starts at 1000 ms: its first drop is again one interval after
     * the sojourn reached target, at 1105 ms; the next comes interval/sqrt(count1 - 1 + 1)
     * later, not a whole interval later. */
    arrive(&l, MS(1000), 1500, 400);
    size_t n = codel_drop_times(&l, 1400, times, 64);
    CHECK(n >= 2 && times[0] == 1105, "second episode starts at %d ms", n ? times[0] : -1);
    uint32_t resumed = count1 - 1;   /* delta = count - lastcount, lastcount was 1 */
    int want = (int)ceil(1105.0 + 100.0 / sqrt((double)resumed) - 1e-9);
    CHECK(times[1] == want, "second drop at %d ms, want %d (count resumed at %u)", times[1],
          want, resumed);
    link_free(&l);
    return 0;
}

/* ---- PIE (RFC 8033, its default target 15 ms, update 15 ms, burst allowance 150 ms) ----
 * The same 12 Mbit/s link, 1 ms a 1500-byte packet, without a drop-tail limit: every drop is
 * the discipline's. */

static struct link_params pie_params(void)
{
    struct link_params p = params();
    p.rate_bps = 12000000;
    p.aqm = aqm_find("pie");
    return p;
}

static void start_pie(struct link *l)
{
    struct link_params p = pie_params();
    start(l, &p, 1);
}

/* From t_ms on, `per` packets every `every_ms` for `for_ms`. */
static void arrive_steadily(struct link *l, int t_ms, int per, int every_ms, int for_ms)
{
    for (int t = t_ms; t < t_ms + for_ms; t += every_ms)
        arrive(l, MS(t), 1500, per);
}

/* The mean sojourn of packets that left after from_ms, in ms. */
static double mean_sojourn_ms_after(int from_ms)
{
    uint64_t sum = 0, n = 0;
    for (size_t i = 0; i < n_recs; i++)
        if (recs[i].t >= MS(from_ms)) {
            sum += recs[i].t - recs[i].enq;
            n++;
        }
    return n ? (double)sum / (double)n / (double)NS_PER_MS : 0;
}

/* The longest sojourn among packets that left after from_ms. */
static double max_sojourn_ms_after(int from_ms)
{
    uint64_t max = 0;
    for (size_t i = 0; i < n_recs; i++)
        if (recs[i].t >= MS(from_ms) && recs[i].t - recs[i].enq > max)
            max = recs[i].t - recs[i].enq;
    return (double)max / (double)NS_PER_MS;
}

/* A standing queue: 1.5 times what the link carries, for 6 s. Nothing is dropped within the
 * burst allowance; then PIE drops arrivals at random until the queueing delay is held near its
 * target, where drop-tail without a limit would let it grow to 3 s. */
static int test_pie_drops_a_standing_queue(void)
{
    struct link l;
    start_pie(&l);
    arrive_steadily(&l, 0, 3, 2, 150);
    CHECK(l.st.dropped_aqm_packets == 0, "%llu drops within the burst allowance",
          (unsigned long long)l.st.dropped_aqm_packets);
    arrive_steadily(&l, 150, 3, 2, 5850);
    run_until(&l, MS(7000));
    const struct pie *pie = l.aqm_state;
    CHECK(l.st.dropped_aqm_packets > 1000, "only %llu drops of 9000 packets, 3000 too many",
          (unsigned long long)l.st.dropped_aqm_packets);
    CHECK(pie->drop_prob > 0.2 && pie->drop_prob < 0.5, "drop probability %.3f, want near 1/3",
          pie->drop_prob);
    double late = max_sojourn_ms_after(4000);
    CHECK(late < 60, "sojourns up to %.1f ms in the last 2 s, want near the 15 ms target",
          late);
    CHECK(l.st.dropped_queue_packets == 0 && conserved(&l), "packets conserved");
    link_free(&l);
    return 0;
}

/* PIE with its parameters set (pie_target_ms, pie_tupdate_ms). The standing queue above is held
 * near the target it is given: a mean sojourn near 12 ms with the default 15 ms, near 4 ms
 * with 5 ms. And the controller runs at the interval it is given. */
static int test_pie_parameters_apply(void)
{
    double mean[2];
    const double target[2] = {15, 5};
    struct link l;
    for (int i = 0; i < 2; i++) {
        struct link_params p = pie_params();
        *param(&p, "pie_target_ms") = target[i];
        start(&l, &p, 1);
        arrive_steadily(&l, 0, 3, 2, 6000);
        run_until(&l, MS(7000));
        mean[i] = mean_sojourn_ms_after(4000);
        CHECK(mean[i] > target[i] / 2 && mean[i] < target[i] * 2,
              "target %g ms: mean sojourn %.1f ms in the last 2 s", target[i], mean[i]);
        link_free(&l);
    }
    CHECK(mean[1] < mean[0] / 2, "target 5 ms: %.1f ms, target 15 ms: %.1f ms", mean[1], mean[0]);

    struct link_params p = pie_params();
    *param(&p, "pie_tupdate_ms") = 40;
    start(&l, &p, 1);
    const struct pie *pie = l.aqm_state;
    CHECK(pie->next_update == MS(40), "first update at %llu ns",
          (unsigned long long)pie->next_update);
    arrive_steadily(&l, 0, 3, 2, 1000);
    run_until(&l, MS(1010));
    CHECK(pie->next_update == MS(1040), "next update at %llu ns, want every 40 ms",
          (unsigned long long)pie->next_update);
    link_free(&l);
    return 0;
}

/* Short bursts: twice the link's rate for 60 ms every 500 ms, each drained within 120 ms. The
 * controller sees the delay (its drop probability rises) but the burst allowance lets every
 * packet through, and the idle queue between bursts earns the whole allowance back. */
static int test_pie_lets_short_bursts_through(void)
{
    struct link l;
    start_pie(&l);
    double highest = 0;
    for (int b = 0; b < 10; b++) {
        arrive(&l, MS(500 * b), 1500, 2);   /* the controller catches up on the second */
        const struct pie *pie = l.aqm_state;
        CHECK(pie->burst_allowance == MS(150) && pie->drop_prob == 0,
              "burst %d met an allowance of %.0f ms, drop probability %g", b,
              (double)pie->burst_allowance / (double)NS_PER_MS, pie->drop_prob);
        arrive_steadily(&l, 500 * b + 1, 2, 1, 59);
        run_until(&l, MS(500 * b + 100));
        if (pie->drop_prob > highest)
            highest = pie->drop_prob;
    }
    run_until(&l, MS(6000));
    CHECK(highest > 0, "the controller never reacted to the bursts");
    CHECK(l.st.dropped_aqm_packets == 0, "%llu drops of short bursts",
          (unsigned long long)l.st.dropped_aqm_packets);
    CHECK(l.st.packets_out == l.st.packets_in, "everything delivered");
    link_free(&l);
    return 0;
}

/* ---- the queueing-delay recorder (qdelay.h) ---- */

#define MAX_WINDOWS 64
static struct qdelay_window windows[MAX_WINDOWS];
static size_t n_windows;

static void keep_window(void *ctx, const struct qdelay_window *w)
{
    (void)ctx;
    if (n_windows < MAX_WINDOWS)
        windows[n_windows++] = *w;
}

static int near_bucket(double got_ms, double want_ms)
{
    /* A percentile is its bucket's geometric middle: within 2^(1/16) of the truth. */
    return got_ms <= want_ms * 1.0443 && got_ms >= want_ms / 1.0443;
}

static int test_queue_delay_known_burst(void)
{
    /* 12 Mbit/s: a 1500-byte packet takes exactly 1 ms. A burst of 10 at t = 0 leaves the
     * server at 1, 2, ..., 10 ms: sojourn times 1..10 ms (the wait plus its own
     * transmission). Mean 5.5 ms, max 10 ms; nearest-rank p50 = 5 ms, p95 = p99 = 10 ms. */
    struct link l;
    struct link_params p = params();
    p.rate_bps = 12000000;
    start(&l, &p, 1);
    n_windows = 0;
    link_on_window(&l, keep_window, NULL);
    arrive(&l, 0, 1500, 10);
    run_until(&l, MS(250));
    link_flush_window(&l, MS(250));
    CHECK(l.qd.packets == 10, "%llu samples", (unsigned long long)l.qd.packets);
    CHECK(l.qd.max_ns == MS(10), "max %llu ns", (unsigned long long)l.qd.max_ns);
    CHECK(l.qd.sum_ns == MS(55), "sum %llu ns", (unsigned long long)l.qd.sum_ns);
    double p50 = qdelay_percentile_ms(l.qd.hist, 0.50);
    double p95 = qdelay_percentile_ms(l.qd.hist, 0.95);
    double p99 = qdelay_percentile_ms(l.qd.hist, 0.99);
    CHECK(near_bucket(p50, 5.0) && near_bucket(p95, 10.0) && near_bucket(p99, 10.0),
          "p50 %g p95 %g p99 %g", p50, p95, p99);
    /* Windows of 100 ms: the burst in the first, then idle capacity, then the flushed half
     * window; each with what 12 Mbit/s could carry in it. */
    CHECK(n_windows == 3, "%zu windows", n_windows);
    CHECK(windows[0].start == 0 && windows[0].packets == 10 && windows[0].bytes == 15000,
          "first window %llu packets", (unsigned long long)windows[0].packets);
    CHECK(fabs(windows[0].capacity_bits - 1.2e6) < 1 &&
              fabs(windows[1].capacity_bits - 1.2e6) < 1 &&
              fabs(windows[2].capacity_bits - 0.6e6) < 1,
          "capacity %g %g %g", windows[0].capacity_bits, windows[1].capacity_bits,
          windows[2].capacity_bits);
    CHECK(windows[1].packets == 0 && windows[2].start == MS(200), "later windows");
    link_free(&l);
    return 0;
}

static int test_queue_delay_idle_packet_and_trace_capacity(void)
{
    /* A packet on an idle link waits for nobody: its sojourn is its transmission, 1 ms. */
    struct link l;
    struct link_params p = params();
    p.rate_bps = 12000000;
    start(&l, &p, 1);
    arrive(&l, MS(3), 1500, 1);
    run_until(&l, MS(20));
    CHECK(l.qd.max_ns == MS(1) && l.qd.packets == 1, "sojourn %llu ns",
          (unsigned long long)l.qd.max_ns);
    link_free(&l);

    /* A trace's capacity is its opportunities: 1, 3, 5 ms, repeating every 5 ms (5k + 1,
     * 5k + 3, 5k + 5): 59 in the first 100 ms window (20 periods of 3, less the one at 100 ms,
     * which opens the next window). */
    const struct trace *tr = write_trace("1\n3\n5\n");
    p = params();
    p.trace = tr;
    start(&l, &p, 1);
    n_windows = 0;
    link_on_window(&l, keep_window, NULL);
    arrive(&l, MS(2), 1500, 2);  /* out at 3 and 5 ms: sojourns 1 and 3 ms */
    run_until(&l, MS(100));
    CHECK(n_windows == 1, "%zu windows", n_windows);
    CHECK(fabs(windows[0].capacity_bits - 59 * 1500 * 8.0) < 1, "capacity %g bits",
          windows[0].capacity_bits);
    CHECK(windows[0].packets == 2 && windows[0].max_ns == MS(3) && windows[0].sum_ns == MS(4),
          "sojourns max %llu sum %llu", (unsigned long long)windows[0].max_ns,
          (unsigned long long)windows[0].sum_ns);
    link_free(&l);
    return 0;
}

static int test_queue_delay_buckets(void)
{
    /* Bucket edges: below 50 us is bucket 0; each octave above it has 8 buckets. */
    CHECK(qdelay_bucket(0) == 0 && qdelay_bucket(49999) == 0, "floor");
    CHECK(qdelay_bucket(50000) == 1 && qdelay_bucket(100000) == 9, "octaves: %u %u",
          qdelay_bucket(50000), qdelay_bucket(100000));
    for (uint64_t ns = 60000; ns < 20 * NS_PER_S; ns = ns * 5 / 4)
        CHECK(near_bucket(qdelay_bucket_ms(qdelay_bucket(ns)), (double)ns / 1e6),
              "%llu ns -> %g ms", (unsigned long long)ns, qdelay_bucket_ms(qdelay_bucket(ns)));
    uint64_t empty[QDELAY_BUCKETS] = {0};
    CHECK(isnan(qdelay_percentile_ms(empty, 0.5)), "an empty histogram has no percentile");
    return 0;
}

static const struct test TESTS[] = {
    {"fixed_rate_serialization", test_fixed_rate_serialization},
    {"fixed_rate_exact_over_busy_period", test_fixed_rate_exact_over_busy_period},
    {"delay", test_delay},
    {"zero_delay_unlimited_is_immediate", test_zero_delay_unlimited_is_immediate},
    {"queue_packet_limit", test_queue_packet_limit},
    {"queue_byte_limit", test_queue_byte_limit},
    {"loss_fraction_seeded", test_loss_fraction_seeded},
    {"trace_opportunities_and_wrap", test_trace_opportunities_and_wrap},
    {"trace_byte_accounting", test_trace_byte_accounting},
    {"trace_wasted_when_idle", test_trace_wasted_when_idle},
    {"trace_capacity_real_file", test_trace_capacity_real_file},
    {"jitter_never_reorders", test_jitter_never_reorders},
    {"down_drops_queue_keeps_flight", test_down_drops_queue_keeps_flight},
    {"rate_change_event", test_rate_change_event},
    {"mode_switches", test_mode_switches},
    {"default_queue", test_default_queue},
    {"config_events", test_config_events},
    {"aqm_params_registry", test_aqm_params_registry},
    {"config_aqm_params", test_config_aqm_params},
    {"wakeups_only_for_deliveries", test_wakeups_only_for_deliveries},
    {"codel_drop_schedule", test_codel_drop_schedule},
    {"codel_good_queue_no_drops", test_codel_good_queue_no_drops},
    {"codel_leaves_and_resumes", test_codel_leaves_and_resumes},
    {"pie_drops_a_standing_queue", test_pie_drops_a_standing_queue},
    {"pie_lets_short_bursts_through", test_pie_lets_short_bursts_through},
    {"pie_parameters_apply", test_pie_parameters_apply},
    {"queue_delay_known_burst", test_queue_delay_known_burst},
    {"queue_delay_idle_packet_and_trace_capacity",
     test_queue_delay_idle_packet_and_trace_capacity},
    {"queue_delay_buckets", test_queue_delay_buckets},
};
#define N_TESTS (sizeof TESTS / sizeof TESTS[0])

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < N_TESTS; i++)
            printf("%s\n", TESTS[i].name);
        return 0;
    }
    int failed = 0, ran = 0;
    for (size_t i = 0; i < N_TESTS; i++) {
        int selected = argc == 1;
        for (int a = 1; a < argc; a++)
            selected |= strcmp(argv[a], TESTS[i].name) == 0;
        if (!selected)
            continue;
        ran++;
        int rc = TESTS[i].fn();
        printf("%s %s\n", rc ? "FAIL" : "ok", TESTS[i].name);
        failed += rc != 0;
    }
    if (ran == 0) {
        fprintf(stderr, "no such test\n");
        return 2;
    }
    return failed ? 1 : 0;
}
