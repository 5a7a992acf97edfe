//! `comet-net`: the server side of RocketMQ remoting, shared by the broker and the name server.
//!
//! * [`DispatchTable`]: request code → async [`Processor`]; unknown codes are answered
//!   `REQUEST_CODE_NOT_SUPPORTED`, one-way requests are never answered.
//! * [`Server`]: one shard's accept loop with a connection limit and connection
//!   open/close hooks.
//! * [`ConnectionHandle`]: what processors (and hooks) get: peer address, `send` for late
//!   answers, `invoke` for server-to-client requests awaited by opaque (check transaction
//!   state, running info), `send_oneway` for notifications (consumer ids changed).
//! * [`http`]: the bounded HTTP/1.1 responder of the metrics endpoint and the web console.
//! * [`ServerTls`] ([`tls`]): TLS on the port with RocketMQ's `tls.server.mode` switches
//!   (disabled, permissive, enforcing), set with [`Server::set_tls`].
//!
//! Running on N shards: take a [`comet_rt::net::PortReservation`] for the address (it fixes
//! the port when the address says port 0), start a [`comet_rt::pool::Pool`], and on every
//! shard bind a [`comet_rt::net::Listener`] to the reserved address (`SO_REUSEPORT`), build
//! that shard's `DispatchTable` and run [`Server::serve`]. The kernel spreads connections
//! across shards; each connection lives on the shard that accepted it. Everything here is
//! shard-local (`Rc`), nothing is shared between shards.
//!
//! ```no_run
//! use comet_net::{DispatchTable, Server, ServerConfig};
//! use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
//! use comet_rt::net::{Listener, PortReservation};
//! use comet_rt::pool::{CpuPlacement, ExecutorOptions, Pool, PoolConfig};
//! use comet_rt::shutdown::StopSignal;
//!
//! // Held while serving: it never listens, it only keeps the port number ours.
//! let reservation = PortReservation::new("127.0.0.1:0".parse().unwrap()).unwrap();
//! let addr = reservation.addr();
//! let config = PoolConfig { shard_count: 2, placement: CpuPlacement::Unbound,
//!                           executor: ExecutorOptions::default() };
//! let pool = Pool::start(&config, move |context| async move {
//!     let mut table = DispatchTable::new();
//!     table.register_fn(RequestCode::HEART_BEAT, |_context, request| async move {
//!         Some(RemotingCommand::response_to(&request, ResponseCode::SUCCESS))
//!     });
//!     let server = Server::new(context.shard, table, ServerConfig::default());
//!     server.serve(Listener::bind(addr).unwrap(), StopSignal::new()).await;
//! }).unwrap();
//! pool.join();
//! drop(reservation);
//! ```

pub mod connection;
pub mod dispatch;
pub mod http;
pub mod limits;
pub mod listener;
pub mod request_log;
pub mod tls;

pub use connection::{ConnectionError, ConnectionHandle, ConnectionId, ConnectionLimits};
pub use dispatch::{DispatchTable, LocalBoxFuture, Processor, RequestContext};
pub use listener::{ConnectionHook, Server, ServerConfig};
pub use tls::{ClientAuth, ClientTls, ServerTls, ServerTlsSettings, TlsError, TlsMode, Transport};
