//! Running a broker: one shard per core, each with its store, its server on the shared port
//! (SO_REUSEPORT) and its end of the mesh; shard 0 also runs the broker-wide housekeeping
//! (registration with name servers, persisting topics and groups, expiring clients and
//! locks) and, in standalone mode, the embedded name server.
//!
//! Stop order (every phase bounded): stop accepting and drain connections, persist offsets
//! and metadata, unregister from name servers, shut the store down (final flush,
//! checkpoint, `abort` removed).

use std::cell::OnceCell;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use comet_net::{DispatchTable, Server, ServerConfig};
use comet_proto::message_id::UniqueKeyGenerator;
use comet_rt::fatal::FatalReason;
use comet_rt::mesh::{LocalBoxFuture, Mesh, MeshHandler};
use comet_rt::net::{Listener, PortReservation};
use comet_rt::pool::{CpuPlacement, ExecutorOptions, Pool, PoolConfig, ShardContext};
use comet_rt::shutdown::{RemoteStop, StopSignal};
use comet_rt::task_class::{sleep, spawn, spawn_detached, timeout, TaskClass, TaskHandle};
use comet_rt::ShardId;
use comet_store::{remap, FlushPolicy, LogId, Store, StoreConfig, StoreError};

use crate::acl::{AccessControl, AclLoadError};
use crate::config::{BrokerConfig, BrokerRole, FlushDiskType, MetricsExporter};
use crate::controller_role::ControllerRole;
use crate::live_config::LiveConfig;
use crate::metadata::Metadata;
use crate::metrics::{BrokerLabels, Metrics};
use crate::offset::OffsetFile;
use crate::ownership::owner_shard;
use crate::processor::{self, client};
use crate::shard::{RequestContext, ShardBroker, ShardCall, ShardParts, ShardReply};
use crate::start_progress::{watched, ShardSteps};
use crate::stats::ItemStats;
use crate::traffic::Traffic;
use crate::{persist, register};

/// Slots per ordered pair of shards in the mesh: bounds cross-shard requests in flight, so a
/// hot shard pushes back on the others instead of queueing without limit.
pub const MESH_CAPACITY: usize = 1024;
/// How often shard 0 looks for topic changes to persist and re-register.
pub const METADATA_CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// How often the metadata loop looks for a topic change between its checks.
pub const TOPIC_CHANGE_POLL: Duration = Duration::from_millis(10);
/// io_uring registered memory per shard (see comet_rt::pool: counts against `ulimit -l`).
pub const SHARD_IO_MEMORY_BYTES: usize = 1024 * 1024;
/// How often traffic counters are published and sampled (rates are per second).
pub const TRAFFIC_SAMPLE_INTERVAL: Duration = Duration::from_secs(1);
/// How often the ACL accounts file is checked for changes (Java's watcher: 500 ms).
pub const ACL_FILE_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Number of shards (executors).
    pub shard_count: usize,
    /// Pin shard `i` to CPU `i`.
    pub pinned: bool,
    /// Run the name server inside this process at the first `namesrvAddr`.
    pub standalone: bool,
    /// Tripped by a signal handler (or a test) to stop.
    pub stop: RemoteStop,
    /// Controller mode: what the controller decided (`crate::controller_mode`).
    pub controller: Option<Arc<ControllerRole>>,
}

/// The per-shard store directory: each shard has its own commit log and lock.
pub fn shard_store_root(config: &BrokerConfig, shard: ShardId) -> PathBuf {
    remap::store_root(&config.store_root, shard.index())
}

/// The configuration of store `index` while the queues belong to `shard_count` logs (the
/// shard count, or a slave's master's log count) and `store_count` stores exist: every other
/// store's commit log is readable from it (queues handed over after a shard-count change
/// point into them).
fn store_config(
    config: &BrokerConfig,
    index: usize,
    shard_count: usize,
    store_count: usize,
) -> StoreConfig {
    let log_id = |index: usize| LogId::new(u8::try_from(index).unwrap_or(u8::MAX));
    let own_log = log_id(index).expect("at most 128 shards");
    let mut store = StoreConfig::new(remap::store_root(&config.store_root, index), own_log);
    store.segment_bytes = config.commit_log_segment_bytes;
    if !config.warm_commit_log {
        store.warm_ahead_bytes = 0;
    }
    store.flushes_in_flight_max = config.commit_log_flushes_in_flight;
    store.flush_policy = match config.flush_disk_type {
        FlushDiskType::SyncFlush => FlushPolicy::Sync,
        FlushDiskType::AsyncFlush => FlushPolicy::Async,
    };
    store.flush_interval_ms = config.flush_interval_ms;
    store.file_reserved_hours = config.file_reserved_hours;
    store.delete_when_hours = config
        .delete_when_hours
        .iter()
        .map(|hour| u32::from(*hour))
        .collect();
    store.disk_max_used_ratio = f64::from(config.disk_max_used_percent) / 100.0;
    store.disk_high_ratio = f64::from(config.disk_clean_forcibly_percent) / 100.0;
    store.disk_hard_ratio = f64::from(config.disk_refuse_writes_percent) / 100.0;
    store.cq_cache_bytes = config.consume_queue_cache_bytes;
    store.read_window_cache_bytes = config.commit_log_read_window_cache_bytes;
    store.delay_levels_ms = crate::delay_level::delay_levels_ms(config);
    store.owns_queue = Some(Rc::new(move |topic: &str, queue_id: i32| {
        owner_shard(topic, queue_id, shard_count).index() == index
    }));
    for other in (0..store_count).filter(|other| *other != index) {
        let Some(other_log) = log_id(other) else {
            continue;
        };
        let dir = remap::store_root(&config.store_root, other)
            .join("commitlog")
            .join(other_log.to_string());
        store.other_logs.insert(other_log, dir);
    }
    store
}

/// Why the stores could not be brought to the running shard count.
#[derive(Debug, thiserror::Error)]
enum RemapError {
    /// The layout file or the store directories could not be read or written.
    #[error(transparent)]
    Layout(StoreError),
    /// A store could not be recovered under the old ownership.
    #[error("store recovery before the hand-over: {0}")]
    Recovery(#[source] StoreError),
    /// Queues could not be handed to their new owners.
    #[error("queue hand-over: {0}")]
    HandOver(#[source] StoreError),
}

/// Before any shard opens its store: when the shard count differs from the one recorded
/// under the store root, brings every existing store to a clean state under the old
/// ownership and hands each queue to its new owner (comet_store::remap; no record moves).
/// Leftovers of an interrupted removal of a fully deleted store go first. Returns how many
/// stores exist afterwards.
fn remap_stores(config: &BrokerConfig, shard_count: usize) -> Result<usize, RemapError> {
    let root = &config.store_root;
    remap::remove_retired_stores(root).map_err(RemapError::Layout)?;
    let existing = remap::existing_store_count(root).map_err(RemapError::Layout)?;
    let recorded = remap::read_shard_count(root).map_err(RemapError::Layout)?;
    // Stores written before the layout file existed had one store per shard.
    let previous = recorded.unwrap_or(existing);
    if existing > 0 && previous != shard_count {
        log::warn!("shard count changes from {previous} to {shard_count}: handing queues over");
        comet_rt::local::run_local("store-remap", async {
            for index in 0..existing {
                if !remap::store_root(root, index).exists() {
                    // A log of a stopped shard, fully deleted: nothing to recover, and
                    // opening it would create an empty store.
                    continue;
                }
                let store = Store::open(store_config(config, index, previous, existing)).await?;
                store.shutdown().await?;
            }
            Ok::<(), comet_store::StoreError>(())
        })
        .map_err(RemapError::Recovery)?;
        let stores: Vec<PathBuf> = (0..existing.max(shard_count))
            .map(|index| remap::store_root(root, index))
            .collect();
        let moved = remap::hand_over_queues(&stores, |topic, queue_id| {
            owner_shard(topic, queue_id, shard_count).index()
        })
        .map_err(RemapError::HandOver)?;
        log::warn!("{moved} queues handed to new owners");
    }
    if recorded != Some(shard_count) {
        remap::write_shard_count(root, shard_count).map_err(RemapError::Layout)?;
    }
    Ok(existing.max(shard_count))
}

/// Why the broker could not start, or stopped on an error: what happened, and which exit
/// status says so (a busy port is not a storage failure).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct RunError {
    /// The class of failure (the process exit status).
    pub reason: FatalReason,
    /// What failed and why, for the log.
    pub message: String,
    /// The error that caused it (none when several shards failed: the message has each).
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl RunError {
    /// Turns an error of class `reason` into a `RunError` with the error's message.
    pub fn new<E>(reason: FatalReason) -> impl FnOnce(E) -> RunError
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        move |source| RunError {
            reason,
            message: source.to_string(),
            source: Some(Box::new(source)),
        }
    }

    /// As [`RunError::new`], the message saying first what was being done (`what`).
    pub fn during<E>(
        reason: FatalReason,
        what: impl std::fmt::Display,
    ) -> impl FnOnce(E) -> RunError
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        move |source| RunError {
            reason,
            message: format!("{what}: {source}"),
            source: Some(Box::new(source)),
        }
    }
}

/// Runs the broker until `options.stop` is tripped; returns once every shard stopped.
pub fn run(live: LiveConfig, options: RunOptions) -> Result<(), RunError> {
    let shard_count = options.shard_count;
    assert!(shard_count >= 1);
    let config = live.snapshot();
    crate::delay_level::parse_delay_levels(&config.message_delay_levels)
        .map_err(RunError::new(FatalReason::Config))?;
    std::fs::create_dir_all(&config.store_root).map_err(RunError::during(
        FatalReason::StorageIo,
        config.store_root.display(),
    ))?;
    // A slave's queues belong to its master's logs, which its shards host (see
    // crate::replication::hosting); the stores are brought to that count.
    let queue_logs = crate::replication::hosting::queue_logs(
        &config.store_root,
        shard_count,
        config.broker_role.is_master(),
    )
    .map_err(RunError::new(FatalReason::StorageIo))?;
    let store_count = watched(
        format!(
            "fitting the stores under {} to {queue_logs} logs",
            config.store_root.display()
        ),
        || remap_stores(&config, queue_logs),
    )
    .map_err(RunError::new(FatalReason::StorageIo))?;
    if !config.broker_role.is_master() {
        crate::timer_wheel::cursor::forget_on_slave(&config.store_root).map_err(
            RunError::during(FatalReason::StorageIo, "removing a slave's timer wheel"),
        )?;
    }
    let listen: SocketAddr = config.listen_addr();
    if options.standalone {
        // Checked here, before any shard runs, so shard 0 never waits for it.
        let namesrv = crate::standalone::name_server_addr(&config)
            .map_err(RunError::new(FatalReason::Config))?;
        comet_rt::net::ensure_port_free(namesrv).map_err(RunError::during(
            FatalReason::Bind,
            format!("cannot serve the name server on {namesrv}"),
        ))?;
    }
    // Shard 0's HA listener joins this reservation's reuse-port group and no other process's
    // (the reservation checks that nothing listens there first). Held for the run, so no
    // outgoing connection takes the port as its local port before the listener binds it.
    let ha_reservation = if config.broker_role.is_master() {
        Some(reserve_ha_port(&config)?)
    } else {
        None
    };
    let metrics_on = config.metrics_exporter == MetricsExporter::Prom;
    if metrics_on {
        // Shard 0 alone serves metrics: checked before any shard runs.
        let metrics = config.metrics_listen_addr();
        comet_rt::net::ensure_port_free(metrics).map_err(RunError::during(
            FatalReason::Bind,
            format!("cannot serve metrics on {metrics}"),
        ))?;
    }
    let reservation = PortReservation::new(listen).map_err(RunError::during(
        FatalReason::Bind,
        format!("cannot listen on {listen}"),
    ))?;
    let metadata = watched(
        format!(
            "loading topics and groups under {}",
            config.store_root.display()
        ),
        || Metadata::load(&config),
    )
    .map_err(RunError::new(FatalReason::Config))?;
    let metadata = Arc::new(metadata);
    crate::delay_level::cursor::note_role(
        metadata.config_dir(),
        config.broker_role.is_master(),
        comet_rt::clock::wall_clock_ms(),
    )
    .map_err(RunError::during(
        FatalReason::StorageIo,
        "recording the broker's role",
    ))?;
    let acl = load_acl(&config).map_err(RunError::new(FatalReason::Config))?;
    // The slave suggestion compares a consumer's lag with the machine's memory.
    crate::memory::read_total_memory();
    let config = Arc::new(live);
    let mesh: Mesh<ShardCall, ShardReply> = Mesh::new(shard_count, MESH_CAPACITY);
    let unique_keys = Arc::new(UniqueKeyGenerator::new(
        config.load().broker_ip,
        std::process::id(),
        random_i32(),
    ));
    let pool_config = PoolConfig {
        shard_count,
        placement: if options.pinned {
            CpuPlacement::Pinned { first_cpu: 0 }
        } else {
            CpuPlacement::Unbound
        },
        executor: ExecutorOptions {
            name: "comet-shard".to_owned(),
            io_memory_bytes: SHARD_IO_MEMORY_BYTES,
            ..ExecutorOptions::default()
        },
    };
    let start = Arc::new(ShardStart {
        config,
        traffic: Arc::new(Traffic::new(shard_count)),
        stats: Arc::new(ItemStats::new(
            shard_count,
            comet_rt::clock::wall_clock_ms(),
        )),
        metrics: Arc::new(Metrics::new(shard_count, metrics_on)),
        metadata,
        unique_keys,
        listen: reservation.addr(),
        queue_logs,
        store_count,
        acl,
        replication: match &options.controller {
            Some(role) => role.shared_replication().clone(),
            None => Arc::new(crate::replication::SharedReplication::new()),
        },
        options,
    });
    let pool = Pool::start(&pool_config, move |context: ShardContext| {
        let start = start.clone();
        let mesh = mesh.clone();
        async move {
            let shard = context.shard;
            // Every line this thread logs carries `shard=N` (kv and json formats).
            comet_log::set_thread_shard(shard.0);
            let stop = start.options.stop.clone();
            let result = run_shard(context, start, mesh).await;
            if let Err(error) = &result {
                // Said at once, and the run stops: the other shards would otherwise serve on
                // without this one, and its failure would surface only when they end.
                let cause = error.source.as_ref().map(|cause| format!(": {cause}"));
                log::error!("{shard} failed: {error}{}", cause.unwrap_or_default());
                stop.request();
            }
            result
        }
    })
    .map_err(RunError::new(FatalReason::Config))?;
    let mut failures = Vec::new();
    for result in pool.join() {
        match result {
            Ok(Ok(())) => {}
            Ok(Err(error)) => failures.push(error),
            Err(e) => failures.push(RunError::new(FatalReason::StorageIo)(e)),
        }
    }
    drop(reservation);
    drop(ha_reservation);
    // The first shard's reason stands for all; every message is kept.
    let Some(first) = failures.first() else {
        return Ok(());
    };
    if failures.len() == 1 {
        return Err(failures.remove(0));
    }
    let reason = first.reason;
    let message = failures
        .iter()
        .map(|failure| failure.message.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    Err(RunError {
        reason,
        message,
        source: None,
    })
}

/// Reserves `config`'s HA port (bound, never listening) until the reservation drops.
///
/// Why: an outgoing connection of any process on the machine takes a free port as its local
/// port, and Linux gives connections even ports first; `haListenPort` defaults to the
/// listen port + 1, so an HA port next to an odd listen port is exactly such a port. A
/// connection holding it (open, or in TIME_WAIT for a minute after it closed) makes the
/// HA listener's bind fail. A bound socket keeps new connections off the port.
pub fn reserve_ha_port(config: &BrokerConfig) -> Result<PortReservation, RunError> {
    let ha = config.ha_listen_addr();
    PortReservation::new(ha).map_err(RunError::during(
        FatalReason::Bind,
        format!("cannot listen for slaves on {ha}"),
    ))
}

/// Gives every topic whose consume queues this master's stores hold a topic config: a
/// promoted slave may hold messages of topics its master created after the last metadata
/// copy, and they must stay reachable through routes.
fn adopt_stored_topics(broker: &ShardBroker) {
    let mut counts: std::collections::BTreeMap<String, i32> = std::collections::BTreeMap::new();
    let stores =
        std::iter::once(broker.store()).chain(broker.hosted_logs().iter().map(|l| &l.store));
    for store in stores {
        for (topic, queue_id) in store.queue_list() {
            let count = counts.entry(topic).or_insert(1);
            *count = (*count).max(queue_id.saturating_add(1));
        }
    }
    let mut changed = Vec::new();
    {
        let mut topics = broker.topics();
        for (topic, count) in counts {
            if topics.adopt_stored_queues(&topic, count) {
                changed.push(topic);
            }
        }
    }
    if !changed.is_empty() {
        log::warn!(
            "{}: topics restored from the queues in the store (no topic config held them): {}",
            broker.shard(),
            changed.join(", ")
        );
        broker.mark_topics_changed();
    }
}

fn random_i32() -> i32 {
    let mut bytes = [0u8; 4];
    // SAFETY: getrandom writes at most `bytes.len()` bytes into the buffer it is given.
    let written = unsafe { libc::getrandom(bytes.as_mut_ptr().cast(), bytes.len(), 0) };
    if written != 4 {
        // The low 32 bits of the wall clock: only a fallback seed, any bits will do.
        let millis = u32::try_from(comet_rt::clock::wall_clock_ms().rem_euclid(1 << 32));
        return (millis.unwrap_or(0) ^ std::process::id()) as i32;
    }
    i32::from_be_bytes(bytes)
}

struct ShardStart {
    config: Arc<LiveConfig>,
    traffic: Arc<Traffic>,
    stats: Arc<ItemStats>,
    metrics: Arc<Metrics>,
    metadata: Arc<Metadata>,
    unique_keys: Arc<UniqueKeyGenerator>,
    listen: SocketAddr,
    options: RunOptions,
    /// How many logs the queues belong to (the shard count, or a slave's master's log count).
    queue_logs: usize,
    /// Stores under the store root (at least one per shard; more after the count shrank).
    store_count: usize,
    /// The plain ACL, when `aclEnable` is on.
    acl: Option<Arc<AccessControl>>,
    /// Replication state every shard shares (a slave's master addresses).
    replication: Arc<crate::replication::SharedReplication>,
}

/// Reads the accounts file when `aclEnable` is on; a missing or malformed file stops the
/// start: a broker asked to check credentials must not run open.
fn load_acl(config: &BrokerConfig) -> Result<Option<Arc<AccessControl>>, AclLoadError> {
    if !config.acl_enable {
        return Ok(None);
    }
    let acl = AccessControl::load(&config.plain_acl_file)?;
    log::info!(
        "ACL 1.0 on: every request is checked against {}",
        config.plain_acl_file.display()
    );
    Ok(Some(Arc::new(acl)))
}

async fn run_shard(
    context: ShardContext,
    start: Arc<ShardStart>,
    mesh: Mesh<ShardCall, ShardReply>,
) -> Result<(), RunError> {
    let shard = context.shard;
    let stop = StopSignal::new();
    stop.follow(start.options.stop.clone());
    // Before any store opens, so a long recovery shows in the metrics while it runs.
    let metrics_broker = serve_metrics(&start, shard, &stop)?;
    let steps = ShardSteps::start(shard, &format!("opening store {}", shard.index()));
    let store = open_store(&start, shard, shard.index(), context.shard_count).await?;
    // A slave with fewer shards than its master has logs hosts the others here too.
    let mut hosted = Vec::new();
    let hosted_logs = crate::replication::hosting::hosted_logs(
        shard.index(),
        context.shard_count,
        start.queue_logs,
    );
    for log in hosted_logs.into_iter().filter(|log| *log != shard.index()) {
        steps.step(&format!("opening hosted store {log}"));
        let log_store = open_store(&start, shard, log, context.shard_count).await?;
        hosted.push(crate::shard::HostedLog {
            store: log_store,
            replication: Rc::new(crate::replication::ReplicationState::new(
                crate::replication::log_id_of(log),
                start.replication.clone(),
            )),
        });
    }
    let broker = Rc::new(ShardBroker::new(ShardParts {
        shard,
        shard_count: context.shard_count,
        config: start.config.clone(),
        metadata: start.metadata.clone(),
        store,
        store_host: SocketAddr::new(
            start.config.load().broker_ip,
            start.config.load().listen_port,
        ),
        unique_keys: start.unique_keys.clone(),
        traffic: start.traffic.clone(),
        stats: start.stats.clone(),
        metrics: start.metrics.clone(),
        replication: crate::replication::ReplicationState::new(
            crate::replication::log_id_of(shard.index()),
            start.replication.clone(),
        ),
        queue_logs: start.queue_logs,
        hosted,
        controller: start.options.controller.clone(),
    }));
    steps.step("loading consumer offsets");
    load_offsets(&broker).await;
    if start.config.load().broker_role.is_master() {
        adopt_stored_topics(&broker);
    }
    steps.step("waiting for the other shards to start");
    let peer = mesh
        .join(mesh_handler(broker.clone()))
        .await
        // The error carries no cause (nor a request: joining sends none), only its text.
        .map_err(|error| RunError {
            reason: FatalReason::Config,
            message: format!("{shard}: mesh: {error}"),
            source: None,
        })?;
    broker.set_mesh(peer);
    let mut server = build_server(&broker, start.acl.clone());
    // Loaded per shard from the same files; a bad file stops the start with its reason.
    let config = start.config.snapshot();
    server.set_tls(config.server_tls().map_err(RunError::during(
        FatalReason::Config,
        format!("{shard}: TLS"),
    ))?);
    config.client_tls().map_err(RunError::during(
        FatalReason::Config,
        format!("{shard}: outgoing TLS"),
    ))?;
    let server = Rc::new(server);
    broker.set_server(server.clone());
    if let Some(metrics_broker) = &metrics_broker {
        // From now on a scrape reads every shard's figures.
        let _ = metrics_broker.set(broker.clone());
    }
    if start.options.standalone && shard.0 == 0 {
        crate::standalone::spawn_name_server(&start.config.snapshot(), stop.clone())
            .map_err(RunError::new(FatalReason::Bind))?;
    }
    if let (Some(acl), 0) = (start.acl.clone(), shard.0) {
        spawn_acl_watch(acl, stop.clone());
    }
    steps.step("starting replication");
    crate::replication::start(&broker, &stop)
        .await
        .map_err(|error| {
            let reason = match error {
                crate::replication::ReplicationError::Bind { .. } => FatalReason::Bind,
                _ => FatalReason::StorageIo,
            };
            RunError::during(reason, format!("{shard}: replication"))(error)
        })?;
    let metadata_task = spawn_housekeeping(&broker, &stop, !start.options.standalone);
    // A slave's log holds only what its master streams: the services that append records
    // of their own run on masters.
    let (schedule_task, transaction_task, timer_task, revive_task) =
        if start.config.load().broker_role.is_master() {
            (
                crate::delay_level::delivery::spawn_delivery(&broker, &stop),
                crate::transaction::check::spawn_checker(&broker, &stop),
                crate::timer_wheel::wheel::spawn_wheel(&broker, &stop),
                Some(crate::pop::revive::spawn_revive(&broker, &stop)),
            )
        } else {
            (None, None, None, None)
        };
    let listener = Listener::bind(start.listen).map_err(RunError::during(
        FatalReason::Bind,
        format!("{shard}: bind {}", start.listen),
    ))?;
    drop(steps);
    log::info!(
        "{shard} serving on {} (store {})",
        start.listen,
        shard_store_root(&start.config.snapshot(), shard).display()
    );
    server.serve(listener, stop.clone()).await;
    if let Some(task) = metadata_task {
        task.await;
    }
    for task in [schedule_task, transaction_task, timer_task, revive_task]
        .into_iter()
        .flatten()
    {
        task.await;
    }
    crate::replication::finish(&broker).await;
    shutdown_shard(&broker).await.map_err(RunError::during(
        FatalReason::StorageIo,
        format!("{shard}: store shutdown"),
    ))
}

/// Starts the metrics endpoint on shard 0 when metrics are on, before the broker serves
/// (see `crate::metrics_server`): returns where to hand it the broker once it does.
fn serve_metrics(
    start: &ShardStart,
    shard: ShardId,
    stop: &StopSignal,
) -> Result<Option<Rc<OnceCell<Rc<ShardBroker>>>>, RunError> {
    if !start.metrics.enabled() || shard.0 != 0 {
        return Ok(None);
    }
    let config = start.config.snapshot();
    let addr = config.metrics_listen_addr();
    let listener = Listener::bind(addr).map_err(RunError::during(
        FatalReason::Bind,
        format!("{shard}: metrics on {addr}"),
    ))?;
    let broker = Rc::new(OnceCell::new());
    let endpoint = crate::metrics_server::Endpoint {
        metrics: start.metrics.clone(),
        labels: BrokerLabels {
            cluster: config.cluster_name.clone(),
            node_id: config.broker_name.clone(),
        },
        broker: broker.clone(),
    };
    let serving = crate::metrics_server::serve(endpoint, listener, stop.clone());
    spawn_detached(TaskClass::Admin, serving);
    Ok(Some(broker))
}

/// Opens store `index` (its log has that id) on shard `shard` of `shard_count`.
async fn open_store(
    start: &ShardStart,
    shard: ShardId,
    index: usize,
    shard_count: usize,
) -> Result<Store, RunError> {
    let broker_config = start.config.snapshot();
    let mut config = store_config(&broker_config, index, start.queue_logs, start.store_count);
    config.recovery_progress = start
        .metrics
        .watch_recovery(shard.index(), config.log_id.get());
    if index < start.queue_logs {
        // Logs no shard writes any more: this store deletes their expired segments and
        // answers key queries from their index. The stores of running shards past a
        // slave's logs are not among them: their shards keep them.
        config.adopted_logs = remap::adopted_logs(index, start.queue_logs, start.store_count)
            .into_iter()
            .filter(|log| usize::from(log.get()) >= shard_count)
            .collect();
    }
    if !broker_config.broker_role.is_master() {
        // A truncation or a fresh copy the master asked for in an earlier run, applied
        // before anything is served (see crate::replication::receiver).
        let pending = crate::replication::pending_store_change(&config.root).map_err(
            RunError::during(FatalReason::StorageIo, format!("store {index}")),
        )?;
        config.truncate_log_to = pending.truncate_log_to;
        config.reset_log_to = pending.reset_log_to;
    }
    // A SYNC_MASTER's consumers see only what the in-sync slaves hold (see
    // crate::replication::sync_master); a slave's only what its master confirmed, since it
    // may hold bytes its master never made durable (see crate::replication::receiver).
    config.visible_after_confirm = matches!(
        broker_config.broker_role,
        BrokerRole::SyncMaster | BrokerRole::Slave
    );
    // A restarted slave shows only what was visible before, until its master confirms the
    // rest or makes it cut what the master no longer holds (see crate::replication::receiver).
    config.hold_unconfirmed_at_open = broker_config.broker_role == BrokerRole::Slave;
    Store::open(config).await.map_err(RunError::during(
        FatalReason::StorageIo,
        format!("store {index}"),
    ))
}

fn mesh_handler(broker: Rc<ShardBroker>) -> MeshHandler<ShardCall, ShardReply> {
    Rc::new(
        move |_source: ShardId, call: ShardCall| -> LocalBoxFuture<ShardReply> {
            let broker = broker.clone();
            Box::pin(async move {
                match call {
                    ShardCall::Request { context, command } => {
                        processor::handle_local(&broker, context, command).await
                    }
                    ShardCall::ToClient {
                        connection,
                        command,
                    } => {
                        crate::routing::deliver_locally(&broker, connection, command);
                        None
                    }
                    ShardCall::AskClient {
                        connection,
                        label,
                        command,
                        limit,
                    } => Some(
                        processor::ask_client::ask_local(
                            &broker, connection, &label, command, limit,
                        )
                        .await,
                    ),
                    ShardCall::Append { records } => {
                        Some(crate::reappend::append_local(&broker, records).await)
                    }
                    ShardCall::ConsumerMetrics => {
                        let figures = crate::metrics_collect::consumer::compute(&broker).await;
                        let shard = broker.shard().index();
                        broker.metrics().publish_consumers(shard, figures);
                        None
                    }
                    ShardCall::Replica {
                        stream,
                        hello,
                        buffered,
                    } => {
                        crate::replication::adopt(&broker, stream, hello, buffered);
                        None
                    }
                }
            })
        },
    )
}

/// The dispatch table. With ACL on, every code is checked before routing; with it off the
/// processors are registered as they are, so the unsigned path pays nothing.
fn build_server(broker: &Rc<ShardBroker>, acl: Option<Arc<AccessControl>>) -> Server {
    let mut table = DispatchTable::new();
    for code in processor::SUPPORTED_CODES {
        let broker = broker.clone();
        match acl.clone() {
            None => table.register_fn(*code, move |context: comet_net::RequestContext, request| {
                let broker = broker.clone();
                async move { handle_timed(&broker, request_context(&context), request).await }
            }),
            Some(acl) => {
                table.register_fn(*code, move |context: comet_net::RequestContext, request| {
                    let broker = broker.clone();
                    let acl = acl.clone();
                    async move {
                        let context = request_context(&context);
                        if let Err(denied) = acl.check(&request, context.peer.ip()) {
                            return refused(&request, context.peer, &denied);
                        }
                        handle_timed(&broker, context, request).await
                    }
                })
            }
        }
    }
    if let Some(acl) = acl {
        table.set_fallback(acl_fallback(acl));
    }
    for code in crate::routing::PULL_CLASS_CODES {
        table.set_class(code, TaskClass::Pull);
    }
    let config = ServerConfig {
        idle_timeout: Duration::from_millis(broker.config().channel_idle_ms),
        ..ServerConfig::default()
    };
    let mut server = Server::new(broker.shard(), table, config);
    let closed_broker = broker.clone();
    server.on_connection_closed(Rc::new(move |connection| {
        let broker = closed_broker.clone();
        let id = connection.id();
        spawn_detached(TaskClass::Admin, async move {
            client::connection_closed(&broker, id).await
        });
    }));
    server
}

/// Serves a request, counting its latency by request and response code when metrics are on
/// (`rocketmq_rpc_latency`: from its dispatch to its answer, on the shard it arrived at).
async fn handle_timed(
    broker: &ShardBroker,
    context: RequestContext,
    request: comet_proto::RemotingCommand,
) -> Option<comet_proto::RemotingCommand> {
    let started = broker.metrics().rpc_timer();
    let code = request.code;
    let response = processor::handle(broker, context, request).await;
    let response_code = response.as_ref().map(|response| response.code);
    let shard = broker.shard().index();
    broker
        .metrics()
        .record_rpc(shard, started, code, response_code);
    response
}

/// The processor of codes Comet does not serve, with ACL on. Java checks every code, its
/// default processor's too: an unsigned request for such a code is refused as an ACL
/// failure, a signed one is answered REQUEST_CODE_NOT_SUPPORTED.
fn acl_fallback(acl: Arc<AccessControl>) -> comet_net::Processor {
    Rc::new(move |context: comet_net::RequestContext, request| {
        let acl = acl.clone();
        Box::pin(async move {
            let peer = context.peer_addr();
            if let Err(denied) = acl.check(&request, peer.ip()) {
                return refused(&request, peer, &denied);
            }
            Some(comet_proto::RemotingCommand::not_supported_to(&request))
        })
    })
}

fn request_context(context: &comet_net::RequestContext) -> RequestContext {
    RequestContext {
        peer: context.peer_addr(),
        connection: context.connection.id(),
    }
}

/// The answer to a request the ACL refused (none to a one-way request).
fn refused(
    request: &comet_proto::RemotingCommand,
    peer: SocketAddr,
    denied: &crate::acl::Denied,
) -> Option<comet_proto::RemotingCommand> {
    log::warn!(
        "ACL refused code {} from {peer} (opaque {}): {denied}",
        request.code,
        request.opaque
    );
    (!request.is_oneway()).then(|| denied.response_to(request))
}

fn offsets_path(broker: &ShardBroker, shard: ShardId) -> PathBuf {
    broker
        .metadata()
        .config_dir()
        .join(format!("consumerOffset-{}.json", shard.0))
}

/// Reads every shard's offset file and keeps the entries this shard owns, so a changed core
/// count loses no committed offset (a transaction op queue's offset goes with its half
/// queue, where the checker that keeps it runs).
async fn load_offsets(broker: &Rc<ShardBroker>) {
    let directory = broker.metadata().config_dir().to_path_buf();
    let files: Vec<OffsetFile> =
        comet_rt::task_class::run_blocking(move || read_offset_files(&directory)).await;
    let mut offsets = broker.offsets().borrow_mut();
    for file in files {
        offsets.load(file, |topic, queue_id| {
            broker.owns(crate::transaction::offset_owner_topic(topic), queue_id)
        });
    }
    offsets.take_snapshot();
}

fn read_offset_files(directory: &std::path::Path) -> Vec<OffsetFile> {
    persist::read_json_family::<OffsetFile>(directory, "consumerOffset")
        .into_iter()
        .filter_map(|file| {
            file.parsed.unwrap_or_else(|e| {
                log::warn!("ignoring {}: {e}", file.name);
                None
            })
        })
        .collect()
}

async fn persist_offsets(broker: &ShardBroker) {
    let snapshot = {
        let mut offsets = broker.offsets().borrow_mut();
        if !offsets.is_changed() {
            return;
        }
        offsets.take_snapshot()
    };
    let path = offsets_path(broker, broker.shard());
    let bytes = match serde_json::to_vec(&snapshot) {
        Ok(bytes) => bytes,
        Err(e) => return log::error!("cannot encode consumer offsets: {e}"),
    };
    let written =
        comet_rt::task_class::run_blocking(move || persist::write_atomic(&path, &bytes)).await;
    if let Err(e) = written {
        log::error!("cannot persist consumer offsets: {e}");
    }
}

async fn persist_groups(broker: &ShardBroker) {
    // Checked here so an unchanged table costs no trip to the blocking pool every second.
    if !broker.groups().is_changed() {
        return;
    }
    let metadata = broker.metadata().clone();
    if let Err(e) = comet_rt::task_class::run_blocking(move || metadata.persist_groups()).await {
        log::error!("cannot persist subscription groups: {e}");
    }
}

async fn persist_metadata(broker: &ShardBroker) {
    let metadata = broker.metadata().clone();
    let written = comet_rt::task_class::run_blocking(move || {
        metadata
            .persist_topics()
            .and_then(|()| metadata.persist_groups())
    })
    .await;
    if let Err(e) = written {
        log::error!("cannot persist topics or groups: {e}");
    }
}

/// Starts the periodic tasks; on shard 0 returns the metadata task, which unregisters from
/// the name servers (when `unregister_at_stop`) before it ends.
/// Shard 0: reads the ACL accounts file again whenever it changes (checked every
/// [`ACL_FILE_CHECK_INTERVAL`], off the shard thread), so account edits apply without a
/// restart, as in Java. A file that does not parse is reported and the accounts in force stay.
fn spawn_acl_watch(acl: Arc<AccessControl>, stop: StopSignal) {
    spawn_detached(TaskClass::Housekeeping, async move {
        while !stop.is_triggered() {
            sleep(ACL_FILE_CHECK_INTERVAL).await;
            let watched = acl.clone();
            match comet_rt::task_class::run_blocking(move || watched.reload_if_changed()).await {
                Ok(true) => log::info!("ACL: accounts file changed; its accounts are in force"),
                Ok(false) => {}
                Err(error) => log::error!("ACL: {error}; the previous accounts stay in force"),
            }
        }
    });
}

fn spawn_housekeeping(
    broker: &Rc<ShardBroker>,
    stop: &StopSignal,
    unregister_at_stop: bool,
) -> Option<TaskHandle<()>> {
    let offsets_broker = broker.clone();
    let offsets_stop = stop.clone();
    spawn_detached(TaskClass::Housekeeping, async move {
        let interval = Duration::from_millis(offsets_broker.config().persist_interval_ms);
        while !offsets_stop.is_triggered() {
            sleep(interval.min(Duration::from_secs(1))).await;
            persist_offsets(&offsets_broker).await;
        }
    });
    let traffic_broker = broker.clone();
    let traffic_stop = stop.clone();
    spawn_detached(TaskClass::Housekeeping, async move {
        // The first sample is taken at start-up, so rates count from boot.
        while !traffic_stop.is_triggered() {
            sample_traffic(&traffic_broker);
            sleep(TRAFFIC_SAMPLE_INTERVAL).await;
        }
    });
    if broker.shard().0 != 0 {
        return None;
    }
    let broker = broker.clone();
    let stop = stop.clone();
    Some(spawn(TaskClass::Housekeeping, async move {
        metadata_loop(&broker, &stop, unregister_at_stop).await
    }))
}

/// Publishes this shard's stored-message count; shard 0 then records the broker-wide totals
/// for the rates GET_BROKER_RUNTIME_INFO reports (a shard's count may be up to one interval
/// old in that sample, which evens out over the 10 s and longer windows), and takes the
/// per-topic statistics' snapshots when due.
fn sample_traffic(broker: &ShardBroker) {
    broker
        .traffic()
        .set_put(broker.store().stats().appended_records);
    crate::metrics_server::publish(broker);
    if broker.shard().0 == 0 {
        let now_ms = comet_rt::clock::wall_clock_ms();
        broker
            .all_traffic()
            .sample(now_ms, crate::traffic::local_day(now_ms));
        broker.stats().sample(now_ms);
    }
}

/// Shard 0: registration (every period, and right after a topic change), metadata
/// persistence, client and lock expiry.
async fn metadata_loop(broker: &ShardBroker, stop: &StopSignal, unregister_at_stop: bool) {
    // What is registered (name, addresses, cluster) takes effect at restart: a run-time
    // update of `listenPort` must not advertise a port nothing listens on.
    let registered = broker.live_config().snapshot();
    let mut links = register::links(&registered);
    let period = Duration::from_millis(broker.config().register_period_ms);
    let mut since_register = period;
    let mut opaque = 0i32;
    while !stop.is_triggered() {
        // In controller mode a broker registers once the controller decided its role (an
        // undecided one would take an id the controller has not given it).
        let decided = broker
            .controller()
            .is_none_or(|role| role.serving() != crate::controller_role::Serving::Undecided);
        let (changed, generation) = broker.metadata().take_topics_changed();
        if decided && (changed || since_register >= period) {
            if changed {
                persist_metadata(broker).await;
            }
            let wrapper = broker
                .topics()
                .to_wrapper(broker.config().broker_permission);
            opaque = opaque.wrapping_add(1);
            let answered = register::register_all(&registered, &mut links, &wrapper, opaque).await;
            // In controller mode the controller names the master, not the name servers.
            if !registered.broker_role.is_master() && broker.controller().is_none() {
                let master = answered.master;
                broker
                    .replication
                    .shared
                    .learn(master.ha_addr, master.broker_addr);
            }
            broker.metadata().set_registered_generation(generation);
            since_register = Duration::ZERO;
        }
        let now_ms = comet_rt::clock::wall_clock_ms();
        let expired = broker.clients().expire(now_ms);
        broker.locks().expire(now_ms);
        for group in expired {
            client::notify_consumer_ids_changed(broker, &group).await;
        }
        persist_groups(broker).await;
        since_register += wait_for_change(broker, stop).await;
    }
    if unregister_at_stop {
        register::unregister_all(&registered, &mut links, opaque.wrapping_add(1)).await;
    }
}

/// Waits up to [`METADATA_CHECK_INTERVAL`], less when a topic changes (requests such as a
/// heartbeat that creates a retry topic wait for its registration, as Apache RocketMQ's do)
/// or the broker stops; returns the time waited.
async fn wait_for_change(broker: &ShardBroker, stop: &StopSignal) -> Duration {
    let mut waited = Duration::ZERO;
    while waited < METADATA_CHECK_INTERVAL && !broker.metadata().topics_change_pending() {
        if timeout(TOPIC_CHANGE_POLL, stop.wait()).await.is_ok() {
            break;
        }
        waited += TOPIC_CHANGE_POLL;
    }
    waited
}

async fn shutdown_shard(broker: &ShardBroker) -> Result<(), StoreError> {
    log::info!(
        "{} stopping: persisting offsets and flushing the store",
        broker.shard()
    );
    persist_offsets(broker).await;
    if broker.shard().0 == 0 {
        persist_metadata(broker).await;
    }
    broker.store().shutdown().await?;
    for hosted in broker.hosted_logs() {
        hosted.store.shutdown().await?;
    }
    let (in_place, forwarded) = broker.traffic().requests();
    log::info!(
        "{} stopped ({in_place} requests handled in place, {forwarded} handed to other shards)",
        broker.shard(),
    );
    Ok(())
}
