//! GET_ROUTEINFO_BY_TOPIC throughput: 1,000 topics registered, 16 connections, each keeping a
//! window of requests in flight (pipelined), for a fixed time. Prints requests per second.
//!
//! Run: `cargo run --release -p comet-nameserver --example route_bench -- [seconds] [window]`

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use comet_nameserver::{NameServerThread, NamesrvConfig};
use comet_proto::body::{
    DataVersion, JsonBody, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper,
};
use comet_proto::bytes::BytesMut;
use comet_proto::frame::{encode, encode_to_bytes};
use comet_proto::headers::RegisterBrokerRequestHeader;
use comet_proto::{Decoded, FrameDecoder, RemotingCommand, RequestCode, ResponseCode};

const TOPICS: usize = 1_000;
const CONNECTIONS: usize = 16;

fn register_request() -> RemotingCommand {
    let topic_config_table = (0..TOPICS)
        .map(|index| {
            let name = format!("BenchTopic{index}");
            (name.clone(), TopicConfig::new(name))
        })
        .collect();
    let body = RegisterBrokerBody {
        filter_server_list: Vec::new(),
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            data_version: DataVersion {
                counter: 1,
                state_version: 0,
                timestamp: 1,
            },
            topic_config_table,
            ..TopicConfigSerializeWrapper::default()
        },
    };
    RemotingCommand::request(RequestCode::REGISTER_BROKER, 1)
        .with_header(&RegisterBrokerRequestHeader {
            broker_name: "broker-a".to_owned(),
            broker_addr: "127.0.0.1:10911".to_owned(),
            cluster_name: "DefaultCluster".to_owned(),
            ha_server_addr: "127.0.0.1:10912".to_owned(),
            broker_id: 0,
            ..RegisterBrokerRequestHeader::default()
        })
        .with_body(body.encode())
}

fn read_frames(stream: &mut TcpStream, buffer: &mut BytesMut, count: usize) -> usize {
    let decoder = FrameDecoder::default();
    let mut received = 0;
    let mut chunk = vec![0u8; 256 * 1024];
    while received < count {
        while let Some(decoded) = decoder.decode(buffer).expect("valid frames") {
            let Decoded::Command(response) = decoded else {
                panic!("malformed response")
            };
            assert_eq!(response.response_code(), ResponseCode::SUCCESS);
            received += 1;
        }
        if received == count {
            break;
        }
        let read = stream.read(&mut chunk).expect("read");
        assert!(read > 0, "server closed");
        buffer.extend_from_slice(&chunk[..read]);
    }
    received
}

fn main() {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let window: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(32);
    let directory = std::env::temp_dir().join(format!("comet-route-bench-{}", std::process::id()));
    let config = NamesrvConfig {
        listen_port: 0,
        bind_address: "127.0.0.1".parse().unwrap(),
        kv_config_path: directory.join("kvConfig.json"),
        ..NamesrvConfig::default()
    };
    let server = NameServerThread::spawn(config).expect("name server");
    let addr = server.addr();
    let mut broker = TcpStream::connect(addr).unwrap();
    broker
        .write_all(&encode_to_bytes(&register_request()))
        .unwrap();
    read_frames(&mut broker, &mut BytesMut::new(), 1);

    let stop = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..CONNECTIONS)
        .map(|connection| {
            let (stop, total) = (stop.clone(), total.clone());
            std::thread::spawn(move || {
                let mut stream = TcpStream::connect(addr).unwrap();
                stream.set_nodelay(true).unwrap();
                let mut buffer = BytesMut::new();
                let mut next = connection;
                let mut opaque = 0;
                while !stop.load(Ordering::Relaxed) {
                    let mut batch = BytesMut::new();
                    for _ in 0..window {
                        let mut request =
                            RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC, opaque);
                        request
                            .ext_fields
                            .insert("topic", format!("BenchTopic{}", next % TOPICS));
                        encode(&request, &mut batch);
                        next += 7;
                        opaque += 1;
                    }
                    stream.write_all(&batch).unwrap();
                    let received = read_frames(&mut stream, &mut buffer, window);
                    total.fetch_add(received as u64, Ordering::Relaxed);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    let requests = total.load(Ordering::Relaxed);
    println!(
        "GET_ROUTEINFO_BY_TOPIC: {requests} requests in {elapsed:.1} s = {:.0} requests/s \
         ({CONNECTIONS} connections, window {window}, {TOPICS} topics)",
        requests as f64 / elapsed
    );
    drop(broker);
    server.stop();
    let _ = std::fs::remove_dir_all(directory);
}
