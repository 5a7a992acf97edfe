//! Consumes a topic in per-queue order (queues locked on the broker), printing each queue's
//! offsets as they arrive. Pair it with ordered sends (`Producer::send_orderly`).
//!
//! ```text
//! cargo run -p comet-client --example orderly_consumer -- --namesrv 127.0.0.1:9876
//! ```

mod common;

use std::time::Duration;

use comet_client::{
    ClientConfig, ConsumeFromWhere, ConsumeOrderlyStatus, ConsumerConfig, MessageListener,
    PushConsumer, PushConsumerConfig,
};

const USAGE: &str = "orderly_consumer [--namesrv 127.0.0.1:9876] [--topic TopicTest] \
[--group example_orderly] [--seconds 60]";

fn main() -> Result<(), comet_client::ClientError> {
    env_logger::init();
    let args = common::Args::parse(USAGE);
    let client = ClientConfig::with_namesrv(&args.get("namesrv", "127.0.0.1:9876"));
    let mut config = ConsumerConfig::new(&args.get("group", "example_orderly"), client);
    config.consume_from_where = ConsumeFromWhere::FirstOffset;
    let listener = MessageListener::orderly(|messages, queue| {
        for message in messages {
            println!(
                "queue {} offset {}: {}",
                queue.queue_id,
                message.queue_offset,
                String::from_utf8_lossy(&message.body)
            );
        }
        ConsumeOrderlyStatus::Success
    });
    let consumer = PushConsumer::new(PushConsumerConfig::new(config), listener)?;
    consumer.subscribe(&args.get("topic", "TopicTest"), "*")?;
    consumer.start()?;
    std::thread::sleep(Duration::from_secs(args.number("seconds", 60)));
    consumer.shutdown();
    Ok(())
}
