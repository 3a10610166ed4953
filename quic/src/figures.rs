//! The proxy's own per-path figures for the player page, answered on `--paths-listen` at
//! `GET /.well-known/mpstream/paths` in the shape of the collector's (mpstream's server/seen.py):
//! the server sees only the gateway's connections, not the paths, so only this end can say what
//! each path carries. The page's multipath-aware adaptation rule reads them every second.
//!
//! This end receives the video, so a path's rate is what it received: the fastest it received
//! at over one sampling interval in the last second. While a response arrives a path runs at
//! what it can carry; between responses it carries nothing, which says nothing of the path.

use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use noq::{Connection, PathId, PathStatus};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::stats::KnownPaths;

/// The one target answered (mpstream's transports/base.py names it for every carrier).
pub const PATHS_TARGET: &str = "/.well-known/mpstream/paths";
/// How often each path's received bytes are read.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// How far back a path's fastest interval is looked for.
const RATE_WINDOW: Duration = Duration::from_secs(1);
/// The longest request head read; anything longer is answered 400.
const HEAD_LIMIT: usize = 8 * 1024;

/// Each path's received bytes at each sample of the last RATE_WINDOW.
#[derive(Clone, Default)]
pub struct Received(Arc<Mutex<BTreeMap<PathId, VecDeque<(Instant, u64)>>>>);

impl Received {
    pub fn record(&self, id: PathId, at: Instant, bytes: u64) {
        let mut all = self.0.lock().expect("the received-bytes lock");
        let samples = all.entry(id).or_default();
        samples.push_back((at, bytes));
        while samples
            .front()
            .is_some_and(|(t, _)| at.duration_since(*t) > RATE_WINDOW)
        {
            samples.pop_front();
        }
    }

    pub fn forget(&self, keep: &[PathId]) {
        self.0
            .lock()
            .expect("the received-bytes lock")
            .retain(|id, _| keep.contains(id));
    }

    /// The fastest a path received at between two consecutive samples (bits/s), or None before
    /// it has two.
    pub fn peak_bps(&self, id: PathId) -> Option<f64> {
        let all = self.0.lock().expect("the received-bytes lock");
        let samples = all.get(&id)?;
        samples
            .iter()
            .zip(samples.iter().skip(1))
            .filter_map(|((t0, b0), (t1, b1))| {
                let dt = t1.duration_since(*t0).as_secs_f64();
                (dt > 0.0).then(|| b1.saturating_sub(*b0) as f64 * 8.0 / dt)
            })
            .reduce(f64::max)
    }
}

/// Samples every known path of `conn` until it closes.
pub async fn sample_received(conn: Connection, paths: KnownPaths, received: Received) {
    let mut tick = tokio::time::interval(SAMPLE_EVERY);
    while conn.close_reason().is_none() {
        tick.tick().await;
        let now = Instant::now();
        let ids = paths.ids();
        for &id in &ids {
            if let Some(stats) = conn.path_stats(id) {
                received.record(id, now, stats.udp_rx.bytes);
            }
        }
        received.forget(&ids);
    }
}

/// The client's address of a path as KnownPaths holds it (an address, or one with a port).
fn address_of(local: &str) -> String {
    local
        .parse::<SocketAddr>()
        .map(|a| a.ip())
        .or_else(|_| local.parse::<IpAddr>())
        .map(|ip| ip.to_string())
        .unwrap_or_else(|_| local.to_string())
}

/// One path's figure, in the collector's fields. `waiting_ms` is 0: the receiving end cannot
/// tell data sent towards it from none; a path that failed is left out once noq discards it.
pub fn path_figure(
    local: &str,
    peak_bps: Option<f64>,
    rx_bytes: u64,
    rtt: Duration,
    backup: bool,
) -> Value {
    json!({
        "address": address_of(local),
        "subflows": 1,
        "delivery_bps": peak_bps.map(f64::round),
        "app_limited": false,
        "rtt_ms": (rtt.as_secs_f64() * 1e5).round() / 100.0,
        "bytes_acked": rx_bytes,
        "backup": backup,
        "waiting_ms": 0,
    })
}

/// The answer: every known path with an address and figures.
pub fn answer(conn: &Connection, paths: &KnownPaths, received: &Received, label: &str) -> Value {
    let figures: Vec<Value> = paths
        .snapshot()
        .into_iter()
        .filter_map(|(id, local)| {
            let local = local?;
            let stats = conn.path_stats(id)?;
            let backup = conn
                .path(id)
                .and_then(|p| p.status().ok())
                .is_some_and(|s| s == PathStatus::Backup);
            Some(path_figure(
                &local,
                received.peak_bps(id),
                stats.udp_rx.bytes,
                stats.rtt,
                backup,
            ))
        })
        .collect();
    json!({"measured": true, "label": label, "paths": figures})
}

/// The HTTP/1.1 response to a request head: the figures at PATHS_TARGET, 404 elsewhere, 400 for
/// what is not a GET request line. Each answer closes its connection.
pub fn respond(head: &str, figures: impl FnOnce() -> Value) -> Vec<u8> {
    let line = head.lines().next().unwrap_or("");
    let mut words = line.split_whitespace();
    let (status, body) = match (words.next(), words.next()) {
        (Some("GET"), Some(target)) if target.split('?').next() == Some(PATHS_TARGET) => {
            ("200 OK", figures().to_string())
        }
        (Some(_), Some(_)) => ("404 Not Found", format!("only {PATHS_TARGET} is here\n")),
        _ => ("400 Bad Request", "not an HTTP request\n".to_string()),
    };
    let kind = if status.starts_with("200") {
        "application/json"
    } else {
        "text/plain; charset=utf-8"
    };
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nAccess-Control-Allow-Origin: *\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < HEAD_LIMIT {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// Answers the page on `listener` until the caller stops waiting.
pub async fn serve(
    listener: TcpListener,
    conn: Connection,
    paths: KnownPaths,
    received: Received,
    label: &'static str,
) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            continue;
        };
        let (conn, paths, received) = (conn.clone(), paths.clone(), received.clone());
        tokio::spawn(async move {
            let head = tokio::time::timeout(Duration::from_secs(2), read_head(&mut stream)).await;
            let head = head.unwrap_or_default();
            let out = respond(&head, || answer(&conn, &paths, &received, label));
            let _ = stream.write_all(&out).await;
            let _ = stream.shutdown().await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paths_rate_is_its_fastest_interval_of_the_last_second() {
        let received = Received::default();
        let (id, t0) = (PathId::ZERO, Instant::now());
        assert_eq!(received.peak_bps(id), None);
        received.record(id, t0, 0);
        received.record(id, t0 + Duration::from_millis(100), 25_000); // 2 Mbit/s
        received.record(id, t0 + Duration::from_millis(200), 25_000); // idle
        assert_eq!(received.peak_bps(id), Some(2_000_000.0));
        // A second and more later, the burst is out of the window.
        received.record(id, t0 + Duration::from_millis(1250), 25_000);
        received.record(id, t0 + Duration::from_millis(1350), 30_000);
        assert_eq!(received.peak_bps(id), Some(400_000.0));
        received.forget(&[]);
        assert_eq!(received.peak_bps(id), None);
    }

    #[test]
    fn the_figure_names_the_paths_address_without_its_port() {
        let figure = path_figure(
            "10.1.1.2:40000",
            Some(1e6),
            42,
            Duration::from_millis(21),
            true,
        );
        assert_eq!(figure["address"], "10.1.1.2");
        assert_eq!(figure["delivery_bps"], 1e6);
        assert_eq!(figure["bytes_acked"], 42);
        assert_eq!(figure["rtt_ms"], 21.0);
        assert_eq!(figure["backup"], true);
        assert_eq!(
            path_figure("10.1.0.2", None, 0, Duration::ZERO, false)["delivery_bps"],
            Value::Null
        );
    }

    #[test]
    fn only_the_paths_target_is_answered() {
        let ok = String::from_utf8(respond(
            "GET /.well-known/mpstream/paths?x=1 HTTP/1.1\r\nHost: h\r\n\r\n",
            || json!({"measured": true}),
        ))
        .unwrap();
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("Access-Control-Allow-Origin: *\r\n"), "{ok}");
        assert!(ok.ends_with("\r\n\r\n{\"measured\":true}"), "{ok}");
        let other =
            String::from_utf8(respond("GET /media/x HTTP/1.1\r\n\r\n", || json!({}))).unwrap();
        assert!(other.starts_with("HTTP/1.1 404"), "{other}");
        let junk = String::from_utf8(respond("", || json!({}))).unwrap();
        assert!(junk.starts_with("HTTP/1.1 400"), "{junk}");
    }
}
