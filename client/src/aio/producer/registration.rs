//! How an async producer makes brokers able to find it: heartbeats naming its group
//! (Java's `MQClientInstance.sendHeartbeatToAllBrokerWithLock` for producers).
//!
//! A broker pushes a request's reply (PUSH_REPLY_MESSAGE_TO_CLIENT) to the connection of the
//! producer registered under the request's `REPLY_TO_CLIENT`, and sends a transaction's
//! check-back (CHECK_TRANSACTION_STATE) to a connection registered under the half's producer
//! group; both registrations come from heartbeats. Plain sends need neither, so a producer
//! registers only once something needs it ([`Inner::register`]): then it
//! * heartbeats every master broker its routes name that has had no heartbeat yet, and all
//!   of them again when the transport opened a connection since (a broker forgets a client's
//!   registration with the connection it came on);
//! * starts one task that heartbeats every known master every `heartbeat_broker_interval`
//!   (30 s), holding the producer weakly: it ends with the producer or its shutdown.
//!
//! A producer registered up front (`AsyncProducer::register`, what the blocking
//! `Producer::start` does, as Java's producer `start`) also heartbeats every known master
//! again as soon as a send finds that the transport opened a connection since the last
//! heartbeat: a broker met for the first time lists the client among the group's producers
//! after its first send, not 30 s later. The check costs a send two atomic loads.
//! [`Inner::unregister`] sends UNREGISTER_CLIENT for the group to every known broker.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use comet_proto::body::JsonBody;
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::Inner;
use crate::instance::CLIENT_INNER_PRODUCER_GROUP;
use crate::protocol::{self, HeartbeatData, ProducerData};
use crate::route::MASTER_ID;
use crate::util::lock;

/// The registration state of one async producer.
#[derive(Default)]
pub(crate) struct Registration {
    /// Broker addresses a heartbeat went to.
    heartbeated: Mutex<BTreeSet<String>>,
    /// The transport's connection count at the last full heartbeat.
    connects_seen: AtomicU64,
    /// The periodic heartbeat task, once started.
    task: Mutex<Option<JoinHandle<()>>>,
    /// Registered up front: sends wake the heartbeat task after a new connection.
    up_front: AtomicBool,
    /// Wakes the heartbeat task before its interval ends (shared with it, so the task
    /// holds the producer only weakly while it waits).
    wake: Arc<Notify>,
}

impl Registration {
    /// Stops the periodic heartbeat.
    pub(crate) fn stop(&self) {
        if let Some(task) = lock(&self.task).take() {
            task.abort();
        }
    }

    /// Called by each send with the transport's connection count: wakes the heartbeat task
    /// of a producer registered up front when a connection opened since the last heartbeat
    /// (once: the first caller to see the new count takes it).
    pub(crate) fn after_send(&self, connects: u64) {
        if !self.up_front.load(Ordering::Relaxed) {
            return;
        }
        let seen = self.connects_seen.load(Ordering::Acquire);
        if seen != connects
            && self
                .connects_seen
                .compare_exchange(seen, connects, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            self.wake.notify_one();
        }
    }

    /// Whether the group was registered with the brokers (up front or for a request).
    fn started(&self) -> bool {
        lock(&self.task).is_some()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Inner {
    /// Registers this producer up front (see the module docs): the heartbeat task starts,
    /// every master the routes know gets a heartbeat, and so do all of them again after a
    /// send that opened a connection.
    pub(in crate::aio) async fn register_up_front(self: &Arc<Self>) {
        self.registration.up_front.store(true, Ordering::Relaxed);
        self.register(None).await;
    }

    /// Sends UNREGISTER_CLIENT for the group (and the client's inner producer group, as
    /// Java's producer does) to every broker the routes know, when the group was registered;
    /// a failure is logged. Each waits at most `api_timeout`.
    pub(in crate::aio) async fn unregister(&self) {
        if !self.registration.started() {
            return;
        }
        let mut addrs: Vec<String> = self
            .routes()
            .cache()
            .brokers()
            .values()
            .flat_map(|members| members.values().cloned())
            .collect();
        addrs.sort();
        addrs.dedup();
        let client_id = self.client_id.as_str();
        for addr in addrs {
            for group in [self.config().group.as_str(), CLIENT_INNER_PRODUCER_GROUP] {
                let request = protocol::unregister_client(client_id, Some(group), None);
                if let Err(error) = self
                    .routes()
                    .invoke_broker(&addr, request, &[ResponseCode::SUCCESS])
                    .await
                {
                    log::debug!("unregister of {group} from {addr} failed: {error}");
                }
            }
        }
    }

    /// Registers this producer with the brokers (see the module docs): with `topic`, its
    /// publish route is fetched first so its brokers are among them. A failed heartbeat is
    /// logged: the periodic one tries again.
    pub(in crate::aio) async fn register(self: &Arc<Self>, topic: Option<&str>) {
        if self.check_running().is_err() {
            return;
        }
        {
            let mut task = lock(&self.registration.task);
            if task.is_none() {
                let weak = Arc::downgrade(self);
                let interval = self.config().client.heartbeat_broker_interval;
                *task = Some(tokio::spawn(heartbeat_loop(weak, interval)));
            }
        }
        if let Some(topic) = topic {
            if let Err(error) = self.publish_route(topic).await {
                log::debug!("route of {topic} not fetched for registration: {error}");
            }
        }
        let connects = self.transport().connects();
        let reconnected = self
            .registration
            .connects_seen
            .swap(connects, Ordering::AcqRel)
            != connects;
        let addrs: Vec<String> = if reconnected {
            self.master_addrs()
        } else {
            let heartbeated = lock(&self.registration.heartbeated);
            self.master_addrs()
                .into_iter()
                .filter(|addr| !heartbeated.contains(addr))
                .collect()
        };
        self.heartbeat(addrs).await;
    }

    /// Every master broker the routes know (producers heartbeat masters only, as Java's).
    fn master_addrs(&self) -> Vec<String> {
        let mut addrs: Vec<String> = self
            .routes()
            .cache()
            .brokers()
            .values()
            .filter_map(|members| members.get(&MASTER_ID).cloned())
            .collect();
        addrs.sort();
        addrs.dedup();
        addrs
    }

    fn heartbeat_data(&self) -> HeartbeatData {
        HeartbeatData {
            client_id: self.client_id.clone(),
            producer_data_set: vec![
                ProducerData {
                    group_name: self.config().group.clone(),
                },
                ProducerData {
                    group_name: CLIENT_INNER_PRODUCER_GROUP.into(),
                },
            ],
            consumer_data_set: Vec::new(),
            heartbeat_fingerprint: 0,
            without_sub: false,
        }
    }

    async fn heartbeat(&self, addrs: Vec<String>) {
        if addrs.is_empty() {
            return;
        }
        let body = self.heartbeat_data().encode();
        for addr in addrs {
            let request =
                RemotingCommand::request(RequestCode::HEART_BEAT, 0).with_body(body.clone());
            match self
                .routes()
                .invoke_broker(&addr, request, &[ResponseCode::SUCCESS])
                .await
            {
                Ok(_) => {
                    lock(&self.registration.heartbeated).insert(addr);
                }
                Err(error) => log::warn!("producer heartbeat to {addr} failed: {error}"),
            }
        }
    }
}

/// Heartbeats every known master each `interval`, or sooner when a send wakes it, while the
/// producer lives and runs.
async fn heartbeat_loop(producer: Weak<Inner>, interval: std::time::Duration) {
    loop {
        let wake = match producer.upgrade() {
            Some(inner) => inner.registration.wake.clone(),
            None => return,
        };
        let woken = tokio::time::timeout(interval, wake.notified())
            .await
            .is_ok();
        let Some(inner) = producer.upgrade() else {
            return;
        };
        if inner.check_running().is_err() {
            return;
        }
        if !woken {
            inner
                .registration
                .connects_seen
                .store(inner.transport().connects(), Ordering::Release);
        }
        inner.heartbeat(inner.master_addrs()).await;
    }
}
