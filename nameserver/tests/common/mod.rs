//! Test helpers: a name server on its own thread bound to 127.0.0.1:0 with a temporary KV
//! directory, and a blocking client speaking comet-proto frames. Directories, ports and
//! waiting come from comet-test-support.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use bytes::BytesMut;
use comet_nameserver::{NameServerThread, NamesrvConfig};
use comet_proto::body::{
    DataVersion, JsonBody, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper,
};
use comet_proto::frame::encode_to_bytes;
use comet_proto::headers::RegisterBrokerRequestHeader;
use comet_proto::{Decoded, FrameDecoder, RemotingCommand, RequestCode};
pub use comet_test_support::TempDir;

/// A running name server and the temporary directory holding its KV file.
pub struct TestNameServer {
    pub server: Option<NameServerThread>,
    pub directory: TempDir,
}

impl TestNameServer {
    pub fn start() -> TestNameServer {
        TestNameServer::start_with(|_| {})
    }

    pub fn start_with(adjust: impl FnOnce(&mut NamesrvConfig)) -> TestNameServer {
        let directory = TempDir::new("namesrv-kv");
        let mut config = NamesrvConfig {
            listen_port: 0,
            bind_address: "127.0.0.1".parse().unwrap(),
            kv_config_path: directory.path().join("kvConfig.json"),
            ..NamesrvConfig::default()
        };
        adjust(&mut config);
        let server = NameServerThread::spawn(config).unwrap();
        TestNameServer {
            server: Some(server),
            directory,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.as_ref().unwrap().addr()
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr())
    }
}

impl Drop for TestNameServer {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.stop();
        }
    }
}

/// A blocking remoting client.
pub struct Client {
    pub stream: TcpStream,
    buffer: BytesMut,
    next_opaque: i32,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Client {
            stream,
            buffer: BytesMut::new(),
            next_opaque: 1,
        }
    }

    pub fn send(&mut self, mut command: RemotingCommand) -> i32 {
        command.opaque = self.next_opaque;
        self.next_opaque += 1;
        self.stream.write_all(&encode_to_bytes(&command)).unwrap();
        command.opaque
    }

    /// The next frame, or `None` when the server closed the connection.
    pub fn receive(&mut self) -> Option<RemotingCommand> {
        let decoder = FrameDecoder::default();
        loop {
            match decoder.decode(&mut self.buffer).unwrap() {
                Some(Decoded::Command(command)) => return Some(command),
                Some(Decoded::Malformed(error)) => panic!("malformed frame from server: {error}"),
                None => {}
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return None,
                Ok(read) => self.buffer.extend_from_slice(&chunk[..read]),
                Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(error) => panic!("read failed: {error}"),
            }
        }
    }

    /// Sends and waits for the matching response.
    pub fn call(&mut self, command: RemotingCommand) -> RemotingCommand {
        let opaque = self.send(command);
        let response = self.receive().expect("connection closed");
        assert!(response.is_response());
        assert_eq!(response.opaque, opaque);
        response
    }
}

/// One broker member for registration.
#[derive(Clone)]
pub struct Broker {
    pub cluster: String,
    pub name: String,
    pub id: i64,
    pub addr: String,
    pub topics: Vec<String>,
    pub counter: i64,
    pub timeout_ms: Option<i64>,
}

impl Broker {
    pub fn master(name: &str, addr: &str, topics: &[&str]) -> Broker {
        Broker {
            cluster: "DefaultCluster".to_owned(),
            name: name.to_owned(),
            id: 0,
            addr: addr.to_owned(),
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
            counter: 1,
            timeout_ms: None,
        }
    }

    pub fn body(&self) -> RegisterBrokerBody {
        let topic_config_table = self
            .topics
            .iter()
            .map(|topic| {
                let mut config = TopicConfig::new(topic.clone());
                config.read_queue_nums = 4;
                config.write_queue_nums = 4;
                (topic.clone(), config)
            })
            .collect();
        RegisterBrokerBody {
            filter_server_list: Vec::new(),
            topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                data_version: DataVersion {
                    counter: self.counter,
                    state_version: 0,
                    timestamp: 1_700_000_000_000 + self.counter,
                },
                topic_config_table,
                ..TopicConfigSerializeWrapper::default()
            },
        }
    }

    pub fn register_request(&self) -> RemotingCommand {
        let body = self.body().encode();
        let crc = i32::try_from(crc32fast::hash(&body) & 0x7FFF_FFFF).unwrap();
        RemotingCommand::request(RequestCode::REGISTER_BROKER, 0)
            .with_header(&RegisterBrokerRequestHeader {
                broker_name: self.name.clone(),
                broker_addr: self.addr.clone(),
                cluster_name: self.cluster.clone(),
                ha_server_addr: self.addr.replace(":10911", ":10912"),
                broker_id: self.id,
                heartbeat_timeout_millis: self.timeout_ms,
                enable_acting_master: Some(false),
                compressed: false,
                body_crc32: Some(crc),
            })
            .with_body(body)
    }
}

/// GET_ROUTEINFO_BY_TOPIC request.
pub fn route_request(topic: &str) -> RemotingCommand {
    let mut request = RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC, 0);
    request.ext_fields.insert("topic", topic);
    request
}
