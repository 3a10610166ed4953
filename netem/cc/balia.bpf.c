/* BALIA, the Balanced Linked Adaptation algorithm (Peng, Walid, Hwang, Low, IEEE/ACM ToN 2016),
 * as a BPF TCP congestion control for MPTCP subflows, registered as mps_balia. Both its increase
 * and its decrease on loss are coupled (coupled_math.h: cc_balia_increase, cc_balia_ssthresh). */
#include "coupled.bpf.h"

static __always_inline __u64 balia_rule(const struct cc_path *p, const struct cc_view *v, int r,
					int *negative)
{
	*negative = 0;
	return cc_balia_increase(v, r);
}

CC_COMMON_OPS(mps_balia)

SEC("struct_ops")
void BPF_PROG(mps_balia_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	CC_CONG_AVOID(sk, acked, balia_rule);
}

SEC("struct_ops")
__u32 BPF_PROG(mps_balia_ssthresh, struct sock *sk)
{
	struct tcp_sock *tp = (struct tcp_sock *)sk;
	struct cc_path paths[CC_MAX_PATHS] = {};
	struct cc_view view;
	int n;

	n = cc_gather(sk, paths);
	cc_view_of(paths, n, &view);
	return (__u32)cc_balia_ssthresh(&view, 0, tp->snd_cwnd); /* sk is path 0 */
}

SEC(".struct_ops")
struct tcp_congestion_ops mps_balia = {
	.init = (void *)mps_balia_init,
	.cong_avoid = (void *)mps_balia_cong_avoid,
	.ssthresh = (void *)mps_balia_ssthresh,
	.undo_cwnd = (void *)mps_balia_undo_cwnd,
	.name = "mps_balia",
};
