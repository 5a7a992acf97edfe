//! Address patterns of `whiteRemoteAddress` and `globalWhiteRemoteAddresses`, with the
//! meaning Java's `RemoteAddressStrategyFactory` gives them:
//!
//! ```text
//! (blank)                  matches nothing
//! *   *.*.*.*              matches every address
//! 192.168.0.{1,2,3}        one of the listed last parts (IPv6 too: 2001:db8::{1,2})
//! 192.168.0.1,10.0.0.2     one of the listed addresses (IPv4 or IPv6)
//! 192.168.*.*  10.1.0-63.* IPv4 range: the first `*` or `a-b` in parts 2..4 decides; the
//!                          parts before it must be equal; later parts are not looked at
//!                          (as in Java: `10.*.5.6` admits any 10.x.y.z)
//! 192.168.0.1  ::1         one address
//! ```
//!
//! Comet refuses, with an error naming the pattern, what Java would refuse or fail on at
//! match time (a malformed address, a range without a bound, fewer than four IPv4 parts),
//! and IPv6 ranges (`2001:db8::1-ff`), which it does not implement: its listeners are IPv4.

use std::collections::BTreeSet;
use std::net::{AddrParseError, IpAddr, Ipv4Addr};
use std::num::ParseIntError;

use super::limits::WHITE_ADDRESSES_MAX;
use super::AclFileError;

/// One parsed pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddressPattern {
    /// Blank: no address matches.
    Nothing,
    /// `*`: every address matches.
    Everything,
    /// A set of addresses (one address, a comma list or a `{..}` list).
    Set(BTreeSet<IpAddr>),
    /// An IPv4 range: `head` equal, part `head.len()` within `first..=last`.
    Ipv4Range {
        /// The leading parts that must be equal (1 to 3 of them).
        head: Vec<u8>,
        /// Lowest admitted value of the ranged part.
        first: u8,
        /// Highest admitted value of the ranged part.
        last: u8,
    },
}

/// What is wrong with an address pattern.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// A `{..}` list without the prefix it extends.
    #[error("expected PREFIX{{a,b,...}}")]
    Braces,
    /// An empty list, or one longer than [`WHITE_ADDRESSES_MAX`].
    #[error("a list needs 1 to {WHITE_ADDRESSES_MAX} addresses")]
    ListLength,
    /// An item that is no IPv4 or IPv6 address.
    #[error("`{item}` is not an IPv4 or IPv6 address")]
    NotAnAddress {
        /// The item as written.
        item: String,
        /// The parser's error.
        #[source]
        source: AddrParseError,
    },
    /// A range in an IPv6 pattern.
    #[error("IPv6 ranges are not supported by Comet")]
    Ipv6Range,
    /// An IPv4 range without four parts.
    #[error("an IPv4 range has four parts")]
    Ipv4Parts,
    /// A part before the ranged one that is not a number.
    #[error("the parts before `{ranged}` must be numbers 0..255")]
    RangeHead {
        /// The ranged part.
        ranged: String,
        /// The parser's error.
        #[source]
        source: ParseIntError,
    },
    /// No `*` or `a-b` part.
    #[error("no `*` or `a-b` range among the last three parts")]
    NoRange,
    /// An `a-b` part whose bounds are not numbers or are reversed.
    #[error("`{part}` is not a range a-b with 0 <= a <= b <= 255")]
    BadRange {
        /// The part as written.
        part: String,
    },
}

impl AddressPattern {
    /// Parses a pattern; the error names it and says what is wrong.
    pub fn parse(pattern: &str) -> Result<AddressPattern, AclFileError> {
        parse_pattern(pattern).map_err(|source| AclFileError::Address {
            pattern: pattern.to_owned(),
            source,
        })
    }

    /// True when `peer` matches.
    pub fn matches(&self, peer: IpAddr) -> bool {
        match self {
            AddressPattern::Nothing => false,
            AddressPattern::Everything => true,
            AddressPattern::Set(addresses) => addresses.contains(&peer),
            AddressPattern::Ipv4Range { head, first, last } => match peer {
                IpAddr::V4(peer) => ipv4_in_range(peer, head, *first, *last),
                IpAddr::V6(_) => false,
            },
        }
    }
}

fn parse_pattern(pattern: &str) -> Result<AddressPattern, AddressError> {
    if pattern.trim().is_empty() {
        return Ok(AddressPattern::Nothing);
    }
    if matches!(pattern, "*" | "*.*.*.*" | "*:*:*:*:*:*:*:*") {
        return Ok(AddressPattern::Everything);
    }
    if pattern.ends_with('}') {
        return parse_braces(pattern).ok_or(AddressError::Braces)?;
    }
    if pattern.contains(',') {
        let items: Vec<&str> = pattern.split(',').filter(|item| !item.is_empty()).collect();
        return address_set(&items);
    }
    if pattern.contains('*') || pattern.contains('-') {
        if pattern.contains(':') {
            return Err(AddressError::Ipv6Range);
        }
        return parse_ipv4_range(pattern);
    }
    address_set(&[pattern])
}

fn ipv4_in_range(peer: Ipv4Addr, head: &[u8], first: u8, last: u8) -> bool {
    let octets = peer.octets();
    assert!(!head.is_empty() && head.len() < octets.len());
    octets[..head.len()] == *head && (first..=last).contains(&octets[head.len()])
}

/// `192.168.0.{1,2}`: the text before `{` followed by each listed item; `None` when the
/// pattern is not of that form.
fn parse_braces(pattern: &str) -> Option<Result<AddressPattern, AddressError>> {
    let open = pattern.rfind('{')?;
    let prefix = &pattern[..open];
    let separator = if pattern.contains(':') { ':' } else { '.' };
    if !prefix.ends_with(separator) {
        return None;
    }
    if separator == '.' && prefix.split('.').filter(|part| !part.is_empty()).count() < 3 {
        return None;
    }
    let items: Vec<String> = pattern[open + 1..pattern.len() - 1]
        .split(',')
        .filter(|item| !item.is_empty())
        .map(|item| format!("{prefix}{item}"))
        .collect();
    let items: Vec<&str> = items.iter().map(String::as_str).collect();
    Some(address_set(&items))
}

/// Every item parsed as an address; the first that is not one is the error.
fn address_set(items: &[&str]) -> Result<AddressPattern, AddressError> {
    if items.is_empty() || items.len() > WHITE_ADDRESSES_MAX {
        return Err(AddressError::ListLength);
    }
    let mut addresses = BTreeSet::new();
    for item in items {
        let address = item
            .parse::<IpAddr>()
            .map_err(|source| AddressError::NotAnAddress {
                item: (*item).to_owned(),
                source,
            })?;
        addresses.insert(address);
    }
    Ok(AddressPattern::Set(addresses))
}

/// `a.b.*.*`, `a.b.c-d.*`: the first ranged part among parts 2..4 decides.
fn parse_ipv4_range(pattern: &str) -> Result<AddressPattern, AddressError> {
    let parts: Vec<&str> = pattern.split('.').filter(|part| !part.is_empty()).collect();
    if parts.len() != 4 {
        return Err(AddressError::Ipv4Parts);
    }
    for index in 1..4 {
        let Some((first, last)) = part_range(parts[index].trim())? else {
            continue;
        };
        let head = parts[..index]
            .iter()
            .map(|part| part.trim().parse::<u8>())
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|source| AddressError::RangeHead {
                ranged: parts[index].to_owned(),
                source,
            })?;
        return Ok(AddressPattern::Ipv4Range { head, first, last });
    }
    Err(AddressError::NoRange)
}

/// `*` → 0..=255, `a-b` → a..=b, a plain number → None (not the ranged part). As in Java, a
/// range ending at 0 does not count as the ranged part.
fn part_range(part: &str) -> Result<Option<(u8, u8)>, AddressError> {
    if part == "*" {
        return Ok(Some((0, 255)));
    }
    let Some((first, last)) = part.split_once('-') else {
        return Ok(None);
    };
    let number = |text: &str| text.trim().parse::<u8>().ok();
    match (number(first), number(last)) {
        (Some(first), Some(last)) if first <= last => Ok((last > 0).then_some((first, last))),
        _ => Err(AddressError::BadRange {
            part: part.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, peer: &str) -> bool {
        AddressPattern::parse(pattern)
            .unwrap()
            .matches(peer.parse().unwrap())
    }

    // Proves each form Java accepts matches as Java's strategies do: blank, everything, one
    // address (IPv4 and IPv6), comma and brace lists, and IPv4 ranges with `*` and `a-b`,
    // including Java's quirk that parts after the ranged one are not compared.
    #[test]
    fn forms_match_as_java() {
        assert!(!matches("", "127.0.0.1"));
        assert!(matches("*", "10.1.2.3"));
        assert!(matches("*.*.*.*", "::1"));
        assert!(matches("127.0.0.1", "127.0.0.1"));
        assert!(!matches("127.0.0.1", "127.0.0.2"));
        assert!(matches("::1", "0:0:0:0:0:0:0:1"));
        assert!(matches("10.0.0.1,127.0.0.1", "127.0.0.1"));
        assert!(!matches("10.0.0.1,10.0.0.2", "127.0.0.1"));
        assert!(matches("192.168.0.{1,2,3}", "192.168.0.2"));
        assert!(!matches("192.168.0.{1,2,3}", "192.168.0.4"));
        assert!(matches("2001:db8::{1,2}", "2001:db8::2"));
        assert!(matches("127.0.*.*", "127.0.200.1"));
        assert!(!matches("127.0.*.*", "127.1.0.1"));
        assert!(matches("10.1.0-63.*", "10.1.63.9"));
        assert!(!matches("10.1.0-63.*", "10.1.64.9"));
        assert!(!matches("10.1.0-63.*", "10.12.1.1"));
        assert!(matches("10.*.5.6", "10.9.9.9"));
        assert!(matches("127.0.0.1-5", "127.0.0.5"));
        assert!(!matches("127.0.0.1-5", "127.0.0.6"));
        assert!(!matches("127.*.*.*", "::1"));
    }

    // Proves malformed patterns are refused with an error naming the pattern.
    #[test]
    fn malformed_patterns_are_refused() {
        for bad in [
            "localhost",
            "127.0.0.256",
            "127.0.0.1, 10.0.0.1",
            "127.0.*",
            "127.0.5-1.*",
            "127.0.0-0.1",
            "-1.0.0.*",
            "x.0.*.*",
            "1.2.{3,4}",
            "1.2.3.{4,x}",
            "2001:db8::1-ff",
        ] {
            let error = AddressPattern::parse(bad).unwrap_err();
            assert!(error.to_string().contains(bad), "{bad}: {error}");
        }
    }
}
