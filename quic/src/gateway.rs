//! The gateway: in the server's namespace, in front of nginx. Each QUIC stream (or TCP/MPTCP
//! connection) from a proxy becomes one connection to nginx, relayed both ways as bytes arrive.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args as ClapArgs;
use noq::rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
use noq::{
    Connection, Endpoint, Incoming, PathEvent, PathId, RecvStream, SendStream, ServerConfig,
};
use serde_json::json;
use tokio::net::TcpListener;

use crate::holds::{self, Holds};
use crate::options::QuicOptions;
use crate::scheduler::SchedulerName;
use crate::stats::{KnownPaths, StatsLog, follow_paths, sample};
use crate::{announce_ready, pipe, sockets, stop_signal};

/// The name in the gateway's self-signed certificate, which the proxy checks.
pub const SERVER_NAME: &str = "mpstream-gateway";

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// UDP address QUIC is accepted on (every address of the host with 0.0.0.0).
    #[arg(long, default_value = "0.0.0.0:4433")]
    listen: SocketAddr,
    /// Also accept TCP and MPTCP connections from proxies here.
    #[arg(long)]
    tcp_listen: Option<SocketAddr>,
    /// The HTTP server every request goes to.
    #[arg(long)]
    upstream: SocketAddr,
    /// Write the gateway's certificate (DER) here, for the proxy to trust.
    #[arg(long)]
    cert_out: PathBuf,
    /// A client address whose paths carry no data while a path from another address can
    /// (held from the start; the control channel releases it).
    #[arg(long = "hold")]
    holds: Vec<IpAddr>,
    /// Take commands on stdin, one a line: `hold ADDRESS`, `release ADDRESS` or `held`; each is
    /// answered with one JSON line on stdout, `{"control": {"ok": ..., "held": [...]}}`.
    #[arg(long)]
    control_stdin: bool,
    #[command(flatten)]
    quic: QuicOptions,
}

pub async fn run(args: Args) -> Result<()> {
    let log = StatsLog::open(args.quic.stats.as_deref())?;
    let holds = Holds::new(&args.holds);
    let config = server_config(&args, holds.clone())?;
    let endpoint = Endpoint::server(config, args.listen)
        .with_context(|| format!("cannot listen for QUIC on {}", args.listen))?;
    let tcp = args
        .tcp_listen
        .map(|a| sockets::listen(a, true))
        .transpose()?;
    announce_ready(json!({
        "quic": endpoint.local_addr()?.to_string(),
        "tcp": tcp.as_ref().map(|l| l.local_addr().map(|a| a.to_string())).transpose()?,
    }));
    if args.control_stdin {
        tokio::spawn(holds::serve_stdin(holds.clone(), log.clone()));
    }
    let serving = Serving {
        upstream: args.upstream,
        holds,
        log,
        interval: Duration::from_millis(args.quic.stats_interval_ms),
        keepalive: Duration::from_millis(args.quic.path_keepalive_ms),
        scheduler: args.quic.scheduler,
    };
    tokio::select! {
        () = accept_quic(endpoint.clone(), serving) => {}
        () = accept_tcp(tcp, args.upstream) => {}
        () = stop_signal() => {}
    }
    endpoint.close(0u32.into(), b"gateway stopping");
    let _ = tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await;
    Ok(())
}

fn server_config(args: &Args, holds: Holds) -> Result<ServerConfig> {
    let issued = rcgen::generate_simple_self_signed(vec![SERVER_NAME.into()])?;
    let cert: CertificateDer<'static> = issued.cert.der().clone();
    let key = PrivatePkcs8KeyDer::from(issued.signing_key.serialize_der());
    // Written whole or not at all: the proxy may be waiting for it.
    let partial = args.cert_out.with_extension("part");
    std::fs::write(&partial, cert.as_ref())
        .with_context(|| format!("cannot write the certificate to {}", partial.display()))?;
    std::fs::rename(&partial, &args.cert_out)?;
    let mut config = ServerConfig::with_single_cert(vec![cert], key.into())?;
    config.transport_config(Arc::new(args.quic.transport_config("gateway", holds)?));
    Ok(config)
}

/// What every QUIC connection is served with.
#[derive(Clone)]
struct Serving {
    upstream: SocketAddr,
    holds: Holds,
    log: StatsLog,
    interval: Duration,
    keepalive: Duration,
    scheduler: SchedulerName,
}

async fn accept_quic(endpoint: Endpoint, serving: Serving) {
    while let Some(incoming) = endpoint.accept().await {
        tokio::spawn(serving.clone().serve(incoming));
    }
}

impl Serving {
    /// Serves one proxy's connection: the handshake, then its streams until it closes.
    async fn serve(self, incoming: Incoming) {
        let Some(conn) = self.handshake(incoming).await else {
            return;
        };
        self.log.write(
            json!({"side": "gateway", "event": "connected", "conn": conn.stable_id(),
                         "remote": conn.path(PathId::ZERO).and_then(|p| p.remote_address().ok())
                             .map(|a| a.to_string()),
                         "multipath": conn.is_multipath_enabled(), "scheduler": self.scheduler.name(),
                         "held": self.holds.addresses()}),
        );
        self.watch_paths(&conn);
        self.relay_streams(&conn).await;
    }

    /// The connection, or None once the failed handshake is logged.
    async fn handshake(&self, incoming: Incoming) -> Option<Connection> {
        match incoming.await {
            Ok(conn) => Some(conn),
            Err(err) => {
                self.log.write(
                    json!({"side": "gateway", "event": "handshake_failed", "reason": err.to_string()}),
                );
                None
            }
        }
    }

    /// Starts the connection's path tasks: following (and logging) its path events, pinging
    /// its paths under multipath, and sampling them into the statistics when they are written.
    fn watch_paths(&self, conn: &Connection) {
        let paths = KnownPaths::default();
        paths.add(PathId::ZERO, None);
        tokio::spawn(follow_paths(
            conn.clone(),
            "gateway",
            paths.clone(),
            self.log.clone(),
            self.scheduler.reinjects(),
            mirror_status,
        ));
        if conn.is_multipath_enabled() && self.keepalive > Duration::ZERO {
            tokio::spawn(ping_paths(
                conn.clone(),
                paths.clone(),
                self.keepalive,
                self.holds.clone(),
            ));
        }
        if self.log.enabled() {
            tokio::spawn(sample(
                conn.clone(),
                "gateway",
                paths,
                self.log.clone(),
                self.interval,
                self.scheduler.reinjects(),
            ));
        }
    }

    /// Relays each stream the proxy opens to a connection of its own to the upstream, until
    /// the connection closes (logged).
    async fn relay_streams(&self, conn: &Connection) {
        loop {
            match conn.accept_bi().await {
                Ok((send, recv)) => {
                    tokio::spawn(relay_stream(self.upstream, send, recv));
                }
                Err(err) => {
                    self.log.write(
                        json!({"side": "gateway", "event": "closed", "conn": conn.stable_id(),
                                     "reason": err.to_string()}),
                    );
                    return;
                }
            }
        }
    }
}

/// Relays one stream to a new connection to the upstream; the stream is reset (code 1) when
/// that connection cannot be made.
async fn relay_stream(upstream: SocketAddr, mut send: SendStream, recv: RecvStream) {
    match sockets::connect(upstream, None, false).await {
        Ok(tcp) => {
            let _ = pipe::tcp_with_stream(tcp, send, recv).await;
        }
        Err(err) => {
            eprintln!("mpstream-quic gateway: {err}");
            let _ = send.reset(1u32.into());
        }
    }
}

/// Pings every path this often, so that the proxy, which judges a path dead when it hears
/// nothing on it, hears something on an idle one. noq's own per-path keep-alive is re-armed only
/// by packets received on that path, and the proxy may acknowledge on another path, so after
/// its first ping it would fall silent. A hold or release pings at once: a ping wakes the
/// connection, whose scheduler then applies the change (it runs only when the connection has
/// something to send, and a released path's data may be waiting for just that).
async fn ping_paths(conn: Connection, paths: KnownPaths, every: Duration, holds: Holds) {
    let mut tick = tokio::time::interval(every);
    let mut changes = holds.subscribe();
    while conn.close_reason().is_none() {
        tokio::select! {
            _ = tick.tick() => {}
            Ok(()) = changes.changed() => {}
        }
        for id in paths.ids() {
            if let Some(path) = conn.path(id) {
                let _ = path.ping();
            }
        }
    }
}

/// The sender schedules by its own view of a path's status: the client marks a path backup,
/// and the gateway, which sends the video, must apply it.
fn mirror_status(conn: &Connection, event: &PathEvent) {
    if let PathEvent::RemoteStatus { id, status, .. } = event
        && let Some(path) = conn.path(*id)
    {
        let _ = path.set_status(*status);
    }
}

async fn accept_tcp(listener: Option<TcpListener>, upstream: SocketAddr) {
    let Some(listener) = listener else {
        return std::future::pending().await;
    };
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        let _ = client.set_nodelay(true);
        tokio::spawn(async move {
            match sockets::connect(upstream, None, false).await {
                Ok(server) => {
                    let _ = pipe::tcp_with_tcp(client, server).await;
                }
                Err(err) => eprintln!("mpstream-quic gateway: {err}"),
            }
        });
    }
}
