//! The QUIC options both ends share, and the transport configuration they make.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::{Args as ClapArgs, ValueEnum};
use noq::{TransportConfig, VarInt, congestion};

use crate::holds::{HoldingFactory, Holds};
use crate::scheduler::SchedulerName;

/// The congestion controllers noq offers, by the names a profile's `cc` uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Cc {
    Cubic,
    #[value(name = "newreno", alias = "reno")]
    NewReno,
    #[value(name = "bbr", alias = "bbr3")]
    Bbr,
}

#[derive(ClapArgs, Clone, Debug)]
pub struct QuicOptions {
    /// Congestion control of this end's sending direction (each path has its own controller).
    #[arg(long, value_enum, default_value = "cubic")]
    pub cc: Cc,
    /// Which path this end's data goes on (`mpstream-quic schedulers` lists them).
    #[arg(long, value_enum, default_value = "lowest-id")]
    pub scheduler: SchedulerName,
    /// UDP payload size of every QUIC packet, fixed (path MTU discovery off) so that a run is
    /// comparable with TCP's: 1472 fills a 1500-byte IPv4 link as TCP's 1448-byte segments do.
    #[arg(long, default_value_t = 1472, value_parser = clap::value_parser!(u16).range(1200..=1472))]
    pub packet_size: u16,
    /// How many paths may be open at once; 0 turns the multipath extension off. Path ids are
    /// never reused, so a path that fails and is opened again takes a new one.
    #[arg(long, default_value_t = 0)]
    pub max_paths: u32,
    /// A path that hears nothing for this long is abandoned (the other paths carry on); 0: never.
    /// Only the receiving end can judge: noq acknowledges a path's data on whichever path it
    /// sends on, so the sending end may hear nothing on a path that works (the gateway runs
    /// with 0 and the proxy abandons a dead path, which the gateway then drops).
    #[arg(long, default_value_t = 1000)]
    pub path_idle_ms: u64,
    /// Every path is probed this often, so an idle but healthy path is not abandoned.
    #[arg(long, default_value_t = 250)]
    pub path_keepalive_ms: u64,
    /// The connection closes when it hears nothing for this long (keep-alives are sent every
    /// 2 s): long enough that one path's outage does not end a single-path connection, as it
    /// does not end a TCP connection.
    #[arg(long, default_value_t = 30_000)]
    pub idle_timeout_ms: u64,
    /// Write one qlog file per connection into this folder (JSON-SEQ, readable by qvis).
    #[arg(long)]
    pub qlog_dir: Option<PathBuf>,
    /// Append JSON lines of per-path statistics and path events to this file.
    #[arg(long)]
    pub stats: Option<PathBuf>,
    /// How often the per-path statistics are sampled.
    #[arg(long, default_value_t = 100)]
    pub stats_interval_ms: u64,
}

// Flow-control windows large enough for 2 x 100 Mbit/s at a 100 ms round trip, so that the
// windows, not the paths, never limit a download we measure.
const STREAM_WINDOW: u32 = 16 << 20;
const CONNECTION_WINDOW: u32 = 64 << 20;
const KEEP_ALIVE: Duration = Duration::from_secs(2);

impl QuicOptions {
    /// The configuration of this end; its scheduler keeps data off the paths `holds` holds.
    pub fn transport_config(&self, qlog_prefix: &str, holds: Holds) -> Result<TransportConfig> {
        if Duration::from_millis(self.idle_timeout_ms) <= KEEP_ALIVE {
            bail!(
                "--idle-timeout-ms must be above {} ms, the keep-alive interval",
                KEEP_ALIVE.as_millis()
            );
        }
        if self.path_idle_ms > 0 && self.path_keepalive_ms >= self.path_idle_ms {
            bail!(
                "--path-keepalive-ms ({}) must be below --path-idle-ms ({})",
                self.path_keepalive_ms,
                self.path_idle_ms
            );
        }
        let mut tc = TransportConfig::default();
        tc.initial_mtu(self.packet_size)
            .mtu_discovery_config(None)
            .stream_receive_window(VarInt::from_u32(STREAM_WINDOW))
            .receive_window(VarInt::from_u32(CONNECTION_WINDOW))
            .send_window(CONNECTION_WINDOW.into())
            .keep_alive_interval(Some(KEEP_ALIVE))
            .max_idle_timeout(Some(
                Duration::from_millis(self.idle_timeout_ms).try_into()?,
            ));
        tc.congestion_controller_factory(match self.cc {
            Cc::Cubic => Arc::new(congestion::CubicConfig::default()),
            Cc::NewReno => Arc::new(congestion::NewRenoConfig::default()),
            Cc::Bbr => Arc::new(congestion::Bbr3Config::default()),
        });
        tc.packet_scheduler_factory(Some(Arc::new(HoldingFactory {
            scheduler: self.scheduler,
            holds,
        })));
        if self.max_paths > 0 {
            tc.max_concurrent_multipath_paths(self.max_paths)
                .default_path_max_idle_timeout(
                    (self.path_idle_ms > 0).then(|| Duration::from_millis(self.path_idle_ms)),
                )
                .default_path_keep_alive_interval(Some(Duration::from_millis(
                    self.path_keepalive_ms,
                )));
        }
        if let Some(dir) = &self.qlog_dir {
            std::fs::create_dir_all(dir)?;
            tc.qlog_from_path(dir, qlog_prefix);
        }
        Ok(tc)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        quic: QuicOptions,
    }

    fn parse(args: &[&str]) -> Result<QuicOptions, clap::Error> {
        Cli::try_parse_from(std::iter::once("test").chain(args.iter().copied())).map(|c| c.quic)
    }

    fn refusal(args: &[&str]) -> String {
        match parse(args)
            .expect("the options parse")
            .transport_config("t", Holds::default())
        {
            Ok(_) => panic!("{args:?} was accepted"),
            Err(err) => err.to_string(),
        }
    }

    #[test]
    fn the_defaults_make_a_configuration_with_and_without_multipath() {
        assert!(
            parse(&[])
                .unwrap()
                .transport_config("t", Holds::default())
                .is_ok()
        );
        assert!(
            parse(&["--max-paths", "4"])
                .unwrap()
                .transport_config("t", Holds::default())
                .is_ok()
        );
    }

    #[test]
    fn an_idle_timeout_not_above_the_keep_alive_is_refused() {
        let err = refusal(&["--idle-timeout-ms", "2000"]);
        assert!(
            err.contains("--idle-timeout-ms must be above 2000 ms"),
            "{err}"
        );
        assert!(
            parse(&["--idle-timeout-ms", "2001"])
                .unwrap()
                .transport_config("t", Holds::default())
                .is_ok()
        );
    }

    #[test]
    fn a_path_keep_alive_not_below_the_path_idle_limit_is_refused() {
        let err = refusal(&["--path-keepalive-ms", "1000"]);
        assert!(
            err.contains("--path-keepalive-ms (1000) must be below --path-idle-ms (1000)"),
            "{err}"
        );
        // Without an idle limit (the gateway's) no keep-alive is too slow.
        let no_limit = parse(&["--path-idle-ms", "0", "--path-keepalive-ms", "5000"]).unwrap();
        assert!(no_limit.transport_config("t", Holds::default()).is_ok());
    }

    #[test]
    fn the_packet_size_must_fit_a_1500_byte_link_and_quic_s_minimum() {
        assert_eq!(parse(&["--packet-size", "1200"]).unwrap().packet_size, 1200);
        assert!(parse(&["--packet-size", "1473"]).is_err());
        assert!(parse(&["--packet-size", "1199"]).is_err());
    }

    #[test]
    fn the_scheduler_defaults_to_noq_s_own_and_unknown_names_are_refused() {
        assert_eq!(parse(&[]).unwrap().scheduler, SchedulerName::LowestId);
        assert_eq!(
            parse(&["--scheduler", "redundant-tail"]).unwrap().scheduler,
            SchedulerName::RedundantTail
        );
        let err = parse(&["--scheduler", "blest"]).err().unwrap().to_string();
        assert!(err.contains("lowest-id") && err.contains("minrtt"), "{err}");
    }

    #[test]
    fn the_cc_takes_the_names_a_profile_uses() {
        assert_eq!(parse(&["--cc", "reno"]).unwrap().cc, Cc::NewReno);
        assert_eq!(parse(&["--cc", "bbr3"]).unwrap().cc, Cc::Bbr);
        assert!(parse(&["--cc", "lia"]).is_err());
    }
}
