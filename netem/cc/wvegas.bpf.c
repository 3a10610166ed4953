/* wVegas, weighted Vegas (Cao, Xu, Fu, IEEE ICNP 2012), as a BPF TCP congestion control for
 * MPTCP subflows, registered as mps_wvegas. Delay-based: once per round trip each subflow
 * steers the packets it keeps queued to its share of a connection-wide total, the share being
 * its rate over the connection's (coupled_math.h: cc_wvegas_round). Slow start is Reno's until
 * a queue shows; a loss halves the window (Reno), and until the socket is back in the Open
 * state (recovery, loss) the window follows Reno's rules, as in the paper's implementation. */
#include "coupled.bpf.h"

#define TCP_CA_OPEN 0

/* Per-socket state, in icsk_ca_priv (104 bytes). The sibling reads of cc_gather take this
 * struct's second and third words as OLIA's loss counts, which wVegas does not use. */
struct wv_priv {
	__u64 rtt_sum_us; /* the RTT samples of this round, summed */
	__u32 samples;    /* and counted */
	__u32 base_us;    /* the smallest RTT sample seen (+1 us, so never 0) */
	__u32 round_end;  /* snd_nxt when the round began: the round ends when that is acked */
	__u32 active;     /* 0 outside the Open state: Reno then */
	struct cc_wvegas s;
};

static __always_inline struct wv_priv *wv_of(struct sock *sk)
{
	return (struct wv_priv *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

/* A fresh round from now, alpha and the queue history as at the start (the paper's enable). */
static __always_inline void wv_enable(struct sock *sk)
{
	struct wv_priv *ca = wv_of(sk);

	ca->active = 1;
	ca->round_end = ((struct tcp_sock *)sk)->snd_nxt;
	ca->rtt_sum_us = 0;
	ca->samples = 0;
	ca->s.alpha = CC_WV_MIN_ALPHA;
	ca->s.q_min_us = 0;
}

SEC("struct_ops")
void BPF_PROG(mps_wvegas_init, struct sock *sk)
{
	_Static_assert(sizeof(struct wv_priv) <= 104, "icsk_ca_priv holds 104 bytes");
	wv_of(sk)->base_us = 0xffffffff;
	wv_enable(sk);
}

SEC("struct_ops")
void BPF_PROG(mps_wvegas_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct wv_priv *ca = wv_of(sk);
	__u32 rtt;

	if (sample->rtt_us < 0)
		return;
	rtt = (__u32)sample->rtt_us + 1;
	if (rtt < ca->base_us)
		ca->base_us = rtt;
	ca->rtt_sum_us += rtt;
	ca->samples++;
}

SEC("struct_ops")
void BPF_PROG(mps_wvegas_set_state, struct sock *sk, __u8 new_state)
{
	if (new_state == TCP_CA_OPEN)
		wv_enable(sk);
	else
		wv_of(sk)->active = 0;
}

SEC("struct_ops")
void BPF_PROG(mps_wvegas_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	/* Sending again after an idle period: the base RTT may have changed, start over. */
	if (event == CA_EVENT_CWND_RESTART) {
		wv_of(sk)->base_us = 0xffffffff;
		wv_enable(sk);
	}
}

SEC("struct_ops")
void BPF_PROG(mps_wvegas_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct wv_priv *ca = wv_of(sk);

	if (!ca->active) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}
	if ((__s32)(ack - ca->round_end) > 0) {
		ca->round_end = tp->snd_nxt;
		if (ca->samples <= 2) {
			/* Too few samples for a mean: this round is Reno's. */
			tcp_reno_cong_avoid(sk, ack, acked);
		} else {
			struct cc_path paths[CC_MAX_PATHS] = {};
			struct cc_view view;
			__u64 ssthresh = tp->snd_ssthresh;
			__u64 rtt = ca->rtt_sum_us / ca->samples;
			__u64 w;
			int n;

			n = cc_gather(sk, paths);
			cc_view_of(paths, n, &view);
			w = cc_wvegas_round(&view, 0, tp->snd_cwnd, &ssthresh, ca->base_us, rtt, &ca->s);
			/* No growth the application or the receiver would not use. */
			if (w > tp->snd_cwnd && !tp->is_cwnd_limited)
				w = tp->snd_cwnd;
			tp->snd_cwnd = w < tp->snd_cwnd_clamp ? (__u32)w : tp->snd_cwnd_clamp;
			tp->snd_ssthresh = (__u32)ssthresh;
			if (tp->snd_cwnd < tp->snd_ssthresh && tp->is_cwnd_limited)
				tcp_slow_start(tp, acked);
		}
		ca->rtt_sum_us = 0;
		ca->samples = 0;
	} else if (tp->snd_cwnd < tp->snd_ssthresh && tp->is_cwnd_limited) {
		tcp_slow_start(tp, acked);
	}
}

SEC("struct_ops")
__u32 BPF_PROG(mps_wvegas_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(mps_wvegas_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops mps_wvegas = {
	.init = (void *)mps_wvegas_init,
	.cong_avoid = (void *)mps_wvegas_cong_avoid,
	.ssthresh = (void *)mps_wvegas_ssthresh,
	.undo_cwnd = (void *)mps_wvegas_undo_cwnd,
	.pkts_acked = (void *)mps_wvegas_pkts_acked,
	.set_state = (void *)mps_wvegas_set_state,
	.cwnd_event = (void *)mps_wvegas_cwnd_event,
	.name = "mps_wvegas",
};
