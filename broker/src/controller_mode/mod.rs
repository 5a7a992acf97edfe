//! Controller mode (`enableControllerMode=true`): the controllers, not the configuration,
//! decide which broker of a broker set is master (docs/architecture.md#failover).
//!
//! [`run_controlled`] starts the session's driver thread (`driver`), waits for the
//! controller's first decision, then runs the shards in the role decided, again and again: a
//! run ends when the controller decides a role the run cannot take in place, after which the
//! next run starts in that role. Becoming master therefore goes through the same clean stop
//! and start that promotion by hand does (the new master's logs begin a new epoch), and
//! becoming a slave goes through the slave's start (its receivers cut any tail its new
//! master lacks).
//!
//! Writes: a master acknowledges a write only while its lease holds (`ControllerRole`): the
//! controller confirmed it master, in an answer to a request sent less than the lease ago.
//! The lease is shorter than `controllerHeartBeatTimeoutMills`, after which the controller may
//! elect another master, so a master cut off from the controllers stops acknowledging before
//! anyone else can start.
//!
//! `wire` translates the session's requests and answers to remoting frames.

pub mod driver;
pub mod wire;

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use comet_replication::controller::identity::{
    ConfirmedIdentity, StoredIdentity, TempIdentity, CONFIRMED_FILE_NAME, TEMP_FILE_NAME,
};
use comet_replication::controller::{AckPolicy, Session, SessionConfig};
use comet_rt::fatal::FatalReason;
use comet_rt::shutdown::RemoteStop;
use thiserror::Error;

use crate::config::{BrokerConfig, BrokerRole};
use crate::controller_role::{ControllerRole, Serving};
use crate::live_config::LiveConfig;
use crate::runtime::{run, RunError, RunOptions};

/// The lease is this share of `controllerHeartBeatTimeoutMills`, in percent: the rest covers
/// the heartbeat interval and the time an answer spends in flight.
pub const LEASE_PERCENT_OF_HEARTBEAT_TIMEOUT: u64 = 70;

/// Heartbeats stop once the shards published nothing for the heartbeat timeout divided by
/// this: a broker whose shards stalled must give way well before its lease would.
pub const SHARDS_SILENT_DIVISOR: u32 = 2;

/// Why controller mode could not start.
#[derive(Debug, Error)]
pub enum ControllerModeError {
    /// An identity file cannot be read.
    #[error("cannot read the broker's controller identity {path}: {reason}")]
    Identity {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// The session refused the configuration or the stored identity.
    #[error("controller session: {0}")]
    Session(#[from] comet_replication::controller::SessionError),
    /// The driver thread could not start.
    #[error("cannot start the controller driver: {0}")]
    Thread(#[source] std::io::Error),
}

/// The runs' stop, the role the next run takes, and the broker id the current run
/// registers with: shared by the driver and [`run_controlled`].
pub struct RunControl {
    process_stop: RemoteStop,
    run_stop: Mutex<RemoteStop>,
    desired: Mutex<Serving>,
    run_broker_id: Mutex<Option<i64>>,
}

impl RunControl {
    fn new(process_stop: RemoteStop) -> RunControl {
        RunControl {
            process_stop,
            run_stop: Mutex::new(RemoteStop::new()),
            desired: Mutex::new(Serving::Undecided),
            run_broker_id: Mutex::new(None),
        }
    }

    /// Whether the process is stopping (a signal).
    pub fn process_stop_requested(&self) -> bool {
        self.process_stop.is_requested()
    }

    /// Ends the current run (the shards stop cleanly).
    pub fn stop_run(&self) {
        self.run_stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .request();
    }

    /// The role the next run takes.
    pub fn desired(&self) -> Serving {
        self.desired
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Records the role the next run takes.
    pub fn set_desired(&self, serving: Serving) {
        *self.desired.lock().unwrap_or_else(PoisonError::into_inner) = serving;
    }

    /// The controller id the current run registers with, if it has one.
    pub fn run_broker_id(&self) -> Option<i64> {
        *self
            .run_broker_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn begin_run(&self, broker_id: Option<i64>) -> RemoteStop {
        *self
            .run_broker_id
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = broker_id;
        let stop = RemoteStop::new();
        *self.run_stop.lock().unwrap_or_else(PoisonError::into_inner) = stop.clone();
        stop
    }
}

/// Runs the broker in controller mode until `options.stop` is requested.
pub fn run_controlled(
    config: BrokerConfig,
    overrides: std::collections::BTreeMap<String, String>,
    options: RunOptions,
) -> Result<(), RunError> {
    let started = comet_rt::clock::monotonic_now();
    let (role, notifications) = ControllerRole::new(started);
    std::fs::create_dir_all(&config.store_root).map_err(RunError::during(
        FatalReason::StorageIo,
        config.store_root.display(),
    ))?;
    let stored = read_identity(&config.store_root).map_err(RunError::new(FatalReason::Config))?;
    if let Some(confirmed) = &stored.confirmed {
        role.set_broker_id(confirmed.broker_id);
    }
    let session = Session::new(session_config(&config), stored)
        .map_err(|error| RunError::new(FatalReason::Config)(ControllerModeError::from(error)))?;
    let control = Arc::new(RunControl::new(options.stop.clone()));
    let heartbeat_timeout = Duration::from_millis(config.controller_heartbeat_timeout_ms);
    let driver_config = driver::DriverConfig {
        identity_dir: config.store_root.clone(),
        lease: heartbeat_timeout * u32::try_from(LEASE_PERCENT_OF_HEARTBEAT_TIMEOUT).unwrap_or(70)
            / 100,
        log_count: options.shard_count,
        request_timeout: Duration::from_millis(
            comet_replication::controller::REQUEST_TIMEOUT_MS_DEFAULT,
        ),
        shards_silent_max: heartbeat_timeout / SHARDS_SILENT_DIVISOR,
        ack_policy: AckPolicy {
            in_sync_replicas: config.in_sync_replicas,
            min_in_sync_replicas: config.min_in_sync_replicas,
            all_ack_in_sync_state_set: config.all_ack_in_sync_state_set,
        },
    };
    let driver = std::thread::Builder::new()
        .name("comet-controller".to_owned())
        .spawn({
            let (role, control) = (role.clone(), control.clone());
            move || driver::drive(session, driver_config, role, notifications, control)
        })
        .map_err(|error| RunError::new(FatalReason::Config)(ControllerModeError::Thread(error)))?;
    // Held while the process runs: any run may make this broker a master, whose HA port
    // must then be free (see `runtime::reserve_ha_port`).
    let _ha_reservation = crate::runtime::reserve_ha_port(&config)?;
    let mut outcome = Ok(());
    // The shards start only once the controller decided a role, so a start costs no
    // restart: every restart is one more clean stop and start for clients to wait through.
    let mut waiting = comet_log::progress::Progress::waiting(
        format!(
            "controller mode: waiting for the controllers ({}) to decide this broker's role",
            config.controller_addrs.join(";")
        ),
        comet_rt::clock::monotonic_now(),
    );
    while control.desired() == Serving::Undecided && !options.stop.is_requested() {
        std::thread::sleep(driver::IDLE_WAIT_MAX);
        waiting.report(0, comet_rt::clock::monotonic_now());
    }
    while !options.stop.is_requested() {
        // The run's stop first: a decision made from here on stops this run, not a past one.
        let broker_id = role.broker_id();
        let run_stop = control.begin_run(broker_id);
        let serving = control.desired();
        role.set_serving(serving.clone());
        role.clear_figures(comet_rt::clock::monotonic_now());
        let run_config = config_for_run(&config, &serving, broker_id);
        log::info!(
            "controller mode: serving {serving:?} as brokerId {}",
            run_config.broker_id
        );
        let run_options = RunOptions {
            stop: run_stop,
            controller: Some(role.clone()),
            ..options.clone()
        };
        if let Err(error) = run(LiveConfig::new(run_config, overrides.clone()), run_options) {
            outcome = Err(error);
            break;
        }
    }
    options.stop.request();
    if driver.join().is_err() {
        log::error!("the controller driver panicked");
    }
    outcome
}

/// The configuration of one run: the decided role, and the id the name servers know the
/// broker by (0 for the master, its controller id for a slave).
fn config_for_run(
    config: &BrokerConfig,
    serving: &Serving,
    broker_id: Option<i64>,
) -> BrokerConfig {
    let mut run = config.clone();
    match serving {
        Serving::Master { .. } => {
            run.broker_id = 0;
            if !run.broker_role.is_master() {
                run.broker_role = BrokerRole::AsyncMaster;
            }
        }
        Serving::Undecided | Serving::Slave { .. } => {
            run.broker_role = BrokerRole::Slave;
            run.broker_id = broker_id.unwrap_or(1).max(1);
        }
    }
    run
}

fn session_config(config: &BrokerConfig) -> SessionConfig {
    let mut session = SessionConfig::new(
        config.cluster_name.clone(),
        config.broker_name.clone(),
        format!("{}:{}", config.broker_ip, config.listen_port),
        config.controller_addrs.clone(),
        comet_rt::clock::wall_clock_ms(),
    );
    session.election_priority = config.broker_election_priority;
    session.heartbeat_interval = Duration::from_millis(config.broker_heartbeat_interval_ms);
    session.heartbeat_timeout_ms =
        i64::try_from(config.controller_heartbeat_timeout_ms).unwrap_or(i64::MAX);
    session.sync_broker_metadata_period =
        Duration::from_millis(config.sync_broker_metadata_period_ms);
    session.check_sync_state_set_period =
        Duration::from_millis(config.check_sync_state_set_period_ms);
    session.sync_controller_metadata_period =
        Duration::from_millis(config.sync_controller_metadata_period_ms);
    session
}

fn read_identity(dir: &Path) -> Result<StoredIdentity, ControllerModeError> {
    let read = |name: &str| -> Result<Option<String>, ControllerModeError> {
        let path = dir.join(name);
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Some(text)),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(ControllerModeError::Identity {
                path: path.display().to_string(),
                reason: error.to_string(),
            }),
        }
    };
    let bad = |name: &str, reason: String| ControllerModeError::Identity {
        path: dir.join(name).display().to_string(),
        reason,
    };
    let confirmed = read(CONFIRMED_FILE_NAME)?
        .map(|text| ConfirmedIdentity::decode(&text))
        .transpose()
        .map_err(|e| bad(CONFIRMED_FILE_NAME, e.to_string()))?;
    let temp = read(TEMP_FILE_NAME)?
        .map(|text| TempIdentity::decode(&text))
        .transpose()
        .map_err(|e| bad(TEMP_FILE_NAME, e.to_string()))?;
    Ok(StoredIdentity { confirmed, temp })
}
