//! `comet-broker`: runs a broker, as RocketMQ's `mqbroker`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Parser;
use comet_broker::config::{BrokerConfig, ConfigError};
use comet_broker::live_config::{overrides_path, read_overrides, LiveConfig, OverridesError};
use comet_broker::runtime::{run, RunOptions};
use comet_broker::standalone::default_namesrv_addr;
use comet_rt::fatal::{fatal, FatalReason};
use comet_rt::shutdown::RemoteStop;
use thiserror::Error;

/// A RocketMQ-compatible broker, thread-per-core on io_uring.
#[derive(Parser, Debug)]
#[command(name = "comet-broker", version)]
struct Args {
    /// A RocketMQ broker.conf (Java properties); flags override its keys.
    #[arg(short = 'c', long = "config")]
    config: Option<PathBuf>,
    /// Run the name server inside this process at `namesrvAddr` (default 127.0.0.1:9876).
    #[arg(long)]
    standalone: bool,
    /// Shards (pinned executors); default: every available core.
    #[arg(long)]
    cores: Option<usize>,
    /// Do not pin shards to cores (shared machines, tests).
    #[arg(long)]
    no_pin: bool,
    /// `namesrvAddr`: name servers to register with, `;`-separated.
    #[arg(short = 'n', long = "namesrv")]
    namesrv: Option<String>,
    /// `bindAddress`: the local IPv4 address the listeners bind (default 0.0.0.0).
    #[arg(long)]
    bind_address: Option<String>,
    /// `listenPort`.
    #[arg(long)]
    listen_port: Option<u16>,
    /// `storePathRootDir`.
    #[arg(long)]
    store: Option<PathBuf>,
    /// `flushDiskType`: SYNC_FLUSH or ASYNC_FLUSH.
    #[arg(long)]
    flush: Option<String>,
    /// `brokerIP1`: the address clients are given.
    #[arg(long)]
    broker_ip: Option<String>,
    /// `logFormat`: text (the default), kv (logfmt) or json.
    #[arg(long)]
    log_format: Option<String>,
    /// Any other key, as `key=value` (repeatable).
    #[arg(short = 'o', long = "option")]
    options: Vec<String>,
    /// Print every config key with its default, unit and whether a run-time change applies
    /// at once, then exit.
    #[arg(long)]
    help_config: bool,
}

/// Why the configuration cannot be loaded; the broker exits with the config status.
#[derive(Debug, Error)]
enum LoadError {
    /// The `-c` file cannot be read.
    #[error("cannot read broker config file {}: {source}", path.display())]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A `-o` argument without `=`.
    #[error("option {0:?} is not key=value")]
    Option(String),
    /// A known key with a value it cannot take.
    #[error(transparent)]
    Invalid(#[from] ConfigError),
    /// The run-time updates under the store root cannot be read.
    #[error(transparent)]
    Overrides(#[from] OverridesError),
}

/// The configuration in force, with what reading it found worth saying.
struct Loaded {
    config: BrokerConfig,
    /// The updates operators made at run time, which the live config keeps adding to.
    overrides: BTreeMap<String, String>,
    /// Keys Comet does not use.
    unknown: Vec<String>,
}

impl Loaded {
    /// Logs what reading the configuration found: it is read before the logger starts,
    /// since the log format is one of its keys.
    fn log_notes(&self) {
        if !self.overrides.is_empty() {
            log::info!(
                "applying {} broker config keys changed at run time ({})",
                self.overrides.len(),
                overrides_path(&self.config.store_root).display()
            );
        }
        for key in &self.unknown {
            log::warn!("ignoring broker config key `{key}`: Comet does not use it");
        }
    }
}

/// The configuration in force: defaults, then the `-c` file, then the updates operators made
/// at run time (kept under the store root by UPDATE_BROKER_CONFIG), then command-line flags.
fn load_config(args: &Args) -> Result<Loaded, LoadError> {
    let mut file_pairs: Vec<(String, String)> = Vec::new();
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path).map_err(|source| LoadError::File {
            path: path.clone(),
            source,
        })?;
        file_pairs.extend(comet_proto::java_properties::parse(&text));
    }
    let flag_pairs = flag_pairs(args)?;
    // The overrides file lives under the store root, which the file or a flag may name.
    let mut located = BrokerConfig::default();
    located.apply_pairs(
        file_pairs
            .iter()
            .chain(&flag_pairs)
            .map(|(k, v)| (k.as_str(), v.as_str())),
    )?;
    let overrides = read_overrides(&located.store_root)?;
    let mut config = BrokerConfig::default();
    let unknown = config.apply_pairs(
        file_pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(overrides.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .chain(flag_pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
    )?;
    if args.standalone && config.namesrv_addrs.is_empty() {
        config.namesrv_addrs.push(default_namesrv_addr(&config));
    }
    Ok(Loaded {
        config,
        overrides,
        unknown,
    })
}

/// The keys the command line sets, in order: named flags, then `-o key=value` options.
fn flag_pairs(args: &Args) -> Result<Vec<(String, String)>, LoadError> {
    let flags = [
        ("namesrvAddr", args.namesrv.clone()),
        ("bindAddress", args.bind_address.clone()),
        ("listenPort", args.listen_port.map(|port| port.to_string())),
        (
            "storePathRootDir",
            args.store.as_ref().map(|path| path.display().to_string()),
        ),
        ("flushDiskType", args.flush.clone()),
        ("brokerIP1", args.broker_ip.clone()),
        ("logFormat", args.log_format.clone()),
    ];
    let mut pairs: Vec<(String, String)> = flags
        .into_iter()
        .filter_map(|(key, value)| value.map(|value| (key.to_owned(), value)))
        .collect();
    for option in &args.options {
        let (key, value) = option
            .split_once('=')
            .ok_or_else(|| LoadError::Option(option.clone()))?;
        pairs.push((key.trim().to_owned(), value.trim().to_owned()));
    }
    Ok(pairs)
}

fn main() {
    let args = Args::parse();
    if args.help_config {
        print!("{}", comet_broker::config::help_text());
        return;
    }
    // Before the logger starts, a refused configuration (an unknown logFormat included)
    // still reaches stderr: `fatal` prints it too.
    let loaded = load_config(&args).unwrap_or_else(|e| fatal(FatalReason::Config, &e.to_string()));
    comet_log::init(loaded.config.log_format, "info");
    loaded.log_notes();
    let Loaded {
        config, overrides, ..
    } = loaded;
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let shard_count = args.cores.unwrap_or(cores).clamp(1, 128);
    let stop = RemoteStop::new();
    stop.on_termination_signals()
        .expect("start the signal thread");
    log::info!(
        "comet-broker {} starting: {} shards, store {}, {:?}, listening on {}",
        env!("CARGO_PKG_VERSION"),
        shard_count,
        config.store_root.display(),
        config.flush_disk_type,
        config.listen_addr()
    );
    let options = RunOptions {
        shard_count,
        pinned: !args.no_pin && shard_count <= cores,
        standalone: args.standalone,
        stop,
        controller: None,
    };
    let outcome = if config.enable_controller_mode {
        comet_broker::controller_mode::run_controlled(config, overrides, options)
    } else {
        run(LiveConfig::new(config, overrides), options)
    };
    if let Err(e) = outcome {
        fatal(e.reason, &e.message);
    }
    log::info!("comet-broker stopped cleanly");
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves every named flag sets a key of the config table (a renamed key cannot leave a
    // flag behind that the broker would ignore), and that `-o` without `=` is a typed error.
    #[test]
    fn flags_set_keys_of_the_table() {
        let args = Args::parse_from([
            "comet-broker",
            "-n",
            "127.0.0.1:9876",
            "--bind-address",
            "127.0.0.1",
            "--listen-port",
            "20911",
            "--store",
            "/tmp/store",
            "--flush",
            "ASYNC_FLUSH",
            "--broker-ip",
            "10.0.0.1",
            "--log-format",
            "json",
            "-o",
            "regionId=EU",
        ]);
        let pairs = flag_pairs(&args).unwrap();
        assert_eq!(pairs.len(), 8);
        for (key, _) in &pairs {
            assert!(comet_broker::config::key_def(key).is_some(), "{key}");
        }
        let mut config = BrokerConfig::default();
        let unknown = config
            .apply_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(config.region_id, "EU");
        assert_eq!(config.log_format, comet_log::LogFormat::Json);
        let refused = config.apply_pairs([("logFormat", "xml")]).unwrap_err();
        assert!(
            refused.to_string().contains("text, kv or json"),
            "{refused}"
        );
        let args = Args::parse_from(["comet-broker", "-o", "regionId"]);
        assert!(matches!(flag_pairs(&args), Err(LoadError::Option(_))));
    }
}
