//! Request processing: routing to the owner shard, then the processor for the code.
//!
//! [`handle`] runs on the shard whose connection carried the request. Requests bound to one
//! queue (sends, pulls, offsets) go to the queue's owner; key queries go to every shard (each
//! has its own index); a view by id goes to the shard whose log the offset names; the rest
//! (client management, admin) run in place against the shared metadata, asking each queue's
//! owner for per-queue figures, and broker-wide offset tables are gathered from every shard
//! ([`inspect`]); admin requests a client answers ([`ask_client`]) reach the shard holding
//! the client's connection. [`handle_local`] runs a request on the current shard without
//! routing, and is what a forwarded request runs on its target.

pub mod admin;
pub mod ask_client;
pub mod assignment;
pub mod broker_config;
pub mod client;
pub mod controller;
pub mod end_transaction;
pub mod ha_status;
pub mod inspect;
pub mod offsets;
pub mod pop;
pub mod pop_ack;
pub mod pop_peek;
pub mod pull;
pub mod query;
pub mod queue_figures;
pub mod recall;
pub mod reply;
pub mod send;
pub mod send_back;
pub mod stats;

use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_store::PhysicalOffset;

use crate::routing::{on_owner, on_shard, persist_topics_now, shard_id};
use crate::shard::{RequestContext, ShardBroker};

/// Serves one request that arrived on this shard.
pub async fn handle(
    broker: &ShardBroker,
    context: RequestContext,
    request: RemotingCommand,
) -> Option<RemotingCommand> {
    use RequestCode::*;
    match request.request_code() {
        SEND_MESSAGE
        | SEND_MESSAGE_V2
        | SEND_BATCH_MESSAGE
        | SEND_REPLY_MESSAGE
        | SEND_REPLY_MESSAGE_V2 => {
            let mut request = request;
            match send::route(broker, &mut request) {
                Ok(route) => {
                    if route.topic_created {
                        if let Err(e) = persist_topics_now(broker).await {
                            let remark = format!("cannot persist the new topic: {e}");
                            return Some(RemotingCommand::error_to(
                                &request,
                                ResponseCode::SYSTEM_ERROR,
                                remark,
                            ));
                        }
                    }
                    on_owner(broker, context, &route.topic, route.queue_id, request).await
                }
                Err(response) => Some(response),
            }
        }
        PULL_MESSAGE
        | LITE_PULL_MESSAGE
        | QUERY_CONSUMER_OFFSET
        | UPDATE_CONSUMER_OFFSET
        | GET_MAX_OFFSET
        | GET_MIN_OFFSET
        | SEARCH_OFFSET_BY_TIMESTAMP
        | GET_EARLIEST_MSG_STORETIME
        | QUERY_CONSUME_QUEUE
        | ACK_MESSAGE
        | CHANGE_MESSAGE_INVISIBLETIME
        // With a queue id, one queue's span (the coordinator's per-queue call); without,
        // the whole topic's, gathered where the request arrived.
        | QUERY_CONSUME_TIME_SPAN => {
            match queue_of(&request) {
                Some((topic, queue_id)) => {
                    on_owner(broker, context, &topic, queue_id, request).await
                }
                // No usable topic/queue: the local processor answers with the header error.
                None => handle_local(broker, context, request).await,
            }
        }
        INVOKE_BROKER_TO_RESET_OFFSET => match queue_of(&request) {
            Some((topic, queue_id)) => on_owner(broker, context, &topic, queue_id, request).await,
            None => Some(reset_all_queues(broker, context, request).await),
        },
        QUERY_MESSAGE => Some(query_all_shards(broker, context, request).await),
        // Checked here; the deletion it stores goes to its timer queue's owner.
        RECALL_MESSAGE => Some(recall::process(broker, context, &request).await),
        // Joined from pops of each queue on its owner.
        POP_MESSAGE => Some(pop::process(broker, context, &request).await),
        BATCH_ACK_MESSAGE => Some(pop_ack::batch_ack(broker, context, &request).await),
        // Joined from each queue's owner; polling info from every shard.
        PEEK_MESSAGE => Some(pop_peek::peek(broker, context, &request).await),
        NOTIFICATION => Some(pop_peek::notification(broker, context, &request).await),
        POLLING_INFO => Some(pop_peek::polling_info(broker, context, &request).await),
        GET_BROKER_HA_STATUS => Some(ha_status::gather(broker, context, request).await),
        // Broker-wide admin writes and figures: the shared tables here, each shard's offsets,
        // queues and logs by its own part in `handle_local`.
        DELETE_SUBSCRIPTIONGROUP => Some(admin::delete_group(broker, &request).await),
        DELETE_TOPIC_IN_BROKER => Some(admin::delete_topic(broker, &request).await),
        GET_BROKER_RUNTIME_INFO => Some(admin::runtime_info(broker, &request).await),
        DELETE_EXPIRED_COMMITLOG | CLEAN_EXPIRED_CONSUMEQUEUE | CLEAN_UNUSED_TOPIC => {
            Some(admin::store_maintenance(broker, &request).await)
        }
        // Broker-wide: gathered from (or applied on) every shard; `handle_local` runs the
        // shard's own part.
        GET_ALL_CONSUMER_OFFSET => Some(inspect::all_consumer_offsets(broker, &request).await),
        CLONE_GROUP_OFFSET => Some(inspect::clone_group_offset(broker, context, &request).await),
        VIEW_MESSAGE_BY_ID | CONSUMER_SEND_MSG_BACK | END_TRANSACTION => {
            let key = if request.request_code() == END_TRANSACTION {
                "commitLogOffset"
            } else {
                "offset"
            };
            let offset = request.ext_fields.optional_i64(key).ok().flatten();
            let well_formed =
                offset.is_some_and(|offset| PhysicalOffset::from_i64(offset).is_some());
            match offset.and_then(|offset| query::shard_of_offset(broker, offset)) {
                Some(index) => on_shard(broker, context, shard_id(index), request).await,
                // A log no running shard writes (the core count shrank): its durable segments
                // are readable from every shard, so the message is viewed where it was asked.
                None if well_formed && request.request_code() == VIEW_MESSAGE_BY_ID => {
                    handle_local(broker, context, request).await
                }
                None => Some(RemotingCommand::error_to(
                    &request,
                    ResponseCode::SYSTEM_ERROR,
                    "no message at that offset",
                )),
            }
        }
        _ => handle_local(broker, context, request).await,
    }
}

/// The error answer to `request` with a remark.
pub(crate) fn error(
    request: &RemotingCommand,
    code: ResponseCode,
    remark: impl Into<String>,
) -> RemotingCommand {
    RemotingCommand::error_to(request, code, remark)
}

/// A slave stores only what its master streams: a send is answered SERVICE_NOT_AVAILABLE
/// with Java's remark (Java's `DefaultMessageStore` refuses every put on a slave, and its
/// `SendMessageProcessor` answers so), before any topic is created.
///
/// In controller mode a master whose lease lapsed refuses the same way: the controller may
/// be electing another master, and two must never acknowledge writes.
pub fn slave_refusal(broker: &ShardBroker, request: &RemotingCommand) -> Option<RemotingCommand> {
    if broker.config().broker_role.is_master() {
        if lease_lapsed(broker) {
            return Some(error(
                request,
                ResponseCode::SERVICE_NOT_AVAILABLE,
                "service not available now: the controller has not confirmed this broker as \
                 master recently (controller mode), so it acknowledges no writes",
            ));
        }
        return None;
    }
    Some(error(
        request,
        ResponseCode::SERVICE_NOT_AVAILABLE,
        "service not available now. It may be caused by one of the following reasons: the \
         broker's disk is full, messages are put to the slave, message store has been shut \
         down, etc.",
    ))
}

/// Whether this broker is in controller mode and its master lease has lapsed.
pub fn lease_lapsed(broker: &ShardBroker) -> bool {
    broker
        .controller()
        .is_some_and(|role| !role.lease_valid(comet_rt::clock::monotonic_now()))
}

fn queue_of(request: &RemotingCommand) -> Option<(String, i32)> {
    let topic = request.ext_fields.get("topic")?;
    let queue_id = request.ext_fields.optional_i32("queueId").ok().flatten()?;
    (queue_id >= 0).then(|| (topic.to_owned(), queue_id))
}

/// INVOKE_BROKER_TO_RESET_OFFSET without a queue: every readable queue of the topic is
/// reset on its owner; the answer is the ResetOffsetBody of the new offsets.
async fn reset_all_queues(
    broker: &ShardBroker,
    context: RequestContext,
    request: RemotingCommand,
) -> RemotingCommand {
    let Some(topic) = request.ext_fields.get("topic").map(str::to_owned) else {
        return error(
            &request,
            ResponseCode::SYSTEM_ERROR,
            "missing required header field `topic`",
        );
    };
    let queue_count = broker
        .topics()
        .get(&topic)
        .map(|config| config.read_queue_nums);
    let Some(queue_count) = queue_count else {
        return error(
            &request,
            ResponseCode::TOPIC_NOT_EXIST,
            format!("topic[{topic}] not exist"),
        );
    };
    let mut offset_table = std::collections::BTreeMap::new();
    for queue_id in 0..queue_count {
        let mut per_queue = request.clone();
        per_queue.ext_fields.insert("queueId", queue_id.to_string());
        let Some(response) = on_owner(broker, context, &topic, queue_id, per_queue).await else {
            continue;
        };
        if response.response_code() != ResponseCode::SUCCESS {
            return RemotingCommand {
                opaque: request.opaque,
                ..response
            };
        }
        let offset = response
            .ext_fields
            .optional_i64("offset")
            .ok()
            .flatten()
            .unwrap_or(0);
        let queue = comet_proto::body::MessageQueue {
            topic: topic.clone(),
            broker_name: broker.config().broker_name.clone(),
            queue_id,
        };
        offset_table.insert(queue, offset);
    }
    let body = comet_proto::body::ResetOffsetBody { offset_table };
    RemotingCommand::response_to(&request, ResponseCode::SUCCESS)
        .with_body(comet_proto::body::JsonBody::encode(&body))
}

async fn query_all_shards(
    broker: &ShardBroker,
    context: RequestContext,
    request: RemotingCommand,
) -> RemotingCommand {
    let mut records = Vec::new();
    let mut last = None;
    for index in 0..broker.shard_count() {
        let copy = request.clone();
        let Some(response) = on_shard(broker, context, shard_id(index), copy).await else {
            continue;
        };
        if response.response_code() == ResponseCode::SUCCESS {
            records.push(response.body.clone());
        }
        last = Some(response);
    }
    if records.is_empty() {
        return last.unwrap_or_else(|| {
            RemotingCommand::error_to(&request, ResponseCode::QUERY_NOT_FOUND, "no message found")
        });
    }
    query::found_response(&request, &records)
}

/// Runs `request` on this shard.
pub async fn handle_local(
    broker: &ShardBroker,
    context: RequestContext,
    request: RemotingCommand,
) -> Option<RemotingCommand> {
    use RequestCode::*;
    if request.request_code() == END_TRANSACTION {
        return end_transaction::process(broker, &request).await;
    }
    let response = match request.request_code() {
        SEND_MESSAGE | SEND_MESSAGE_V2 | SEND_BATCH_MESSAGE => {
            send::process(broker, context, request).await
        }
        SEND_REPLY_MESSAGE | SEND_REPLY_MESSAGE_V2 => {
            reply::process(broker, context, request).await
        }
        PULL_MESSAGE | LITE_PULL_MESSAGE => pull::process(broker, request).await,
        POP_MESSAGE => pop::pop_one_queue(broker, &request).await,
        ACK_MESSAGE => pop_ack::ack(broker, &request).await,
        BATCH_ACK_MESSAGE => pop_ack::batch_ack_local(broker, &request).await,
        CHANGE_MESSAGE_INVISIBLETIME => pop_ack::change_invisible_time(broker, &request).await,
        PEEK_MESSAGE => pop_peek::peek_one_queue(broker, &request).await,
        POLLING_INFO => pop_peek::polling_info_local(&request),
        QUERY_CONSUMER_OFFSET => offsets::query_consumer_offset(broker, &request),
        UPDATE_CONSUMER_OFFSET => offsets::update_consumer_offset(broker, &request),
        GET_MAX_OFFSET => offsets::max_offset(broker, &request),
        GET_MIN_OFFSET => offsets::min_offset(broker, &request),
        SEARCH_OFFSET_BY_TIMESTAMP => offsets::search_offset(broker, &request).await,
        GET_EARLIEST_MSG_STORETIME => offsets::earliest_store_time(broker, &request).await,
        INVOKE_BROKER_TO_RESET_OFFSET => offsets::reset_offset_of_queue(broker, &request).await,
        QUERY_MESSAGE => query::query_local(broker, &request).await,
        VIEW_MESSAGE_BY_ID => query::view_local(broker, &request).await,
        CONSUMER_SEND_MSG_BACK => send_back::process(broker, &request).await,
        HEART_BEAT => client::heartbeat(broker, context, &request).await,
        UNREGISTER_CLIENT => client::unregister(broker, &request).await,
        GET_CONSUMER_LIST_BY_GROUP => client::consumer_list(broker, &request),
        LOCK_BATCH_MQ => client::lock_batch(broker, &request),
        UNLOCK_BATCH_MQ => client::unlock_batch(broker, &request),
        CHECK_CLIENT_CONFIG => client::check_client_config(broker, &request),
        UPDATE_AND_CREATE_TOPIC => {
            let response = persisted(broker, admin::create_topic(broker, &request)).await;
            // Registered before the answer, as Java's broker does: 5.x's proxy creates its
            // system topics and looks for their routes at once, and fails at start-up
            // without them.
            if response.response_code() == ResponseCode::SUCCESS {
                let generation = broker.metadata().topics_generation();
                client::wait_registered(broker, generation).await;
            }
            response
        }
        DELETE_TOPIC_IN_BROKER => admin::delete_topic_local(broker, &request).await,
        GET_ALL_TOPIC_CONFIG => admin::all_topic_config(broker, &request),
        GET_SYSTEM_TOPIC_LIST_FROM_BROKER => admin::system_topics(broker, &request),
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => admin::create_group(broker, &request),
        GET_ALL_SUBSCRIPTIONGROUP_CONFIG => admin::all_groups(broker, &request),
        GET_SUBSCRIPTIONGROUP_CONFIG => admin::group_config(broker, &request),
        DELETE_SUBSCRIPTIONGROUP => admin::delete_group_offsets_local(broker, &request),
        GET_TOPIC_STATS_INFO => admin::topic_stats(broker, &request).await,
        GET_CONSUME_STATS => admin::consume_stats(broker, &request).await,
        GET_CONSUMER_CONNECTION_LIST => admin::consumer_connections(broker, &request),
        GET_PRODUCER_CONNECTION_LIST => admin::producer_connections(broker, &request),
        QUERY_TOPIC_CONSUME_BY_WHO => admin::consumed_by_who(broker, &request).await,
        QUERY_TOPICS_BY_CONSUMER => admin::topics_by_consumer(broker, &request).await,
        GET_BROKER_CONFIG => broker_config::get(broker, &request),
        UPDATE_BROKER_CONFIG => broker_config::update(broker, &request).await,
        GET_BROKER_RUNTIME_INFO => admin::runtime_info_local(broker, &request).await,
        DELETE_EXPIRED_COMMITLOG => admin::delete_expired_commit_log_local(broker, &request),
        CLEAN_EXPIRED_CONSUMEQUEUE => admin::clean_expired_queues_local(broker, &request).await,
        CLEAN_UNUSED_TOPIC => admin::clean_unused_topic_local(broker, &request).await,
        GET_BROKER_HA_STATUS => ha_status::local(broker, &request),
        NOTIFY_BROKER_ROLE_CHANGED => controller::notify_role_changed(broker, &request),
        GET_TOPIC_CONFIG => admin::topic_config(broker, &request),
        VIEW_BROKER_STATS_DATA => stats::view(broker, &request),
        GET_CONSUMER_RUNNING_INFO => ask_client::consumer_running_info(broker, &request).await,
        CONSUME_MESSAGE_DIRECTLY => ask_client::consume_message_directly(broker, &request).await,
        INVOKE_BROKER_TO_GET_CONSUMER_STATUS => ask_client::consumer_status(broker, &request).await,
        QUERY_CONSUME_QUEUE => inspect::query_consume_queue(broker, &request),
        QUERY_CONSUME_TIME_SPAN => inspect::consume_time_span(broker, &request).await,
        GET_BROKER_CONSUME_STATS => inspect::broker_consume_stats(broker, &request).await,
        CLONE_GROUP_OFFSET => inspect::clone_group_offset_local(broker, &request),
        GET_ALL_CONSUMER_OFFSET => inspect::local_consumer_offsets(broker, &request),
        GET_ALL_DELAY_OFFSET => inspect::all_delay_offsets(broker, &request).await,
        QUERY_ASSIGNMENT => assignment::query_assignment(broker, &request).await,
        SET_MESSAGE_REQUEST_MODE => assignment::set_message_request_mode(broker, &request).await,
        GET_ALL_MESSAGE_REQUEST_MODE => assignment::all_message_request_modes(broker, &request),
        _ => RemotingCommand::not_supported_to(&request),
    };
    Some(response)
}

/// Persists the topic table before a successful topic change is acknowledged.
async fn persisted(broker: &ShardBroker, response: RemotingCommand) -> RemotingCommand {
    if response.response_code() != ResponseCode::SUCCESS {
        return response;
    }
    match persist_topics_now(broker).await {
        Ok(()) => response,
        Err(e) => RemotingCommand {
            code: ResponseCode::SYSTEM_ERROR.value(),
            remark: Some(format!("cannot persist topics: {e}")),
            ..response
        },
    }
}

/// The codes [`handle`] serves; everything else is answered REQUEST_CODE_NOT_SUPPORTED.
pub const SUPPORTED_CODES: &[RequestCode] = &[
    RequestCode::NOTIFY_BROKER_ROLE_CHANGED,
    RequestCode::SEND_MESSAGE,
    RequestCode::SEND_MESSAGE_V2,
    RequestCode::SEND_BATCH_MESSAGE,
    RequestCode::RECALL_MESSAGE,
    RequestCode::SEND_REPLY_MESSAGE,
    RequestCode::SEND_REPLY_MESSAGE_V2,
    RequestCode::PULL_MESSAGE,
    RequestCode::LITE_PULL_MESSAGE,
    RequestCode::POP_MESSAGE,
    RequestCode::ACK_MESSAGE,
    RequestCode::BATCH_ACK_MESSAGE,
    RequestCode::CHANGE_MESSAGE_INVISIBLETIME,
    RequestCode::PEEK_MESSAGE,
    RequestCode::NOTIFICATION,
    RequestCode::POLLING_INFO,
    RequestCode::QUERY_CONSUMER_OFFSET,
    RequestCode::UPDATE_CONSUMER_OFFSET,
    RequestCode::GET_MAX_OFFSET,
    RequestCode::GET_MIN_OFFSET,
    RequestCode::SEARCH_OFFSET_BY_TIMESTAMP,
    RequestCode::GET_EARLIEST_MSG_STORETIME,
    RequestCode::INVOKE_BROKER_TO_RESET_OFFSET,
    RequestCode::QUERY_MESSAGE,
    RequestCode::VIEW_MESSAGE_BY_ID,
    RequestCode::CONSUMER_SEND_MSG_BACK,
    RequestCode::END_TRANSACTION,
    RequestCode::HEART_BEAT,
    RequestCode::UNREGISTER_CLIENT,
    RequestCode::GET_CONSUMER_LIST_BY_GROUP,
    RequestCode::LOCK_BATCH_MQ,
    RequestCode::UNLOCK_BATCH_MQ,
    RequestCode::CHECK_CLIENT_CONFIG,
    RequestCode::UPDATE_AND_CREATE_TOPIC,
    RequestCode::DELETE_TOPIC_IN_BROKER,
    RequestCode::GET_ALL_TOPIC_CONFIG,
    RequestCode::GET_SYSTEM_TOPIC_LIST_FROM_BROKER,
    RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
    RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    RequestCode::GET_SUBSCRIPTIONGROUP_CONFIG,
    RequestCode::DELETE_SUBSCRIPTIONGROUP,
    RequestCode::GET_TOPIC_STATS_INFO,
    RequestCode::GET_CONSUME_STATS,
    RequestCode::GET_CONSUMER_CONNECTION_LIST,
    RequestCode::GET_PRODUCER_CONNECTION_LIST,
    RequestCode::QUERY_TOPIC_CONSUME_BY_WHO,
    RequestCode::GET_BROKER_CONFIG,
    RequestCode::UPDATE_BROKER_CONFIG,
    RequestCode::GET_BROKER_RUNTIME_INFO,
    RequestCode::GET_BROKER_HA_STATUS,
    RequestCode::GET_TOPIC_CONFIG,
    RequestCode::VIEW_BROKER_STATS_DATA,
    RequestCode::GET_CONSUMER_RUNNING_INFO,
    RequestCode::CONSUME_MESSAGE_DIRECTLY,
    RequestCode::INVOKE_BROKER_TO_GET_CONSUMER_STATUS,
    RequestCode::QUERY_CONSUME_QUEUE,
    RequestCode::QUERY_CONSUME_TIME_SPAN,
    RequestCode::GET_BROKER_CONSUME_STATS,
    RequestCode::CLONE_GROUP_OFFSET,
    RequestCode::GET_ALL_CONSUMER_OFFSET,
    RequestCode::GET_ALL_DELAY_OFFSET,
    RequestCode::QUERY_ASSIGNMENT,
    RequestCode::SET_MESSAGE_REQUEST_MODE,
    RequestCode::GET_ALL_MESSAGE_REQUEST_MODE,
    RequestCode::DELETE_EXPIRED_COMMITLOG,
    RequestCode::CLEAN_EXPIRED_CONSUMEQUEUE,
    RequestCode::CLEAN_UNUSED_TOPIC,
    RequestCode::QUERY_TOPICS_BY_CONSUMER,
];

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::path::Path;
    use std::rc::Rc;

    use comet_nameserver::config::NamesrvConfig;
    use comet_nameserver::kv_config::KvConfig;
    use comet_nameserver::processor::{dispatch_table, NameServerState};
    use comet_nameserver::route_table::RouteTable;
    use comet_proto::RequestCode;

    use super::SUPPORTED_CODES;

    /// The heading of the section that lists what the proxy and the Java client send.
    const SECTION: &str = "### Requests from Apache RocketMQ's proxy";

    /// A row of one of the section's tables.
    struct Row {
        /// Which table of the section, counted from 0.
        table: usize,
        code: i32,
        name: String,
        /// The "Comet" column: a processor module in backquotes, `name server`, or
        /// `not supported`.
        comet: String,
    }

    /// The section's text, up to the next heading.
    fn section(markdown: &str) -> &str {
        let start = markdown
            .find(SECTION)
            .expect("docs/protocol.md has the section");
        let rest = &markdown[start + SECTION.len()..];
        &rest[..rest.find("\n#").unwrap_or(rest.len())]
    }

    fn rows(section: &str) -> Vec<Row> {
        let mut rows = Vec::new();
        let mut table = None;
        for line in section.lines() {
            if line.starts_with("| code |") {
                table = Some(table.map_or(0, |index| index + 1));
            }
            let cells: Vec<&str> = line
                .trim()
                .strip_prefix('|')
                .and_then(|inner| inner.strip_suffix('|'))
                .map(|inner| inner.split('|').map(str::trim).collect())
                .unwrap_or_default();
            let (Some(table), [code, name, _, comet]) = (table, cells.as_slice()) else {
                continue;
            };
            let Ok(code) = code.parse::<i32>() else {
                continue;
            };
            rows.push(Row {
                table,
                code,
                name: (*name).to_owned(),
                comet: (*comet).to_owned(),
            });
        }
        rows
    }

    // Proves the protocol notes' list of what the proxy and the Java client send says what
    // Comet does: a row naming a processor module is a code the broker dispatches (to a module
    // that exists), a `name server` row one the name server dispatches, a `not supported` row
    // one neither dispatches (answered REQUEST_CODE_NOT_SUPPORTED); every name is the code's
    // Java name, and the counts the text gives are the proxy table's.
    #[test]
    fn proxy_request_list_matches_the_dispatch_tables() {
        let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let markdown = std::fs::read_to_string(crate_dir.join("../docs/protocol.md"))
            .expect("docs/protocol.md is readable");
        let section = section(&markdown);
        let kv = KvConfig::load(&crate_dir.join("no-such-dir/kvConfig.json"))
            .expect("a missing KV file is an empty store");
        let state = NameServerState {
            routes: RefCell::new(RouteTable::new()),
            kv: RefCell::new(kv),
            config: RefCell::new(NamesrvConfig::default()),
        };
        let name_server = dispatch_table(&Rc::new(state));
        let rows = rows(section);
        assert!(rows.len() >= 30, "only {} rows found", rows.len());
        let (mut handled, mut unsupported) = (0, 0);
        for row in &rows {
            let code = RequestCode::from(row.code);
            let what = format!("docs row {} {}", row.code, row.name);
            assert_eq!(code.name(), Some(row.name.as_str()), "{what}");
            let by_broker = SUPPORTED_CODES.contains(&code);
            let by_name_server = name_server.get(row.code).is_some();
            let counted = match row.comet.as_str() {
                "not supported" => {
                    assert!(!(by_broker || by_name_server), "{what} is dispatched");
                    &mut unsupported
                }
                "name server" => {
                    assert!(by_name_server, "{what}: the name server does not serve it");
                    &mut handled
                }
                module => {
                    let module = module
                        .strip_prefix('`')
                        .and_then(|inner| inner.strip_suffix('`'))
                        .unwrap_or_else(|| panic!("{what}: no module in backquotes"));
                    assert!(by_broker, "{what}: the broker does not serve it");
                    let file = crate_dir.join(format!("src/processor/{module}.rs"));
                    assert!(file.is_file(), "{what}: no module {module}");
                    &mut handled
                }
            };
            if row.table == 0 {
                *counted += 1;
            }
        }
        let counts = format!("{handled} codes are handled, {unsupported} are not.");
        assert!(section.contains(&counts), "the text lacks {counts:?}");
    }
}
