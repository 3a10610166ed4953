/* The congestion window cap of a deployment's server (`server.cwnd_clamp_bdp`), a sock_ops
 * program: when a TCP connection or an MPTCP subflow is established, the cap of its (network
 * namespace, remote /24) in `clamps` becomes its window clamp. A topology fills the map for its
 * server's namespace, an entry a path (netem/cwndclamp.py), and empties it on the way down. A
 * route's locked `cwnd` metric would do this without BPF, but the kernel reads it through its
 * TCP metrics cache, which holds no entry for a destination it has not closed a connection to:
 * on a fresh namespace it never applies (docs/deployments.md). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define SOL_TCP 6
#define TCP_BPF_SNDCWND_CLAMP 1002 /* include/uapi/linux/bpf.h: a #define, not in BTF */

struct clamp_key {
	__u64 netns;     /* the namespace's cookie (SO_NETNS_COOKIE) */
	__u32 remote24;  /* the remote IPv4 address's /24, host order */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct clamp_key);
	__type(value, __u32);
} clamps SEC(".maps");

SEC("sockops")
int cwnd_clamp(struct bpf_sock_ops *skops)
{
	struct clamp_key key = {};
	__u32 *packets;
	int cap;

	if (skops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB &&
	    skops->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB)
		return 1;
	key.netns = bpf_get_netns_cookie(skops);
	key.remote24 = bpf_ntohl(skops->remote_ip4) & 0xffffff00;
	packets = bpf_map_lookup_elem(&clamps, &key);
	if (packets) {
		cap = *packets;
		bpf_setsockopt(skops, SOL_TCP, TCP_BPF_SNDCWND_CLAMP, &cap, sizeof(cap));
	}
	return 1;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
