/* LIA, the Linked Increases Algorithm of RFC 6356, as a BPF TCP congestion control for MPTCP
 * subflows. Registered as mps_lia (mpstream's prefix: no clash with a kernel's own "lia").
 * The increase is coupled_math.h's cc_lia_increase; the decrease on loss is Reno's halving,
 * as the RFC keeps it. */
#include "coupled.bpf.h"

static __always_inline __u64 lia_rule(const struct cc_path *p, const struct cc_view *v, int r,
				      int *negative)
{
	*negative = 0;
	return cc_lia_increase(p, v, r);
}

CC_COMMON_OPS(mps_lia)

SEC("struct_ops")
void BPF_PROG(mps_lia_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	CC_CONG_AVOID(sk, acked, lia_rule);
}

SEC("struct_ops")
__u32 BPF_PROG(mps_lia_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops mps_lia = {
	.init = (void *)mps_lia_init,
	.cong_avoid = (void *)mps_lia_cong_avoid,
	.ssthresh = (void *)mps_lia_ssthresh,
	.undo_cwnd = (void *)mps_lia_undo_cwnd,
	.name = "mps_lia",
};
