//! Polls a topic with the lite pull consumer and commits manually after each batch.
//!
//! ```text
//! cargo run -p comet-client --example lite_pull_consumer -- --namesrv 127.0.0.1:9876
//! ```

mod common;

use std::time::{Duration, Instant};

use comet_client::{
    ClientConfig, ConsumeFromWhere, ConsumerConfig, LitePullConfig, LitePullConsumer,
};

const USAGE: &str = "lite_pull_consumer [--namesrv 127.0.0.1:9876] [--topic TopicTest] \
[--group example_lite] [--seconds 60]";

fn main() -> Result<(), comet_client::ClientError> {
    env_logger::init();
    let args = common::Args::parse(USAGE);
    let client = ClientConfig::with_namesrv(&args.get("namesrv", "127.0.0.1:9876"));
    let mut consumer_config = ConsumerConfig::new(&args.get("group", "example_lite"), client);
    consumer_config.consume_from_where = ConsumeFromWhere::FirstOffset;
    let mut config = LitePullConfig::new(consumer_config);
    config.auto_commit = false;
    let consumer = LitePullConsumer::new(config)?;
    consumer.subscribe(&args.get("topic", "TopicTest"), "*")?;
    consumer.start()?;
    let deadline = Instant::now() + Duration::from_secs(args.number("seconds", 60));
    while Instant::now() < deadline {
        let messages = consumer.poll(Duration::from_secs(1));
        for message in &messages {
            println!(
                "queue {} offset {}: {}",
                message.queue_id,
                message.queue_offset,
                String::from_utf8_lossy(&message.body)
            );
        }
        if !messages.is_empty() {
            consumer.commit()?;
        }
    }
    consumer.shutdown();
    Ok(())
}
