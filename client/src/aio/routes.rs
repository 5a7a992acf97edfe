//! Routes over the async transport for the async consumers: the name servers' fail-over walk
//! ([`NameServers`]), a route cache, and a lazy refresh of routes older than
//! `poll_name_server_interval` (no task of its own). A failed refresh keeps the cached route.

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
    /// Held while a route is fetched, so concurrent lookups cause one fetch.
    fetching: tokio::sync::Mutex<()>,
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
            fetching: tokio::sync::Mutex::new(()),
            api_timeout,
            refresh_interval,
        }
    }

    pub(crate) fn cache(&self) -> &RouteCache {
        &self.cache
    }

    fn is_fresh(&self, topic: &str) -> bool {
        lock(&self.fetched_at)
            .get(topic)
            .is_some_and(|fetched| fetched.elapsed() < self.refresh_interval)
    }

    /// The route of `topic`: the cached one while fresh, else fetched (the stale one is kept
    /// when the fetch fails).
    pub(crate) async fn route(&self, topic: &str) -> Result<Arc<TopicRoute>> {
        if let Some(route) = self.cache.get(topic).filter(|_| self.is_fresh(topic)) {
            return Ok(route);
        }
        let _fetching = self.fetching.lock().await;
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
                    log::debug!("route refresh of {topic} failed, keeping the cached one: {error}");
                    lock(&self.fetched_at).insert(topic.to_owned(), Instant::now());
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
        let _fetching = self.fetching.lock().await;
        if self.cache.master_addr(broker_name).is_none() {
            self.update(topic).await?;
        }
        self.cache
            .master_addr(broker_name)
            .ok_or_else(|| ClientError::BrokerNotFound(broker_name.to_owned()))
    }

    /// Fetches `topic`'s route and caches it; `Ok(None)` when no name server knows it.
    async fn update(&self, topic: &str) -> Result<Option<Arc<TopicRoute>>> {
        let (addr, response) = self.invoke_namesrv(protocol::get_route_info(topic)).await?;
        let fetched = route::route_from_response(&addr, response)?;
        lock(&self.fetched_at).insert(topic.to_owned(), Instant::now());
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
