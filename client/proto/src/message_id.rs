//! Message ids (docs/protocol.md#message-ids).
//!
//! Offset message id (the broker's `msgId`, the client's `offsetMsgId`), upper-case hex:
//!
//! ```text
//! IPv4 (32 hex): | store ip (4) | store port i32 (4) | commit-log offset i64 (8) |
//! IPv6 (56 hex): | store ip (16) | store port i32 (4) | commit-log offset i64 (8) |
//! ```
//!
//! Client unique key (`UNIQ_KEY`, the id applications see), upper-case hex:
//!
//! ```text
//! | client ip (4 or 16) | pid low 16 bits (2) | per-process random i32 (4) |
//! | ms since start of month i32 (4) | counter low 16 bits (2) |
//! ```
//!
//! Java fills the random field with its class loader's hash code; Comet uses a random value
//! drawn once per generator, which serves the same purpose (two processes with the same ip and
//! pid low bits still differ).

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use thiserror::Error;

/// Length of an IPv4 offset message id in hex characters.
pub const OFFSET_MSG_ID_V4_CHARS: usize = 32;
/// Length of an IPv6 offset message id in hex characters.
pub const OFFSET_MSG_ID_V6_CHARS: usize = 56;

/// A message id that does not decode.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum MessageIdError {
    /// Neither 32 nor 56 characters.
    #[error("message id of {length} characters: expected 32 (IPv4) or 56 (IPv6)")]
    Length {
        /// Characters received.
        length: usize,
    },
    /// A character that is not a hex digit.
    #[error("message id has a non-hex character at {position}")]
    NotHex {
        /// Character index.
        position: usize,
    },
    /// The port field is outside 0..=65535.
    #[error("message id port {port} is out of range")]
    Port {
        /// The decoded port.
        port: i32,
    },
}

/// A decoded offset message id: where the record lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OffsetMessageId {
    /// The broker's store host (`brokerIP1:listenPort`).
    pub store_host: SocketAddr,
    /// Commit-log physical offset of the record.
    pub commit_log_offset: i64,
}

const HEX_UPPER: &[u8; 16] = b"0123456789ABCDEF";

fn push_hex(dst: &mut String, bytes: &[u8]) {
    for byte in bytes {
        dst.push(char::from(HEX_UPPER[usize::from(byte >> 4)]));
        dst.push(char::from(HEX_UPPER[usize::from(byte & 0xF)]));
    }
}

fn ip_octets(ip: IpAddr, dst: &mut String) {
    match ip {
        IpAddr::V4(v4) => push_hex(dst, &v4.octets()),
        IpAddr::V6(v6) => push_hex(dst, &v6.octets()),
    }
}

/// Renders the offset message id of a record stored at `commit_log_offset` by `store_host`.
pub fn encode_offset_msg_id(store_host: SocketAddr, commit_log_offset: i64) -> String {
    let mut text = String::with_capacity(OFFSET_MSG_ID_V6_CHARS);
    ip_octets(store_host.ip(), &mut text);
    push_hex(&mut text, &i32::from(store_host.port()).to_be_bytes());
    push_hex(&mut text, &commit_log_offset.to_be_bytes());
    assert!(text.len() == OFFSET_MSG_ID_V4_CHARS || text.len() == OFFSET_MSG_ID_V6_CHARS);
    text
}

fn hex_value(byte: u8, position: usize) -> Result<u8, MessageIdError> {
    match byte {
        b'0'..=b'9' => Ok(byte - b'0'),
        b'a'..=b'f' => Ok(byte - b'a' + 10),
        b'A'..=b'F' => Ok(byte - b'A' + 10),
        _ => Err(MessageIdError::NotHex { position }),
    }
}

fn decode_hex<const N: usize>(text: &[u8], start: usize) -> Result<[u8; N], MessageIdError> {
    assert!(text.len() >= start + 2 * N);
    let mut bytes = [0u8; N];
    for (index, byte) in bytes.iter_mut().enumerate() {
        let position = start + 2 * index;
        *byte = hex_value(text[position], position)? << 4
            | hex_value(text[position + 1], position + 1)?;
    }
    Ok(bytes)
}

/// Decodes an offset message id; the address family follows from the length, as in Java.
/// Hex digits of either case are accepted.
pub fn decode_offset_msg_id(text: &str) -> Result<OffsetMessageId, MessageIdError> {
    let bytes = text.as_bytes();
    let (ip, rest) = match bytes.len() {
        OFFSET_MSG_ID_V4_CHARS => (IpAddr::V4(Ipv4Addr::from(decode_hex::<4>(bytes, 0)?)), 8),
        OFFSET_MSG_ID_V6_CHARS => (IpAddr::V6(Ipv6Addr::from(decode_hex::<16>(bytes, 0)?)), 32),
        length => return Err(MessageIdError::Length { length }),
    };
    let port = i32::from_be_bytes(decode_hex::<4>(bytes, rest)?);
    let commit_log_offset = i64::from_be_bytes(decode_hex::<8>(bytes, rest + 8)?);
    let port = u16::try_from(port).map_err(|_| MessageIdError::Port { port })?;
    Ok(OffsetMessageId {
        store_host: SocketAddr::new(ip, port),
        commit_log_offset,
    })
}

/// Generates client unique keys (`UNIQ_KEY`) with the Java layout.
///
/// Thread-safe without locks: the fixed prefix is computed once, the counter is an atomic,
/// and the month start is cached in an atomic and refreshed when a timestamp leaves its month.
#[derive(Debug)]
pub struct UniqueKeyGenerator {
    /// Upper-case hex of ip, pid and random: fixed for the generator's life.
    prefix: String,
    counter: AtomicU32,
    /// Start of the current month (UTC), ms since the epoch, and the start of the next one,
    /// packed as two u32 counts of seconds since the epoch in one word so they change together.
    month_bounds_s: AtomicU64,
}

impl UniqueKeyGenerator {
    /// A generator for a client at `ip` whose process id is `pid`; `random` stands in for the
    /// Java class loader hash and should be drawn once per process from a random source.
    pub fn new(ip: IpAddr, pid: u32, random: i32) -> UniqueKeyGenerator {
        let mut prefix = String::with_capacity(40);
        ip_octets(ip, &mut prefix);
        let pid_low = (pid & 0xFFFF) as u16;
        push_hex(&mut prefix, &pid_low.to_be_bytes());
        push_hex(&mut prefix, &random.to_be_bytes());
        UniqueKeyGenerator {
            prefix,
            counter: AtomicU32::new(0),
            month_bounds_s: AtomicU64::new(0),
        }
    }

    /// A generator for this process at `ip`: its own pid, and a random value taken from the
    /// standard library's per-process random hash keys (no extra dependency, and different in
    /// every process, which is all the field needs).
    pub fn for_this_process(ip: IpAddr) -> UniqueKeyGenerator {
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        let random_bits = hasher.finish().to_be_bytes();
        let random = i32::from_be_bytes([
            random_bits[0],
            random_bits[1],
            random_bits[2],
            random_bits[3],
        ]);
        UniqueKeyGenerator::new(ip, std::process::id(), random)
    }

    /// The fixed per-process prefix (20 hex characters for IPv4).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The next key for a message created at `now_ms` (wall clock, ms since the Unix epoch).
    /// The month is taken in UTC: Java uses the JVM's local zone, which only shifts the field
    /// and does not change uniqueness.
    pub fn next(&self, now_ms: i64) -> String {
        let month_start_ms = self.month_start_ms(now_ms);
        let since_month_ms = month_field(now_ms - month_start_ms);
        let counter = (self.counter.fetch_add(1, Ordering::Relaxed) & 0xFFFF) as u16;
        let mut key = String::with_capacity(self.prefix.len() + 12);
        key.push_str(&self.prefix);
        push_hex(&mut key, &since_month_ms.to_be_bytes());
        push_hex(&mut key, &counter.to_be_bytes());
        key
    }

    fn month_start_ms(&self, now_ms: i64) -> i64 {
        let now_s = now_ms.div_euclid(1000);
        let bounds = self.month_bounds_s.load(Ordering::Relaxed);
        let start_s = i64::try_from(bounds >> 32).expect("32 bits");
        let end_s = i64::try_from(bounds & 0xFFFF_FFFF).expect("32 bits");
        if start_s <= now_s && now_s < end_s {
            return start_s * 1000;
        }
        let (start_s, end_s) = month_bounds_utc_s(now_s);
        if let (Ok(start), Ok(end)) = (u32::try_from(start_s), u32::try_from(end_s)) {
            self.month_bounds_s
                .store(u64::from(start) << 32 | u64::from(end), Ordering::Relaxed);
        }
        start_s * 1000
    }
}

/// The i32 field Java writes: the difference wrapped to 32 bits (a month holds more ms than
/// an i32, so late-month values turn negative in Java too), with small backwards clock steps
/// (under 1,000,000 ms) clamped to 0.
fn month_field(delta_ms: i64) -> i32 {
    let low_bits = u32::try_from(delta_ms.rem_euclid(1 << 32)).expect("reduced modulo 2^32");
    let wrapped = low_bits as i32;
    if wrapped < 0 && wrapped > -1_000_000 {
        return 0;
    }
    wrapped
}

/// Start of the UTC month containing `now_s` and of the next month, seconds since the epoch.
fn month_bounds_utc_s(now_s: i64) -> (i64, i64) {
    let days = now_s.div_euclid(86_400);
    let (year, month, _) = civil_from_days(days);
    let start = days_from_civil(year, month, 1);
    let (next_year, next_month) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    let end = days_from_civil(next_year, next_month, 1);
    (start * 86_400, end * 86_400)
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31), proleptic Gregorian calendar
/// (H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// (year, month 1-12, day) to days since 1970-01-01 (H. Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_shifted = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * month_shifted + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// Writes `key` decoded fields for diagnostics: ip, pid, random, ms in month, counter.
pub fn describe_unique_key(key: &str) -> Option<String> {
    let bytes = key.as_bytes();
    let ip_bytes = match bytes.len() {
        32 => 4,
        56 => 16,
        _ => return None,
    };
    let start = 2 * ip_bytes;
    let pid = u16::from_be_bytes(decode_hex::<2>(bytes, start).ok()?);
    let random = i32::from_be_bytes(decode_hex::<4>(bytes, start + 4).ok()?);
    let since_month_ms = i32::from_be_bytes(decode_hex::<4>(bytes, start + 12).ok()?);
    let counter = u16::from_be_bytes(decode_hex::<2>(bytes, start + 20).ok()?);
    let mut text = String::new();
    let _ = write!(
        text,
        "pid={pid} random={random} ms_in_month={since_month_ms} counter={counter}"
    );
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the reference example and a round trip for both address families.
    #[test]
    fn offset_msg_id_reference_example() {
        let host: SocketAddr = "10.0.0.5:10911".parse().unwrap();
        let id = encode_offset_msg_id(host, 0x1234);
        assert_eq!(id, "0A00000500002A9F0000000000001234");
        assert_eq!(
            decode_offset_msg_id(&id).unwrap(),
            OffsetMessageId {
                store_host: host,
                commit_log_offset: 0x1234
            }
        );
        let v6: SocketAddr = "[2001:db8::1]:10911".parse().unwrap();
        let id6 = encode_offset_msg_id(v6, i64::MAX);
        assert_eq!(id6.len(), 56);
        assert_eq!(
            decode_offset_msg_id(&id6.to_lowercase())
                .unwrap()
                .store_host,
            v6
        );
    }

    // Proves bad lengths, characters and ports are typed errors.
    #[test]
    fn offset_msg_id_errors() {
        assert_eq!(
            decode_offset_msg_id("00"),
            Err(MessageIdError::Length { length: 2 })
        );
        assert_eq!(
            decode_offset_msg_id("0A00000500002A9F000000000000123G"),
            Err(MessageIdError::NotHex { position: 31 })
        );
        assert_eq!(
            decode_offset_msg_id("0A000005FFFFFFFF0000000000001234"),
            Err(MessageIdError::Port { port: -1 })
        );
        assert!(decode_offset_msg_id("é0000005FFFFFFFF000000000000123").is_err());
    }

    // Proves the unique key layout: fixed prefix, month-relative ms and a counter.
    #[test]
    fn unique_key_layout() {
        let generator = UniqueKeyGenerator::new("192.168.1.2".parse().unwrap(), 0x1_2345, -1);
        assert_eq!(generator.prefix(), "C0A801022345FFFFFFFF");
        // 2026-11-29T15:00:00Z; the month started 2026-11-01T00:00:00Z.
        let now_ms = 1_795_964_400_000;
        let month_start_ms = 1_793_491_200_000;
        let key = generator.next(now_ms);
        assert_eq!(key.len(), 32);
        // 2,473,200,000 ms wraps past i32::MAX, as Java's (int) cast does.
        assert_eq!(&key[20..28], format!("{:08X}", now_ms - month_start_ms));
        assert_eq!(month_field(now_ms - month_start_ms), -1_821_767_296);
        assert_eq!(month_field(-5), 0);
        assert_eq!(month_field(-2_000_000), -2_000_000);
        assert_eq!(&key[28..], "0000");
        assert_eq!(&generator.next(now_ms)[28..], "0001");
        assert!(describe_unique_key(&key).unwrap().contains("pid=9029"));
    }

    // Proves the calendar helpers agree on known dates, including leap years.
    #[test]
    fn month_bounds() {
        assert_eq!(month_bounds_utc_s(0), (0, 31 * 86_400));
        // 2024-02-15 lies in a 29-day February.
        let (start, end) = month_bounds_utc_s(1_707_955_200);
        assert_eq!(start, 1_706_745_600);
        assert_eq!(end - start, 29 * 86_400);
        for days in [-1000i64, 0, 59, 365, 10_000, 20_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    // Proves two generators of one process draw different random fields, as two processes
    // would, and that an IPv6 address gives 56-character keys.
    #[test]
    fn per_process_random_field() {
        let ip: IpAddr = "10.1.1.1".parse().unwrap();
        let first = UniqueKeyGenerator::for_this_process(ip);
        let second = UniqueKeyGenerator::for_this_process(ip);
        assert_eq!(first.prefix()[..12], second.prefix()[..12]);
        assert_ne!(first.prefix()[12..], second.prefix()[12..]);
        let v6 = UniqueKeyGenerator::for_this_process("2001:db8::1".parse().unwrap());
        assert_eq!(v6.next(0).len(), 56);
    }

    // Proves keys stay unique across threads sharing one generator.
    #[test]
    fn unique_across_threads() {
        let generator =
            std::sync::Arc::new(UniqueKeyGenerator::new("10.1.1.1".parse().unwrap(), 42, 7));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let generator = generator.clone();
                std::thread::spawn(move || {
                    (0..5000)
                        .map(|_| generator.next(1_795_964_400_000))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all = std::collections::HashSet::new();
        for handle in handles {
            for key in handle.join().unwrap() {
                assert!(all.insert(key));
            }
        }
        assert_eq!(all.len(), 20_000);
    }
}
