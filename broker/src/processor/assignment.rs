//! QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401), as Java's
//! `QueryAssignmentProcessor` serves them (docs/protocol.md#server-side-assignment).
//!
//! An answer without assignments (the key left out) tells the client the broker cannot
//! balance now (unknown topic, no consumer list, unknown strategy) and that it should keep
//! the queues it has; Java answers SUCCESS so too.

use std::collections::BTreeSet;

use comet_net::request_log::RequestFields;
use comet_proto::body::{
    JsonBody, MessageModel, MessageQueue, MessageQueueAssignment, QueryAssignmentRequestBody,
    QueryAssignmentResponseBody, SetMessageRequestModeRequestBody,
};
use comet_proto::names::is_retry_topic;
use comet_proto::{RemotingCommand, ResponseCode};

use super::error;
use crate::assignment::allocate::{
    allocate_for_pop, sort_client_ids, sort_queues, AllocateError, Strategy,
};
use crate::assignment::modes::RequestMode;
use crate::assignment::routes::{ask_name_servers, own_queues, RouteAnswer};
use crate::shard::ShardBroker;

/// QUERY_ASSIGNMENT: the queues `clientId` reads, each with the group's mode.
pub async fn query_assignment(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let body = match QueryAssignmentRequestBody::decode(&request.body) {
        Ok(body) => body,
        Err(e) => {
            let remark = format!("malformed QueryAssignmentRequestBody: {e}");
            return error(request, ResponseCode::SYSTEM_ERROR, remark);
        }
    };
    let Some(message_model) = body.message_model else {
        return error(
            request,
            ResponseCode::SYSTEM_ERROR,
            "QueryAssignmentRequestBody has no messageModel",
        );
    };
    // An owned copy: the config is read again after the route lookup's await.
    let config = std::sync::Arc::clone(&broker.config());
    let mode = broker.metadata().assignment().modes().effective(
        &body.topic,
        &body.consumer_group,
        config.default_message_request_mode,
        config.default_pop_share_queue_num,
    );
    let queues = topic_queues(broker, &body.topic).await;
    let assigned = match (message_model, queues) {
        (_, None) => {
            if !is_retry_topic(&body.topic) {
                comet_net::warn_request!(
                    fields(request, &body),
                    "QUERY_ASSIGNMENT: no assignment for group {} : topic {} does not exist",
                    body.consumer_group,
                    body.topic
                );
            }
            None
        }
        (MessageModel::BROADCASTING, Some(queues)) => Some(queues),
        (MessageModel::CLUSTERING, Some(queues)) => balance(
            broker,
            request,
            &body,
            mode,
            queues,
            config.server_load_balancer_enable,
        ),
    };
    let assignments = assigned.map(|queues| {
        queues
            .into_iter()
            .map(|queue| MessageQueueAssignment {
                message_queue: Some(queue),
                mode: mode.mode,
                attachments: None,
            })
            .collect::<BTreeSet<_>>()
    });
    let answer = QueryAssignmentResponseBody {
        message_queue_assignments: assignments,
    };
    RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_body(answer.encode())
}

/// The log fields of a QUERY_ASSIGNMENT, whose topic and group travel in its body.
fn fields(request: &RemotingCommand, body: &QueryAssignmentRequestBody) -> RequestFields {
    RequestFields::of(request)
        .with_topic(&body.topic)
        .with_group(&body.consumer_group)
}

/// Java's `doLoadBalance` for a clustering group; `None` when the broker cannot say.
fn balance(
    broker: &ShardBroker,
    request: &RemotingCommand,
    body: &QueryAssignmentRequestBody,
    mode: RequestMode,
    mut queues: Vec<MessageQueue>,
    server_load_balancer_enable: bool,
) -> Option<Vec<MessageQueue>> {
    if !server_load_balancer_enable {
        return Some(queues);
    }
    let Some(mut client_ids) = broker
        .clients()
        .consumer_group(&body.consumer_group)
        .map(|group| group.client_ids())
    else {
        comet_net::warn_request!(
            fields(request, body),
            "QUERY_ASSIGNMENT: no assignment for group {} topic {}: the group has no consumer",
            body.consumer_group,
            body.topic
        );
        return None;
    };
    sort_queues(&mut queues);
    sort_client_ids(&mut client_ids);
    let Some(strategy) = Strategy::from_name(&body.strategy_name) else {
        comet_net::warn_request!(
            fields(request, body),
            "QUERY_ASSIGNMENT: unsupported strategy {:?} (group {})",
            body.strategy_name,
            body.consumer_group
        );
        return None;
    };
    let allocated: Result<Vec<MessageQueue>, AllocateError> = match mode.mode {
        comet_proto::body::MessageRequestMode::POP => allocate_for_pop(
            strategy,
            &queues,
            &client_ids,
            &body.client_id,
            mode.pop_share_queue_num,
        ),
        comet_proto::body::MessageRequestMode::PULL => {
            strategy.allocate(&queues, &client_ids, &body.client_id)
        }
    };
    match allocated {
        Ok(allocated) => Some(allocated),
        Err(e) => {
            comet_net::warn_request!(
                fields(request, body),
                "QUERY_ASSIGNMENT: no assignment for group {} topic {}: {e}",
                body.consumer_group,
                body.topic
            );
            None
        }
    }
}

/// Every readable queue of `topic` in the cluster: the name servers' route (cached briefly),
/// or this broker's own queues when no name server answers. A topic the name servers do
/// not know yet but this broker has (its registration is still on its way) counts with this
/// broker's queues; one neither knows is `None`.
async fn topic_queues(broker: &ShardBroker, topic: &str) -> Option<Vec<MessageQueue>> {
    let assignment = broker.metadata().assignment();
    let now = comet_rt::clock::monotonic_now();
    let cached = assignment.routes().fresh(topic, now);
    let answer = match cached {
        Some(answer) => Some(answer),
        None => {
            let config = std::sync::Arc::clone(&broker.config());
            let opaque = assignment.next_opaque();
            let answer = ask_name_servers(&config, topic, opaque).await;
            if let Some(answer) = &answer {
                let now = comet_rt::clock::monotonic_now();
                assignment.routes().store(topic, answer.clone(), now);
            }
            answer
        }
    };
    match answer {
        Some(RouteAnswer::Queues(queues)) if !queues.is_empty() => Some(queues),
        _ => own_queues(&broker.config(), &broker.topics(), topic),
    }
}

/// SET_MESSAGE_REQUEST_MODE: records the mode of a (topic, group) and writes the table
/// before answering. Retry topics stay PULL (NO_PERMISSION); the topic must exist, the
/// group must exist or be creatable.
pub async fn set_message_request_mode(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> RemotingCommand {
    let body = match SetMessageRequestModeRequestBody::decode(&request.body) {
        Ok(body) => body,
        Err(e) => {
            let remark = format!("malformed SetMessageRequestModeRequestBody: {e}");
            return error(request, ResponseCode::SYSTEM_ERROR, remark);
        }
    };
    if is_retry_topic(&body.topic) {
        return error(
            request,
            ResponseCode::NO_PERMISSION,
            "retry topic is not allowed to set mode",
        );
    }
    if broker.topics().get(&body.topic).is_none() {
        let remark = format!("topic[{}] not exist", body.topic);
        return error(request, ResponseCode::TOPIC_NOT_EXIST, remark);
    }
    let auto_create = broker.config().auto_create_subscription_group;
    let group = broker.groups().get_or_create(
        &body.consumer_group,
        auto_create && !body.consumer_group.is_empty(),
    );
    if group.is_none() {
        return error(
            request,
            ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST,
            "subscription group does not exist",
        );
    }
    broker.metadata().assignment().modes().set(body);
    let metadata = broker.metadata().clone();
    match comet_rt::task_class::run_blocking(move || metadata.persist_request_modes()).await {
        Ok(()) => RemotingCommand::response_to(request, ResponseCode::SUCCESS),
        Err(e) => error(
            request,
            ResponseCode::SYSTEM_ERROR,
            format!("cannot persist the request modes: {e}"),
        ),
    }
}

/// GET_ALL_MESSAGE_REQUEST_MODE: the whole mode table as `messageRequestMode.json` holds it
/// (Java's `AdminBrokerProcessor.getAllMessageRequestMode`, which its slaves copy).
pub fn all_message_request_modes(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> RemotingCommand {
    let body = broker.metadata().assignment().modes().encode();
    RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_body(body)
}
