/* The coupled CCs' integer arithmetic (coupled_math.h, the code the BPF programs run) as a
 * filter, for tests/unit/test_coupled_cc_math.py to check against the papers' formulas.
 *
 * Each input line: RULE W_CUR then one "w rtt_us l1 l2" group per path, path 0 being the
 * subflow the ACK or loss is on; RULE is lia, olia or balia. Each output line:
 * "increase_q30 negative balia_ssthresh(W_CUR)".
 *
 * wVegas decides once a round: "wvegas W SSTHRESH BASE_US RTT_US ALPHA Q_MIN_US" then the
 * paths as above (path 0's window being W), and the output is "w ssthresh alpha q_min_us" after
 * the round. */
#include <stdio.h>
#include <string.h>

#include "coupled_math.h"

int main(void)
{
	char rule[16];
	char line[1024];

	while (fgets(line, sizeof(line), stdin)) {
		struct cc_path paths[CC_MAX_PATHS] = {0};
		struct cc_view view;
		unsigned long long w_cur, step = 0;
		int used, off = 0, n = 0, negative = 0;

		unsigned long long ssthresh = 0, base = 0, rtt = 0;
		struct cc_wvegas wv = {0};

		if (sscanf(line, "%15s %llu%n", rule, &w_cur, &used) != 2) {
			fprintf(stderr, "bad line: %s", line);
			return 2;
		}
		off = used;
		if (!strcmp(rule, "wvegas")) {
			if (sscanf(line + off, "%llu %llu %llu %u %u%n", &ssthresh, &base, &rtt,
				   &wv.alpha, &wv.q_min_us, &used) != 5) {
				fprintf(stderr, "bad wvegas line: %s", line);
				return 2;
			}
			off += used;
		}
		while (n < CC_MAX_PATHS) {
			unsigned w, rtt, l1, l2;
			if (sscanf(line + off, "%u %u %u %u%n", &w, &rtt, &l1, &l2, &used) != 4)
				break;
			paths[n].w = w;
			paths[n].rtt_us = rtt;
			paths[n].l1 = l1;
			paths[n].l2 = l2;
			off += used;
			n++;
		}
		if (n == 0) {
			fprintf(stderr, "no paths: %s", line);
			return 2;
		}
		cc_view_of(paths, n, &view);
		if (!strcmp(rule, "wvegas")) {
			cc_u64 ss = ssthresh;
			cc_u64 w = cc_wvegas_round(&view, 0, w_cur, &ss, base, rtt, &wv);
			printf("%llu %llu %u %u\n", (unsigned long long)w, (unsigned long long)ss,
			       wv.alpha, wv.q_min_us);
			continue;
		}
		if (!strcmp(rule, "lia"))
			step = cc_lia_increase(paths, &view, 0);
		else if (!strcmp(rule, "olia"))
			step = cc_olia_increase(paths, &view, 0, &negative);
		else if (!strcmp(rule, "balia"))
			step = cc_balia_increase(&view, 0);
		else {
			fprintf(stderr, "unknown rule %s\n", rule);
			return 2;
		}
		printf("%llu %d %llu\n", step, negative,
		       (unsigned long long)cc_balia_ssthresh(&view, 0, w_cur));
	}
	return 0;
}
