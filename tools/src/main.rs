//! `comet-admin`: RocketMQ's `mqadmin` against any RocketMQ-protocol cluster (Comet or Apache
//! RocketMQ), built on comet-client. It takes mqadmin's command names and flags as they are
//! (`comet-admin clusterList -n 127.0.0.1:9876`); its earlier kebab-case names
//! (`cluster-list`) stay as aliases.
//!
//! Output is plain text meant for people and for `grep`: one line per row, columns separated
//! by spaces, the figures RocketMQ's tool prints under the same names; `--json` prints the
//! same figures as one JSON object. Client warnings go to stderr (`RUST_LOG` sets the level;
//! `warn` by default; `--log-format` their format).

mod commands;
mod context;
mod error;
mod output;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use comet_client::remoting::TlsOptions;
use comet_client::ClientConfig;

use crate::commands::Command;
use crate::context::Context;

/// Administers a RocketMQ-protocol cluster through its name servers.
#[derive(Parser, Debug)]
#[command(name = "comet-admin", version)]
struct Args {
    /// Name server addresses, `;`-separated.
    #[arg(
        short = 'n',
        long = "namesrvAddr",
        alias = "namesrv",
        global = true,
        default_value = "127.0.0.1:9876"
    )]
    namesrv: String,
    /// Print the output as one JSON object.
    #[arg(long, global = true)]
    json: bool,
    /// TLS to name servers and brokers whose tls.server.mode is permissive or enforcing;
    /// without --tls-ca any server certificate is accepted (Java's tls.test.mode.enable).
    #[arg(long, global = true)]
    tls: bool,
    /// With --tls: trust only servers whose certificate this PEM CA file signed.
    #[arg(long, global = true, requires = "tls")]
    tls_ca: Option<std::path::PathBuf>,
    /// Format of the warnings on stderr: text, kv (logfmt) or json.
    #[arg(long, global = true, default_value = "text")]
    log_format: comet_log::LogFormat,
    #[command(subcommand)]
    command: Command,
}

fn main() -> ExitCode {
    // Client warnings (a name server unreachable, a route refused) explain failures.
    let args = Args::parse();
    let mut logger = comet_log::builder(args.log_format, "warn");
    logger.format_timestamp_millis();
    logger.init();
    let mut config = ClientConfig {
        namesrv_addrs: args
            .namesrv
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect(),
        ..ClientConfig::default()
    };
    if let Some(timeout_ms) = args.command.api_timeout_ms() {
        config.api_timeout = Duration::from_millis(timeout_ms);
    }
    if args.tls {
        let tls = match &args.tls_ca {
            Some(ca) => TlsOptions::trusting_ca(ca),
            None => TlsOptions::trusting_any(),
        };
        match tls {
            Ok(tls) => config.transport.tls = Some(tls),
            Err(error) => {
                eprintln!("comet-admin: {error}");
                return ExitCode::from(2);
            }
        }
    }
    let context = match Context::new(config) {
        Ok(context) => context,
        Err(error) => {
            eprintln!("comet-admin: {error}");
            return ExitCode::from(2);
        }
    };
    let repeat = args.command.repeat_interval();
    let outcome = loop {
        let printed = commands::run(&context, args.command.clone()).and_then(|report| {
            if args.json {
                println!("{}", report.to_json()?);
            } else {
                print!("{}", report.text());
            }
            Ok(())
        });
        let Some(every) = repeat else {
            break printed;
        };
        // A watch outlives a failed round (a broker restarting): say so and go on.
        if let Err(error) = printed {
            eprintln!("comet-admin: {error}");
        }
        if let Err(error) = std::io::Write::flush(&mut std::io::stdout()) {
            break Err(error.into());
        }
        std::thread::sleep(every);
    };
    context.shutdown();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("comet-admin: {error}");
            ExitCode::FAILURE
        }
    }
}
