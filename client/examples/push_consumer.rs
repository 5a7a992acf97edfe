//! Consumes a topic with a concurrent listener until Ctrl-C or `--seconds` elapse.
//!
//! ```text
//! cargo run -p comet-client --example push_consumer -- --namesrv 127.0.0.1:9876 --topic TopicTest
//! ```

mod common;

use std::time::Duration;

use comet_client::{
    ClientConfig, ConsumeConcurrentlyStatus, ConsumeFromWhere, ConsumerConfig, MessageListener,
    PushConsumer, PushConsumerConfig,
};

const USAGE: &str = "push_consumer [--namesrv 127.0.0.1:9876] [--topic TopicTest] \
[--group example_push] [--expression '*'] [--seconds 60]";

fn main() -> Result<(), comet_client::ClientError> {
    env_logger::init();
    let args = common::Args::parse(USAGE);
    let client = ClientConfig::with_namesrv(&args.get("namesrv", "127.0.0.1:9876"));
    let mut config = ConsumerConfig::new(&args.get("group", "example_push"), client);
    config.consume_from_where = ConsumeFromWhere::FirstOffset;
    let listener = MessageListener::concurrently(|messages, queue| {
        for message in messages {
            println!(
                "{}:{} offset={} msgId={} tags={:?} body={}",
                queue.broker_name,
                queue.queue_id,
                message.queue_offset,
                message.client_msg_id(),
                message.tags(),
                String::from_utf8_lossy(&message.body)
            );
        }
        ConsumeConcurrentlyStatus::ConsumeSuccess
    });
    let consumer = PushConsumer::new(PushConsumerConfig::new(config), listener)?;
    consumer.subscribe(
        &args.get("topic", "TopicTest"),
        &args.get("expression", "*"),
    )?;
    consumer.start()?;
    println!("consumer {} started", consumer.client_id());
    std::thread::sleep(Duration::from_secs(args.number("seconds", 60)));
    consumer.shutdown();
    Ok(())
}
