//! mpstream's QUIC hop. `proxy` runs in the client's namespace: the browser speaks plain
//! HTTP/1.1 to it on loopback, and it carries each of the browser's connections to the gateway
//! as one stream of a single long-lived (multipath) QUIC connection, or as a TCP or MPTCP
//! connection of its own (the hop without QUIC, to measure what the hop itself costs).
//! `gateway` runs in the server's namespace in front of nginx and relays each stream or
//! connection to it, streaming the response back as it arrives. The bytes are HTTP/1.1 end to
//! end: nginx, its access log and the player page see the same requests whatever the hop.

mod figures;
mod gateway;
mod holds;
mod options;
mod pipe;
mod proxy;
mod scheduler;
mod sockets;
mod stats;

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "mpstream-quic",
    version,
    about = "HTTP/1.1 over (multipath) QUIC between a client-side proxy and a server-side gateway"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// In front of the HTTP server: accepts QUIC (and optionally TCP/MPTCP) from proxies.
    Gateway(gateway::Args),
    /// Beside the browser: accepts HTTP/1.1 on a local port and carries it to the gateway.
    Proxy(proxy::Args),
    /// Lists the packet schedulers --scheduler takes, one JSON line each.
    Schedulers,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("mpstream-quic: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Gateway(args) => gateway::run(args).await,
            Command::Proxy(args) => proxy::run(args).await,
            Command::Schedulers => {
                list_schedulers();
                Ok(())
            }
        }
    });
    // The gateway's control channel reads stdin on a blocking thread that only a line or the
    // end of stdin finishes; dropping the runtime would wait for it, so a stopped gateway whose
    // stdin is still open would never exit. Everything else has finished by now.
    runtime.shutdown_background();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("mpstream-quic: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// The mpstream side lists the schedulers from this, so a new one needs no change there.
fn list_schedulers() {
    for s in scheduler::SchedulerName::value_variants() {
        println!("{}", s.listing());
    }
}

/// Resolves on the first SIGTERM or SIGINT: the caller then closes its connections cleanly
/// (which also flushes the qlog, written through a buffer).
pub async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("a SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}

/// What carries the QUIC modes: the library and the multipath draft it implements (the library's
/// version is the one Cargo.toml pins; tests/unit/test_hop.py checks they agree).
pub const QUIC_IMPLEMENTATION: &str = "noq 1.4.0, draft-ietf-quic-multipath-21";

/// One line on stdout saying the process is ready, which the caller waits for.
pub fn announce_ready(what: serde_json::Value) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", serde_json::json!({ "ready": what }));
    let _ = out.flush();
}
