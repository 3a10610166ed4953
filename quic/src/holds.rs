//! Paths held back at run time: the sender keeps new data off every path to a held client
//! address while a path to another address can carry it, as MPTCP keeps data off a backup
//! subflow. mpstream's path policies (mpstream/transports/pathpolicy.py) hold a metered network's path
//! this way and release it when the player's buffer needs it.
//!
//! noq's own path status cannot do it for the gateway: the status a client opens a path with
//! stays local to the client (noq sends PATH_STATUS frames only when a status changes), so the
//! gateway, which sends the video, never learns it. The hold lives in the gateway instead, set
//! on its command line (`--hold`) and changed through its control channel (`--control-stdin`:
//! one command a line on stdin, one JSON answer a line on stdout), and is applied by the packet
//! scheduler hook, which sees each path's peer address.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;

use noq_proto::{PacketScheduler, PacketSchedulerFactory, PathId, PathView, Schedule, SendView};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::watch;

use crate::scheduler::SchedulerName;
use crate::stats::StatsLog;

/// The client addresses whose paths are held; shared by the control channel (which changes
/// it), every connection's scheduler (which reads it each round) and the tasks that wake a
/// connection when it changes.
#[derive(Clone, Debug)]
pub struct Holds(Arc<watch::Sender<BTreeSet<IpAddr>>>);

impl Default for Holds {
    fn default() -> Self {
        Self(Arc::new(watch::Sender::new(BTreeSet::new())))
    }
}

impl Holds {
    pub fn new(addresses: &[IpAddr]) -> Self {
        let holds = Self::default();
        for &a in addresses {
            holds.set(a, true);
        }
        holds
    }

    /// Holds (`held`) or releases the paths to `address`; whether that changed anything.
    pub fn set(&self, address: IpAddr, held: bool) -> bool {
        let address = address.to_canonical();
        self.0.send_if_modified(|set| {
            if held {
                set.insert(address)
            } else {
                set.remove(&address)
            }
        })
    }

    pub fn addresses(&self) -> Vec<IpAddr> {
        self.0.borrow().iter().copied().collect()
    }

    /// Resolves on each change (for waking a connection, whose scheduler only runs when it
    /// has something to send).
    pub fn subscribe(&self) -> watch::Receiver<BTreeSet<IpAddr>> {
        self.0.subscribe()
    }

    /// The paths this round's scheduler must keep data off: those to a held address, but
    /// only while a path to another address can carry data (noq's verdict: validated, not
    /// abandoned, not a backup beside an available path). When the held paths are all that
    /// is left, they carry the data, as a backup subflow does when the others fail.
    pub fn held_paths(&self, paths: &[PathView]) -> Vec<PathId> {
        let held = self.0.borrow();
        if held.is_empty() {
            return Vec::new();
        }
        let is_held = |p: &PathView| held.contains(&p.remote.ip().to_canonical());
        if !paths.iter().any(|p| p.eligible && !is_held(p)) {
            return Vec::new();
        }
        paths.iter().filter(|p| is_held(p)).map(|p| p.id).collect()
    }
}

/// A connection's scheduler with the held paths taken out: the inner scheduler sees them as
/// paths noq would not send data on (so it neither orders data onto them nor picks them for
/// a re-injection), and they hold their data this round.
#[derive(Debug)]
pub struct Holding {
    inner: Box<dyn PacketScheduler>,
    holds: Holds,
}

impl PacketScheduler for Holding {
    fn schedule(&mut self, send: &SendView, paths: &[PathView], out: &mut Schedule) {
        let held = self.holds.held_paths(paths);
        if held.is_empty() {
            return self.inner.schedule(send, paths, out);
        }
        let views: Vec<PathView> = paths
            .iter()
            .map(|p| PathView {
                eligible: p.eligible && !held.contains(&p.id),
                ..*p
            })
            .collect();
        self.inner.schedule(send, &views, out);
        for id in held {
            if !out.held.contains(&id) {
                out.held.push(id);
            }
        }
    }
}

/// Makes each connection's scheduler: the one named, under the holds.
#[derive(Debug)]
pub struct HoldingFactory {
    pub scheduler: SchedulerName,
    pub holds: Holds,
}

impl PacketSchedulerFactory for HoldingFactory {
    fn new_scheduler(&self) -> Box<dyn PacketScheduler> {
        Box::new(Holding {
            inner: self.scheduler.new_scheduler(),
            holds: self.holds.clone(),
        })
    }
}

/// One control command (`hold ADDRESS`, `release ADDRESS` or `held`) applied to `holds`: the
/// answer, or what was wrong with the command.
pub fn command(holds: &Holds, line: &str) -> Result<Value, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let held = match words.as_slice() {
        ["held"] => None,
        [verb @ ("hold" | "release"), address] => {
            let ip: IpAddr = address.parse().map_err(|_| {
                format!("{address:?} is not an IP address (give the client address of a path)")
            })?;
            Some((*verb, ip))
        }
        _ => {
            return Err(format!(
                "unknown command {:?}: say `hold ADDRESS`, `release ADDRESS` or `held`",
                line.trim()
            ));
        }
    };
    let changed = held.is_some_and(|(verb, ip)| holds.set(ip, verb == "hold"));
    let listed: Vec<String> = holds.addresses().iter().map(|a| a.to_string()).collect();
    Ok(json!({"ok": true, "changed": changed, "held": listed}))
}

/// Serves the control channel on stdin until it closes: each command's answer is one JSON line
/// on stdout (`{"control": {...}}`), and each change is a `hold` or `release` event in the
/// statistics, so that a trial's evidence has the time the sender learnt it.
pub async fn serve_stdin(holds: Holds, log: StatsLog) {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::stdout();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.trim().is_empty() {
            continue;
        }
        let answer = match command(&holds, &line) {
            Ok(answer) => {
                if answer["changed"] == true {
                    let verb = line.split_whitespace().next().unwrap_or_default();
                    log.write(json!({"side": "gateway", "event": verb,
                                     "address": line.split_whitespace().nth(1),
                                     "held": answer["held"]}));
                }
                answer
            }
            Err(error) => json!({"ok": false, "error": error}),
        };
        let text = format!("{}\n", json!({ "control": answer }));
        if out.write_all(text.as_bytes()).await.is_err() || out.flush().await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::time::Duration;

    use noq_proto::PathStatus;

    use super::*;
    use crate::stats::path_number;

    const WIFI: &str = "10.1.0.2";
    const CELLULAR: &str = "10.1.1.2";

    /// Path `id` from client address `address`: validated, available, 20 ms, 20 packets of
    /// window, `in_flight` of them in flight.
    fn path(id: u32, address: &str, in_flight: u64) -> PathView {
        PathView {
            id: PathId::from(id),
            status: PathStatus::Available,
            validated: true,
            remote: SocketAddr::new(address.parse().unwrap(), 40000 + id as u16),
            eligible: true,
            smoothed_rtt: Duration::from_millis(20),
            rtt_var: Duration::from_millis(2),
            cwnd: 20 * 1472,
            bytes_in_flight: in_flight * 1472,
            mtu: 1472,
        }
    }

    fn schedule(
        scheduler: SchedulerName,
        holds: &Holds,
        queued: u64,
        paths: &[PathView],
    ) -> Schedule {
        let factory = HoldingFactory {
            scheduler,
            holds: holds.clone(),
        };
        let mut out = Schedule::default();
        let send = SendView {
            queued_bytes: queued,
            reinjection_pending: 0,
        };
        factory.new_scheduler().schedule(&send, paths, &mut out);
        out
    }

    fn ids(v: &[PathId]) -> Vec<u64> {
        v.iter().map(|&id| path_number(id)).collect()
    }

    fn ip(a: &str) -> IpAddr {
        a.parse().unwrap()
    }

    #[test]
    fn nothing_held_is_the_scheduler_alone() {
        let paths = [path(0, WIFI, 0), path(1, CELLULAR, 0)];
        let out = schedule(SchedulerName::LowestId, &Holds::default(), 100_000, &paths);
        assert_eq!(ids(&out.order), [0, 1]);
        assert!(out.held.is_empty());
    }

    #[test]
    fn a_held_address_s_path_carries_no_data_while_another_can() {
        let holds = Holds::new(&[ip(CELLULAR)]);
        // Both paths idle, data queued: lowest-id would use path 0 first and path 1 when path
        // 0 is full; path 1 is held either way.
        let paths = [path(0, WIFI, 0), path(1, CELLULAR, 0)];
        let out = schedule(SchedulerName::LowestId, &holds, 100_000, &paths);
        assert_eq!(ids(&out.held), [1]);
        // Path 0's window full: noq would move on to path 1; held, it waits for path 0.
        let paths = [path(0, WIFI, 20), path(1, CELLULAR, 0)];
        let out = schedule(SchedulerName::LowestId, &holds, 100_000, &paths);
        assert_eq!(ids(&out.held), [1]);
        // Nothing queued: still held (its acknowledgements go on path 0, its probes on itself).
        let out = schedule(SchedulerName::LowestId, &holds, 0, &paths);
        assert_eq!(ids(&out.held), [1]);
    }

    #[test]
    fn the_held_path_is_no_choice_of_the_scheduler_it_wraps() {
        // minrtt would pick the faster path 1 and hold path 0; with path 1's address held,
        // path 0 carries the data and path 1 holds.
        let holds = Holds::new(&[ip(CELLULAR)]);
        let mut fast = path(1, CELLULAR, 0);
        fast.smoothed_rtt = Duration::from_millis(5);
        let paths = [path(0, WIFI, 0), fast];
        let out = schedule(SchedulerName::MinRtt, &holds, 100_000, &paths);
        assert_eq!(ids(&out.order)[0], 0);
        assert_eq!(ids(&out.held), [1]);
        // redundant-tail copies nothing onto a held path: path 0's tail stays where it is.
        let paths = [path(0, WIFI, 10), fast];
        let out = schedule(SchedulerName::RedundantTail, &holds, 0, &paths);
        assert!(out.reinject.is_none());
        assert_eq!(ids(&out.held), [1]);
    }

    #[test]
    fn a_held_path_carries_the_data_when_no_other_path_can() {
        let holds = Holds::new(&[ip(CELLULAR)]);
        // Path 0 abandoned or not validated (noq would not send data on it).
        let mut gone = path(0, WIFI, 0);
        gone.eligible = false;
        let paths = [gone, path(2, CELLULAR, 0)];
        let out = schedule(SchedulerName::LowestId, &holds, 100_000, &paths);
        assert!(out.held.is_empty());
        // Only the held path is open at all.
        let out = schedule(
            SchedulerName::LowestId,
            &holds,
            100_000,
            &[path(2, CELLULAR, 0)],
        );
        assert!(out.held.is_empty());
    }

    #[test]
    fn every_path_to_a_held_address_is_held_and_a_release_lets_them_send() {
        // Path 1 failed and was opened again as path 3 from the same address.
        let holds = Holds::new(&[ip(CELLULAR)]);
        let paths = [path(0, WIFI, 0), path(1, CELLULAR, 0), path(3, CELLULAR, 0)];
        let out = schedule(SchedulerName::LowestId, &holds, 100_000, &paths);
        assert_eq!(ids(&out.held), [1, 3]);
        assert!(holds.set(ip(CELLULAR), false));
        let out = schedule(SchedulerName::LowestId, &holds, 100_000, &paths);
        assert!(out.held.is_empty());
        assert_eq!(ids(&out.order), [0, 1, 3]);
    }

    #[test]
    fn an_ipv4_mapped_peer_address_is_the_same_address() {
        let holds = Holds::new(&[ip(CELLULAR)]);
        let mut mapped = path(1, WIFI, 0);
        mapped.remote = SocketAddr::new(ip("::ffff:10.1.1.2"), 40001);
        let paths = [path(0, WIFI, 0), mapped];
        assert_eq!(ids(&holds.held_paths(&paths)), [1]);
    }

    #[test]
    fn commands_hold_and_release_and_say_what_is_held() {
        let holds = Holds::default();
        let answer = command(&holds, "hold 10.1.1.2").unwrap();
        assert_eq!(answer["changed"], true);
        assert_eq!(answer["held"], json!(["10.1.1.2"]));
        // Again: nothing changes, and it is no error.
        assert_eq!(command(&holds, "hold 10.1.1.2").unwrap()["changed"], false);
        assert_eq!(
            command(&holds, "  held ").unwrap()["held"],
            json!(["10.1.1.2"])
        );
        let answer = command(&holds, "release 10.1.1.2").unwrap();
        assert_eq!(
            (answer["changed"].clone(), answer["held"].clone()),
            (json!(true), json!([]))
        );
        assert_eq!(
            command(&holds, "release 10.1.1.2").unwrap()["changed"],
            false
        );
    }

    #[test]
    fn a_bad_command_is_refused_with_what_is_understood() {
        let holds = Holds::default();
        let err = command(&holds, "hold cellular").unwrap_err();
        assert!(err.contains("\"cellular\" is not an IP address"), "{err}");
        let err = command(&holds, "pause 10.1.1.2").unwrap_err();
        assert!(
            err.contains("hold ADDRESS") && err.contains("release ADDRESS"),
            "{err}"
        );
        assert!(command(&holds, "hold").is_err());
        assert!(holds.addresses().is_empty());
    }

    #[tokio::test]
    async fn a_change_wakes_the_subscribers() {
        let holds = Holds::default();
        let mut changes = holds.subscribe();
        holds.set(ip(CELLULAR), true);
        tokio::time::timeout(Duration::from_secs(1), changes.changed())
            .await
            .expect("woken")
            .unwrap();
        assert!(changes.borrow_and_update().contains(&ip(CELLULAR)));
        // No change, no wake.
        holds.set(ip(CELLULAR), true);
        assert!(!changes.has_changed().unwrap());
    }
}
