/* A deployment's server caps per path (`server.cwnd_clamp_bdp`, `server.pacing_cap`,
 * `server.sndbuf_bdp`), a sock_ops program: when a TCP connection or an MPTCP subflow is
 * established, the caps of its (network namespace, remote /24) in `caps` become its window
 * clamp (and its initial window, where lower), its maximum pacing rate and its send buffer.
 * A topology fills the map for its server's namespace, an entry a path (netem/pathcaps.py), and
 * empties it on the way down. A route's locked `cwnd` metric would cap the window without BPF,
 * but the kernel reads it through its TCP metrics cache, which holds no entry for a destination
 * it has not closed a connection to: on a fresh namespace it never applies
 * (docs/deployments.md). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* include/uapi: #defines, not in BTF */
#define SOL_SOCKET 1
#define SOL_TCP 6
#define SO_SNDBUF 7
#define SO_MAX_PACING_RATE 47
#define TCP_BPF_IW 1001
#define TCP_BPF_SNDCWND_CLAMP 1002

struct cap_key {
	__u64 netns;     /* the namespace's cookie (SO_NETNS_COOKIE) */
	__u32 remote24;  /* the remote IPv4 address's /24, host order */
	__u32 pad;
};

struct path_cap {
	__u32 cwnd;      /* packets; 0: no window cap */
	__u32 pacing;    /* bytes a second; 0: no pacing cap */
	__u32 sndbuf;    /* bytes, as SO_SNDBUF takes them (the kernel doubles them); 0: none */
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct cap_key);
	__type(value, struct path_cap);
} caps SEC(".maps");

SEC("sockops")
int path_caps(struct bpf_sock_ops *skops)
{
	struct cap_key key = {};
	struct path_cap *cap;
	int value;

	if (skops->op != BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB &&
	    skops->op != BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB)
		return 1;
	key.netns = bpf_get_netns_cookie(skops);
	key.remote24 = bpf_ntohl(skops->remote_ip4) & 0xffffff00;
	cap = bpf_map_lookup_elem(&caps, &key);
	if (!cap)
		return 1;
	if (cap->cwnd) {
		value = cap->cwnd;
		bpf_setsockopt(skops, SOL_TCP, TCP_BPF_SNDCWND_CLAMP, &value, sizeof(value));
		/* The clamp bounds the window's growth, not where it starts: a connection starts at
		 * the initial window (10 packets) and is cut to the clamp only once it is
		 * cwnd-limited, which a live stream's small responses never make it. On a path of a
		 * few hundred kbit/s ten packets are a third of a second of queue, and a player that
		 * opens a connection every few seconds kept that queue standing. So the initial
		 * window is the cap too, where that is lower (the kernel takes it only before any
		 * data was sent: at establishment). */
		if (value < skops->snd_cwnd)
			bpf_setsockopt(skops, SOL_TCP, TCP_BPF_IW, &value, sizeof(value));
	}
	if (cap->pacing) {
		/* Also turns on TCP's own pacing for the socket (sk_pacing_status), and the MPTCP
		 * scheduler reads the capped rate when it picks a subflow. */
		value = cap->pacing;
		bpf_setsockopt(skops, SOL_SOCKET, SO_MAX_PACING_RATE, &value, sizeof(value));
	}
	if (cap->sndbuf) {
		/* Fixed: no autotuning. An MPTCP scheduler queues a burst of up to 64 KB on an idle
		 * subflow whatever its rate, and stops at a subflow whose buffer is full. */
		value = cap->sndbuf;
		bpf_setsockopt(skops, SOL_SOCKET, SO_SNDBUF, &value, sizeof(value));
	}
	return 1;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
