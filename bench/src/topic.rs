//! Topic preparation: create (or update) a topic on every master the name server knows, and
//! wait until the name server serves its route, so the run does not start on the
//! auto-create path.

use std::time::{Duration, Instant};

use comet_client::{Admin, ClientConfig, TopicSpec};

use crate::error::{BenchError, Result};

/// How long the route of a new topic may take to appear at the name server.
const ROUTE_WAIT: Duration = Duration::from_secs(15);

/// Creates `topic` with `queues` read and write queues on every master, then waits for its
/// route.
pub fn ensure_topic(client: &ClientConfig, topic: &str, queues: i32) -> Result<()> {
    ensure_topics(client, &[topic.to_string()], queues)
}

/// [`ensure_topic`] for each of `topics`, through one admin client.
pub fn ensure_topics(client: &ClientConfig, topics: &[String], queues: i32) -> Result<()> {
    assert!(queues > 0, "a topic has at least one queue");
    let admin = Admin::new(client.clone())?;
    let outcome = topics
        .iter()
        .try_for_each(|topic| create_and_wait(&admin, topic, queues));
    admin.shutdown();
    outcome
}

fn create_and_wait(admin: &Admin, topic: &str, queues: i32) -> Result<()> {
    let deadline = Instant::now() + ROUTE_WAIT;
    // A broker that just started may not have registered yet.
    let masters = loop {
        let masters = admin.cluster_masters(None).unwrap_or_default();
        if !masters.is_empty() {
            break masters;
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Args(format!(
                "no broker registered with the name server within {ROUTE_WAIT:?}, \
                 cannot create {topic}"
            )));
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let spec = TopicSpec::new(topic, queues);
    for address in &masters {
        admin.create_topic_on_broker(address, &spec)?;
    }
    loop {
        match admin.topic_route(topic) {
            Ok(_) => return Ok(()),
            Err(error) if Instant::now() >= deadline => return Err(error.into()),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

/// Commits `group`'s offsets on every queue of `topic` at the queue's end, so a consumer of
/// that group starts there, not at an old backlog.
pub fn commit_group_at_end(client: &ClientConfig, group: &str, topic: &str) -> Result<()> {
    let admin = Admin::new(client.clone())?;
    let outcome = admin.commit_group_offsets_at_end(group, topic);
    admin.shutdown();
    outcome.map(drop).map_err(Into::into)
}
