/* The window arithmetic of the coupled congestion controls, in integers, shared by the BPF
 * programs (lia.bpf.c, olia.bpf.c, balia.bpf.c, wvegas.bpf.c) and the user-space harness that checks it
 * against the papers' formulas in floating point (test_coupled.c,
 * tests/unit/test_coupled_cc_math.py).
 *
 * Units. A window is in packets, a round-trip time in microseconds (the kernel's srtt_us >> 3),
 * an increase in Q30 packets per acknowledged packet (CC_ONE is one packet; Q30 keeps the
 * 1/(n^2 w) of four paths with windows of thousands of packets to within a unit in 10^4).
 *
 * Every formula here is invariant when all round-trip times are scaled by one factor, so they
 * are first normalised to the smallest one: rho_k = rtt_k * 2^16 / rtt_min, clamped to
 * [2^16, 2^22] (a 64-fold spread; a subflow beyond it counts as 64 times slower). Then
 * x_k = w_k * 2^30 / rho_k stands for the rate w_k / rtt_k (to 0.2% for a window of two
 * packets 64 times slower than the fastest path), and x_k^2 / w_k for w_k / rtt_k^2, both by
 * the same factor, so that
 *     (w_r / rtt_r^2) / (sum_k w_k / rtt_k)^2 = (x_r^2 / w_r) / S^2,  S = sum_k x_k.
 * With w_k clamped to 2^14 packets (24 MB at a 1500-byte MTU: a second of 190 Mbit/s),
 * x_k <= 2^28, x_k^2 / w_k <= 2^42, S <= 2^30, and x_r^2 / w_r / S <= x_r / w_r <= 2^14, so
 * the shifts below stay within 64 bits. Only unsigned division is used (the BPF instruction set of
 * older kernels has no signed one).
 */
#ifndef MPSTREAM_COUPLED_MATH_H
#define MPSTREAM_COUPLED_MATH_H

#ifndef __bpf__
#include <stdint.h>
typedef uint64_t cc_u64;
typedef uint32_t cc_u32;
#define CC_INLINE static inline
#else
typedef __u64 cc_u64;
typedef __u32 cc_u32;
#define CC_INLINE static __always_inline
#endif

/* A connection's own subflow and up to three siblings: the BPF verifier walks OLIA's pass
 * over the paths once per combination of its branches, and refuses it at eight paths (over a
 * million instructions) while it accepts four. Profiles with coupled CCs are held to four
 * paths (netem/profile.py). */
#define CC_MAX_PATHS 4
#define CC_Q 30
#define CC_ONE ((cc_u64)1 << CC_Q)
#define CC_MAX_WINDOW ((cc_u64)1 << 14)
#define CC_RHO_ONE 65536ULL
#define CC_RHO_MAX (64ULL * CC_RHO_ONE)

/* What one subflow contributes: its window, its smoothed round trip and (OLIA only) the
 * packets acknowledged between its last two losses (l1) and since its last loss (l2). */
struct cc_path {
	cc_u32 w;
	cc_u32 rtt_us;
	cc_u32 l1;
	cc_u32 l2;
};

/* The quantities every rule needs: x_k, x_k^2 / w_k and S, for n paths (kept small: a BPF
 * program has 512 bytes of stack). */
struct cc_view {
	int n;
	cc_u64 x[CC_MAX_PATHS];
	cc_u64 term[CC_MAX_PATHS];
	cc_u64 sum_x;
};


CC_INLINE cc_u64 cc_clamp(cc_u64 v, cc_u64 lo, cc_u64 hi)
{
	return v < lo ? lo : (v > hi ? hi : v);
}

/* w_k, clamped to [1, 2^16] packets. */
CC_INLINE cc_u64 cc_window(const struct cc_path *p, int i)
{
	return cc_clamp(p[i & (CC_MAX_PATHS - 1)].w, 1, CC_MAX_WINDOW);
}

CC_INLINE void cc_view_of(const struct cc_path *p, int n, struct cc_view *v)
{
	cc_u64 rtt_min = ~0ULL;
	int i;

	if (n > CC_MAX_PATHS)
		n = CC_MAX_PATHS;
	v->n = n;
	v->sum_x = 0;
	for (i = 0; i < CC_MAX_PATHS && i < n; i++) {
		cc_u64 r = p[i].rtt_us ? p[i].rtt_us : 1;
		if (r < rtt_min)
			rtt_min = r;
	}
	for (i = 0; i < CC_MAX_PATHS && i < n; i++) {
		cc_u64 r = p[i].rtt_us ? p[i].rtt_us : 1;
		cc_u64 w = cc_window(p, i);
		cc_u64 rho = cc_clamp(r * CC_RHO_ONE / rtt_min, CC_RHO_ONE, CC_RHO_MAX);
		cc_u64 x = (w << 30) / rho;
		v->x[i] = x;
		v->term[i] = x * x / w;
		v->sum_x += x;
	}
}

/* (w_r / rtt_r^2) / (sum_k w_k / rtt_k)^2 in Q30, from a term x_r^2 / w_r. */
CC_INLINE cc_u64 cc_share(cc_u64 term, cc_u64 sum_x)
{
	if (!sum_x)
		return 0;
	return (((term << 20) / sum_x) << 10) / sum_x;
}

/* LIA (RFC 6356, section 3): per acknowledged packet on r, the window grows by
 *     min(alpha / w_total, 1 / w_r),  alpha / w_total = max_k(w_k / rtt_k^2) / (sum_k w_k / rtt_k)^2
 * (alpha's w_total cancels against the increase's). */
CC_INLINE cc_u64 cc_lia_increase(const struct cc_path *p, const struct cc_view *v, int r)
{
	cc_u64 best = 0, coupled, own;
	int i;

	for (i = 0; i < CC_MAX_PATHS && i < v->n; i++)
		if (v->term[i] > best)
			best = v->term[i];
	coupled = cc_share(best, v->sum_x);
	own = CC_ONE / cc_window(p, r);
	return coupled < own ? coupled : own;
}

/* OLIA (Khalili et al., CoNEXT 2012; draft-khalili-mptcp-congestion-control-05, section 3):
 * per acknowledged packet on r, the window grows by
 *     (w_r / rtt_r^2) / (sum_k w_k / rtt_k)^2 + alpha_r / w_r
 * with M the paths of largest window, B the paths of largest l_k^2 / rtt_k (l_k = max(l1, l2),
 * packets between losses), |P| the number of paths, and
 *     alpha_r =  1 / (|P| |B \ M|)  for r in B \ M,
 *     alpha_r = -1 / (|P| |M|)      for r in M when B \ M is not empty,
 *     alpha_r =  0                  otherwise.
 * Returns the increase's magnitude in Q30; *negative is set when it is a decrease. */
/* OLIA's pass over the paths: the largest window and l^2 / rtt, how many paths have each and
 * how many have both (a path in B and in M is not a collected path). */
struct cc_olia_scan {
	const struct cc_path *p;
	int self;
	cc_u64 w_max, best, lr_self;
	cc_u64 n_m, n_best, n_best_in_m;
};

CC_INLINE void cc_olia_visit(struct cc_olia_scan *s, int i)
{
	const struct cc_path *q = &s->p[i & (CC_MAX_PATHS - 1)];
	cc_u64 w = cc_window(s->p, i);
	cc_u64 l = q->l1 > q->l2 ? q->l1 : q->l2;
	cc_u64 lr = l * l / (q->rtt_us ? q->rtt_us : 1);

	if (i == s->self)
		s->lr_self = lr;
	if (w > s->w_max) {
		s->w_max = w;
		s->n_m = 0;
		s->n_best_in_m = 0;
	}
	if (lr > s->best) {
		s->best = lr;
		s->n_best = 0;
		s->n_best_in_m = 0;
	}
	s->n_m += w == s->w_max;
	s->n_best += lr == s->best;
	s->n_best_in_m += (w == s->w_max) && (lr == s->best);
}

/* After the pass: the increase's magnitude in Q30; *negative is set when it is a decrease. */
CC_INLINE cc_u64 cc_olia_finish(const struct cc_olia_scan *s, const struct cc_view *v,
				int *negative)
{
	cc_u64 w_self = cc_window(s->p, s->self);
	cc_u64 first = cc_share(v->term[s->self & (CC_MAX_PATHS - 1)], v->sum_x);
	cc_u64 part;

	*negative = 0;
	if (s->n_best == s->n_best_in_m) /* B \ M is empty: alpha is 0 */
		return first;
	if (w_self != s->w_max) {
		if (s->lr_self != s->best)
			return first;
		part = CC_ONE / ((cc_u64)v->n * (s->n_best - s->n_best_in_m) * w_self);
		return first + part;
	}
	part = CC_ONE / ((cc_u64)v->n * s->n_m * w_self);
	if (part > first) {
		*negative = 1;
		return part - first;
	}
	return first - part;
}

#ifndef __bpf__
/* In user space the pass is a plain loop; the BPF program runs cc_olia_visit under bpf_loop,
 * which the verifier checks once instead of once per path and branch. */
CC_INLINE cc_u64 cc_olia_increase(const struct cc_path *p, const struct cc_view *v, int r,
				  int *negative)
{
	struct cc_olia_scan s = {.p = p, .self = r};
	int i;

	for (i = 0; i < v->n; i++)
		cc_olia_visit(&s, i);
	return cc_olia_finish(&s, v, negative);
}
#endif

/* alpha_r = max_k x_k / x_r of BALIA, in Q16, at most 1024 (a path a thousand times slower than
 * the best counts as that). */
CC_INLINE cc_u64 cc_balia_alpha_q16(const struct cc_view *v, int r)
{
	cc_u64 x_max = 0, x_r = v->x[r & (CC_MAX_PATHS - 1)];
	int i;

	for (i = 0; i < CC_MAX_PATHS && i < v->n; i++)
		if (v->x[i] > x_max)
			x_max = v->x[i];
	if (!x_r)
		return 1024ULL << 16;
	return cc_clamp((x_max << 16) / x_r, 1ULL << 16, 1024ULL << 16);
}

/* BALIA (Peng, Walid, Hwang, Low, IEEE/ACM ToN 24(1), 2016, algorithm 1): per acknowledged
 * packet on r, with x_k = w_k / rtt_k and alpha_r = max_k x_k / x_r, the window grows by
 *     x_r / (rtt_r (sum_k x_k)^2) * (1 + alpha_r) / 2 * (4 + alpha_r) / 5
 * where x_r / (rtt_r (sum x)^2) = (w_r / rtt_r^2) / (sum_k w_k / rtt_k)^2. */
CC_INLINE cc_u64 cc_balia_increase(const struct cc_view *v, int r)
{
	cc_u64 a = cc_balia_alpha_q16(v, r);
	/* (1 + a)(4 + a) / 10 in Q10; the product is below 2^53 */
	cc_u64 factor = (((65536 + a) * (262144 + a)) / 10) >> 22;
	cc_u64 step;

	if (!v->sum_x)
		return 0;
	/* The factor multiplies before the last division by S: after both, a slow path's share
	 * would have too few bits left for its large alpha. step <= 2^34 and the factor is below
	 * 2^27 (alpha at most 1024). */
	step = (v->term[r & (CC_MAX_PATHS - 1)] << 20) / v->sum_x;
	return step * factor / v->sum_x;
}

/* BALIA's decrease on a loss on r: w_r - (w_r / 2) * min(alpha_r, 1.5), rounded, at least 2
 * packets. */
CC_INLINE cc_u64 cc_balia_ssthresh(const struct cc_view *v, int r, cc_u64 w_r)
{
	cc_u64 a = cc_balia_alpha_q16(v, r);
	cc_u64 cut;

	if (a > (3ULL << 15))
		a = 3ULL << 15;
	cut = (w_r * a + (1ULL << 16)) >> 17;
	return w_r > cut + 2 ? w_r - cut : 2;
}

/* wVegas, weighted Vegas (Cao, Xu, Fu, "Delay-based congestion control for multipath TCP",
 * IEEE ICNP 2012): a delay-based coupled CC. Once per round trip, from the round's mean RTT
 * and the smallest RTT the subflow has seen (base), path r estimates the packets it keeps
 * queued, diff_r = w_r (rtt_r - base_r) / rtt_r, and steers it to alpha_r packets, its share of
 * a connection-wide total: alpha_r = total_alpha * x_r / sum_k x_k (x = w / rtt, the rate), at
 * least 2. The paper's implementation's constants: a total of 10 packets, 2 per path to start,
 * slow start left once more than 1 packet is queued. */
#define CC_WV_TOTAL_ALPHA 10
#define CC_WV_MIN_ALPHA 2
#define CC_WV_GAMMA 1

/* What a subflow keeps from one round to the next. */
struct cc_wvegas {
	cc_u32 alpha;    /* packets this path aims to keep queued */
	cc_u32 q_min_us; /* the smallest queueing delay since the last drain; 0: none yet */
};

/* One round trip's decision on path r, whose window is w, from its base and the round's mean
 * RTT (microseconds). Returns the new window (at least 2) and may lower *ssthresh:
 * - in slow start (w < *ssthresh), with more than CC_WV_GAMMA packets queued, the window drops
 *   to what the path holds without a queue plus one, w base / rtt + 1, and slow start ends
 *   (*ssthresh below it); otherwise slow start goes on (the caller's, per ACK);
 * - in congestion avoidance, when diff_r reaches alpha_r, alpha_r is recomputed from the
 *   paths' rates; then the window steps by one packet towards diff_r = alpha_r;
 * - and when the queueing delay has doubled from the smallest seen since the last drain, the
 *   window is cut to w base / (2 rtt), to drain the queue the paths share (the paper's remedy
 *   for a queue other flows built). */
CC_INLINE cc_u64 cc_wvegas_round(const struct cc_view *v, int r, cc_u64 w, cc_u64 *ssthresh,
				 cc_u64 base_us, cc_u64 rtt_us, struct cc_wvegas *s)
{
	cc_u64 q, diff;

	if (w > CC_MAX_WINDOW)
		w = CC_MAX_WINDOW;
	if (!base_us || rtt_us < base_us)
		return w < 2 ? 2 : w;
	q = rtt_us - base_us;
	diff = w * q / rtt_us;
	if (w < *ssthresh) {
		if (diff > CC_WV_GAMMA) {
			cc_u64 target = w * base_us / rtt_us + 1;
			if (target < w)
				w = target;
			if (w < 2)
				w = 2;
			if (*ssthresh > w - 1)
				*ssthresh = w - 1;
		}
		return w < 2 ? 2 : w;
	}
	if (diff >= s->alpha) {
		cc_u64 a = v->sum_x ? v->x[r & (CC_MAX_PATHS - 1)] * CC_WV_TOTAL_ALPHA / v->sum_x
				    : CC_WV_TOTAL_ALPHA;
		s->alpha = a < CC_WV_MIN_ALPHA ? CC_WV_MIN_ALPHA : (cc_u32)a;
	}
	if (diff > s->alpha && w > 2) {
		w -= 1;
		if (*ssthresh > w - 1)
			*ssthresh = w - 1;
	} else if (diff < s->alpha) {
		w += 1;
	}
	if (!s->q_min_us || q < s->q_min_us)
		s->q_min_us = (cc_u32)q;
	if (s->q_min_us && q >= 2ULL * s->q_min_us) {
		w = w * base_us / (2 * rtt_us);
		s->q_min_us = 0;
	}
	return w < 2 ? 2 : w;
}

#endif
