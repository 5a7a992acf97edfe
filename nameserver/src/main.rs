//! `comet-nameserver`: the name server binary. Reads `-c namesrv.properties` like `mqnamesrv
//! -c`, applies command-line overrides, and serves on one executor until killed.

use std::path::PathBuf;

use clap::Parser;
use comet_log::LogFormat;
use comet_nameserver::{NameServerError, NameServerThread, NamesrvConfig};
use comet_rt::fatal::{fatal, FatalReason};
use comet_rt::shutdown::RemoteStop;

/// Command-line flags; each overrides the config file's key of the same meaning.
#[derive(Parser, Debug)]
#[command(
    name = "comet-nameserver",
    version,
    about = "Comet name server (RocketMQ-compatible)"
)]
struct Args {
    /// A namesrv.properties file (Java properties syntax).
    #[arg(short = 'c', long = "config")]
    config: Option<PathBuf>,
    /// Port to listen on (`listenPort`, default 9876).
    #[arg(short = 'p', long = "listen-port")]
    listen_port: Option<u16>,
    /// Address to listen on (`bindAddress`, default 0.0.0.0).
    #[arg(long = "bind-address")]
    bind_address: Option<std::net::IpAddr>,
    /// Where the KV config is persisted (`kvConfigPath`).
    #[arg(long = "kv-config-path")]
    kv_config_path: Option<PathBuf>,
    /// Liveness scan period in ms (`scanNotActiveBrokerInterval`).
    #[arg(long = "scan-interval-ms")]
    scan_interval_ms: Option<u64>,
    /// Expiry of brokers that do not say their own, in ms (`brokerExpiryMs`).
    #[arg(long = "broker-expiry-ms")]
    broker_expiry_ms: Option<u64>,
    /// Log line format (`logFormat`): text (the default), kv (logfmt) or json.
    #[arg(long = "log-format")]
    log_format: Option<String>,
    /// Print every config key with its default, unit and whether a run-time change applies
    /// at once, then exit.
    #[arg(long)]
    help_config: bool,
}

fn load(args: &Args) -> Result<NamesrvConfig, NameServerError> {
    let mut config = match &args.config {
        Some(path) => NamesrvConfig::from_file(path)?,
        None => NamesrvConfig::default(),
    };
    let overrides = [
        ("listenPort", args.listen_port.map(|v| v.to_string())),
        ("bindAddress", args.bind_address.map(|v| v.to_string())),
        (
            "kvConfigPath",
            args.kv_config_path
                .as_ref()
                .map(|v| v.display().to_string()),
        ),
        (
            "scanNotActiveBrokerInterval",
            args.scan_interval_ms.map(|v| v.to_string()),
        ),
        (
            "brokerExpiryMs",
            args.broker_expiry_ms.map(|v| v.to_string()),
        ),
        ("logFormat", args.log_format.clone()),
    ];
    for (key, value) in overrides {
        if let Some(value) = value {
            config.apply(key, &value)?;
        }
    }
    config.validate()?;
    Ok(config)
}

/// The log format in force: `--log-format`, else the config file's `logFormat`, else text.
/// Read before the configuration is loaded, so that what loading it logs (unknown keys) is
/// already in that format; a value neither parses is refused at once.
fn log_format(args: &Args) -> Result<LogFormat, NameServerError> {
    let from_file = match &args.config {
        Some(path) => NamesrvConfig::from_file(path).map(|config| config.log_format)?,
        None => LogFormat::default(),
    };
    match &args.log_format {
        Some(value) => {
            let mut config = NamesrvConfig::default();
            config.apply("logFormat", value)?;
            Ok(config.log_format)
        }
        None => Ok(from_file),
    }
}

fn main() {
    let args = Args::parse();
    if args.help_config {
        print!("{}", comet_nameserver::config::help_text());
        return;
    }
    let format =
        log_format(&args).unwrap_or_else(|error| fatal(FatalReason::Config, &error.to_string()));
    comet_log::init(format, "info");
    let config = load(&args).unwrap_or_else(|error| fatal(FatalReason::Config, &error.to_string()));
    // SIGTERM (systemd, Docker) and SIGINT stop the name server through its stop sequence,
    // with exit status 0.
    let stop = RemoteStop::new();
    stop.on_termination_signals()
        .expect("start the signal thread");
    let name_server = match NameServerThread::spawn_stopped_by(config, stop) {
        Ok(name_server) => name_server,
        Err(error @ NameServerError::Bind { .. }) => fatal(FatalReason::Bind, &error.to_string()),
        Err(error) => fatal(FatalReason::Config, &error.to_string()),
    };
    log::info!("comet-nameserver listening on {}", name_server.addr());
    if let Err(error) = name_server.wait() {
        fatal(FatalReason::Config, &error.to_string());
    }
    log::info!("comet-nameserver stopped cleanly");
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the log format comes from the config file's logFormat unless --log-format says
    // otherwise, and that a format neither takes is a config error rather than a default.
    #[test]
    fn log_format_from_file_then_flag() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("namesrv.properties");
        std::fs::write(&file, "logFormat=kv\n").unwrap();
        let path = file.display().to_string();
        let args = Args::parse_from(["comet-nameserver", "-c", &path]);
        assert_eq!(log_format(&args).unwrap(), LogFormat::Kv);
        let args = Args::parse_from(["comet-nameserver", "-c", &path, "--log-format", "json"]);
        assert_eq!(log_format(&args).unwrap(), LogFormat::Json);
        assert_eq!(load(&args).unwrap().log_format, LogFormat::Json);
        let args = Args::parse_from(["comet-nameserver", "--log-format", "xml"]);
        let error = log_format(&args).unwrap_err();
        assert!(error.to_string().contains("text, kv or json"), "{error}");
        std::fs::write(&file, "logFormat=yaml\n").unwrap();
        let args = Args::parse_from(["comet-nameserver", "-c", &path]);
        assert!(log_format(&args).is_err());
    }
}
