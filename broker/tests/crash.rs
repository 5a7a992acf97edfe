//! SIGKILL under a SYNC_FLUSH send load: nothing acknowledged may be lost.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use comet_proto::headers::SendMessageResponseHeader;
use comet_proto::message::decode_records;
use comet_proto::{CommandHeader, ResponseCode};
use comet_test_support::crash_seed::{crash_seed, XorShift};
use common::{pull_request, send_request, Broker, Client, TempDir};

const QUEUES: i32 = 8;
const SENDERS: usize = 16;
/// Kill rounds per run unless `COMET_CRASH_ROUNDS` says otherwise (a soak runs more).
const ROUNDS: usize = 3;

type Acked = Arc<Mutex<Vec<(i32, i64, String)>>>;

/// One sender: sync sends until the broker goes away, recording every acknowledgement.
fn sender(broker_addr: std::net::SocketAddr, round: usize, sender_id: usize, acked: Acked) {
    let Ok(stream) = std::net::TcpStream::connect(broker_addr) else {
        return;
    };
    drop(stream);
    let mut client = Client::connect(broker_addr);
    for sequence in 0.. {
        let queue_id = i32::try_from((sender_id + sequence) % QUEUES as usize).unwrap();
        let body = format!("r{round}-s{sender_id}-n{sequence}");
        let request = send_request("CrashTopic", queue_id, body.as_bytes(), None, None);
        let response =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| client.call(request)));
        let Ok(response) = response else { return };
        if response.response_code() != ResponseCode::SUCCESS {
            return;
        }
        let header = SendMessageResponseHeader::from_ext_fields(&response.ext_fields).unwrap();
        acked
            .lock()
            .unwrap()
            .push((queue_id, header.queue_offset, body));
    }
}

fn drain(client: &mut Client, queue_id: i32) -> Vec<(i64, String)> {
    let mut messages = Vec::new();
    let mut offset = 0;
    loop {
        let response = client.call(pull_request(
            "crash_check",
            "CrashTopic",
            queue_id,
            offset,
            32,
            0,
        ));
        if response.response_code() != ResponseCode::SUCCESS {
            return messages;
        }
        for message in decode_records(response.body.clone()) {
            messages.push((
                message.queue_offset,
                String::from_utf8(message.body.to_vec()).unwrap(),
            ));
        }
        offset = response
            .ext_fields
            .optional_i64("nextBeginOffset")
            .unwrap()
            .unwrap();
    }
}

fn pseudo_random_ms(random: &mut XorShift, round: usize) -> u64 {
    300 + random.next_word() % 900 + round as u64 * 37
}

// Proves that after each of several SIGKILLs in the middle of a 16-sender SYNC_FLUSH load,
// the restarted broker holds every acknowledged message at the queue offset it was
// acknowledged with, offsets are dense, and no message appears twice.
#[test]
fn sigkill_under_sync_flush_load_loses_nothing_acknowledged() {
    let rounds: usize = std::env::var("COMET_CRASH_ROUNDS")
        .ok()
        .and_then(|rounds| rounds.parse().ok())
        .unwrap_or(ROUNDS);
    let seed = crash_seed();
    eprintln!("crash test seed {seed} (set COMET_CRASH_SEED to replay the kill moments)");
    let mut random = XorShift(seed);
    let directory = TempDir::new("e2e-crash");
    let mut broker = Broker::start(&directory.0, 2, &[]);
    common::create_topic(&mut broker.client(), "CrashTopic", QUEUES);
    let acked: Acked = Arc::new(Mutex::new(Vec::new()));
    for round in 0..rounds {
        let acked_before = acked.lock().unwrap().len();
        let senders: Vec<_> = (0..SENDERS)
            .map(|sender_id| {
                let acked = acked.clone();
                let addr = broker.broker_addr;
                std::thread::spawn(move || sender(addr, round, sender_id, acked))
            })
            .collect();
        // The kill at a pseudo-random moment of the load is this test's input, not a wait.
        std::thread::sleep(Duration::from_millis(pseudo_random_ms(&mut random, round)));
        broker.kill();
        for handle in senders {
            handle.join().unwrap();
        }
        // One line per round in a fixed form, so a soak script can sum what was acknowledged
        // (tests/soak/sigkill.sh); what the broker holds is checked once, after the last.
        let acknowledged = acked.lock().unwrap().len() - acked_before;
        eprintln!("crash round {round}: acknowledged {acknowledged}");
        broker.restart(2);
    }
    let mut client = broker.client();
    let mut stored: BTreeMap<(i32, i64), String> = BTreeMap::new();
    let mut seen = HashSet::new();
    for queue_id in 0..QUEUES {
        for (index, (offset, body)) in drain(&mut client, queue_id).into_iter().enumerate() {
            assert_eq!(offset, index as i64, "queue {queue_id} offsets are dense");
            assert!(seen.insert(body.clone()), "{body} stored twice");
            stored.insert((queue_id, offset), body);
        }
    }
    let acked = acked.lock().unwrap();
    eprintln!(
        "crash rounds {rounds}: acknowledged {}, recovered {}",
        acked.len(),
        stored.len()
    );
    assert!(
        acked.len() > 100,
        "only {} sends were acknowledged",
        acked.len()
    );
    for (queue_id, offset, body) in acked.iter() {
        assert_eq!(
            stored.get(&(*queue_id, *offset)),
            Some(body),
            "acknowledged {body} at {queue_id}/{offset} lost"
        );
    }
}
