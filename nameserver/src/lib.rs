//! `comet-nameserver`: the RocketMQ name server, as a library and the `comet-nameserver`
//! binary.
//!
//! Brokers register their topics with every name server (every 30 s, REGISTER_BROKER);
//! producers, consumers and admin tools ask for routes (GET_ROUTEINFO_BY_TOPIC) and cluster
//! views. Name servers know nothing of each other: a deployment runs several side by side.
//!
//! The whole name server lives on one shard: its [`route_table::RouteTable`], KV store and
//! configuration are owned there ([`processor::NameServerState`]) and every answer is built
//! from them in place. To run it:
//!
//! * as a process: the `comet-nameserver` binary (or [`NameServerThread::spawn`], which runs
//!   it on its own executor thread, as tests do);
//! * inside another glommio executor (the broker's `--standalone` mode): build
//!   [`NameServer::new`], bind a [`comet_rt::net::Listener`] and spawn [`NameServer::run`] as
//!   a task, in the [`comet_rt::task_class::TaskClass::NameServer`] class.
//!
//! With `consoleListenPort` set, [`start_on_shard`] also binds the web console's listener and
//! [`NameServer::run`] serves it beside the remoting port ([`console`]).

pub mod config;
pub mod console;
pub mod controller;
pub mod housekeeping;
pub mod kv_config;
pub mod limits;
pub mod processor;
pub mod route_table;

use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;

use comet_net::{Server, ServerConfig, ServerTls};
use comet_rt::net::Listener;
use comet_rt::pool::{spawn_shard, CpuPlacement, ExecutorOptions, ShardContext, ShardHandle};
use comet_rt::shutdown::{RemoteStop, StopSignal};
use comet_rt::task_class::{spawn, TaskClass};
use comet_rt::ShardId;
use thiserror::Error;

pub use config::NamesrvConfig;
use kv_config::{KvConfig, KvError};
use processor::{dispatch_table, NameServerState};
use route_table::RouteTable;

/// Why the name server cannot start.
#[derive(Debug, Error)]
pub enum NameServerError {
    /// The KV config file is unreadable.
    #[error(transparent)]
    Kv(#[from] KvError),
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// The listener cannot bind.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
    /// The TLS certificate or key cannot be used.
    #[error("TLS: {0}")]
    Tls(#[from] comet_net::TlsError),
    /// The controller cannot start.
    #[error(transparent)]
    Controller(#[from] controller::service::ControllerError),
    /// The executor cannot start.
    #[error(transparent)]
    Pool(#[from] comet_rt::pool::PoolError),
}

/// A name server on the current shard, ready to serve.
pub struct NameServer {
    state: Rc<NameServerState>,
    /// The controller (`enableControllerInNamesrv`), bound and recovered.
    controller: Option<controller::service::ControllerService>,
    shard: ShardId,
    tls: ServerTls,
    /// The web console's listener (`consoleListenPort`), bound by [`start_on_shard`].
    console: Option<Listener>,
}

impl NameServer {
    /// Loads the KV store and builds the empty route table. Must run on the serving shard.
    pub fn new(config: NamesrvConfig, shard: ShardId) -> Result<NameServer, NameServerError> {
        config.validate()?;
        // Loaded here so a bad certificate or key stops the start with its reason.
        let tls = ServerTls::new(&config.server_tls_settings())?;
        let kv = KvConfig::load(&config.kv_config_path)?;
        let state = NameServerState {
            routes: RefCell::new(RouteTable::new()),
            kv: RefCell::new(kv),
            config: RefCell::new(config),
        };
        Ok(NameServer {
            state: Rc::new(state),
            controller: None,
            shard,
            tls,
            console: None,
        })
    }

    /// The shard-owned state (for embedding code and tests).
    pub fn state(&self) -> &Rc<NameServerState> {
        &self.state
    }

    /// Where the web console listens, when `consoleListenPort` turns it on.
    pub fn console_addr(&self) -> Option<SocketAddr> {
        self.console.as_ref().map(Listener::local_addr)
    }

    /// The address the configuration asks to listen on.
    pub fn listen_addr(&self) -> SocketAddr {
        let config = self.state.config.borrow();
        SocketAddr::new(config.bind_address, config.listen_port)
    }

    /// Serves on `listener` until `stop`, with the liveness scan running beside it.
    pub async fn run(self, listener: Listener, stop: StopSignal) {
        let config = self.state.config.borrow().clone();
        let server_config = ServerConfig {
            connections_max: config.connections_max,
            frame_bytes_max: config.frame_bytes_max,
            inflight_requests_max: limits::INFLIGHT_REQUESTS_PER_CONNECTION_MAX,
            task_class: TaskClass::NameServer,
            ..ServerConfig::default()
        };
        let mut server = Server::new(self.shard, dispatch_table(&self.state), server_config);
        server.set_tls(self.tls.clone());
        let closed_state = self.state.clone();
        server.on_connection_closed(Rc::new(move |connection| {
            housekeeping::connection_closed(&closed_state, connection);
        }));
        let scan = spawn(
            TaskClass::Housekeeping,
            housekeeping::scan_loop(self.state.clone(), stop.clone()),
        );
        let console = self.console.map(|listener| {
            let console = console::Console::new(self.state.clone());
            spawn(
                TaskClass::Admin,
                console::serve(console, listener, stop.clone()),
            )
        });
        let controller = self.controller.map(|controller| {
            let run = controller.run(self.shard, config.connections_max, stop.clone());
            spawn(TaskClass::Admin, run)
        });
        server.serve(listener, stop).await;
        if let Some(controller) = controller {
            controller.await;
        }
        if let Some(console) = console {
            console.await;
        }
        scan.await;
    }
}

/// A name server running on its own executor thread.
pub struct NameServerThread {
    addr: SocketAddr,
    stop: RemoteStop,
    handle: Option<ShardHandle<()>>,
}

impl NameServerThread {
    /// Starts a name server on a new executor thread and returns once it listens.
    pub fn spawn(config: NamesrvConfig) -> Result<NameServerThread, NameServerError> {
        NameServerThread::spawn_stopped_by(config, RemoteStop::new())
    }

    /// As [`NameServerThread::spawn`], stopping when `stop` is requested as well (the binary
    /// passes the handle its signal thread trips).
    pub fn spawn_stopped_by(
        config: NamesrvConfig,
        stop: RemoteStop,
    ) -> Result<NameServerThread, NameServerError> {
        let remote = stop.clone();
        let (ready_sender, ready_receiver) = std::sync::mpsc::channel();
        let context = ShardContext {
            shard: ShardId(0),
            shard_count: 1,
        };
        let options = ExecutorOptions {
            name: "namesrv".to_owned(),
            ..ExecutorOptions::default()
        };
        let handle = spawn_shard(
            &options,
            CpuPlacement::Unbound,
            context,
            move |context| async move {
                let started = start_on_shard(config, context.shard);
                let (name_server, listener) = match started {
                    Ok(started) => started,
                    Err(error) => {
                        let _ = ready_sender.send(Err(error));
                        return;
                    }
                };
                let _ = ready_sender.send(Ok(listener.local_addr()));
                let signal = StopSignal::new();
                signal.follow(remote);
                name_server.run(listener, signal).await;
            },
        )?;
        let addr = ready_receiver.recv().map_err(|_| NameServerError::Bind {
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            source: io::Error::other("name-server thread ended before listening"),
        })??;
        Ok(NameServerThread {
            addr,
            stop,
            handle: Some(handle),
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops it and waits for its thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    /// Blocks until the name server stops (binaries).
    pub fn wait(mut self) -> Result<(), NameServerError> {
        match self.handle.take() {
            Some(handle) => handle.join().map_err(NameServerError::from),
            None => Ok(()),
        }
    }

    fn shutdown(&mut self) {
        self.stop.request();
        if let Some(handle) = self.handle.take() {
            if let Err(error) = handle.join() {
                log::error!("name-server thread: {error}");
            }
        }
    }
}

impl Drop for NameServerThread {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Builds the name server and binds its listener on the current shard.
pub fn start_on_shard(
    config: NamesrvConfig,
    shard: ShardId,
) -> Result<(NameServer, Listener), NameServerError> {
    let mut name_server = NameServer::new(config, shard)?;
    let config = name_server.state.config.borrow().clone();
    if config.enable_controller_in_namesrv {
        let controller = controller::service::ControllerService::prepare(&config)?;
        name_server.controller = Some(controller);
    }
    let addr = name_server.listen_addr();
    // Listeners carry SO_REUSEPORT: refuse a port another name server already serves.
    comet_rt::net::ensure_port_free(addr)
        .map_err(|source| NameServerError::Bind { addr, source })?;
    let listener = Listener::bind(addr).map_err(|source| NameServerError::Bind { addr, source })?;
    if config.console_listen_port != 0 {
        let addr = SocketAddr::new(config.bind_address, config.console_listen_port);
        comet_rt::net::ensure_port_free(addr)
            .map_err(|source| NameServerError::Bind { addr, source })?;
        let console =
            Listener::bind(addr).map_err(|source| NameServerError::Bind { addr, source })?;
        name_server.console = Some(console);
    }
    Ok((name_server, listener))
}
