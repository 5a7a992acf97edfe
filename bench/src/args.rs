//! The command line (clap). Every flag of a run is echoed in the JSON report's `params`.
//!
//! With no subcommand the tool runs the canonical workload: `produce` with its defaults
//! (1 KiB bodies, 64 sync sender threads, 10 seconds, topic `BenchmarkTest`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, FromArgMatches, Parser, Subcommand, ValueEnum};
use comet_client::remoting::TlsOptions;
use comet_client::{ClientConfig, Credentials};
use serde::Serialize;

use crate::error::{BenchError, Result};
use crate::limits::{
    BATCH_MAX, INFLIGHT_MAX, MESSAGE_BYTES_MAX, POP_CONSUMERS_MAX, THREADS_MAX, TOPICS_MAX,
};

/// Load generator for RocketMQ-protocol brokers (Comet, Apache RocketMQ, ...).
#[derive(Parser, Debug, Clone, Serialize)]
#[command(name = "comet-bench", version)]
pub struct Cli {
    /// Name server address(es), `host:port;host:port`.
    #[arg(long, global = true, default_value = "127.0.0.1:9876")]
    pub namesrv: String,
    /// Also write the summary as JSON to this file.
    #[arg(long, global = true)]
    pub json: Option<PathBuf>,
    /// No progress lines (the summary is still printed).
    #[arg(long, global = true)]
    pub quiet: bool,
    /// ACL 1.0 access key: every request is signed (with --secret-key), as brokers running
    /// with aclEnable=true require.
    #[arg(long, global = true, requires = "secret_key")]
    pub access_key: Option<String>,
    /// ACL 1.0 secret key of --access-key (never written to the report).
    #[arg(long, global = true, requires = "access_key")]
    #[serde(skip)]
    pub secret_key: Option<String>,
    /// TLS on every connection (name servers and brokers), for brokers whose
    /// tls.server.mode is permissive or enforcing. Without --tls-ca any server certificate is
    /// accepted, as Java's client in its default tls.test.mode.enable.
    #[arg(long, global = true)]
    pub tls: bool,
    /// With --tls: trust only servers whose certificate this PEM CA file signed.
    #[arg(long, global = true, requires = "tls")]
    pub tls_ca: Option<PathBuf>,
    /// Report the CPU time this process (e.g. the broker) used during the run (repeatable).
    #[arg(long = "watch-pid", global = true)]
    pub watch_pids: Vec<u32>,
    /// What to run; `produce` with its defaults when absent.
    #[command(subcommand)]
    pub command: Option<Command>,
}

impl Cli {
    /// Client settings for the name servers, signing when credentials were given and over
    /// TLS with --tls (a CA file that cannot be read is an error).
    pub fn client_config(&self) -> Result<ClientConfig> {
        let mut config = ClientConfig::with_namesrv(&self.namesrv);
        if let (Some(access_key), Some(secret_key)) = (&self.access_key, &self.secret_key) {
            config.credentials = Some(Credentials::new(access_key, secret_key));
        }
        if self.tls {
            config.transport.tls = Some(match &self.tls_ca {
                Some(ca) => TlsOptions::trusting_ca(ca)?,
                None => TlsOptions::trusting_any()?,
            });
        }
        Ok(config)
    }
}

/// The kinds of run.
#[derive(Subcommand, Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Command {
    /// Send messages and measure send latency and throughput.
    Produce(ProduceArgs),
    /// Consume a topic and measure rate and end-to-end latency from the born time.
    Consume(ConsumeArgs),
    /// Produce at a fixed rate while consuming; end-to-end latency percentiles.
    E2e(E2eArgs),
    /// Pop consumers (RocketMQ 5.x): drain a topic, or pop while producing at --rate.
    Pop(PopArgs),
}

impl Command {
    /// The canonical workload: `produce` with every default.
    pub fn canonical() -> Command {
        let command = ProduceArgs::augment_args(clap::Command::new("produce"));
        let matches = command.get_matches_from(["produce"]);
        let args =
            ProduceArgs::from_arg_matches(&matches).expect("produce's defaults always parse");
        Command::Produce(args)
    }

    /// The subcommand's name.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Produce(_) => "produce",
            Command::Consume(_) => "consume",
            Command::E2e(_) => "e2e",
            Command::Pop(_) => "pop",
        }
    }
}

/// How a sending run ends.
#[derive(Args, Debug, Clone, Serialize)]
pub struct FinishArgs {
    /// Run for this many seconds (default 10 when --messages is not given either).
    #[arg(long = "duration")]
    pub duration_s: Option<f64>,
    /// Stop after exactly this many messages.
    #[arg(long)]
    pub messages: Option<u64>,
}

impl FinishArgs {
    /// The run's duration limit: the given one, 10 s when neither limit is given.
    pub fn duration(&self) -> Result<Option<Duration>> {
        match (self.duration_s, self.messages) {
            (None, None) => Ok(Some(Duration::from_secs(10))),
            (None, Some(_)) => Ok(None),
            (Some(seconds), _) => {
                if !seconds.is_finite() || seconds <= 0.0 || seconds > 1e7 {
                    return Err(BenchError::Args(format!(
                        "--duration must be a positive number of seconds, not {seconds}"
                    )));
                }
                Ok(Some(Duration::from_secs_f64(seconds)))
            }
        }
    }
}

/// What and how to send.
#[derive(Args, Debug, Clone, Serialize)]
pub struct SendArgs {
    /// Topic (the prefix of the topics' names with --topics above 1).
    #[arg(long, default_value = "BenchmarkTest")]
    pub topic: String,
    /// Spread the messages round robin over this many topics, `<topic>_0` to
    /// `<topic>_<N-1>` (produce only; with --queues each is created with that many queues).
    #[arg(long, default_value_t = 1)]
    pub topics: usize,
    /// Body bytes per message.
    #[arg(long = "size", default_value_t = 1024)]
    pub size_bytes: usize,
    /// Sync sender threads (ignored with --inflight).
    #[arg(long, default_value_t = 64)]
    pub threads: usize,
    /// Async sends kept in flight (one driver thread, callbacks) instead of sync threads.
    #[arg(long)]
    pub inflight: Option<usize>,
    /// Send with the async client (`AsyncProducer`) from one task on a current-thread tokio
    /// runtime, keeping `--inflight` sends (else `--threads`) in flight.
    #[arg(long)]
    pub async_client: bool,
    /// Messages per request (a RocketMQ batch) when above 1; sync senders only.
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Open loop: this many messages per second in total, latency from the intended time.
    #[arg(long = "rate")]
    pub rate_msgs_per_s: Option<f64>,
    /// Give every message a unique key (indexed by the broker).
    #[arg(long)]
    pub keys: bool,
    /// Tag of every message.
    #[arg(long)]
    pub tags: Option<String>,
    /// Compress bodies (zlib, every single message; batches are never compressed).
    #[arg(long)]
    pub compress: bool,
    /// Create (or update) the topic with this many queues per broker before sending.
    #[arg(long)]
    pub queues: Option<i32>,
    /// Producer group.
    #[arg(long, default_value = "comet_bench_producer")]
    pub producer_group: String,
    /// Timeout of one send, retries included.
    #[arg(long = "send-timeout-ms", default_value_t = 3000)]
    pub send_timeout_ms: u64,
}

impl SendArgs {
    /// Checks the sending flags against the limits and each other.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: String| Err(BenchError::Args(what));
        if !(1..=MESSAGE_BYTES_MAX).contains(&self.size_bytes) {
            return bad(format!("--size must be 1..={MESSAGE_BYTES_MAX} bytes"));
        }
        if !(1..=THREADS_MAX).contains(&self.threads) {
            return bad(format!("--threads must be 1..={THREADS_MAX}"));
        }
        if let Some(inflight) = self.inflight {
            if !(1..=INFLIGHT_MAX).contains(&inflight) {
                return bad(format!("--inflight must be 1..={INFLIGHT_MAX}"));
            }
            if self.batch > 1 {
                return bad("--batch needs sync senders; drop --inflight".into());
            }
        }
        if self.async_client && self.batch > 1 {
            return bad("--batch needs sync senders; drop --async-client".into());
        }
        if !(1..=BATCH_MAX).contains(&self.batch) {
            return bad(format!("--batch must be 1..={BATCH_MAX}"));
        }
        if self
            .queues
            .is_some_and(|queues| !(1..=1024).contains(&queues))
        {
            return bad("--queues must be 1..=1024".into());
        }
        if self.send_timeout_ms == 0 {
            return bad("--send-timeout-ms must be positive".into());
        }
        if !(1..=TOPICS_MAX).contains(&self.topics) {
            return bad(format!("--topics must be 1..={TOPICS_MAX}"));
        }
        Ok(())
    }

    /// The topics messages go to: `--topic` alone, or `<topic>_<i>` for each of `--topics`.
    pub fn topic_names(&self) -> Vec<String> {
        if self.topics <= 1 {
            return vec![self.topic.clone()];
        }
        (0..self.topics)
            .map(|index| format!("{}_{index}", self.topic))
            .collect()
    }

    /// Sends the async client keeps in flight: `--inflight`, else `--threads`.
    pub fn async_client_window(&self) -> usize {
        self.inflight.unwrap_or(self.threads)
    }

    /// Index in [`SendArgs::topic_names`] of message `sequence` of sender `thread` (the
    /// async driver is the only sender with --inflight or --async-client): the senders'
    /// messages interleave round robin over every topic, whatever the thread count.
    pub fn topic_index(&self, thread: usize, sequence: u64) -> usize {
        let topics = self.topics.max(1) as u64;
        let senders = if self.inflight.is_some() || self.async_client {
            1
        } else {
            self.threads.max(1)
        };
        let spread = sequence
            .wrapping_mul(senders as u64)
            .wrapping_add(thread as u64);
        usize::try_from(spread % topics).expect("below the topic count")
    }
}

/// `produce`.
#[derive(Args, Debug, Clone, Serialize)]
pub struct ProduceArgs {
    /// What and how to send.
    #[command(flatten)]
    pub send: SendArgs,
    /// When to stop.
    #[command(flatten)]
    pub finish: FinishArgs,
    /// Send every message as a transaction (comet-client's `TransactionProducer`): a half
    /// message, then END_TRANSACTION with COMMIT as soon as it is stored (the local
    /// transaction always commits), and a check-back listener answering COMMIT. Sync
    /// senders, one message per transaction: refuses --inflight, --async-client and --batch.
    #[arg(long)]
    pub transactional: bool,
}

impl ProduceArgs {
    /// Checks the sending flags, and that --transactional has sync senders of single
    /// messages (a transaction is one half sent synchronously, then its decision).
    pub fn validate(&self) -> Result<()> {
        self.send.validate()?;
        if !self.transactional {
            return Ok(());
        }
        let refused = |flag: &str| {
            Err(BenchError::Args(format!(
                "--transactional sends one half per sync sender; drop {flag}"
            )))
        };
        if self.send.inflight.is_some() {
            return refused("--inflight");
        }
        if self.send.async_client {
            return refused("--async-client");
        }
        if self.send.batch > 1 {
            return refused("--batch");
        }
        Ok(())
    }
}

/// Push or lite pull.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ConsumeMode {
    /// `PushConsumer` with a concurrent listener.
    Push,
    /// `LitePullConsumer` polled by the consume threads.
    Lite,
}

/// Where a group with no stored offset starts.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StartFrom {
    /// The queues' beginning (drain a backlog).
    First,
    /// The queues' end (new messages only).
    Last,
}

/// How to receive.
#[derive(Args, Debug, Clone, Serialize)]
pub struct ReceiveArgs {
    /// Push or lite-pull consumer.
    #[arg(long, value_enum, default_value_t = ConsumeMode::Push)]
    pub mode: ConsumeMode,
    /// Messages per pull request.
    #[arg(long, default_value_t = 32)]
    pub pull_batch: i32,
    /// Messages per listener call (push) or per poll (lite).
    #[arg(long, default_value_t = 32)]
    pub consume_batch: usize,
}

impl ReceiveArgs {
    /// Checks the receiving flags.
    pub fn validate(&self) -> Result<()> {
        if !(1..=1024).contains(&self.pull_batch) || !(1..=1024).contains(&self.consume_batch) {
            return Err(BenchError::Args(
                "--pull-batch and --consume-batch must be 1..=1024".into(),
            ));
        }
        Ok(())
    }
}

/// `consume`.
#[derive(Args, Debug, Clone, Serialize)]
pub struct ConsumeArgs {
    /// Topic (the prefix of the topics' names with --topics above 1).
    #[arg(long, default_value = "BenchmarkTest")]
    pub topic: String,
    /// Consumer group (the prefix of the groups' names with --topics above 1).
    #[arg(long, default_value = "comet_bench_consumer")]
    pub group: String,
    /// Consume this many topics, `<topic>_0` to `<topic>_<N-1>` (as produce --topics names
    /// them), each by a group of its own, `<group>_<i>`: one push consumer per group, all
    /// on one runtime of --threads workers (push mode only).
    #[arg(long, default_value_t = 1)]
    pub topics: usize,
    /// Consume threads (push listener pool, or lite-pull polling threads).
    #[arg(long, default_value_t = 20)]
    pub threads: usize,
    /// Where a group without stored offsets starts.
    #[arg(long, value_enum, default_value_t = StartFrom::Last)]
    pub from: StartFrom,
    /// Stop once no message arrived for this many seconds (after the first one).
    #[arg(long = "idle-exit")]
    pub idle_exit_s: Option<f64>,
    /// How to receive.
    #[command(flatten)]
    pub receive: ReceiveArgs,
    /// When to stop.
    #[command(flatten)]
    pub finish: FinishArgs,
}

impl ConsumeArgs {
    /// Checks the flags against the limits and each other.
    pub fn validate(&self) -> Result<()> {
        self.receive.validate()?;
        let bad = |what: String| Err(BenchError::Args(what));
        if !(1..=TOPICS_MAX).contains(&self.topics) {
            return bad(format!("--topics must be 1..={TOPICS_MAX}"));
        }
        if self.topics > 1 && self.receive.mode != ConsumeMode::Push {
            return bad("--topics above 1 is for --mode push".into());
        }
        Ok(())
    }

    /// The (topic, group) pairs to consume: `--topic` by `--group` alone, or `<topic>_<i>`
    /// by `<group>_<i>` for each of `--topics`.
    pub fn topic_groups(&self) -> Vec<(String, String)> {
        if self.topics <= 1 {
            return vec![(self.topic.clone(), self.group.clone())];
        }
        (0..self.topics)
            .map(|index| {
                (
                    format!("{}_{index}", self.topic),
                    format!("{}_{index}", self.group),
                )
            })
            .collect()
    }
}

/// `e2e`.
#[derive(Args, Debug, Clone, Serialize)]
pub struct E2eArgs {
    /// What and how to send (`--rate` defaults to 1000 msgs/s here).
    #[command(flatten)]
    pub send: SendArgs,
    /// Consumer group (default: a new group per run).
    #[arg(long)]
    pub group: Option<String>,
    /// Consume threads.
    #[arg(long, default_value_t = 20)]
    pub consume_threads: usize,
    /// How to receive.
    #[command(flatten)]
    pub receive: ReceiveArgs,
    /// When to stop sending.
    #[command(flatten)]
    pub finish: FinishArgs,
}

/// `pop`.
#[derive(Args, Debug, Clone, Serialize)]
pub struct PopArgs {
    /// The topic, and what to send with --rate (end-to-end mode; without it the run only
    /// pops what the topic holds).
    #[command(flatten)]
    pub send: SendArgs,
    /// Consumer group (default: a new group per run).
    #[arg(long)]
    pub group: Option<String>,
    /// Pop consumers of the group, each its own client and connection.
    #[arg(long, default_value_t = 8)]
    pub consumers: usize,
    /// Messages per receive (1 to 32).
    #[arg(long, default_value_t = 32)]
    pub pop_batch: usize,
    /// How long popped messages stay invisible to the group, ms.
    #[arg(long = "invisible-time-ms", default_value_t = 60_000)]
    pub invisible_time_ms: u64,
    /// Do not ack: every message comes back after its invisible time.
    #[arg(long)]
    pub no_ack: bool,
    /// Where a new group starts when draining (end-to-end runs start at the end).
    #[arg(long, value_enum, default_value_t = StartFrom::First)]
    pub from: StartFrom,
    /// When draining, stop once no message arrived for this many seconds (after the first).
    #[arg(long = "idle-exit")]
    pub idle_exit_s: Option<f64>,
    /// When to stop: sending with --rate, else receiving.
    #[command(flatten)]
    pub finish: FinishArgs,
}

impl PopArgs {
    /// Checks the flags against the limits and each other.
    pub fn validate(&self) -> Result<()> {
        self.send.validate()?;
        let bad = |what: String| Err(BenchError::Args(what));
        if self.send.topics > 1 {
            return bad("--topics is for produce only: pop consumes one topic".into());
        }
        if !(1..=POP_CONSUMERS_MAX).contains(&self.consumers) {
            return bad(format!("--consumers must be 1..={POP_CONSUMERS_MAX}"));
        }
        if !(1..=32).contains(&self.pop_batch) {
            return bad("--pop-batch must be 1..=32 (the broker refuses more)".into());
        }
        if !(1..=12 * 3_600_000).contains(&self.invisible_time_ms) {
            return bad("--invisible-time-ms must be 1..=43200000 (12 hours)".into());
        }
        Ok(())
    }
}

/// Checks a thread count.
pub fn check_threads(flag: &str, threads: usize) -> Result<()> {
    if (1..=THREADS_MAX).contains(&threads) {
        Ok(())
    } else {
        Err(BenchError::Args(format!(
            "{flag} must be 1..={THREADS_MAX}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the canonical workload's defaults: 1 KiB, 64 sync threads, 10 s, closed loop.
    #[test]
    fn canonical_workload_defaults() {
        let Command::Produce(args) = Command::canonical() else {
            panic!("canonical workload is produce");
        };
        assert_eq!(args.send.size_bytes, 1024);
        assert_eq!(args.send.threads, 64);
        assert_eq!(args.send.inflight, None);
        assert_eq!(args.send.rate_msgs_per_s, None);
        assert_eq!(
            args.finish.duration().unwrap(),
            Some(Duration::from_secs(10))
        );
        let cli = Cli::try_parse_from(["comet-bench", "--namesrv", "127.0.0.1:1"]).unwrap();
        assert!(cli.command.is_none());
    }

    // Proves --access-key/--secret-key give the client signing credentials, one without the
    // other is refused, and the secret never reaches the JSON report's params.
    #[test]
    fn credentials_sign_and_stay_out_of_the_report() {
        let cli = Cli::try_parse_from([
            "comet-bench",
            "produce",
            "--access-key",
            "bench0001",
            "--secret-key",
            "bench-secret",
        ])
        .unwrap();
        let credentials = cli.client_config().unwrap().credentials.unwrap();
        assert_eq!(credentials, Credentials::new("bench0001", "bench-secret"));
        let report = serde_json::to_string(&cli).unwrap();
        assert!(
            report.contains("bench0001") && !report.contains("bench-secret"),
            "{report}"
        );
        assert!(Cli::try_parse_from(["comet-bench", "--access-key", "a"]).is_err());
        let plain = Cli::try_parse_from(["comet-bench"]).unwrap();
        assert!(plain.client_config().unwrap().credentials.is_none());
        assert!(plain.client_config().unwrap().transport.tls.is_none());
        let tls = Cli::try_parse_from(["comet-bench", "--tls"]).unwrap();
        assert!(tls.client_config().unwrap().transport.tls.is_some());
        let missing_ca = Cli::try_parse_from(["comet-bench", "--tls", "--tls-ca", "/nonexistent"]);
        assert!(missing_ca.unwrap().client_config().is_err());
        assert!(Cli::try_parse_from(["comet-bench", "--tls-ca", "ca.pem"]).is_err());
    }

    // Proves every flag of issue 7 parses, and contradictory or out-of-range flags are
    // refused with a typed error.
    #[test]
    fn flags_parse_and_validate() {
        let cli = Cli::try_parse_from([
            "comet-bench",
            "produce",
            "--topic",
            "T",
            "--size",
            "128",
            "--threads",
            "8",
            "--batch",
            "32",
            "--rate",
            "5000",
            "--keys",
            "--tags",
            "TagA",
            "--compress",
            "--queues",
            "8",
            "--messages",
            "100",
            "--json",
            "out.json",
        ])
        .unwrap();
        let Some(Command::Produce(args)) = cli.command else {
            panic!("produce")
        };
        args.send.validate().unwrap();
        assert_eq!(args.finish.duration().unwrap(), None);
        assert_eq!(args.send.rate_msgs_per_s, Some(5000.0));
        let mut bad = args.send.clone();
        bad.inflight = Some(64);
        assert!(matches!(bad.validate(), Err(BenchError::Args(_))));
        bad.batch = 1;
        bad.size_bytes = 0;
        assert!(bad.validate().is_err());
        let zero = FinishArgs {
            duration_s: Some(0.0),
            messages: None,
        };
        assert!(zero.duration().is_err());
        let cli = Cli::try_parse_from([
            "comet-bench",
            "consume",
            "--group",
            "g",
            "--threads",
            "4",
            "--mode",
            "lite",
            "--from",
            "first",
            "--idle-exit",
            "2",
        ])
        .unwrap();
        let lite = |c: &ConsumeArgs| c.receive.mode == ConsumeMode::Lite;
        assert!(matches!(cli.command, Some(Command::Consume(ref c)) if lite(c)));
        let Some(Command::Consume(mut consume)) = cli.command else {
            panic!("consume")
        };
        consume.validate().unwrap();
        assert_eq!(
            consume.topic_groups(),
            [("BenchmarkTest".into(), "g".into())]
        );
        consume.topics = 3;
        assert!(
            consume.validate().is_err(),
            "--topics is for push consumers"
        );
        consume.receive.mode = ConsumeMode::Push;
        consume.validate().unwrap();
        assert_eq!(
            consume.topic_groups()[2],
            ("BenchmarkTest_2".into(), "g_2".into())
        );
        consume.topics = TOPICS_MAX + 1;
        assert!(consume.validate().is_err());
        let cli = Cli::try_parse_from(["comet-bench", "e2e", "--rate", "100", "--inflight", "16"]);
        assert!(cli.is_ok());
        assert!(check_threads("--threads", 0).is_err());
        let cli = Cli::try_parse_from([
            "comet-bench",
            "pop",
            "--consumers",
            "64",
            "--queues",
            "8",
            "--invisible-time-ms",
            "30000",
            "--messages",
            "1000",
        ])
        .unwrap();
        let Some(Command::Pop(pop)) = cli.command else {
            panic!("pop")
        };
        pop.validate().unwrap();
        assert_eq!(
            (pop.consumers, pop.pop_batch, pop.from),
            (64, 32, StartFrom::First)
        );
        let refused = |change: fn(&mut PopArgs)| {
            let mut args = pop.clone();
            change(&mut args);
            matches!(args.validate(), Err(BenchError::Args(_)))
        };
        assert!(refused(|args| args.consumers = 0));
        assert!(refused(|args| args.pop_batch = 33));
        assert!(refused(|args| args.invisible_time_ms = 0));
        assert!(refused(|args| args.send.topics = 2));
    }

    // Proves --transactional parses (off by default, also in the canonical workload), passes
    // with sync senders of single messages, open loop and several topics, and is refused
    // with a typed error beside --inflight, --async-client or --batch.
    #[test]
    fn transactional_flag_parses_and_refuses_async_and_batches() {
        let Command::Produce(canonical) = Command::canonical() else {
            panic!("canonical workload is produce");
        };
        assert!(!canonical.transactional);
        canonical.validate().unwrap();
        let parse = |extra: &[&str]| {
            let cli = Cli::try_parse_from(
                [&["comet-bench", "produce", "--transactional"], extra].concat(),
            )
            .unwrap();
            let Some(Command::Produce(args)) = cli.command else {
                panic!("produce")
            };
            assert!(args.transactional);
            args.validate()
        };
        parse(&["--threads", "8", "--size", "1024"]).unwrap();
        parse(&["--rate", "500", "--topics", "3", "--keys", "--tags", "T"]).unwrap();
        for extra in [
            &["--inflight", "64"][..],
            &["--async-client"][..],
            &["--batch", "2"][..],
        ] {
            match parse(extra) {
                Err(BenchError::Args(reason)) => {
                    assert!(reason.contains(extra[0]), "{reason}")
                }
                other => panic!("{extra:?} accepted: {other:?}"),
            }
        }
        assert!(matches!(parse(&["--size", "0"]), Err(BenchError::Args(_))));
        let plain = ["comet-bench", "produce", "--async-client", "--batch", "1"];
        let Some(Command::Produce(args)) = Cli::try_parse_from(plain).unwrap().command else {
            panic!("produce")
        };
        args.validate().unwrap();
        let json = serde_json::to_value(&args).unwrap();
        assert_eq!(json["transactional"], false, "{json}");
        let e2e = Cli::try_parse_from(["comet-bench", "e2e", "--transactional"]);
        assert!(e2e.is_err(), "--transactional belongs to produce only");
    }

    // Proves --topics names N topics after --topic, that the senders' messages together
    // reach every topic equally, and that 0 or more than the limit is refused.
    #[test]
    fn topics_spread_round_robin() {
        let cli = Cli::try_parse_from([
            "comet-bench",
            "produce",
            "--topic",
            "T",
            "--topics",
            "10",
            "--threads",
            "4",
        ])
        .unwrap();
        let Some(Command::Produce(args)) = cli.command else {
            panic!("produce")
        };
        args.send.validate().unwrap();
        let names = args.send.topic_names();
        assert_eq!(names.len(), 10);
        assert_eq!((names[0].as_str(), names[9].as_str()), ("T_0", "T_9"));
        let mut sent = [0u32; 10];
        for thread in 0..4 {
            for sequence in 0..25 {
                sent[args.send.topic_index(thread, sequence)] += 1;
            }
        }
        assert_eq!(sent, [10; 10], "100 messages over 10 topics");
        let mut window = args.send.clone();
        window.inflight = Some(16);
        let reached: std::collections::BTreeSet<usize> = (0..10)
            .map(|sequence| window.topic_index(0, sequence))
            .collect();
        assert_eq!(reached.len(), 10, "the async driver reaches every topic");
        let mut one = args.send.clone();
        one.topics = 1;
        assert_eq!(one.topic_names(), vec!["T".to_string()]);
        assert_eq!(one.topic_index(3, 7), 0);
        one.topics = 0;
        assert!(matches!(one.validate(), Err(BenchError::Args(_))));
        one.topics = TOPICS_MAX + 1;
        assert!(one.validate().is_err());
    }
}
