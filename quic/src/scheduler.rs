//! Packet schedulers of the multipath QUIC hop: which path carries the next packets of data.
//!
//! noq 1.4.0 has no scheduler of its own to choose: it offers data to the paths in ascending
//! id. Our patch over noq-proto (quic/patches/, applied by scripts/build-quic.sh) asks a
//! `PacketScheduler` at the start of every `poll_transmit` for the order the paths are offered
//! data in, which paths hold their data back this round, and whether the stream data in flight
//! on a path is re-injected (sent once more, on the path offered data first). noq still decides
//! everything else: a path it would not send data on stays so, and congestion control and
//! pacing still stop a path, after which the next path in the order is offered the data.

use std::cmp::Ordering;

use clap::ValueEnum;
use noq_proto::{
    PacketScheduler, PacketSchedulerFactory, PathId, PathView, Reinjection, Schedule, SendView,
};
use serde_json::{Value, json};

/// The schedulers by the names `--scheduler`, scenarios and reports use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SchedulerName {
    #[value(name = "lowest-id")]
    LowestId,
    #[value(name = "minrtt")]
    MinRtt,
    #[value(name = "ecf")]
    Ecf,
    #[value(name = "redundant-tail")]
    RedundantTail,
}

impl SchedulerName {
    pub fn name(self) -> &'static str {
        match self {
            Self::LowestId => "lowest-id",
            Self::MinRtt => "minrtt",
            Self::Ecf => "ecf",
            Self::RedundantTail => "redundant-tail",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Self::LowestId => {
                "noq's own: data goes to the lowest-numbered path with window room (the default)"
            }
            Self::MinRtt => {
                "data goes to the path with the lowest smoothed RTT that has window room; \
                 slower paths wait while it has room"
            }
            Self::Ecf => {
                "Earliest Completion First (CoNEXT'17): when the fastest path is full, wait for \
                 it unless the slower path would finish the queued data sooner"
            }
            Self::RedundantTail => {
                "minrtt, and once all queued data is in flight, the slower path's unacknowledged \
                 tail is sent again on the faster path (XLINK-style; copies counted as \
                 redundant_bytes)"
            }
        }
    }

    /// Whether the scheduler sends data twice on purpose (its statistics count the copies).
    pub fn reinjects(self) -> bool {
        self == Self::RedundantTail
    }

    /// One JSON line of `mpstream-quic schedulers`.
    pub fn listing(self) -> Value {
        json!({
            "name": self.name(),
            "description": self.description(),
            "reinjects": self.reinjects(),
            "default": self == Self::LowestId,
        })
    }
}

impl PacketSchedulerFactory for SchedulerName {
    fn new_scheduler(&self) -> Box<dyn PacketScheduler> {
        match self {
            Self::LowestId => Box::new(LowestId),
            Self::MinRtt => Box::new(MinRtt),
            Self::Ecf => Box::new(Ecf::default()),
            Self::RedundantTail => Box::new(RedundantTail::default()),
        }
    }
}

/// Whether noq's congestion check lets the path send one more full packet now.
fn has_room(p: &PathView) -> bool {
    p.bytes_in_flight + u64::from(p.mtu) <= p.cwnd
}

fn room(p: &PathView) -> u64 {
    p.cwnd.saturating_sub(p.bytes_in_flight)
}

/// Lower smoothed RTT first; the path id breaks ties so that a choice is repeatable.
fn faster(a: &PathView, b: &PathView) -> Ordering {
    a.smoothed_rtt.cmp(&b.smoothed_rtt).then(a.id.cmp(&b.id))
}

/// The paths noq lets carry data, with room first, each group fastest first: MPTCP's default
/// (minRTT) order, which the other schedulers start from.
fn minrtt_order(paths: &[PathView]) -> Vec<&PathView> {
    let mut eligible: Vec<&PathView> = paths.iter().filter(|p| p.eligible).collect();
    eligible.sort_by(|a, b| has_room(b).cmp(&has_room(a)).then(faster(a, b)));
    eligible
}

/// Paths not named here follow in ascending id (the patch's rule), so the ineligible paths,
/// which still carry their own probes and path frames, keep noq's order among themselves.
fn offer(out: &mut Schedule, order: &[&PathView]) {
    out.order.extend(order.iter().map(|p| p.id));
}

/// noq's own behaviour: the paths in ascending id, none held back (the patch then does
/// exactly what upstream noq does).
#[derive(Debug)]
struct LowestId;

impl PacketScheduler for LowestId {
    fn schedule(&mut self, _send: &SendView, paths: &[PathView], out: &mut Schedule) {
        let mut ids: Vec<PathId> = paths.iter().map(|p| p.id).collect();
        ids.sort();
        out.order.extend(ids);
    }
}

/// The path with the lowest smoothed RTT among those with window room takes the data, and
/// the others wait while it has room, as minRTT assigns data to subflows by their windows.
/// Pacing does not move data to a slower path: a path with room but paced sends at its pacing
/// time (noq alone would hand the data to the next path meanwhile).
#[derive(Debug)]
struct MinRtt;

impl PacketScheduler for MinRtt {
    fn schedule(&mut self, send: &SendView, paths: &[PathView], out: &mut Schedule) {
        minrtt(send, &minrtt_order(paths), out);
    }
}

fn minrtt(send: &SendView, order: &[&PathView], out: &mut Schedule) {
    match order.first() {
        // Nothing queued: holding a path would only delay its acknowledgements.
        Some(first) if has_room(first) && send.queued_bytes > 0 => offer_first(out, first, order),
        _ => offer(out, order),
    }
}

/// ECF's hysteresis: once it has decided to wait, it keeps waiting until the slow path's
/// round trip exceeds the fast path's completion time by this fraction more (the paper's β).
const ECF_BETA: f64 = 0.25;

/// Earliest Completion First (Lim et al., CoNEXT'17, Algorithm 1). With k bytes queued and the
/// fastest path f full, the fast path needs n = 1 + k/cwnd_f more round trips for them; if that
/// is sooner than the slow path s could deliver even its first packet (rtt_s + δ, δ the larger
/// RTT variation), and s would need at least 2 rtt_f + δ for the k bytes itself, sending on s
/// would only finish later: s holds its data and f is waited for. Otherwise s sends.
#[derive(Debug, Default)]
struct Ecf {
    waiting: bool,
}

impl PacketScheduler for Ecf {
    fn schedule(&mut self, send: &SendView, paths: &[PathView], out: &mut Schedule) {
        let order = minrtt_order(paths);
        offer(out, &order);
        let Some(fast) = order.iter().copied().min_by(|a, b| faster(a, b)) else {
            return;
        };
        // Nothing queued: there is no completion time to improve, and holding a path would
        // only delay its acknowledgements.
        if send.queued_bytes == 0 {
            return;
        }
        let others = order.iter().copied().filter(|p| p.id != fast.id);
        if has_room(fast) {
            // The fastest path takes the data; the others wait for their turn.
            out.held.extend(others.map(|p| p.id));
            return;
        }
        // The path MPTCP's default would use next: the fastest other with room.
        let Some(slow) = others.clone().find(|p| has_room(p)) else {
            return; // no path can send data now anyway
        };
        if self.should_wait(send.queued_bytes, fast, slow) {
            out.held.extend(others.map(|p| p.id));
        }
    }
}

impl Ecf {
    fn should_wait(&mut self, queued: u64, fast: &PathView, slow: &PathView) -> bool {
        let k = queued as f64;
        let (rtt_f, rtt_s) = (
            fast.smoothed_rtt.as_secs_f64(),
            slow.smoothed_rtt.as_secs_f64(),
        );
        let delta = fast.rtt_var.max(slow.rtt_var).as_secs_f64();
        let n = 1.0 + k / fast.cwnd.max(1) as f64;
        let beta = if self.waiting { ECF_BETA } else { 0.0 };
        if n * rtt_f < (1.0 + beta) * (rtt_s + delta) {
            if k / slow.cwnd.max(1) as f64 * rtt_s >= 2.0 * rtt_f + delta {
                self.waiting = true;
                return true;
            }
            false
        } else {
            self.waiting = false;
            false
        }
    }
}

/// minRTT for new data, and XLINK's tail re-injection (Zheng et al., SIGCOMM'21): once every
/// queued byte has been sent at least once (what is left of the response is all in flight),
/// the stream data in flight on a slower path is sent again on the fastest path with window
/// room, as much as that room holds, so that the response no longer ends at the slow path's
/// pace. Only packets a copy could beat are copied: one sent on the slow path more than the
/// two paths' RTT difference ago is acknowledged before a copy sent now would be. Each packet
/// is copied once; until the copies are sent, the other paths hold their data so that the
/// copies do not go back out on the slow path. XLINK also gates re-injection on the player's
/// buffer, which the hop does not know: here every response tail is re-injected.
#[derive(Debug, Default)]
struct RedundantTail {
    /// The path the last re-injection was meant for, while its copies wait to be sent.
    target: Option<PathId>,
}

impl PacketScheduler for RedundantTail {
    fn schedule(&mut self, send: &SendView, paths: &[PathView], out: &mut Schedule) {
        let order = minrtt_order(paths);
        if send.reinjection_pending > 0
            && let Some(target) = self.target
            && let Some(t) = order.iter().find(|p| p.id == target)
        {
            offer_first(out, t, &order);
            return;
        }
        // The target is gone or the copies are sent: nothing is held back any longer.
        self.target = None;
        if send.queued_bytes > 0 {
            minrtt(send, &order, out);
            return;
        }
        let Some(target) = order
            .iter()
            .copied()
            .filter(|p| has_room(p))
            .min_by(|a, b| faster(a, b))
        else {
            minrtt(send, &order, out);
            return;
        };
        let source = order
            .iter()
            .copied()
            .filter(|p| p.bytes_in_flight > 0 && p.smoothed_rtt > target.smoothed_rtt)
            .max_by(|a, b| faster(a, b));
        let Some(source) = source else {
            minrtt(send, &order, out);
            return;
        };
        out.reinject = Some(Reinjection {
            from: source.id,
            max_bytes: room(target),
            sent_within: source.smoothed_rtt - target.smoothed_rtt,
        });
        self.target = Some(target.id);
        offer_first(out, target, &order);
    }
}

/// `first` offered data first and alone: the other paths hold theirs this round.
fn offer_first(out: &mut Schedule, first: &PathView, order: &[&PathView]) {
    let others: Vec<&PathView> = order.iter().copied().filter(|p| p.id != first.id).collect();
    out.order.push(first.id);
    offer(out, &others);
    out.held.extend(others.iter().map(|p| p.id));
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use noq_proto::PathStatus;

    use super::*;
    use crate::stats::path_number;

    const MTU: u16 = 1472;
    const PKT: u64 = MTU as u64;

    /// A validated, available path: its smoothed RTT in ms, window and bytes in flight in
    /// full packets, and an RTT variation of a tenth of the RTT.
    fn path(id: u32, rtt_ms: u64, cwnd_pkts: u64, in_flight_pkts: u64) -> PathView {
        PathView {
            id: PathId::from(id),
            status: PathStatus::Available,
            validated: true,
            remote: SocketAddr::from(([10, 1, id as u8, 2], 4000)),
            eligible: true,
            smoothed_rtt: Duration::from_millis(rtt_ms),
            rtt_var: Duration::from_millis(rtt_ms / 10),
            cwnd: cwnd_pkts * PKT,
            bytes_in_flight: in_flight_pkts * PKT,
            mtu: MTU,
        }
    }

    fn queued(pkts: u64) -> SendView {
        SendView {
            queued_bytes: pkts * PKT,
            reinjection_pending: 0,
        }
    }

    fn run(s: &mut dyn PacketScheduler, send: SendView, paths: &[PathView]) -> Schedule {
        let mut out = Schedule::default();
        s.schedule(&send, paths, &mut out);
        out
    }

    fn ids(v: &[PathId]) -> Vec<u64> {
        v.iter().map(|&id| path_number(id)).collect()
    }

    /// The path that sends next: the first in the order that is not held, has room and is
    /// eligible (what the patched `poll_transmit` does with the answer).
    fn sends_next(out: &Schedule, paths: &[PathView]) -> Option<u64> {
        let mut order = out.order.clone();
        for p in paths {
            if !order.contains(&p.id) {
                order.push(p.id);
            }
        }
        order
            .into_iter()
            .filter(|id| !out.held.contains(id))
            .filter_map(|id| paths.iter().find(|p| p.id == id))
            .find(|p| p.eligible && has_room(p))
            .map(|p| path_number(p.id))
    }

    // Path 0: 50 ms; path 1: 10 ms; both with 20 packets of window.

    #[test]
    fn lowest_id_offers_path_0_first_whatever_the_rtts() {
        let paths = [path(0, 50, 20, 0), path(1, 10, 20, 0)];
        let out = run(&mut LowestId, queued(100), &paths);
        assert_eq!(ids(&out.order), [0, 1]);
        assert!(out.held.is_empty() && out.reinject.is_none());
        assert_eq!(sends_next(&out, &paths), Some(0));
        // Path 0 full: noq moves on to path 1.
        let paths = [path(0, 50, 20, 20), path(1, 10, 20, 0)];
        assert_eq!(
            sends_next(&run(&mut LowestId, queued(100), &paths), &paths),
            Some(1)
        );
    }

    #[test]
    fn minrtt_offers_the_lower_rtt_path_with_room_first() {
        let paths = [path(0, 50, 20, 0), path(1, 10, 20, 0)];
        let out = run(&mut MinRtt, queued(100), &paths);
        assert_eq!(ids(&out.order), [1, 0]);
        assert_eq!(sends_next(&out, &paths), Some(1));
        // While path 1 has room (even if its pacer makes it wait), path 0 holds its data.
        assert_eq!(ids(&out.held), [0]);
        // 19 of 20 packets in flight: one more fits, path 1 still alone.
        let paths = [path(0, 50, 20, 0), path(1, 10, 20, 19)];
        let out = run(&mut MinRtt, queued(100), &paths);
        assert_eq!((ids(&out.order), ids(&out.held)), (vec![1, 0], vec![0]));
        // Path 1 full: path 0, slower but with room, comes first.
        let paths = [path(0, 50, 20, 0), path(1, 10, 20, 20)];
        let out = run(&mut MinRtt, queued(100), &paths);
        assert_eq!(ids(&out.order), [0, 1]);
        assert_eq!(sends_next(&out, &paths), Some(0));
        // Nothing queued: nothing held (acknowledgements go on whichever path is first).
        let paths = [path(0, 50, 20, 0), path(1, 10, 20, 0)];
        assert!(run(&mut MinRtt, queued(0), &paths).held.is_empty());
    }

    #[test]
    fn minrtt_leaves_a_path_noq_would_not_use_last() {
        // Path 1 is faster but a backup while path 0 is available (noq's verdict).
        let mut backup = path(1, 10, 20, 0);
        backup.status = PathStatus::Backup;
        backup.eligible = false;
        let paths = [path(0, 50, 20, 0), backup];
        let out = run(&mut MinRtt, queued(100), &paths);
        assert_eq!(ids(&out.order), [0]);
        assert_eq!(sends_next(&out, &paths), Some(0));
    }

    #[test]
    fn ecf_uses_only_the_fast_path_while_it_has_room() {
        let paths = [path(0, 100, 20, 0), path(1, 10, 20, 5)];
        let out = run(&mut Ecf::default(), queued(10), &paths);
        assert_eq!(ids(&out.order), [1, 0]);
        assert_eq!(ids(&out.held), [0]);
        assert_eq!(sends_next(&out, &paths), Some(1));
    }

    #[test]
    fn ecf_waits_for_the_fast_path_for_a_short_tail() {
        // Fast full. k = 10 packets: the fast path needs n = 1 + 10/20 = 1.5 round trips,
        // 15 ms, against 100 + 10 (δ) ms for the slow path's first delivery; the slow path
        // itself would need 10/20 x 100 = 50 ms >= 2 x 10 + 10 = 30 ms. Wait.
        let paths = [path(0, 100, 20, 0), path(1, 10, 20, 20)];
        let mut ecf = Ecf::default();
        let out = run(&mut ecf, queued(10), &paths);
        assert_eq!(ids(&out.held), [0]);
        assert_eq!(sends_next(&out, &paths), None);
        assert!(ecf.waiting);
    }

    #[test]
    fn ecf_sends_on_the_slow_path_when_it_finishes_the_little_left_soon_enough() {
        // Slow path 30 ms: 2 packets take it 2/20 x 30 = 3 ms < 2 x 10 + 3 (δ) = 23 ms.
        let paths = [path(0, 30, 20, 0), path(1, 10, 20, 20)];
        let out = run(&mut Ecf::default(), queued(2), &paths);
        assert!(out.held.is_empty());
        assert_eq!(sends_next(&out, &paths), Some(0));
    }

    #[test]
    fn ecf_uses_both_paths_for_a_long_transfer() {
        // k = 400 packets: n = 21 fast round trips = 210 ms, later than the slow path's
        // 100 + 10 ms: both paths are needed.
        let paths = [path(0, 100, 20, 0), path(1, 10, 20, 20)];
        let mut ecf = Ecf { waiting: true };
        let out = run(&mut ecf, queued(400), &paths);
        assert!(out.held.is_empty());
        assert_eq!(sends_next(&out, &paths), Some(0));
        assert!(!ecf.waiting);
    }

    #[test]
    fn ecf_keeps_waiting_within_its_hysteresis() {
        // Fast: 10 ms, 10 packets of window; slow: 100 ms, no variation. k = 100 packets:
        // n = 11, 110 ms. Fresh: 110 >= 100, send on the slow path. Having waited: 110 <
        // 1.25 x 100, and the slow path would need 100/20 x 100 = 500 ms >= 20 ms: wait on.
        let mut fast = path(1, 10, 10, 10);
        let mut slow = path(0, 100, 20, 0);
        fast.rtt_var = Duration::ZERO;
        slow.rtt_var = Duration::ZERO;
        let paths = [slow, fast];
        let out = run(&mut Ecf::default(), queued(100), &paths);
        assert_eq!(sends_next(&out, &paths), Some(0));
        let out = run(&mut Ecf { waiting: true }, queued(100), &paths);
        assert_eq!(sends_next(&out, &paths), None);
    }

    #[test]
    fn ecf_holds_nothing_when_nothing_is_queued() {
        let paths = [path(0, 100, 20, 0), path(1, 10, 20, 20)];
        let out = run(&mut Ecf::default(), queued(0), &paths);
        assert!(out.held.is_empty());
    }

    #[test]
    fn redundant_tail_sends_new_data_as_minrtt_does() {
        let paths = [path(0, 50, 20, 10), path(1, 10, 20, 5)];
        let out = run(&mut RedundantTail::default(), queued(100), &paths);
        assert_eq!((ids(&out.order), ids(&out.held)), (vec![1, 0], vec![0]));
        assert!(out.reinject.is_none());
    }

    #[test]
    fn redundant_tail_copies_the_slow_paths_tail_onto_the_fast_path() {
        // All queued data sent; 10 packets in flight on the slow path 0, 5 on the fast path 1,
        // whose window has room for 15 more: they are copied there, path 1 offered first.
        let paths = [path(0, 50, 20, 10), path(1, 10, 20, 5)];
        let mut s = RedundantTail::default();
        let out = run(&mut s, queued(0), &paths);
        // Packets sent on path 0 more than 50 - 10 ms ago arrive before a copy would.
        assert_eq!(
            out.reinject,
            Some(Reinjection {
                from: PathId::from(0u32),
                max_bytes: 15 * PKT,
                sent_within: Duration::from_millis(40),
            })
        );
        // The slow path holds its data, so that the copies go on path 1.
        assert_eq!(ids(&out.order), [1, 0]);
        assert_eq!(ids(&out.held), [0]);
        assert_eq!(sends_next(&out, &paths), Some(1));
        // So it does until they are sent.
        let waiting = SendView {
            queued_bytes: 10 * PKT,
            reinjection_pending: 10 * PKT,
        };
        let out = run(&mut s, waiting, &paths);
        assert_eq!(ids(&out.order)[0], 1);
        assert_eq!(ids(&out.held), [0]);
        assert!(out.reinject.is_none());
        assert_eq!(sends_next(&out, &paths), Some(1));
        // Once they are sent, new data goes out as minrtt sends it.
        let paths = [path(0, 50, 20, 10), path(1, 10, 20, 20)];
        let out = run(&mut s, queued(100), &paths);
        assert!(out.reinject.is_none());
        assert_eq!(ids(&out.order), [0, 1]);
        assert_eq!(sends_next(&out, &paths), Some(0));
    }

    #[test]
    fn redundant_tail_releases_the_slow_path_when_the_target_is_gone() {
        let paths = [path(0, 50, 20, 10), path(1, 10, 20, 5)];
        let mut s = RedundantTail::default();
        run(&mut s, queued(0), &paths);
        let mut dead = paths[1];
        dead.eligible = false;
        let waiting = SendView {
            queued_bytes: 10 * PKT,
            reinjection_pending: 10 * PKT,
        };
        let out = run(&mut s, waiting, &[paths[0], dead]);
        assert!(out.held.is_empty());
        assert_eq!(ids(&out.order), [0]);
    }

    #[test]
    fn redundant_tail_does_not_copy_the_fast_paths_tail_onto_the_slow_path() {
        // Only the fast path has data in flight; the slow one has room. No copy.
        let paths = [path(0, 50, 20, 0), path(1, 10, 20, 20)];
        let out = run(&mut RedundantTail::default(), queued(0), &paths);
        assert!(out.reinject.is_none() && out.held.is_empty());
        // Nor when no path has room for a copy.
        let paths = [path(0, 50, 20, 20), path(1, 10, 20, 20)];
        assert!(
            run(&mut RedundantTail::default(), queued(0), &paths)
                .reinject
                .is_none()
        );
    }

    #[test]
    fn the_listing_names_every_scheduler_once_with_lowest_id_the_default() {
        let lines: Vec<Value> = SchedulerName::value_variants()
            .iter()
            .map(|s| s.listing())
            .collect();
        let names: Vec<&str> = lines.iter().map(|l| l["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["lowest-id", "minrtt", "ecf", "redundant-tail"]);
        for (line, s) in lines.iter().zip(SchedulerName::value_variants()) {
            // The listing's name is the one --scheduler takes.
            assert_eq!(SchedulerName::from_str(s.name(), false).unwrap(), *s);
            assert!(!line["description"].as_str().unwrap().is_empty());
        }
        let defaults: Vec<&Value> = lines.iter().filter(|l| l["default"] == true).collect();
        assert_eq!(defaults.len(), 1);
        assert_eq!(defaults[0]["name"], "lowest-id");
        assert!(SchedulerName::RedundantTail.reinjects() && !SchedulerName::Ecf.reinjects());
    }
}
