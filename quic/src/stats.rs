//! Per-path statistics and path events as JSON lines, one file per process: the trial samples
//! them as the kernel sampler samples MPTCP subflows.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use noq::{Connection, PathEvent, PathId, PathStats};
use serde_json::{Value, json};
use tokio_stream::StreamExt;

/// Where this process writes its lines (nowhere without --stats). Lines are written whole and
/// flushed at once, so a reader never sees half of one, even after a kill.
#[derive(Clone, Default)]
pub struct StatsLog(Option<Arc<Mutex<File>>>);

impl StatsLog {
    pub fn open(path: Option<&Path>) -> Result<Self> {
        let Some(path) = path else {
            return Ok(Self(None));
        };
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("cannot open the statistics file {}", path.display()))?;
        Ok(Self(Some(Arc::new(Mutex::new(file)))))
    }

    pub fn enabled(&self) -> bool {
        self.0.is_some()
    }

    pub fn write(&self, mut line: Value) {
        let Some(file) = &self.0 else { return };
        line["t"] = json!(unix_time());
        let mut text = line.to_string();
        text.push('\n');
        let mut file = file.lock().expect("the statistics file lock");
        let _ = file.write_all(text.as_bytes());
    }
}

fn unix_time() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The paths of one connection this end knows of (noq has no call that lists them), each with
/// the local address it was opened from when that was chosen.
#[derive(Clone, Default)]
pub struct KnownPaths(Arc<Mutex<BTreeMap<PathId, Option<String>>>>);

impl KnownPaths {
    /// Records a path; an address given later fills in one recorded without it (the path's
    /// `established` event can come before the opener has recorded its address).
    pub fn add(&self, id: PathId, local: Option<String>) {
        let mut paths = self.0.lock().expect("the path set lock");
        let known = paths.entry(id).or_insert(None);
        if local.is_some() {
            *known = local;
        }
    }

    pub fn remove(&self, id: PathId) {
        self.0.lock().expect("the path set lock").remove(&id);
    }

    pub fn ids(&self) -> Vec<PathId> {
        self.0
            .lock()
            .expect("the path set lock")
            .keys()
            .copied()
            .collect()
    }

    pub fn snapshot(&self) -> Vec<(PathId, Option<String>)> {
        self.0
            .lock()
            .expect("the path set lock")
            .iter()
            .map(|(k, v)| (*k, v.clone()))
            .collect()
    }
}

/// A path's figures; with `reinjects` (the scheduler sends data twice on purpose) also the
/// stream bytes it sent as copies of data still in flight on another path.
pub fn path_stats_json(stats: &PathStats, reinjects: bool) -> Value {
    let mut line = json!({
        "rtt_ms": stats.rtt.as_secs_f64() * 1e3,
        "cwnd": stats.cwnd,
        "sent_packets": stats.sent_packets,
        "sent_bytes": stats.sent_bytes,
        "lost_packets": stats.lost_packets,
        "lost_bytes": stats.lost_bytes,
        "congestion_events": stats.congestion_events,
        "udp_tx_bytes": stats.udp_tx.bytes,
        "udp_rx_bytes": stats.udp_rx.bytes,
        "mtu": stats.current_mtu,
    });
    if reinjects {
        line["redundant_bytes"] = json!(stats.reinjected_bytes);
    }
    line
}

/// Samples every known path of `conn` each `interval` until the connection closes.
pub async fn sample(
    conn: Connection,
    side: &'static str,
    paths: KnownPaths,
    log: StatsLog,
    interval: Duration,
    reinjects: bool,
) {
    let mut tick = tokio::time::interval(interval);
    let conn_id = conn.stable_id();
    while conn.close_reason().is_none() {
        tick.tick().await;
        for (id, local) in paths.snapshot() {
            if let Some(stats) = conn.path_stats(id) {
                let mut line = path_stats_json(&stats, reinjects);
                line["side"] = json!(side);
                line["conn"] = json!(conn_id);
                line["path"] = json!(path_number(id));
                line["local"] = json!(local);
                log.write(line);
            }
        }
    }
}

/// Follows `conn`'s path events: logs each, keeps `paths` current, and hands each event to
/// `also` (the gateway mirrors the client's path status there).
pub async fn follow_paths(
    conn: Connection,
    side: &'static str,
    paths: KnownPaths,
    log: StatsLog,
    reinjects: bool,
    also: impl Fn(&Connection, &PathEvent),
) {
    let mut events = conn.path_events();
    let conn_id = conn.stable_id();
    while let Some(event) = events.next().await {
        let Ok(event) = event else { continue };
        also(&conn, &event);
        let mut line = json!({ "side": side, "conn": conn_id });
        match &event {
            PathEvent::Established { id, .. } => {
                paths.add(*id, None);
                line["event"] = json!("established");
                line["path"] = json!(path_number(*id));
            }
            PathEvent::Abandoned { id, reason, .. } => {
                line["event"] = json!("abandoned");
                line["path"] = json!(path_number(*id));
                line["reason"] = json!(format!("{reason:?}"));
            }
            PathEvent::Discarded { id, path_stats, .. } => {
                paths.remove(*id);
                line = path_stats_json(path_stats, reinjects);
                line["side"] = json!(side);
                line["conn"] = json!(conn_id);
                line["event"] = json!("discarded");
                line["path"] = json!(path_number(*id));
            }
            PathEvent::RemoteStatus { id, status, .. } => {
                line["event"] = json!("remote_status");
                line["path"] = json!(path_number(*id));
                line["status"] = json!(format!("{status:?}"));
            }
            _ => continue,
        }
        log.write(line);
    }
}

pub fn path_number(id: PathId) -> u64 {
    id.to_string().parse().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_s_address_is_filled_in_when_it_comes_after_the_path() {
        let paths = KnownPaths::default();
        let (zero, two) = (PathId::ZERO, PathId::from(2u32));
        paths.add(two, None); // established before its opener recorded the address
        paths.add(zero, Some("10.1.0.2:5000".into()));
        paths.add(two, Some("10.1.1.2:5001".into()));
        paths.add(two, None); // a later event without the address keeps it
        assert_eq!(
            paths.snapshot(),
            [
                (zero, Some("10.1.0.2:5000".into())),
                (two, Some("10.1.1.2:5001".into()))
            ]
        );
        paths.remove(zero);
        assert_eq!(paths.ids(), [two]);
        assert_eq!(path_number(two), 2);
    }

    #[test]
    fn each_line_is_whole_json_with_its_time() {
        let file =
            std::env::temp_dir().join(format!("mps-quic-stats-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&file);
        let log = StatsLog::open(Some(&file)).unwrap();
        assert!(log.enabled());
        log.write(json!({"path": 0, "cwnd": 12000}));
        log.write(json!({"path": 1, "event": "established"}));
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::remove_file(&file).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["cwnd"], 12000);
        assert_eq!(lines[1]["event"], "established");
        let now = unix_time();
        assert!(
            lines
                .iter()
                .all(|l| (now - l["t"].as_f64().unwrap()).abs() < 60.0)
        );
        // Without --stats nothing is written and nothing fails.
        let off = StatsLog::open(None).unwrap();
        assert!(!off.enabled());
        off.write(json!({}));
    }

    #[test]
    fn a_statistics_file_that_cannot_be_opened_is_named() {
        let err = StatsLog::open(Some(Path::new("/nonexistent-dir/stats.jsonl")))
            .err()
            .expect("no such folder");
        assert!(
            err.to_string().contains("/nonexistent-dir/stats.jsonl"),
            "{err}"
        );
    }
}
