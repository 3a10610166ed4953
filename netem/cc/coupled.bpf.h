/* What the three coupled congestion controls share on the kernel side: reading the sibling
 * subflows of an MPTCP connection, and turning a fractional per-packet increase into window
 * steps. Each CC's own file (lia.bpf.c, olia.bpf.c, balia.bpf.c, wvegas.bpf.c) adds its rule.
 *
 * Reading the siblings. From a subflow's socket the path is icsk_ulp_data (the subflow
 * context) -> conn (the MPTCP socket) -> conn_list (every subflow's context) -> tcp_sock. The
 * MPTCP kfunc and helper that would give the MPTCP socket are refused for struct_ops programs
 * on this kernel, and so are plain BTF pointer walks; bpf_rdonly_cast at each step is accepted
 * and turns every read into a fault-safe probe read. The reads are of MPTCP's internals (not a
 * stable interface; CO-RE relocates the fields by name when a kernel moves them) and are taken
 * without the connection's lock: a sibling's window may be a few ACKs stale, which the formulas
 * tolerate (the old out-of-tree implementations read them the same way, under no lock either).
 * A socket that is plain TCP, or whose siblings cannot be read, counts as a single path, where
 * every rule reduces to Reno.
 */
#ifndef MPSTREAM_COUPLED_BPF_H
#define MPSTREAM_COUPLED_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "coupled_math.h"

char _license[] SEC("license") = "GPL"; /* the kernel's TCP kfuncs are GPL-only symbols */

extern __u32 tcp_reno_ssthresh(struct sock *sk) __ksym;
extern __u32 tcp_reno_undo_cwnd(struct sock *sk) __ksym;
extern void tcp_reno_cong_avoid(struct sock *sk, __u32 ack, __u32 acked) __ksym;
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

#define TCP_STATE_ESTABLISHED 1

/* Per-socket state, in the socket's icsk_ca_priv (104 bytes). */
struct cc_priv {
	__u64 acc; /* fractional packets of increase not yet applied, Q30 */
	__u64 l1;  /* OLIA: packets acknowledged between the last two losses */
	__u64 l2;  /* OLIA: packets acknowledged since the last loss */
};

static __always_inline struct cc_priv *cc_priv_of(struct sock *sk)
{
	return (struct cc_priv *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

/* sk's own subflow into paths[0], and the other subflows of its connection that carry data
 * (established, with an RTT sample) after it, at most CC_MAX_PATHS in all. Returns how many:
 * 1 (sk alone) when it is plain TCP. */
static __always_inline int cc_gather(struct sock *sk, struct cc_path *paths)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct inet_connection_sock *icsk = (struct inet_connection_sock *)sk;
	struct cc_priv *own = cc_priv_of(sk);
	struct mptcp_subflow_context *ctx;
	struct mptcp_sock *msk;
	struct list_head *head, *pos;
	int n = 1, i;

	paths[0].w = tp->snd_cwnd;
	paths[0].rtt_us = tp->srtt_us >> 3;
	paths[0].l1 = own->l1;
	paths[0].l2 = own->l2;
	if (!tp->is_mptcp)
		return 1;
	ctx = bpf_rdonly_cast(icsk->icsk_ulp_data,
			      bpf_core_type_id_kernel(struct mptcp_subflow_context));
	if (!ctx)
		return 1;
	msk = bpf_rdonly_cast(ctx->conn, bpf_core_type_id_kernel(struct mptcp_sock));
	if (!msk)
		return 1;
	head = &msk->conn_list;
	pos = head->next;
	/* A few more steps than paths: sk itself and subflows not carrying data are skipped. */
	for (i = 0; i < 2 * CC_MAX_PATHS && n < CC_MAX_PATHS; i++) {
		struct mptcp_subflow_context *sub;
		struct inet_connection_sock *sicsk;
		struct tcp_sock *stp;
		__u64 *spriv;

		if (!pos || (__u64)pos == (__u64)head)
			break;
		/* The list links the contexts by their first member, node. */
		sub = bpf_rdonly_cast(pos, bpf_core_type_id_kernel(struct mptcp_subflow_context));
		pos = sub->node.next;
		stp = bpf_rdonly_cast(sub->tcp_sock, bpf_core_type_id_kernel(struct tcp_sock));
		if (!stp || (__u64)stp == (__u64)sk ||
		    stp->inet_conn.icsk_inet.sk.__sk_common.skc_state != TCP_STATE_ESTABLISHED ||
		    !stp->srtt_us)
			continue;
		sicsk = bpf_rdonly_cast(sub->tcp_sock,
					bpf_core_type_id_kernel(struct inet_connection_sock));
		spriv = (__u64 *)sicsk->icsk_ca_priv;
		paths[n & (CC_MAX_PATHS - 1)].w = stp->snd_cwnd;
		paths[n & (CC_MAX_PATHS - 1)].rtt_us = stp->srtt_us >> 3;
		paths[n & (CC_MAX_PATHS - 1)].l1 = spriv[1];
		paths[n & (CC_MAX_PATHS - 1)].l2 = spriv[2];
		n++;
	}
	return n;
}

/* Adds acked packets' worth of a per-packet change (Q30) to the window, whole packets at a
 * time, keeping the remainder for the next ACK. A decrease (OLIA's alpha on a path of largest
 * window) takes packets off, never below 2. */
static __always_inline void cc_apply(struct sock *sk, __u32 acked, __u64 step, int negative)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct cc_priv *ca = cc_priv_of(sk);
	__u64 total = step * acked;

	if (!negative) {
		__u64 acc = ca->acc + total;
		__u64 whole = acc >> CC_Q;
		ca->acc = acc & (CC_ONE - 1);
		if (whole) {
			__u64 cwnd = tp->snd_cwnd + whole;
			tp->snd_cwnd = cwnd < tp->snd_cwnd_clamp ? cwnd : tp->snd_cwnd_clamp;
		}
		return;
	}
	if (ca->acc >= total) {
		ca->acc -= total;
		return;
	}
	total -= ca->acc;
	{
		__u64 whole = (total + CC_ONE - 1) >> CC_Q;
		ca->acc = (whole << CC_Q) - total;
		tp->snd_cwnd = tp->snd_cwnd > whole + 2 ? tp->snd_cwnd - whole : 2;
	}
}

/* The part of cong_avoid every rule shares: nothing while the application or the receiver
 * limits the sender, slow start below ssthresh (as Reno), then the rule's increase for the
 * packets slow start left. */
#define CC_CONG_AVOID(sk, acked, RULE)                                                   \
	do {                                                                             \
		struct tcp_sock *tp_ = (struct tcp_sock *)(sk);                          \
		struct cc_path paths_[CC_MAX_PATHS] = {};                                \
		struct cc_view view_;                                                    \
		int n_, neg_ = 0;                                                        \
		__u64 step_;                                                             \
		if (!tp_->is_cwnd_limited)                                               \
			return;                                                          \
		if (tp_->snd_cwnd < tp_->snd_ssthresh) {                                 \
			acked = tcp_slow_start(tp_, acked);                              \
			if (!acked)                                                      \
				return;                                                  \
		}                                                                        \
		n_ = cc_gather(sk, paths_);                                              \
		cc_view_of(paths_, n_, &view_);                                          \
		step_ = RULE(paths_, &view_, 0, &neg_);  /* sk is path 0 */              \
		cc_apply(sk, acked, step_, neg_);                                        \
	} while (0)

/* init (a socket's state from zero) and undo_cwnd (Reno's, after a spurious loss), the same
 * for every rule: NAME_init and NAME_undo_cwnd. */
#define CC_COMMON_OPS(NAME)                                                              \
	SEC("struct_ops")                                                                \
	void BPF_PROG(NAME##_init, struct sock *sk)                                      \
	{                                                                                \
		struct cc_priv *ca = cc_priv_of(sk);                                     \
		ca->acc = 0;                                                             \
		ca->l1 = 0;                                                              \
		ca->l2 = 0;                                                              \
	}                                                                                \
	SEC("struct_ops")                                                                \
	__u32 BPF_PROG(NAME##_undo_cwnd, struct sock *sk)                                \
	{                                                                                \
		return tcp_reno_undo_cwnd(sk);                                           \
	}

#endif
