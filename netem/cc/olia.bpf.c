/* OLIA, the Opportunistic Linked Increases Algorithm (Khalili, Gast, Popovic, Le Boudec,
 * CoNEXT 2012), as a BPF TCP congestion control for MPTCP subflows, registered as mps_olia.
 * The increase is coupled_math.h's cc_olia_increase; each subflow counts the packets acknowledged
 * since its last loss (l2) and between its last two losses (l1), which its siblings read; the
 * decrease on loss is Reno's halving, as in the paper. */
#include "coupled.bpf.h"

static long olia_visit(__u64 i, void *ctx)
{
	cc_olia_visit(ctx, (int)i);
	return 0;
}

static __always_inline __u64 olia_rule(const struct cc_path *p, const struct cc_view *v, int r,
				       int *negative)
{
	struct cc_olia_scan s = {.p = p, .self = r};

	bpf_loop(v->n, olia_visit, &s, 0);
	return cc_olia_finish(&s, v, negative);
}

CC_COMMON_OPS(mps_olia)

SEC("struct_ops")
void BPF_PROG(mps_olia_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	cc_priv_of(sk)->l2 += acked;
	CC_CONG_AVOID(sk, acked, olia_rule);
}

SEC("struct_ops")
__u32 BPF_PROG(mps_olia_ssthresh, struct sock *sk)
{
	struct cc_priv *ca = cc_priv_of(sk);

	/* A loss: the count since the last one becomes the count between the last two. */
	ca->l1 = ca->l2;
	ca->l2 = 0;
	return tcp_reno_ssthresh(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops mps_olia = {
	.init = (void *)mps_olia_init,
	.cong_avoid = (void *)mps_olia_cong_avoid,
	.ssthresh = (void *)mps_olia_ssthresh,
	.undo_cwnd = (void *)mps_olia_undo_cwnd,
	.name = "mps_olia",
};
