//! Records what one consumer member received, in the order its listener saw it.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use comet_client::{ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, MessageExt, MessageListener};

use crate::check::cid;

#[derive(Default)]
struct State {
    got: Vec<MessageExt>,
    distinct: HashSet<String>,
    first_arrival: HashMap<String, Instant>,
}

/// The arrivals of one member; shared with its listener.
#[derive(Default)]
pub struct Collector {
    state: Mutex<State>,
}

impl Collector {
    /// An empty collector.
    pub fn new() -> Arc<Collector> {
        Arc::new(Collector::default())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records a delivered batch.
    pub fn add(&self, messages: &[MessageExt]) {
        let now = Instant::now();
        let mut state = self.lock();
        for message in messages {
            let id = cid(message).to_owned();
            state.first_arrival.entry(id.clone()).or_insert(now);
            state.distinct.insert(id);
            state.got.push(message.clone());
        }
    }

    /// Distinct messages received (by `cid`).
    pub fn distinct_count(&self) -> usize {
        self.lock().distinct.len()
    }

    /// The distinct `cid`s received.
    pub fn distinct(&self) -> HashSet<String> {
        self.lock().distinct.clone()
    }

    /// Every delivery so far, duplicates included, in arrival order.
    pub fn arrivals(&self) -> Vec<MessageExt> {
        self.lock().got.clone()
    }

    /// When the message with this `cid` first arrived.
    pub fn first_arrival(&self, id: &str) -> Option<Instant> {
        self.lock().first_arrival.get(id).copied()
    }

    /// A concurrent listener that records and acknowledges everything.
    pub fn concurrently(self: &Arc<Self>) -> MessageListener {
        let collector = self.clone();
        MessageListener::concurrently(move |messages, _queue| {
            collector.add(messages);
            ConsumeConcurrentlyStatus::ConsumeSuccess
        })
    }

    /// An orderly listener that records and acknowledges everything.
    pub fn orderly(self: &Arc<Self>) -> MessageListener {
        let collector = self.clone();
        MessageListener::orderly(move |messages, _queue| {
            collector.add(messages);
            ConsumeOrderlyStatus::Success
        })
    }
}
