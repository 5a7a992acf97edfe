//! What the consumers share (the async ones, under which the blocking ones run): a
//! subscription, the client-side re-filter of pulled messages, the heartbeat entry and the
//! GET_CONSUMER_RUNNING_INFO answer (docs/protocol.md#push-consumer-conversation).

use std::collections::BTreeMap;

use comet_proto::body::{
    ConsumerRunningInfo, ProcessQueueInfo, PROP_CLIENT_VERSION, PROP_CONSUMER_START_TIMESTAMP,
    PROP_CONSUME_ORDERLY, PROP_CONSUME_TYPE, PROP_NAMESERVER_ADDR,
};
use comet_proto::filter::{TagSubscription, EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG};
use comet_proto::message::MessageExt;
use comet_proto::properties::names;

use super::process_queue::ProcessQueue;
use super::{retry_topic, ConsumeFromWhere, ConsumerConfig, MessageModel};
use crate::config::now_ms;
use crate::error::{ClientError, Result};
use crate::message::MessageQueue;
use crate::protocol::{
    ConsumeType, ConsumerData, PullResponseHeader, SubscriptionData, WireConsumeFromWhere,
    WireMessageModel,
};

/// How a subscription selects messages (Java's `ExpressionType`).
#[derive(Clone, Debug)]
pub(crate) enum Filter {
    /// A tag expression: the broker filters by tag hash code, the client again by tag.
    Tag(TagSubscription),
    /// A SQL92 selector over the message properties (Java's `MessageSelector.bySql`): the
    /// broker alone filters (it needs `enablePropertyFilter=true`); the client takes what
    /// it is given and never reads the expression as tags.
    Sql92(String),
}

/// One subscribed topic.
#[derive(Clone, Debug)]
pub(crate) struct Subscription {
    pub filter: Filter,
    pub sub_version: i64,
}

impl Subscription {
    /// A tag subscription (`*`, `TagA || TagB`).
    pub fn tag(expression: &str) -> Subscription {
        Subscription {
            filter: Filter::Tag(TagSubscription::parse(Some(expression))),
            sub_version: now_ms(),
        }
    }

    /// Every message of the topic.
    pub fn all() -> Subscription {
        Subscription {
            filter: Filter::Tag(TagSubscription::all()),
            sub_version: now_ms(),
        }
    }

    /// A SQL92 subscription; an expression that does not compile is refused here, with the
    /// broker's own error text, rather than at every pull.
    pub fn sql92(expression: &str) -> Result<Subscription> {
        let expression = expression.trim();
        if expression.is_empty() {
            return Err(ClientError::Invalid(
                "a SQL92 subscription needs an expression".into(),
            ));
        }
        if let Err(error) = comet_proto::sql92::Selector::compile(expression) {
            return Err(ClientError::Invalid(format!(
                "SQL92 expression {expression:?} does not compile: {error}"
            )));
        }
        Ok(Subscription {
            filter: Filter::Sql92(expression.to_owned()),
            sub_version: now_ms(),
        })
    }

    /// The expression as sent to the broker (`subString`).
    pub fn expression(&self) -> &str {
        match &self.filter {
            Filter::Tag(tags) => tags.expression(),
            Filter::Sql92(expression) => expression,
        }
    }

    /// The expression type as sent to the broker (`expressionType`).
    pub fn expression_type(&self) -> &'static str {
        match &self.filter {
            Filter::Tag(_) => EXPRESSION_TYPE_TAG,
            Filter::Sql92(_) => EXPRESSION_TYPE_SQL92,
        }
    }

    /// The client-side re-filter: tags for a tag subscription; a SQL92 one keeps every
    /// message the broker selected.
    pub fn matches(&self, message: &MessageExt) -> bool {
        match &self.filter {
            Filter::Tag(tags) => tags.matches_tags(message.tags()),
            Filter::Sql92(_) => true,
        }
    }
}

/// Client-side tag re-filter of pulled messages
/// (docs/protocol.md#tags-and-subscription-expressions): drops what lies before the requested
/// offset or does not match the tags, restores the original topic of retry-topic messages, and
/// sets MIN/MAX_OFFSET from the pull answer.
pub(crate) fn filter_pulled(
    group: &str,
    messages: Vec<MessageExt>,
    subscription: &Subscription,
    header: &PullResponseHeader,
    requested: i64,
) -> Vec<MessageExt> {
    let retry = retry_topic(group);
    messages
        .into_iter()
        .filter(|message| message.queue_offset >= requested)
        .filter(|message| subscription.matches(message))
        .map(|mut message| {
            message
                .properties
                .insert(names::MIN_OFFSET, header.min_offset.to_string());
            message
                .properties
                .insert(names::MAX_OFFSET, header.max_offset.to_string());
            if message.topic == retry {
                if let Some(original) = message.property(names::RETRY_TOPIC) {
                    message.topic = original.to_owned();
                }
            }
            message
        })
        .collect()
}

/// One queue's line of GET_CONSUMER_RUNNING_INFO.
pub(crate) fn process_queue_info(
    pq: &ProcessQueue,
    commit_offset: Option<i64>,
) -> ProcessQueueInfo {
    let (messages, bytes) = pq.held();
    ProcessQueueInfo {
        commit_offset: commit_offset.unwrap_or(-1),
        cached_msg_count: i32::try_from(messages).unwrap_or(i32::MAX),
        cached_msg_size_in_mib: i32::try_from(bytes / (1024 * 1024)).unwrap_or(i32::MAX),
        dropped: pq.is_dropped(),
        locked: pq.is_locked(),
        ..ProcessQueueInfo::default()
    }
}

/// The GET_CONSUMER_RUNNING_INFO answer of a consumer: what Java's admin tools read (the
/// consume type, orderly, the start time as a long), its settings under their Java field
/// names, its subscriptions and its queues.
pub(crate) fn running_info(
    config: &ConsumerConfig,
    data: ConsumerData,
    orderly: bool,
    started_ms: i64,
    mq_table: BTreeMap<MessageQueue, ProcessQueueInfo>,
) -> ConsumerRunningInfo {
    let text = |value: &str| serde_json::Value::String(value.to_owned());
    let mut properties = BTreeMap::new();
    properties.insert(PROP_CONSUME_TYPE.to_owned(), text(data.consume_type.name()));
    properties.insert(PROP_CONSUME_ORDERLY.to_owned(), text(&orderly.to_string()));
    properties.insert(
        PROP_CONSUMER_START_TIMESTAMP.to_owned(),
        text(&started_ms.to_string()),
    );
    let namesrv = config.client.namesrv_addrs.join(";");
    properties.insert(PROP_NAMESERVER_ADDR.to_owned(), text(&namesrv));
    properties.insert(PROP_CLIENT_VERSION.to_owned(), text("V5_3_3"));
    properties.insert("consumerGroup".to_owned(), text(&config.group));
    properties.insert("messageModel".to_owned(), text(config.message_model.name()));
    properties.insert(
        "consumeFromWhere".to_owned(),
        text(config.consume_from_where.name()),
    );
    ConsumerRunningInfo {
        properties,
        subscription_set: data.subscription_data_set,
        mq_table,
        ..ConsumerRunningInfo::default()
    }
}

/// The heartbeat entry of a consumer with these settings and subscriptions.
pub(crate) fn consumer_data(
    config: &ConsumerConfig,
    subscriptions: &BTreeMap<String, Subscription>,
    consume_type: ConsumeType,
) -> ConsumerData {
    let subscription_data_set = subscriptions
        .iter()
        .map(|(topic, subscription)| {
            // A SQL92 subscription has no tags (Java leaves both sets empty).
            let (tags_set, code_set) = match &subscription.filter {
                Filter::Tag(tags) => (
                    tags.tags().iter().cloned().collect(),
                    tags.codes().iter().copied().collect(),
                ),
                Filter::Sql92(_) => Default::default(),
            };
            SubscriptionData {
                class_filter_mode: false,
                topic: topic.clone(),
                sub_string: subscription.expression().to_owned(),
                tags_set,
                code_set,
                sub_version: subscription.sub_version,
                expression_type: subscription.expression_type().into(),
            }
        })
        .collect();
    ConsumerData {
        group_name: config.group.clone(),
        consume_type,
        message_model: match config.message_model {
            MessageModel::Clustering => WireMessageModel::CLUSTERING,
            MessageModel::Broadcasting => WireMessageModel::BROADCASTING,
        },
        consume_from_where: match config.consume_from_where {
            ConsumeFromWhere::LastOffset => WireConsumeFromWhere::CONSUME_FROM_LAST_OFFSET,
            ConsumeFromWhere::FirstOffset => WireConsumeFromWhere::CONSUME_FROM_FIRST_OFFSET,
            ConsumeFromWhere::Timestamp => WireConsumeFromWhere::CONSUME_FROM_TIMESTAMP,
        },
        subscription_data_set,
        unit_mode: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tagged(offset: i64, tags: &str) -> MessageExt {
        let mut message = crate::consumer::process_queue::tests::message(offset);
        message.properties.insert(names::TAGS, tags);
        message
    }

    fn header() -> PullResponseHeader {
        PullResponseHeader {
            suggest_which_broker_id: 0,
            next_begin_offset: 3,
            min_offset: 0,
            max_offset: 3,
            offset_delta: None,
            topic_sys_flag: None,
            group_sys_flag: None,
            forbidden_type: None,
        }
    }

    // Proves a SQL92 subscription is never read as tags: the client keeps every message the
    // broker selected whatever its tags (a tag subscription drops the others), and its
    // heartbeat entry carries the expression as SQL92 with no tags or codes.
    #[test]
    fn sql92_subscriptions_are_not_tag_filtered() {
        let pulled = vec![tagged(0, "TagA"), tagged(1, "TagB"), tagged(2, "color")];
        let sql = Subscription::sql92("  color = 'red' OR TagA IS NOT NULL ").unwrap();
        assert_eq!(sql.expression(), "color = 'red' OR TagA IS NOT NULL");
        assert_eq!(sql.expression_type(), "SQL92");
        let kept = filter_pulled("cg", pulled.clone(), &sql, &header(), 0);
        assert_eq!(kept.len(), 3);
        let tags = Subscription::tag("TagA");
        assert_eq!(tags.expression_type(), "TAG");
        let kept = filter_pulled("cg", pulled, &tags, &header(), 0);
        assert_eq!(kept.len(), 1);

        let mut subscriptions = BTreeMap::new();
        subscriptions.insert("T".to_owned(), sql);
        subscriptions.insert("U".to_owned(), tags);
        let config = ConsumerConfig::new("cg", crate::ClientConfig::default());
        let data = consumer_data(&config, &subscriptions, ConsumeType::CONSUME_PASSIVELY);
        let sql_data = &data.subscription_data_set[0];
        assert_eq!(sql_data.topic, "T");
        assert_eq!(sql_data.expression_type, "SQL92");
        assert_eq!(sql_data.sub_string, "color = 'red' OR TagA IS NOT NULL");
        assert!(sql_data.tags_set.is_empty() && sql_data.code_set.is_empty());
        let tag_data = &data.subscription_data_set[1];
        assert_eq!(tag_data.expression_type, "TAG");
        assert!(tag_data.tags_set.contains("TagA"));
    }

    // Proves an expression that does not compile, or an empty one, is refused with a clear
    // error instead of being sent to the broker.
    #[test]
    fn bad_sql92_expressions_are_refused() {
        for bad in ["", "   ", "color = ", "size > 'abc'", "a AND"] {
            let refused = Subscription::sql92(bad);
            assert!(matches!(refused, Err(ClientError::Invalid(_))), "{bad:?}");
        }
    }
}
