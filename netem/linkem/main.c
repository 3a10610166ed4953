/* mpstream-linkem: moves packets between two TUN devices, each direction through its own link
 * model (link.h). Single-threaded: one epoll over the two TUN fds and a signalfd, sleeping until
 * the model's next deadline (absolute CLOCK_MONOTONIC ns) with epoll_pwait2's ns timeout.
 *
 * Why not a timerfd: at 100 Mbit/s the next deadline moves with every packet, and re-arming a
 * timerfd (timerfd_settime, then reading it) cost more CPU than everything else in the loop
 * together; epoll_pwait2 sleeps on the same hrtimer with no extra system call.
 *
 *   tun_a --read--> [a_to_b link] --write--> tun_b
 *   tun_a <--write-- [b_to_a link] <--read-- tun_b
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <linux/if_tun.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "config.h"

#define PROG "mpstream-linkem"
#define EXIT_RUNTIME 1
#define EXIT_CONFIG 2
/* Packets read from one TUN per wake-up, so that deadlines are never starved. */
#define READ_BATCH 64
#define MAX_PACKET 65536
/* SCHED_FIFO priority: above ordinary processes, below the kernel's own threads (50). */
#define REALTIME_PRIORITY 10

struct output {
    int fd;
    uint64_t write_errors;
};

/* Where one direction's queueing-delay windows go (qdelay.h): a JSON line each. */
struct delay_log {
    FILE *f;
    const char *dir;
    int64_t realtime_offset_ns;           /* CLOCK_REALTIME - CLOCK_MONOTONIC */
};

struct emulator {
    struct config cfg;
    int tun[N_DIRS];                     /* [0] = tun_a, [1] = tun_b */
    struct link link[N_DIRS];            /* [0] reads tun_a, writes tun_b; [1] the reverse */
    struct output out[N_DIRS];
    struct delay_log delays[N_DIRS];
    struct link_params configured[N_DIRS];  /* current settings before queue defaults */
    int signal_fd, epoll_fd;
    uint64_t t_start;
    uint64_t event_epoch;                /* t = 0 of the event clock */
    size_t next_event;
    uint64_t events_applied;
};

static const char *const DIR_NAME[N_DIRS] = {"a_to_b", "b_to_a"};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * NS_PER_S + (uint64_t)ts.tv_nsec;
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PROG ": ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(EXIT_RUNTIME);
}

static void deliver(void *ctx, struct packet *pkt, uint64_t now)
{
    (void)now;
    struct output *out = ctx;
    /* A TUN write hands the packet to the kernel's receive path; it does not block. */
    if (write(out->fd, pkt->data, pkt->len) != (ssize_t)pkt->len)
        out->write_errors++;
    free(pkt);
}

static void json_ms(FILE *f, const char *key, double ms)
{
    if (isnan(ms))
        fprintf(f, "\"%s\": null", key);
    else
        fprintf(f, "\"%s\": %.3f", key, ms);
}

/* Sojourn times as "<prefix>mean_ms", max, p50, p95 and p99, comma-separated: the exact mean
 * and max, the percentiles from the histogram (qdelay.h). */
static void json_delays(FILE *f, const char *prefix, uint64_t packets, uint64_t sum_ns,
                        uint64_t max_ns, const uint64_t *hist)
{
    static const struct { const char *name; double q; } pct[] = {
        {"p50_ms", 0.50}, {"p95_ms", 0.95}, {"p99_ms", 0.99}};
    char key[64];
    snprintf(key, sizeof key, "%smean_ms", prefix);
    json_ms(f, key, packets ? (double)sum_ns / (double)packets / 1e6 : NAN);
    snprintf(key, sizeof key, "%smax_ms", prefix);
    fprintf(f, ", ");
    json_ms(f, key, packets ? (double)max_ns / 1e6 : NAN);
    for (unsigned i = 0; i < sizeof pct / sizeof pct[0]; i++) {
        snprintf(key, sizeof key, "%s%s", prefix, pct[i].name);
        fprintf(f, ", ");
        json_ms(f, key, qdelay_percentile_ms(hist, pct[i].q));
    }
}

/* One closed window: when (Unix time of its start), what left the rate server, the capacity,
 * the sojourn times (exact mean and max, percentiles from the histogram) and the histogram
 * itself as [bucket, count] pairs, so that windows pool into any span's percentiles. */
static void write_window(void *ctx, const struct qdelay_window *w)
{
    struct delay_log *log = ctx;
    FILE *f = log->f;
    fprintf(f, "{\"t\": %.3f, \"dir\": \"%s\", \"dt_s\": %.3f, \"packets\": %llu, "
            "\"bytes\": %llu, \"capacity_bytes\": %.0f, ",
            (double)((int64_t)w->start + log->realtime_offset_ns) / 1e9, log->dir,
            (double)QDELAY_WINDOW_NS / 1e9, (unsigned long long)w->packets,
            (unsigned long long)w->bytes, w->capacity_bits / 8);
    json_delays(f, "", w->packets, w->sum_ns, w->max_ns, w->hist);
    fprintf(f, ", \"hist\": [");
    const char *sep = "";
    for (unsigned b = 0; b < QDELAY_BUCKETS; b++)
        if (w->hist[b]) {
            fprintf(f, "%s[%u, %llu]", sep, b, (unsigned long long)w->hist[b]);
            sep = ", ";
        }
    fprintf(f, "]}\n");
}

static int64_t realtime_offset_ns(void)
{
    struct timespec rt, mono;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    return ((int64_t)rt.tv_sec - (int64_t)mono.tv_sec) * (int64_t)NS_PER_S +
           ((int64_t)rt.tv_nsec - (int64_t)mono.tv_nsec);
}

static int open_tun(const char *field, const char *name)
{
    if (if_nametoindex(name) == 0)
        die("%s: no device \"%s\" in this network namespace (create it first: "
            "ip tuntap add dev %s mode tun)", field, name, name);
    int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        die("cannot open /dev/net/tun: %s", strerror(errno));
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
    memcpy(ifr.ifr_name, name, strlen(name) + 1);
    if (ioctl(fd, TUNSETIFF, &ifr) < 0)
        die("%s: cannot attach to \"%s\" (%s): it must be a TUN device (mode tun, not "
            "multi_queue) that no other process holds", field, name, strerror(errno));
    return fd;
}

/* A TUN device's carrier comes on when we attach, but the kernel activates its queueing
 * discipline a moment later (link watch); until then whatever is routed into it is dropped.
 * "ready" promises that packets flow, so wait for the device to run (at most 2 s). */
static void wait_running(const char *name)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return;
    for (int i = 0; i < 2000; i++) {
        struct ifreq ifr;
        memset(&ifr, 0, sizeof ifr);
        memcpy(ifr.ifr_name, name, strlen(name) + 1);
        if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0 || !(ifr.ifr_flags & IFF_UP) ||
            (ifr.ifr_flags & IFF_RUNNING))
            break;  /* running, or administratively down: nothing to wait for */
        usleep(1000);
    }
    close(s);
}

static double rtt_ms(const struct link_params *c)
{
    return c[DIR_A_TO_B].delay_ms + c[DIR_B_TO_A].delay_ms;
}

static struct link_params resolved(const struct emulator *em, int d)
{
    return link_params_resolve(&em->configured[d], rtt_ms(em->configured));
}

static void apply_event(struct emulator *em, const struct event *ev, uint64_t t)
{
    for (int d = 0; d < N_DIRS; d++)
        if (ev->dirs & (1u << d))
            link_patch_apply(&ev->set, &em->configured[d]);
    /* A changed delay changes the round trip, hence both directions' default queues. */
    for (int d = 0; d < N_DIRS; d++) {
        struct link_params p = resolved(em, d);
        link_set_params(&em->link[d], &p, t);
    }
    em->events_applied++;
}

static void run_due_events(struct emulator *em, uint64_t now)
{
    while (em->next_event < em->cfg.n_events) {
        const struct event *ev = &em->cfg.events[em->next_event];
        uint64_t t = em->event_epoch + (uint64_t)(ev->at_s * (double)NS_PER_S);
        if (t > now)
            break;
        apply_event(em, ev, t);
        em->next_event++;
    }
}

/* SIGUSR1: the experiment starts now. Links return to their configured state, traces to
 * their first opportunity, and events replay from t = 0. */
static void restart_event_clock(struct emulator *em, uint64_t now)
{
    em->event_epoch = now;
    em->next_event = 0;
    for (int d = 0; d < N_DIRS; d++) {
        em->configured[d] = em->cfg.link[d];
        struct link_params p = resolved(em, d);
        link_set_params(&em->link[d], &p, now);
        link_restart_trace(&em->link[d], now);
    }
    run_due_events(em, now);
}

static uint64_t next_deadline(const struct emulator *em)
{
    uint64_t d = UINT64_MAX;
    for (int i = 0; i < N_DIRS; i++) {
        uint64_t l = link_next_deadline(&em->link[i]);
        if (l < d)
            d = l;
    }
    if (em->next_event < em->cfg.n_events) {
        const struct event *ev = &em->cfg.events[em->next_event];
        uint64_t t = em->event_epoch + (uint64_t)(ev->at_s * (double)NS_PER_S);
        if (t < d)
            d = t;
    }
    return d;
}

/* How long epoll may sleep: until the next deadline, or for ever when nothing is due. */
static const struct timespec *sleep_for(const struct emulator *em, struct timespec *ts)
{
    uint64_t d = next_deadline(em);
    if (d == UINT64_MAX)
        return NULL;
    uint64_t now = now_ns();
    uint64_t left = d > now ? d - now : 0;
    ts->tv_sec = (time_t)(left / NS_PER_S);
    ts->tv_nsec = (long)(left % NS_PER_S);
    return ts;
}

/* Returns -1 when the device is gone (deleted, or its namespace torn down under us). */
static int read_tun(struct emulator *em, int d)
{
    static unsigned char buf[MAX_PACKET];
    for (int i = 0; i < READ_BATCH; i++) {
        ssize_t n = read(em->tun[d], buf, sizeof buf);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return 0;
            fprintf(stderr, PROG ": read %s: %s\n", em->cfg.tun[d], strerror(errno));
            return -1;
        }
        if (n == 0)
            return 0;
        link_enqueue(&em->link[d], packet_new(buf, (uint32_t)n), now_ns());
    }
    return 0;
}

static void write_link_stats(FILE *f, const struct emulator *em, int d)
{
    const struct link_stats *s = &em->link[d].st;
    const struct link *l = &em->link[d];
    fprintf(f,
            "  \"%s\": {\"packets_in\": %llu, \"bytes_in\": %llu, "
            "\"packets_out\": %llu, \"bytes_out\": %llu,\n"
            "    \"dropped_queue_packets\": %llu, \"dropped_queue_bytes\": %llu, "
            "\"dropped_loss_packets\": %llu, \"dropped_loss_bytes\": %llu,\n"
            "    \"dropped_down_packets\": %llu, \"dropped_down_bytes\": %llu, "
            "\"write_errors\": %llu,\n"
            "    \"max_queue_bytes\": %llu, \"max_queue_packets\": %llu, "
            "\"queue_limit_bytes\": %lld, \"queue_limit_packets\": %lld,\n"
            "    \"dropped_aqm_packets\": %llu, \"dropped_aqm_bytes\": %llu, "
            "\"held_at_exit_packets\": %llu,\n    ",
            DIR_NAME[d], (unsigned long long)s->packets_in, (unsigned long long)s->bytes_in,
            (unsigned long long)s->packets_out, (unsigned long long)s->bytes_out,
            (unsigned long long)s->dropped_queue_packets,
            (unsigned long long)s->dropped_queue_bytes,
            (unsigned long long)s->dropped_loss_packets,
            (unsigned long long)s->dropped_loss_bytes,
            (unsigned long long)s->dropped_down_packets,
            (unsigned long long)s->dropped_down_bytes,
            (unsigned long long)em->out[d].write_errors,
            (unsigned long long)s->max_queue_bytes, (unsigned long long)s->max_queue_packets,
            (long long)l->p.queue_bytes, (long long)l->p.queue_packets,
            (unsigned long long)s->dropped_aqm_packets, (unsigned long long)s->dropped_aqm_bytes,
            (unsigned long long)(s->packets_in - s->packets_out - s->dropped_queue_packets -
                                 s->dropped_loss_packets - s->dropped_down_packets -
                                 s->dropped_aqm_packets));
    /* Each packet's queueing delay over the emulator's life (qdelay.h). */
    const struct qdelay *q = &l->qd;
    fprintf(f, "\"queue_delay_packets\": %llu, ", (unsigned long long)q->packets);
    json_delays(f, "queue_delay_", q->packets, q->sum_ns, q->max_ns, q->hist);
    fprintf(f, "}");
}

static void write_stats(const struct emulator *em)
{
    const char *path = em->cfg.stats_path;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, PROG ": stats_path: cannot write %s: %s\n", tmp, strerror(errno));
        return;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(f, "{\n");
    for (int d = 0; d < N_DIRS; d++) {
        write_link_stats(f, em, d);
        fprintf(f, ",\n");
    }
    fprintf(f,
            "  \"elapsed_s\": %.6f, \"cpu_user_s\": %.6f, \"cpu_system_s\": %.6f, "
            "\"events_applied\": %llu\n}\n",
            (double)(now_ns() - em->t_start) / (double)NS_PER_S,
            (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
            (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6,
            (unsigned long long)em->events_applied);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        fprintf(stderr, PROG ": stats_path: cannot write %s: %s\n", path, strerror(errno));
}

static void print_resolved(const struct emulator *em)
{
    printf("{\"tun_a\": \"%s\", \"tun_b\": \"%s\", \"seed\": %llu, \"events\": %zu",
           em->cfg.tun[0], em->cfg.tun[1], (unsigned long long)em->cfg.seed, em->cfg.n_events);
    for (int d = 0; d < N_DIRS; d++) {
        struct link_params p = resolved(em, d);
        printf(", \"%s\": {\"rate_bps\": %llu, \"trace_mean_bps\": %llu, \"delay_ms\": %g, "
               "\"jitter_ms\": %g, \"loss\": %g, \"queue_bytes\": %lld, "
               "\"queue_packets\": %lld, \"down\": %s, \"aqm\": \"%s\"",
               DIR_NAME[d], (unsigned long long)p.rate_bps,
               (unsigned long long)(p.trace ? trace_mean_bps(p.trace) : 0), p.delay_ms,
               p.jitter_ms, p.loss, (long long)p.queue_bytes, (long long)p.queue_packets,
               p.down ? "true" : "false", p.aqm->name);
        /* Every discipline's parameters (aqm.h), the running one's or not. */
        for (size_t slot = 0; slot < aqm_n_params(); slot++)
            printf(", \"%s\": %g", aqm_param_at(slot)->key, p.aqm_param[slot]);
        printf("}");
    }
    printf("}\n");
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " --config FILE.json [--check] | --list-aqms\n"
            "Moves packets between two existing TUN devices through an emulated link per\n"
            "direction (rate or Mahimahi trace, drop-tail queue, loss, delay, jitter, events).\n"
            "  --check      validate the config, print it with defaults filled in, and exit\n"
            "  --list-aqms  print the queue disciplines and their parameters (JSON), and exit\n"
            "Prints \"ready\" once attached. SIGUSR1 restarts the event clock; SIGTERM or\n"
            "SIGINT exits, writing stats to stats_path. Exit 2: bad config; 1: runtime error.\n");
}

/* The config's path from the command line, and whether only to check it. Exits on --help,
 * --list-aqms or a command line it does not take. */
static const char *parse_args(int argc, char **argv, bool *check_only)
{
    const char *config_path = NULL;
    *check_only = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            config_path = argv[++i];
        else if (strcmp(argv[i], "--check") == 0)
            *check_only = true;
        else if (strcmp(argv[i], "--list-aqms") == 0) {
            aqm_list(stdout);
            exit(0);
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            exit(0);
        } else {
            usage(stderr);
            exit(EXIT_CONFIG);
        }
    }
    if (!config_path) {
        usage(stderr);
        exit(EXIT_CONFIG);
    }
    return config_path;
}

/* Signals arrive through the signalfd only. */
static void block_signals(sigset_t *sigs)
{
    sigemptyset(sigs);
    sigaddset(sigs, SIGTERM);
    sigaddset(sigs, SIGINT);
    sigaddset(sigs, SIGHUP);
    sigaddset(sigs, SIGUSR1);
    sigprocmask(SIG_BLOCK, sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
}

static void ask_for_punctual_wakeups(void)
{
    /* Timer expiries are the schedule: ask for no slack (the default is 50 us). */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    /* The schedule is only as exact as our wake-ups, and a busy machine delays an ordinary
     * process by milliseconds. A low real-time priority fixes that at no cost to others: the
     * loop sleeps whenever nothing is due, and the kernel's RT throttling keeps a share of
     * each CPU for everything else. Without the privilege this quietly stays best-effort. */
    struct sched_param sp = {.sched_priority = REALTIME_PRIORITY};
    sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp);
}

/* Both TUN devices, running, and one epoll over them and the signals. */
static void open_event_sources(struct emulator *em, const sigset_t *sigs)
{
    em->tun[0] = open_tun("tun_a", em->cfg.tun[0]);
    em->tun[1] = open_tun("tun_b", em->cfg.tun[1]);
    wait_running(em->cfg.tun[0]);
    wait_running(em->cfg.tun[1]);
    em->signal_fd = signalfd(-1, sigs, SFD_NONBLOCK | SFD_CLOEXEC);
    em->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    if (em->signal_fd < 0 || em->epoll_fd < 0)
        die("cannot set up the event loop: %s", strerror(errno));
    int fds[] = {em->tun[0], em->tun[1], em->signal_fd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fds[i]};
        if (epoll_ctl(em->epoll_fd, EPOLL_CTL_ADD, fds[i], &ev) < 0)
            die("epoll_ctl: %s", strerror(errno));
    }
}

static void start_links(struct emulator *em)
{
    em->t_start = em->event_epoch = now_ns();
    for (int d = 0; d < N_DIRS; d++) {
        em->out[d].fd = em->tun[1 - d];
        struct link_params p = resolved(em, d);
        link_init(&em->link[d], &p, em->cfg.seed ^ (0xA5A5A5A5ULL * (uint64_t)(d + 1)),
                  em->t_start, deliver, &em->out[d]);
    }
}

static void open_delay_log(struct emulator *em)
{
    if (!em->cfg.delay_log)
        return;
    FILE *f = fopen(em->cfg.delay_log, "w");
    if (!f)
        die("delay_log: cannot write %s: %s", em->cfg.delay_log, strerror(errno));
    int64_t offset = realtime_offset_ns();
    for (int d = 0; d < N_DIRS; d++) {
        em->delays[d] = (struct delay_log){.f = f, .dir = DIR_NAME[d],
                                           .realtime_offset_ns = offset};
        link_on_window(&em->link[d], write_window, &em->delays[d]);
    }
}

/* SIGUSR1 restarts the event clock; any other signal asks to stop (returns false). */
static bool take_signals(struct emulator *em)
{
    bool running = true;
    struct signalfd_siginfo si;
    while (read(em->signal_fd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGUSR1)
            restart_event_clock(em, now_ns());
        else
            running = false;
    }
    return running;
}

/* Moves packets until a signal says stop (exit status 0) or a device goes away (1). */
static int run(struct emulator *em)
{
    bool running = true;
    int status = 0;
    while (running) {
        struct epoll_event evs[8];
        struct timespec ts;
        int n = epoll_pwait2(em->epoll_fd, evs, 8, sleep_for(em, &ts), NULL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            die("epoll_pwait2: %s", strerror(errno));
        }
        for (int i = 0; i < n; i++)
            if (evs[i].data.fd == em->signal_fd)
                running &= take_signals(em);
        run_due_events(em, now_ns());
        for (int i = 0; i < n; i++)
            for (int d = 0; d < N_DIRS; d++)
                if (evs[i].data.fd == em->tun[d] && read_tun(em, d) < 0)
                    running = false, status = EXIT_RUNTIME;
        uint64_t now = now_ns();
        for (int d = 0; d < N_DIRS; d++)
            link_advance(&em->link[d], now);
    }
    return status;
}

/* Closes the last queueing-delay windows, writes the stats, lets go of everything. */
static void shut_down(struct emulator *em)
{
    uint64_t t_end = now_ns();
    for (int d = 0; d < N_DIRS; d++)
        link_flush_window(&em->link[d], t_end);
    if (em->delays[0].f && fclose(em->delays[0].f) != 0)
        fprintf(stderr, PROG ": delay_log: cannot write %s: %s\n", em->cfg.delay_log,
                strerror(errno));
    if (em->cfg.stats_path)
        write_stats(em);
    for (int d = 0; d < N_DIRS; d++) {
        link_free(&em->link[d]);
        close(em->tun[d]);
    }
    config_free(&em->cfg);
}

int main(int argc, char **argv)
{
    bool check_only;
    const char *config_path = parse_args(argc, argv, &check_only);
    static struct emulator em;
    char err[1024];
    if (config_load(config_path, &em.cfg, err, sizeof err) < 0) {
        fprintf(stderr, PROG ": config %s: %s\n", config_path, err);
        return EXIT_CONFIG;
    }
    for (int d = 0; d < N_DIRS; d++)
        em.configured[d] = em.cfg.link[d];
    if (check_only) {
        print_resolved(&em);
        config_free(&em.cfg);
        return 0;
    }
    sigset_t sigs;
    block_signals(&sigs);
    ask_for_punctual_wakeups();
    open_event_sources(&em, &sigs);
    start_links(&em);
    open_delay_log(&em);
    run_due_events(&em, em.t_start);
    printf("ready\n");
    fflush(stdout);
    int status = run(&em);
    shut_down(&em);
    return status;
}
