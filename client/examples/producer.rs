//! Sends messages synchronously, then asynchronously, and prints each result.
//!
//! ```text
//! cargo run -p comet-client --example producer -- --namesrv 127.0.0.1:9876 --topic TopicTest
//! ```

mod common;

use std::time::Duration;

use comet_client::{ClientConfig, Message, Producer, ProducerConfig};

const USAGE: &str = "producer [--namesrv 127.0.0.1:9876] [--topic TopicTest] \
[--group example_producer] [--count 10] [--tags TagA]";

fn main() -> Result<(), comet_client::ClientError> {
    env_logger::init();
    let args = common::Args::parse(USAGE);
    let topic = args.get("topic", "TopicTest");
    let client = ClientConfig::with_namesrv(&args.get("namesrv", "127.0.0.1:9876"));
    let producer = Producer::new(ProducerConfig::new(
        &args.get("group", "example_producer"),
        client,
    ))?;
    producer.start()?;
    let count = args.number("count", 10);
    for index in 0..count {
        let message = Message::new(topic.as_str(), format!("Hello Comet {index}"))
            .with_tags(args.get("tags", "TagA"))
            .with_keys([format!("key-{index}")]);
        match producer.send(message) {
            Ok(result) => println!(
                "{} msgId={} offsetMsgId={} queue={}:{} queueOffset={}",
                result.status.name(),
                result.msg_id,
                result.offset_msg_id,
                result.queue.broker_name,
                result.queue.queue_id,
                result.queue_offset
            ),
            Err(error) => eprintln!("send {index} failed: {error}"),
        }
    }
    let futures: Vec<_> = (0..count)
        .filter_map(|index| {
            let message = Message::new(topic.as_str(), format!("Hello async {index}"));
            producer.send_async_future(message).ok()
        })
        .collect();
    for future in futures {
        match future.wait() {
            Ok(result) => println!("async {} msgId={}", result.status.name(), result.msg_id),
            Err(error) => eprintln!("async send failed: {error}"),
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    producer.shutdown();
    Ok(())
}
