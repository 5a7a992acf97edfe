//! The name server's request processors (docs/protocol.md#name-server-requests), one per request
//! code.
//!
//! Every processor borrows the shard-owned state, builds its answer from it and releases it
//! before any await, so a request never waits behind another. A header that does not decode,
//! or a body that does not parse, is answered `SYSTEM_ERROR` with the reason as remark (as the
//! Java name server answers a handler exception); the connection goes on.

use std::cell::RefCell;
use std::rc::Rc;

use comet_net::{DispatchTable, RequestContext};
use comet_proto::body::{
    DataVersion, JsonBody, RegisterBrokerBody, TopicConfigSerializeWrapper, TopicList,
    TopicRouteData,
};
use comet_proto::headers::{
    AddWritePermOfBrokerRequestHeader, AddWritePermOfBrokerResponseHeader,
    DeleteKVConfigRequestHeader, DeleteTopicFromNamesrvRequestHeader, GetKVConfigRequestHeader,
    GetKVConfigResponseHeader, GetKVListByNamespaceRequestHeader, GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader, PutKVConfigRequestHeader, QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader, RegisterBrokerRequestHeader, RegisterBrokerResponseHeader,
    RegisterTopicRequestHeader, UnRegisterBrokerRequestHeader, WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
};
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};
use comet_rt::clock::wall_clock_ms;
use comet_rt::task_class::run_blocking;

use crate::config::{NamesrvConfig, CONFIG_BLACK_LIST};
use crate::kv_config::KvConfig;
use crate::limits::ORDER_TOPIC_CONFIG_NAMESPACE;
use crate::route_table::{BrokerKey, Registration, RouteTable};

/// Brokers older than V3_0_11 send a bare TopicConfigSerializeWrapper as register body.
const REGISTER_BODY_WRAPPED_SINCE_VERSION: i32 = 37;

/// The name server's state on its shard: route table, KV store, configuration.
pub struct NameServerState {
    /// Topics, brokers, clusters and liveness.
    pub routes: RefCell<RouteTable>,
    /// Namespaced key/value config.
    pub kv: RefCell<KvConfig>,
    /// Current configuration (UPDATE_NAMESRV_CONFIG changes it).
    pub config: RefCell<NamesrvConfig>,
}

type Answer = Result<RemotingCommand, RemotingCommand>;

/// A processor that answers from the state without waiting.
type SyncHandler = fn(&NameServerState, &RequestContext, &RemotingCommand) -> Answer;

fn system_error(request: &RemotingCommand, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::error_to(request, ResponseCode::SYSTEM_ERROR, remark)
}

fn header<H: CommandHeader>(request: &RemotingCommand) -> Result<H, RemotingCommand> {
    request
        .decode_header()
        .map_err(|error| system_error(request, error.to_string()))
}

fn success(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
}

/// Builds the dispatch table over `state`.
pub fn dispatch_table(state: &Rc<NameServerState>) -> DispatchTable {
    let mut table = DispatchTable::new();
    let sync_handlers: [(RequestCode, SyncHandler); 17] = [
        (RequestCode::REGISTER_BROKER, register_broker),
        (RequestCode::UNREGISTER_BROKER, unregister_broker),
        (RequestCode::GET_ROUTEINFO_BY_TOPIC, route_by_topic),
        (RequestCode::GET_BROKER_CLUSTER_INFO, |state, _, request| {
            Ok(success(request).with_body(state.routes.borrow().cluster_info().encode()))
        }),
        (RequestCode::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, all_topics),
        (RequestCode::GET_TOPICS_BY_CLUSTER, topics_by_cluster),
        (
            RequestCode::GET_SYSTEM_TOPIC_LIST_FROM_NS,
            |state, _, request| {
                Ok(success(request).with_body(state.routes.borrow().system_topics().encode()))
            },
        ),
        (RequestCode::GET_UNIT_TOPIC_LIST, |state, _, request| {
            topic_list(state, request, RouteTable::unit_topics)
        }),
        (
            RequestCode::GET_HAS_UNIT_SUB_TOPIC_LIST,
            |state, _, request| topic_list(state, request, RouteTable::has_unit_sub_topics),
        ),
        (
            RequestCode::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST,
            |state, _, request| topic_list(state, request, RouteTable::has_unit_sub_ununit_topics),
        ),
        (RequestCode::DELETE_TOPIC_IN_NAMESRV, delete_topic),
        (RequestCode::REGISTER_TOPIC_IN_NAMESRV, register_topic),
        (RequestCode::WIPE_WRITE_PERM_OF_BROKER, wipe_write_perm),
        (RequestCode::ADD_WRITE_PERM_OF_BROKER, add_write_perm),
        (RequestCode::QUERY_DATA_VERSION, query_data_version),
        (RequestCode::GET_KV_CONFIG, get_kv_config),
        (RequestCode::GET_KVLIST_BY_NAMESPACE, kv_list),
    ];
    for (code, handler) in sync_handlers {
        let state = state.clone();
        table.register_fn(code, move |context, request| {
            let answer = handler(&state, &context, &request);
            async move { Some(answer.unwrap_or_else(|error| error)) }
        });
    }
    register_async_handlers(&mut table, state);
    table
}

fn register_async_handlers(table: &mut DispatchTable, state: &Rc<NameServerState>) {
    let put_state = state.clone();
    table.register_fn(RequestCode::PUT_KV_CONFIG, move |_, request| {
        let state = put_state.clone();
        async move { Some(put_kv_config(&state, &request).await) }
    });
    let delete_state = state.clone();
    table.register_fn(RequestCode::DELETE_KV_CONFIG, move |_, request| {
        let state = delete_state.clone();
        async move { Some(delete_kv_config(&state, &request).await) }
    });
    let update_state = state.clone();
    table.register_fn(RequestCode::UPDATE_NAMESRV_CONFIG, move |_, request| {
        let answer = update_config(&update_state, &request);
        async move { Some(answer.unwrap_or_else(|error| error)) }
    });
    let get_state = state.clone();
    table.register_fn(RequestCode::GET_NAMESRV_CONFIG, move |_, request| {
        let text = get_state.config.borrow().to_properties();
        async move { Some(success(&request).with_body(text.into_bytes())) }
    });
}

fn decode_register_body(
    request: &RemotingCommand,
    compressed: bool,
) -> Result<RegisterBrokerBody, RemotingCommand> {
    if request.body.is_empty() {
        return Ok(RegisterBrokerBody::default());
    }
    let decoded = if request.version < REGISTER_BODY_WRAPPED_SINCE_VERSION {
        TopicConfigSerializeWrapper::decode(&request.body)
            .map(|wrapper| RegisterBrokerBody {
                topic_config_serialize_wrapper: wrapper,
                ..RegisterBrokerBody::default()
            })
            .map_err(|error| error.to_string())
    } else {
        RegisterBrokerBody::decode_with(&request.body, compressed).map_err(|e| e.to_string())
    };
    decoded.map_err(|error| system_error(request, format!("malformed register body: {error}")))
}

fn register_broker(
    state: &NameServerState,
    context: &RequestContext,
    request: &RemotingCommand,
) -> Answer {
    // Java reads a missing primitive `compressed` as false; so do we.
    let mut ext = request.ext_fields.clone();
    if ext.get("compressed").is_none() {
        ext.insert("compressed", "false");
    }
    let header = RegisterBrokerRequestHeader::from_ext_fields(&ext)
        .map_err(|error| system_error(request, error.to_string()))?;
    if let Some(expected) = header.body_crc32.filter(|crc| *crc != 0) {
        let actual = i32::try_from(crc32fast::hash(&request.body) & 0x7FFF_FFFF).unwrap_or(0);
        if actual != expected {
            return Err(system_error(request, "crc32 not match"));
        }
    }
    let body = decode_register_body(request, header.compressed)?;
    let config = state.config.borrow();
    let expiry_ms = i64::try_from(config.broker_expiry.as_millis()).unwrap_or(i64::MAX);
    let registration = Registration {
        cluster: header.cluster_name,
        addr: header.broker_addr,
        broker_name: header.broker_name.clone(),
        broker_id: header.broker_id,
        ha_server_addr: header.ha_server_addr,
        zone_name: request.ext_fields.optional_string("__ZONE_NAME"),
        timeout_ms: header.heartbeat_timeout_millis.unwrap_or(expiry_ms),
        enable_acting_master: header.enable_acting_master,
        topics: body.topic_config_serialize_wrapper,
        filter_servers: body.filter_server_list,
        connection: Some(context.connection.id()),
    };
    if registration.addr.is_empty() || registration.broker_name.is_empty() {
        return Err(system_error(
            request,
            "brokerAddr and brokerName must not be empty",
        ));
    }
    let topics = registration.topics.clone();
    let is_master = registration.broker_id == 0;
    let result = {
        let mut routes = state.routes.borrow_mut();
        let result = routes.register(registration, wall_clock_ms());
        if result.is_some() && is_master && config.delete_topic_with_broker_registration {
            routes.drop_topics_not_in(&header.broker_name, &topics);
        }
        result.unwrap_or_default()
    };
    let mut response = success(request).with_header(&RegisterBrokerResponseHeader {
        ha_server_addr: result.ha_server_addr,
        master_addr: result.master_addr,
    });
    if config.return_order_topic_config_to_broker {
        if let Some(table) = state.kv.borrow().list(ORDER_TOPIC_CONFIG_NAMESPACE) {
            response.body = table.encode();
        }
    }
    Ok(response)
}

fn unregister_broker(
    state: &NameServerState,
    _: &RequestContext,
    request: &RemotingCommand,
) -> Answer {
    let header: UnRegisterBrokerRequestHeader = header(request)?;
    let key = BrokerKey {
        cluster: header.cluster_name,
        addr: header.broker_addr,
    };
    let mut routes = state.routes.borrow_mut();
    // Only the member that is registered under that name and id leaves.
    let matches = routes.live(&key).is_some_and(|live| {
        live.broker_name == header.broker_name && live.broker_id == header.broker_id
    });
    if matches {
        routes.unregister(&key);
    }
    Ok(success(request))
}

fn route_by_topic(
    state: &NameServerState,
    _: &RequestContext,
    request: &RemotingCommand,
) -> Answer {
    let header: GetRouteInfoRequestHeader = header(request)?;
    let route: Option<TopicRouteData> = state.routes.borrow().route(&header.topic);
    let Some(mut route) = route else {
        let remark = format!(
            "No topic route info in name server for the topic: {}",
            header.topic
        );
        return Err(RemotingCommand::error_to(
            request,
            ResponseCode::TOPIC_NOT_EXIST,
            remark,
        ));
    };
    if state.config.borrow().order_message_enable {
        let kv = state.kv.borrow();
        route.order_topic_conf = kv
            .get(ORDER_TOPIC_CONFIG_NAMESPACE, &header.topic)
            .map(str::to_owned);
    }
    // Quoted broker-id keys (the standard-JSON flavour Java sends to requesters at or above
    // V4_9_4) are read by every client version, so one flavour serves all
    // (docs/protocol.md#route-json-quoting-depends-on-the-requester-version).
    Ok(success(request).with_body(route.encode()))
}

fn all_topics(state: &NameServerState, _: &RequestContext, request: &RemotingCommand) -> Answer {
    if !state.config.borrow().enable_all_topic_list {
        return Err(system_error(request, "disable"));
    }
    Ok(success(request).with_body(state.routes.borrow().all_topics().encode()))
}

fn topic_list(
    state: &NameServerState,
    request: &RemotingCommand,
    list: fn(&RouteTable) -> TopicList,
) -> Answer {
    if !state.config.borrow().enable_topic_list {
        return Err(system_error(request, "disable"));
    }
    Ok(success(request).with_body(list(&state.routes.borrow()).encode()))
}

fn topics_by_cluster(
    state: &NameServerState,
    _: &RequestContext,
    request: &RemotingCommand,
) -> Answer {
    let header: GetTopicsByClusterRequestHeader = header(request)?;
    if !state.config.borrow().enable_topic_list {
        return Err(system_error(request, "disable"));
    }
    let list = state.routes.borrow().topics_by_cluster(&header.cluster);
    Ok(success(request).with_body(list.encode()))
}

fn delete_topic(state: &NameServerState, _: &RequestContext, request: &RemotingCommand) -> Answer {
    let header: DeleteTopicFromNamesrvRequestHeader = header(request)?;
    let cluster = header.cluster_name.as_deref();
    state
        .routes
        .borrow_mut()
        .delete_topic(&header.topic, cluster);
    Ok(success(request))
}

fn register_topic(
    state: &NameServerState,
    _: &RequestContext,
    request: &RemotingCommand,
) -> Answer {
    let header: RegisterTopicRequestHeader = header(request)?;
    let route = TopicRouteData::decode(&request.body)
        .map_err(|error| system_error(request, format!("malformed route body: {error}")))?;
    state
        .routes
        .borrow_mut()
        .register_topic(&header.topic, &route.queue_datas);
    Ok(success(request))
}

fn wipe_write_perm(
    state: &NameServerState,
    _: &RequestContext,
    request: &RemotingCommand,
) -> Answer {
    let header: WipeWritePermOfBrokerRequestHeader = header(request)?;
    let count = state
        .routes
        .borrow_mut()
        .set_write_perm(&header.broker_name, false);
    let response_header = WipeWritePermOfBrokerResponseHeader {
        wipe_topic_count: count,
    };
    Ok(success(request).with_header(&response_header))
}

fn add_write_perm(
    state: &NameServerState,
    _: &RequestContext,
    request: &RemotingCommand,
) -> Answer {
    let header: AddWritePermOfBrokerRequestHeader = header(request)?;
    let count = state
        .routes
        .borrow_mut()
        .set_write_perm(&header.broker_name, true);
    let response_header = AddWritePermOfBrokerResponseHeader {
        add_topic_count: count,
    };
    Ok(success(request).with_header(&response_header))
}

fn query_data_version(
    state: &NameServerState,
    _: &RequestContext,
    request: &RemotingCommand,
) -> Answer {
    let header: QueryDataVersionRequestHeader = header(request)?;
    let version = DataVersion::decode(&request.body)
        .map_err(|error| system_error(request, format!("malformed DataVersion body: {error}")))?;
    let key = BrokerKey {
        cluster: header.cluster_name,
        addr: header.broker_addr,
    };
    let mut routes = state.routes.borrow_mut();
    let changed = routes.is_broker_topic_config_changed(&key, &version);
    routes.touch(&key, wall_clock_ms());
    let mut response = success(request).with_header(&QueryDataVersionResponseHeader { changed });
    if let Some(live) = routes.live(&key) {
        response.body = live.data_version.encode();
    }
    Ok(response)
}

fn get_kv_config(state: &NameServerState, _: &RequestContext, request: &RemotingCommand) -> Answer {
    let header: GetKVConfigRequestHeader = header(request)?;
    let kv = state.kv.borrow();
    let Some(value) = kv.get(&header.namespace, &header.key) else {
        let remark = format!(
            "No config item, Namespace: {} Key: {}",
            header.namespace, header.key
        );
        return Err(RemotingCommand::error_to(
            request,
            ResponseCode::QUERY_NOT_FOUND,
            remark,
        ));
    };
    let response_header = GetKVConfigResponseHeader {
        value: Some(value.to_owned()),
    };
    Ok(success(request).with_header(&response_header))
}

fn kv_list(state: &NameServerState, _: &RequestContext, request: &RemotingCommand) -> Answer {
    let header: GetKVListByNamespaceRequestHeader = header(request)?;
    let Some(table) = state.kv.borrow().list(&header.namespace) else {
        let remark = format!("No config item, Namespace: {}", header.namespace);
        return Err(RemotingCommand::error_to(
            request,
            ResponseCode::QUERY_NOT_FOUND,
            remark,
        ));
    };
    Ok(success(request).with_body(table.encode()))
}

async fn persist(state: &NameServerState, request: &RemotingCommand) -> RemotingCommand {
    let job = state.kv.borrow().persist_job();
    match run_blocking(job).await {
        Ok(()) => success(request),
        Err(error) => {
            log::error!("cannot persist the KV config: {error}");
            system_error(request, format!("KV config not persisted: {error}"))
        }
    }
}

async fn put_kv_config(state: &NameServerState, request: &RemotingCommand) -> RemotingCommand {
    let header: PutKVConfigRequestHeader = match header(request) {
        Ok(header) => header,
        Err(error) => return error,
    };
    let stored = state
        .kv
        .borrow_mut()
        .put(&header.namespace, &header.key, &header.value);
    if let Err(error) = stored {
        return system_error(request, error.to_string());
    }
    persist(state, request).await
}

async fn delete_kv_config(state: &NameServerState, request: &RemotingCommand) -> RemotingCommand {
    let header: DeleteKVConfigRequestHeader = match header(request) {
        Ok(header) => header,
        Err(error) => return error,
    };
    if !state.kv.borrow_mut().delete(&header.namespace, &header.key) {
        return success(request);
    }
    persist(state, request).await
}

fn update_config(state: &NameServerState, request: &RemotingCommand) -> Answer {
    let text = std::str::from_utf8(&request.body)
        .map_err(|_| system_error(request, "config body is not UTF-8"))?;
    let pairs = comet_proto::java_properties::parse(text);
    if pairs
        .iter()
        .any(|(key, _)| CONFIG_BLACK_LIST.contains(&key.as_str()))
    {
        return Err(system_error(
            request,
            "Can not update config in black list.",
        ));
    }
    let mut updated = state.config.borrow().clone();
    for (key, value) in &pairs {
        updated
            .apply(key, value)
            .map_err(|error| system_error(request, error.to_string()))?;
    }
    updated
        .validate()
        .map_err(|error| system_error(request, error.to_string()))?;
    *state.config.borrow_mut() = updated;
    Ok(success(request))
}
