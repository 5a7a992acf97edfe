//! Consumes from a tokio program with the async push consumer: the listener is an async
//! closure (here it awaits a timer, standing for a database write or an HTTP call), the
//! consumer's pulls and consumption are tasks of this program's runtime, and it stops after
//! `--seconds`, committing what was consumed.
//!
//! ```text
//! cargo run -p comet-client --example async_push_consumer -- --namesrv 127.0.0.1:9876
//! ```
//!
//! The consumer starts no thread, whatever the number of queues it is given.

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use comet_client::{
    AsyncMessageListener, AsyncPushConsumer, AsyncPushConsumerConfig, ClientConfig,
    ConsumeConcurrentlyStatus, ConsumeFromWhere, ConsumerConfig,
};

const USAGE: &str = "async_push_consumer [--namesrv 127.0.0.1:9876] [--topic TopicTest] \
[--group example_async_push_consumer] [--seconds 30] [--concurrency 20]";

#[tokio::main]
async fn main() -> Result<(), comet_client::ClientError> {
    env_logger::init();
    let args = common::Args::parse(USAGE);
    let topic = args.get("topic", "TopicTest");
    let client = ClientConfig::with_namesrv(&args.get("namesrv", "127.0.0.1:9876"));
    let group = args.get("group", "example_async_push_consumer");
    let mut consumer_config = ConsumerConfig::new(&group, client);
    consumer_config.consume_from_where = ConsumeFromWhere::FirstOffset;
    let mut config = AsyncPushConsumerConfig::new(consumer_config);
    // Listener calls running at once (Java's consumeThreadMin): here tasks, not threads.
    let concurrency = usize::try_from(args.number("concurrency", 20)).unwrap_or(20);
    config.consume_thread_min = concurrency;
    config.consume_thread_max = concurrency;

    let consumed = Arc::new(AtomicU64::new(0));
    let counter = consumed.clone();
    let listener = AsyncMessageListener::concurrently(move |messages, queue| {
        let counter = counter.clone();
        async move {
            // Any awaiting work goes here; returning ReconsumeLater (or panicking) sends the
            // messages back for a later redelivery.
            tokio::time::sleep(Duration::from_millis(1)).await;
            for message in &messages {
                println!(
                    "{}:{} offset={} body={}",
                    queue.broker_name,
                    queue.queue_id,
                    message.queue_offset,
                    String::from_utf8_lossy(&message.body)
                );
            }
            counter.fetch_add(messages.len() as u64, Ordering::Relaxed);
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    });
    let consumer = AsyncPushConsumer::new(config, listener)?;
    consumer.subscribe(&topic, "*")?;
    consumer.start().await?;
    tokio::time::sleep(Duration::from_secs(args.number("seconds", 30))).await;
    // Dropping the consumer would shut it down too (as a task of this runtime); awaiting
    // shutdown makes sure the offsets are persisted before the program exits.
    consumer.shutdown().await;
    println!("consumed {} messages", consumed.load(Ordering::Relaxed));
    Ok(())
}
