//! Routes over the async transport, for the async producer and consumers alike: the name
//! servers' fail-over walk ([`NameServers`]), a route cache, and a lazy refresh of routes older
//! than `poll_name_server_interval` (no task of its own). One fetch per topic at a time: the
//! lookups that need it meanwhile wait for it. A failed refresh keeps the cached route.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use comet_proto::{RemotingCommand, ResponseCode};

use super::transport::AsyncTransport;
use crate::error::{ClientError, Result};
use crate::protocol;
use crate::route::{self, NameServers, RouteCache, TopicRoute};
use crate::util::lock;

/// Route lookups of one async client.
pub(crate) struct AsyncRoutes {
    transport: AsyncTransport,
    namesrv: NameServers,
    cache: RouteCache,
    fetched_at: Mutex<HashMap<String, Instant>>,
    /// One lock per topic, held while its route is fetched, so concurrent lookups of a topic
    /// whose route is missing or stale cause one fetch, not one each.
    fetching: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    api_timeout: Duration,
    refresh_interval: Duration,
}

impl AsyncRoutes {
    pub(crate) fn new(
        transport: AsyncTransport,
        namesrv_addrs: Vec<String>,
        api_timeout: Duration,
        refresh_interval: Duration,
    ) -> AsyncRoutes {
        AsyncRoutes {
            transport,
            namesrv: NameServers::new(namesrv_addrs),
            cache: RouteCache::default(),
            fetched_at: Mutex::new(HashMap::new()),
            fetching: Mutex::new(HashMap::new()),
            api_timeout,
            refresh_interval,
        }
    }

    pub(crate) fn cache(&self) -> &RouteCache {
        &self.cache
    }

    /// True when `topic`'s route was fetched (or its fetch failed) less than the refresh
    /// interval ago.
    pub(crate) fn is_fresh(&self, topic: &str) -> bool {
        lock(&self.fetched_at)
            .get(topic)
            .is_some_and(|fetched| fetched.elapsed() < self.refresh_interval)
    }

    /// Makes `topic`'s route count as fresh for an interval: after a failed refresh, so the
    /// lookups queued behind a dead name server do not each wait out a timeout.
    pub(crate) fn mark_fetched(&self, topic: &str) {
        lock(&self.fetched_at).insert(topic.to_owned(), Instant::now());
    }

    /// The lock held while `topic`'s route is fetched.
    pub(crate) fn fetch_lock(&self, topic: &str) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.fetching)
            .entry(topic.to_owned())
            .or_default()
            .clone()
    }

    /// The route of `topic`: the cached one while fresh, else fetched (the stale one is kept
    /// when the fetch fails).
    pub(crate) async fn route(&self, topic: &str) -> Result<Arc<TopicRoute>> {
        if let Some(route) = self.cache.get(topic).filter(|_| self.is_fresh(topic)) {
            return Ok(route);
        }
        let fetching = self.fetch_lock(topic);
        let _fetching = fetching.lock().await;
        let cached = self.cache.get(topic);
        if let Some(route) = cached.clone().filter(|_| self.is_fresh(topic)) {
            return Ok(route);
        }
        match self.update(topic).await {
            Ok(Some(route)) => Ok(route),
            Ok(None) => Err(ClientError::NoRoute {
                topic: topic.to_owned(),
                reason: "unknown to the name servers".into(),
            }),
            Err(error) => match cached {
                Some(route) => {
                    log::warn!("route refresh of {topic} failed, keeping the cached one: {error}");
                    self.mark_fetched(topic);
                    Ok(route)
                }
                None => Err(error),
            },
        }
    }

    /// The master address of `broker_name`, fetching `topic`'s route once if unknown.
    pub(crate) async fn master_addr(&self, broker_name: &str, topic: &str) -> Result<String> {
        if let Some(addr) = self.cache.master_addr(broker_name) {
            return Ok(addr);
        }
        let fetching = self.fetch_lock(topic);
        let _fetching = fetching.lock().await;
        if self.cache.master_addr(broker_name).is_none() {
            self.update(topic).await?;
        }
        self.cache
            .master_addr(broker_name)
            .ok_or_else(|| ClientError::BrokerNotFound(broker_name.to_owned()))
    }

    /// Refreshes `topic`'s route after a request that started at `failed_at` failed in the
    /// transport, unless another lookup refreshed it since: many requests failing together
    /// (a broker gone) cause one fetch, not one each.
    pub(crate) async fn refresh_after_failure(&self, topic: &str, failed_at: Instant) {
        let fetching = self.fetch_lock(topic);
        let _fetching = fetching.lock().await;
        let refreshed_since = lock(&self.fetched_at)
            .get(topic)
            .is_some_and(|fetched| *fetched > failed_at);
        if refreshed_since {
            return;
        }
        if let Err(error) = self.update(topic).await {
            log::debug!("route refresh of {topic} failed: {error}");
            // The requests queued behind this one take the failure as their refresh too.
            self.mark_fetched(topic);
        }
    }

    /// Fetches `topic`'s route and caches it; `Ok(None)` when no name server knows it. The
    /// caller holds the topic's [`AsyncRoutes::fetch_lock`] when it wants one fetch at a
    /// time.
    pub(crate) async fn update(&self, topic: &str) -> Result<Option<Arc<TopicRoute>>> {
        let (addr, response) = self.invoke_namesrv(protocol::get_route_info(topic)).await?;
        let fetched = route::route_from_response(&addr, response)?;
        self.mark_fetched(topic);
        Ok(fetched.and_then(|data| {
            self.cache.put(topic, data);
            self.cache.get(topic)
        }))
    }

    /// [`NameServers::invoke`]'s fail-over walk over the async transport.
    async fn invoke_namesrv(&self, request: RemotingCommand) -> Result<(String, RemotingCommand)> {
        let mut last_error = None;
        for (index, addr) in self.namesrv.walk() {
            match self
                .transport
                .invoke(addr, request.clone(), self.api_timeout)
                .await
            {
                Ok(response) => {
                    self.namesrv.set_current(index);
                    return Ok((addr.to_owned(), response));
                }
                Err(error) if error.is_transport() => {
                    log::warn!("name server {addr} failed, trying the next one: {error}");
                    last_error = Some(error);
                }
                Err(error) => return Err(error),
            }
        }
        Err(NameServers::all_failed(last_error))
    }

    /// Sends `request` to a broker within the API timeout and fails unless its answer's code
    /// is one of `accepted`.
    pub(crate) async fn invoke_broker(
        &self,
        addr: &str,
        request: RemotingCommand,
        accepted: &[ResponseCode],
    ) -> Result<RemotingCommand> {
        let response = self
            .transport
            .invoke(addr, request, self.api_timeout)
            .await?;
        protocol::expect(addr, response, accepted)
    }
}
