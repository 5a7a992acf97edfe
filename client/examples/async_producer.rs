//! Sends messages from a tokio program with the async producer: one at a time, then many
//! at once from one task, then a batch, then ordered by sharding key, then one-way, and
//! prints each result.
//!
//! ```text
//! cargo run -p comet-client --example async_producer -- --namesrv 127.0.0.1:9876
//! ```
//!
//! The producer starts no thread: its connections run as tasks on this program's runtime.

mod common;

use comet_client::{AsyncProducer, ClientConfig, Message, ProducerConfig, SendResult};

const USAGE: &str = "async_producer [--namesrv 127.0.0.1:9876] [--topic TopicTest] \
[--group example_async_producer] [--count 10]";

fn print(what: &str, result: &SendResult) {
    println!(
        "{what} {} msgId={} queue={}:{} queueOffset={}",
        result.status.name(),
        result.msg_id,
        result.queue.broker_name,
        result.queue.queue_id,
        result.queue_offset
    );
}

#[tokio::main]
async fn main() -> Result<(), comet_client::ClientError> {
    env_logger::init();
    let args = common::Args::parse(USAGE);
    let topic = args.get("topic", "TopicTest");
    let client = ClientConfig::with_namesrv(&args.get("namesrv", "127.0.0.1:9876"));
    let group = args.get("group", "example_async_producer");
    let producer = AsyncProducer::new(ProducerConfig::new(&group, client))?;
    let count = args.number("count", 10);

    for index in 0..count {
        let message = Message::new(topic.as_str(), format!("Hello async {index}"));
        match producer.send(message).await {
            Ok(result) => print("send", &result),
            Err(error) => eprintln!("send {index} failed: {error}"),
        }
    }

    // Many sends in flight from one task: each is a future, none needs a thread.
    let sends = (0..count).map(|index| {
        producer.send(Message::new(
            topic.as_str(),
            format!("Hello concurrent {index}"),
        ))
    });
    for outcome in futures::future::join_all(sends).await {
        match outcome {
            Ok(result) => print("concurrent", &result),
            Err(error) => eprintln!("concurrent send failed: {error}"),
        }
    }

    let batch = (0..count)
        .map(|index| Message::new(topic.as_str(), format!("Hello batch {index}")))
        .collect();
    for result in producer.send_batch(batch).await? {
        print("batch", &result);
    }

    // Ordered: one sharding key, one queue.
    for index in 0..count {
        let order = format!("order-{}", index % 3);
        let message = Message::new(topic.as_str(), format!("Hello ordered {index}"));
        match producer.send_orderly(message, &order).await {
            Ok(result) => print(&order, &result),
            Err(error) => eprintln!("ordered send {index} failed: {error}"),
        }
    }

    // One-way: resolves once queued on the connection; no result.
    producer
        .send_oneway(Message::new(topic.as_str(), "Hello one-way"))
        .await?;
    producer.shutdown();
    Ok(())
}
