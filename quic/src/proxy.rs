//! The proxy: in the client's namespace, beside the browser. Each connection the browser makes
//! to it becomes one stream of a single QUIC connection to the gateway (one path per client
//! address under multipath), or one TCP/MPTCP connection to the gateway.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use clap::{Args as ClapArgs, ValueEnum};
use noq::rustls::RootCertStore;
use noq::rustls::pki_types::CertificateDer;
use noq::{ClientConfig, Connection, Endpoint, FourTuple, PathError, PathId, PathStatus};
use serde_json::json;
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::gateway::SERVER_NAME;
use crate::holds::Holds;
use crate::options::QuicOptions;
use crate::stats::{KnownPaths, StatsLog, follow_paths, path_number, sample};
use crate::{QUIC_IMPLEMENTATION, announce_ready, figures, pipe, sockets, stop_signal};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// One QUIC connection with a path from every --local address.
    Mpquic,
    /// One QUIC connection from the first --local address only.
    Quic,
    /// A TCP connection per browser connection, from the first --local address.
    Tcp,
    /// An MPTCP connection per browser connection (the kernel adds the subflows).
    Mptcp,
}

#[derive(ClapArgs, Debug)]
pub struct Args {
    /// Where the browser connects (plain HTTP/1.1).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The gateway: its QUIC (UDP) address, or its TCP address in the tcp and mptcp modes.
    #[arg(long)]
    gateway: SocketAddr,
    #[arg(long, value_enum)]
    mode: Mode,
    /// A client address, one per path; the first carries the handshake.
    #[arg(long = "local", required = true)]
    locals: Vec<IpAddr>,
    /// A client address whose path is a backup (used only when no other path is).
    #[arg(long = "backup")]
    backups: Vec<IpAddr>,
    /// The gateway's certificate (DER), as its --cert-out wrote it.
    #[arg(long)]
    cert: Option<PathBuf>,
    /// How long to wait for the gateway's handshake.
    #[arg(long, default_value_t = 10_000)]
    connect_timeout_ms: u64,
    /// A path that was abandoned is opened again after this long, and again this long after
    /// each attempt that fails, until it comes back. No back-off: an attempt made while the
    /// link is down already takes its validation's timeout (about 3 s here) to fail, and a
    /// pause that grew to 8 s kept a returning path unused for up to 8 s.
    #[arg(long, default_value_t = 1000)]
    reopen_ms: u64,
    /// Where the page may ask for each path's figures (figures.rs), in the quic and mpquic
    /// modes; the ready line names the address bound.
    #[arg(long)]
    paths_listen: Option<SocketAddr>,
    #[command(flatten)]
    quic: QuicOptions,
}

pub async fn run(args: Args) -> Result<()> {
    let listener = sockets::listen(args.listen, false)?;
    match args.mode {
        Mode::Tcp | Mode::Mptcp => serve_tcp(args, listener).await,
        Mode::Quic | Mode::Mpquic => serve_quic(args, listener).await,
    }
}

async fn serve_tcp(args: Args, listener: TcpListener) -> Result<()> {
    let mptcp = args.mode == Mode::Mptcp;
    announce_ready(json!({
        "listen": listener.local_addr()?.to_string(),
        "mode": format!("{:?}", args.mode).to_lowercase(),
    }));
    let local = args.locals[0];
    let accept = async {
        loop {
            let Ok((browser, _)) = listener.accept().await else {
                continue;
            };
            let _ = browser.set_nodelay(true);
            let gateway = args.gateway;
            tokio::spawn(async move {
                match sockets::connect(gateway, Some(local), mptcp).await {
                    Ok(upstream) => {
                        let _ = pipe::tcp_with_tcp(browser, upstream).await;
                    }
                    Err(err) => eprintln!("mpstream-quic proxy: {err}"),
                }
            });
        }
    };
    tokio::select! {
        () = accept => Ok(()),
        () = stop_signal() => Ok(()),
    }
}

/// The quic and mpquic modes: one QUIC connection to the gateway carries each of the browser's
/// connections as a stream of its own.
async fn serve_quic(args: Args, listener: TcpListener) -> Result<()> {
    let multipath = args.mode == Mode::Mpquic;
    check_max_paths(multipath, args.quic.max_paths)?;
    let log = StatsLog::open(args.quic.stats.as_deref())?;
    let (endpoint, conn) = connect(&args, multipath).await?;
    log.write(
        json!({"side": "proxy", "event": "connected", "conn": conn.stable_id(),
                     "remote": args.gateway.to_string(), "multipath": multipath,
                     "scheduler": args.quic.scheduler.name()}),
    );
    let paths = watch_paths(&conn, &args, &log);
    let opened = if multipath {
        keep_every_path(&conn, &args, &paths, &log)
    } else {
        Vec::new()
    };
    let established = established_paths(opened).await;
    let paths_listen = match args.paths_listen {
        Some(addr) => Some(answer_paths(addr, &conn, &paths, multipath)?),
        None => None,
    };
    announce_ready(json!({
        "listen": listener.local_addr()?.to_string(),
        "mode": format!("{:?}", args.mode).to_lowercase(),
        "paths": established,
        "implementation": QUIC_IMPLEMENTATION,
        "paths_listen": paths_listen,
    }));
    let result = tokio::select! {
        () = relay_browsers(&listener, &conn) => Ok(()),
        reason = conn.closed() => Err(anyhow!("the QUIC connection to the gateway closed: {reason}")),
        () = stop_signal() => Ok(()),
    };
    conn.close(0u32.into(), b"proxy stopping");
    let _ = tokio::time::timeout(Duration::from_secs(2), endpoint.wait_idle()).await;
    result
}

/// Samples what each path receives and answers the page's requests for it on `addr`; the
/// address bound.
fn answer_paths(
    addr: SocketAddr,
    conn: &Connection,
    paths: &KnownPaths,
    multipath: bool,
) -> Result<String> {
    let listener = sockets::listen(addr, false)?;
    let bound = listener.local_addr()?.to_string();
    let received = figures::Received::default();
    tokio::spawn(figures::sample_received(
        conn.clone(),
        paths.clone(),
        received.clone(),
    ));
    let label = if multipath { "mpquic" } else { "quic" };
    tokio::spawn(figures::serve(
        listener,
        conn.clone(),
        paths.clone(),
        received,
        label,
    ));
    Ok(bound)
}

/// Multipath QUIC needs room for a second path; one-path QUIC must not offer the extension.
fn check_max_paths(multipath: bool, max_paths: u32) -> Result<()> {
    if multipath && max_paths < 2 {
        bail!("--mode mpquic needs --max-paths of at least 2 (it is {max_paths})");
    }
    if !multipath && max_paths > 0 {
        bail!("--mode quic is one path: leave --max-paths at 0");
    }
    Ok(())
}

/// The endpoint and its connection to the gateway, once the handshake is done (and, under
/// multipath, once the gateway has agreed to it).
async fn connect(args: &Args, multipath: bool) -> Result<(Endpoint, Connection)> {
    // Multipath sends from every client address through one socket (the source address of
    // each packet chosen per path); one path binds to its address so the kernel's source
    // routing keeps it on that path.
    let bind = if multipath {
        SocketAddr::new([0, 0, 0, 0].into(), 0)
    } else {
        SocketAddr::new(args.locals[0], 0)
    };
    let endpoint =
        Endpoint::client(bind).with_context(|| format!("cannot bind a UDP socket on {bind}"))?;
    endpoint.set_default_client_config(client_config(args)?);
    let connecting = endpoint.connect(args.gateway, SERVER_NAME)?;
    let conn = tokio::time::timeout(Duration::from_millis(args.connect_timeout_ms), connecting)
        .await
        .map_err(|_| {
            anyhow!(
                "no QUIC handshake with the gateway at {} within {} ms",
                args.gateway,
                args.connect_timeout_ms
            )
        })?
        .with_context(|| {
            format!(
                "the QUIC handshake with the gateway at {} failed",
                args.gateway
            )
        })?;
    if multipath && !conn.is_multipath_enabled() {
        bail!(
            "the gateway at {} did not agree to multipath QUIC (start it with --max-paths)",
            args.gateway
        );
    }
    Ok((endpoint, conn))
}

/// The connection's paths, starting with the handshake's from the first --local address, kept
/// current (and logged) by a task that follows the path events, and sampled into the
/// statistics when they are written.
fn watch_paths(conn: &Connection, args: &Args, log: &StatsLog) -> KnownPaths {
    let paths = KnownPaths::default();
    paths.add(PathId::ZERO, Some(args.locals[0].to_string()));
    tokio::spawn(follow_paths(
        conn.clone(),
        "proxy",
        paths.clone(),
        log.clone(),
        args.quic.scheduler.reinjects(),
        |_, _| {},
    ));
    if log.enabled() {
        let interval = Duration::from_millis(args.quic.stats_interval_ms);
        tokio::spawn(sample(
            conn.clone(),
            "proxy",
            paths.clone(),
            log.clone(),
            interval,
            args.quic.scheduler.reinjects(),
        ));
    }
    paths
}

/// Keeps a path open from every --local address (the first one's is the handshake's, marked
/// backup if its address is one); each receiver gets the id of an extra path once it first
/// opens, or None.
fn keep_every_path(
    conn: &Connection,
    args: &Args,
    paths: &KnownPaths,
    log: &StatsLog,
) -> Vec<oneshot::Receiver<Option<u64>>> {
    let keeper = Keeper {
        conn: conn.clone(),
        gateway: args.gateway,
        paths: paths.clone(),
        log: log.clone(),
        reopen: Duration::from_millis(args.reopen_ms),
    };
    let first_status = status_of(args.locals[0], &args.backups);
    if first_status == PathStatus::Backup
        && let Some(p) = conn.path(PathId::ZERO)
    {
        let _ = p.set_status(PathStatus::Backup);
    }
    tokio::spawn(
        keeper
            .clone()
            .keep(args.locals[0], first_status, Some(PathId::ZERO)),
    );
    let mut opened = Vec::new();
    for &local in &args.locals[1..] {
        let (tx, rx) = oneshot::channel();
        tokio::spawn(
            keeper
                .clone()
                .keep_first(local, status_of(local, &args.backups), tx),
        );
        opened.push(rx);
    }
    opened
}

/// The ids of the paths a session starts with: the handshake's, then each extra path that
/// opened within a short wait (a session starts with every path it can have).
async fn established_paths(opened: Vec<oneshot::Receiver<Option<u64>>>) -> Vec<u64> {
    let mut established = vec![0u64];
    for rx in opened {
        if let Ok(Ok(Some(id))) = tokio::time::timeout(Duration::from_secs(5), rx).await {
            established.push(id);
        }
    }
    established
}

/// Carries each connection the browser makes as one new stream of `conn` (until the caller
/// stops waiting on it).
async fn relay_browsers(listener: &TcpListener, conn: &Connection) {
    loop {
        let Ok((browser, _)) = listener.accept().await else {
            continue;
        };
        let _ = browser.set_nodelay(true);
        let conn = conn.clone();
        tokio::spawn(async move {
            if let Ok((send, recv)) = conn.open_bi().await {
                let _ = pipe::tcp_with_stream(browser, send, recv).await;
            }
        });
    }
}

fn status_of(local: IpAddr, backups: &[IpAddr]) -> PathStatus {
    if backups.contains(&local) {
        PathStatus::Backup
    } else {
        PathStatus::Available
    }
}

fn client_config(args: &Args) -> Result<ClientConfig> {
    let path = args
        .cert
        .as_ref()
        .context("--cert is needed in the quic and mpquic modes")?;
    let der = std::fs::read(path)
        .with_context(|| format!("cannot read the gateway's certificate {}", path.display()))?;
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from(der))
        .context("the gateway's certificate is not a DER certificate")?;
    let mut config = ClientConfig::with_root_certificates(Arc::new(roots))?;
    config.transport_config(Arc::new(
        args.quic.transport_config("proxy", Holds::default())?,
    ));
    Ok(config)
}

/// Keeps one client address's path open: opens it, waits for it to be abandoned (a path that
/// hears nothing for --path-idle-ms is), and opens it again every --reopen-ms until it validates.
#[derive(Clone)]
struct Keeper {
    conn: Connection,
    gateway: SocketAddr,
    paths: KnownPaths,
    log: StatsLog,
    reopen: Duration,
}

impl Keeper {
    async fn keep_first(
        self,
        local: IpAddr,
        status: PathStatus,
        first: oneshot::Sender<Option<u64>>,
    ) {
        let id = self.open(local, status).await;
        let _ = first.send(id.map(path_number));
        self.keep(local, status, id).await;
    }

    async fn keep(self, local: IpAddr, status: PathStatus, mut current: Option<PathId>) {
        loop {
            if let Some(id) = current {
                self.until_closed(id).await;
            }
            if self.conn.close_reason().is_some() {
                return;
            }
            tokio::time::sleep(self.reopen).await;
            current = self.open(local, status).await;
        }
    }

    async fn until_closed(&self, id: PathId) {
        while self.conn.path(id).is_some_and(|p| p.status().is_ok()) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The new path's id once it is validated, or None (said in the statistics).
    async fn open(&self, local: IpAddr, status: PathStatus) -> Option<PathId> {
        loop {
            let result = self
                .conn
                .open_path_ensure(FourTuple::new(self.gateway, Some(local)), status)
                .await;
            match result {
                Ok(path) => {
                    self.paths.add(path.id(), Some(local.to_string()));
                    self.log.write(json!({"side": "proxy", "event": "opened", "conn": self.conn.stable_id(),
                                          "path": path_number(path.id()), "local": local.to_string()}));
                    return Some(path.id());
                }
                // Right after the handshake the gateway's connection ids for new paths may not
                // have arrived yet.
                Err(PathError::RemoteCidsExhausted) => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                Err(err) => {
                    self.log.write(json!({"side": "proxy", "event": "open_failed", "conn": self.conn.stable_id(),
                                          "local": local.to_string(), "reason": err.to_string()}));
                    return None;
                }
            }
            if self.conn.close_reason().is_some() {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_is_a_backup_only_when_its_address_is_named_one() {
        let (a, b): (IpAddr, IpAddr) = ("10.1.0.2".parse().unwrap(), "10.1.1.2".parse().unwrap());
        assert_eq!(status_of(a, &[b]), PathStatus::Available);
        assert_eq!(status_of(b, &[b]), PathStatus::Backup);
        assert_eq!(status_of(a, &[]), PathStatus::Available);
    }
}
