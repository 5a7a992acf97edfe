//! The SEND_BATCH_MESSAGE body (docs/protocol.md#batch-body): per-message entries, back to back.
//!
//! ```text
//! +-----------+-------+----------+------+----------+------+-------------+------------+
//! | TOTALSIZE | MAGIC | BODYCRC  | FLAG | BODYLEN  | BODY | PROPERTIES- | PROPERTIES |
//! | i32       | i32 0 | i32 0    | i32  | i32 (n)  | n    | LENGTH i16  | p          |
//! +-----------+-------+----------+------+----------+------+-------------+------------+
//! TOTALSIZE = 22 + n + p
//! ```
//!
//! Magic and CRC are written as 0 and ignored on decode (the broker computes the real CRC
//! when it stores each entry as its own record). Decoding borrows from the body: an entry's
//! body and properties are slices of the input. TOTALSIZE must equal the inner lengths; the
//! Java broker walks by the inner lengths alone, but every known client encoder writes
//! `22 + n + p`, and a disagreement means a broken encoder whose data should not be stored.

use bytes::{BufMut, BytesMut};

use crate::limits::{BATCH_ENTRIES_MAX, PROPERTIES_BYTES_MAX};
use crate::message::RecordError;

/// Fixed bytes of an entry: everything but body and properties.
pub const BATCH_ENTRY_FIXED_BYTES: usize = 22;

/// One message of a batch, borrowed from the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchEntry<'a> {
    /// Application flag.
    pub flag: i32,
    /// Message body (never compressed in batches).
    pub body: &'a [u8],
    /// This message's own properties string (its `UNIQ_KEY`, `KEYS`, `TAGS`, `WAIT`, ...).
    pub properties: &'a str,
}

impl BatchEntry<'_> {
    /// Encoded size of this entry.
    pub fn encoded_length(&self) -> usize {
        BATCH_ENTRY_FIXED_BYTES + self.body.len() + self.properties.len()
    }

    /// Appends this entry to `dst`.
    pub fn encode(&self, dst: &mut BytesMut) -> Result<usize, RecordError> {
        if self.properties.len() > PROPERTIES_BYTES_MAX {
            return Err(RecordError::TooLong {
                what: "batch entry properties",
                length: self.properties.len(),
                max: PROPERTIES_BYTES_MAX,
            });
        }
        let total = self.encoded_length();
        let total_i32 = i32::try_from(total).map_err(|_| RecordError::TooLong {
            what: "batch entry",
            length: total,
            max: i32::MAX as usize,
        })?;
        let start = dst.len();
        dst.reserve(total);
        dst.put_i32(total_i32);
        dst.put_i32(0);
        dst.put_i32(0);
        dst.put_i32(self.flag);
        dst.put_i32(i32::try_from(self.body.len()).expect("body shorter than the entry"));
        dst.put_slice(self.body);
        dst.put_i16(i16::try_from(self.properties.len()).expect("checked above"));
        dst.put_slice(self.properties.as_bytes());
        assert_eq!(dst.len() - start, total);
        Ok(total)
    }
}

/// Appends every entry to `dst`, returning the bytes written.
pub fn encode_batch(entries: &[BatchEntry<'_>], dst: &mut BytesMut) -> Result<usize, RecordError> {
    if entries.len() > BATCH_ENTRIES_MAX {
        return Err(RecordError::TooLong {
            what: "batch entry count",
            length: entries.len(),
            max: BATCH_ENTRIES_MAX,
        });
    }
    let mut written = 0;
    for entry in entries {
        written += entry.encode(dst)?;
    }
    Ok(written)
}

/// Decodes every entry of a batch body, refusing more than [`BATCH_ENTRIES_MAX`] entries.
/// Error offsets are relative to the whole body.
pub fn decode_batch(body: &[u8]) -> Result<Vec<BatchEntry<'_>>, RecordError> {
    // Each entry takes at least 22 bytes, so this bound is honest and costs no more than the
    // body itself.
    let capacity = (body.len() / BATCH_ENTRY_FIXED_BYTES).min(BATCH_ENTRIES_MAX);
    let mut entries = Vec::with_capacity(capacity);
    let mut offset = 0;
    while offset < body.len() {
        if entries.len() == BATCH_ENTRIES_MAX {
            return Err(RecordError::TooLong {
                what: "batch entry count",
                length: entries.len() + 1,
                max: BATCH_ENTRIES_MAX,
            });
        }
        let (entry, length) = decode_entry(body, offset)?;
        entries.push(entry);
        offset += length;
    }
    assert_eq!(offset, body.len());
    Ok(entries)
}

/// Iterates entries lazily; stops after the first error.
pub fn iter_batch(body: &[u8]) -> BatchIter<'_> {
    BatchIter {
        body,
        offset: 0,
        failed: false,
    }
}

/// Lazy batch decoder; see [`iter_batch`].
#[derive(Clone, Debug)]
pub struct BatchIter<'a> {
    body: &'a [u8],
    offset: usize,
    failed: bool,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<BatchEntry<'a>, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.offset >= self.body.len() {
            return None;
        }
        match decode_entry(self.body, self.offset) {
            Ok((entry, length)) => {
                self.offset += length;
                Some(Ok(entry))
            }
            Err(error) => {
                self.failed = true;
                Some(Err(error))
            }
        }
    }
}

fn field_i32(body: &[u8], at: usize, what: &'static str) -> Result<i32, RecordError> {
    match body.get(at..at + 4) {
        Some(word) => Ok(i32::from_be_bytes(word.try_into().expect("4 bytes"))),
        None => Err(RecordError::Truncated {
            what,
            offset: at,
            need: 4,
            have: body.len().saturating_sub(at),
        }),
    }
}

fn field_i16(body: &[u8], at: usize, what: &'static str) -> Result<i16, RecordError> {
    match body.get(at..at + 2) {
        Some(word) => Ok(i16::from_be_bytes(word.try_into().expect("2 bytes"))),
        None => Err(RecordError::Truncated {
            what,
            offset: at,
            need: 2,
            have: body.len().saturating_sub(at),
        }),
    }
}

fn length_field(value: i64, what: &'static str, offset: usize) -> Result<usize, RecordError> {
    usize::try_from(value).map_err(|_| RecordError::LengthInvalid {
        what,
        offset,
        length: value,
    })
}

/// Decodes the entry at `start`, returning it and its length.
fn decode_entry(body: &[u8], start: usize) -> Result<(BatchEntry<'_>, usize), RecordError> {
    let total = length_field(
        field_i32(body, start, "batch entry size")?.into(),
        "batch entry",
        start,
    )?;
    let flag = field_i32(body, start + 12, "batch entry flag")?;
    let body_len = length_field(
        field_i32(body, start + 16, "batch body length")?.into(),
        "batch body",
        start + 16,
    )?;
    let body_start = start + 20;
    let properties_length_at = body_start
        .checked_add(body_len)
        .filter(|end| *end <= body.len())
        .ok_or(RecordError::Truncated {
            what: "batch body",
            offset: body_start,
            need: body_len,
            have: body.len().saturating_sub(body_start),
        })?;
    let properties_len_raw = field_i16(body, properties_length_at, "batch properties length")?;
    let properties_len = length_field(
        properties_len_raw.into(),
        "batch properties",
        properties_length_at,
    )?;
    let properties_start = properties_length_at + 2;
    let Some(properties_bytes) = body.get(properties_start..properties_start + properties_len)
    else {
        return Err(RecordError::Truncated {
            what: "batch properties",
            offset: properties_start,
            need: properties_len,
            have: body.len().saturating_sub(properties_start),
        });
    };
    let computed = BATCH_ENTRY_FIXED_BYTES + body_len + properties_len;
    if computed != total {
        return Err(RecordError::TotalSizeMismatch {
            total_size: total,
            computed,
        });
    }
    let properties = std::str::from_utf8(properties_bytes).map_err(|_| RecordError::Utf8 {
        what: "batch properties",
        offset: properties_start,
    })?;
    let entry = BatchEntry {
        flag,
        body: &body[body_start..properties_length_at],
        properties,
    };
    assert_eq!(entry.encoded_length(), total);
    Ok((entry, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves encode then decode returns the same entries and consumes the whole body.
    #[test]
    fn round_trip() {
        let entries = [
            BatchEntry {
                flag: 0,
                body: b"first",
                properties: "UNIQ_KEY\u{1}A\u{2}",
            },
            BatchEntry {
                flag: 9,
                body: b"",
                properties: "",
            },
        ];
        let mut body = BytesMut::new();
        let written = encode_batch(&entries, &mut body).unwrap();
        assert_eq!(written, 22 + 5 + 11 + 22);
        assert_eq!(decode_batch(&body).unwrap(), entries);
        let lazily: Vec<_> = iter_batch(&body).map(Result::unwrap).collect();
        assert_eq!(lazily, entries);
    }

    // Proves lying sizes and truncations are typed errors with their offsets.
    #[test]
    fn lying_lengths() {
        let mut body = BytesMut::new();
        BatchEntry {
            flag: 0,
            body: b"abc",
            properties: "k\u{1}v\u{2}",
        }
        .encode(&mut body)
        .unwrap();
        let mut wrong_total = body.to_vec();
        wrong_total[3] += 1;
        assert!(matches!(
            decode_batch(&wrong_total),
            Err(RecordError::TotalSizeMismatch { .. })
        ));
        let mut huge_body = body.to_vec();
        huge_body[16..20].copy_from_slice(&i32::MAX.to_be_bytes());
        assert!(matches!(
            decode_batch(&huge_body),
            Err(RecordError::Truncated {
                what: "batch body",
                ..
            })
        ));
        let mut negative = body.to_vec();
        negative[16..20].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(matches!(
            decode_batch(&negative),
            Err(RecordError::LengthInvalid { .. })
        ));
        assert!(matches!(
            decode_batch(&body[..body.len() - 1]),
            Err(RecordError::Truncated { .. })
        ));
        let mut failing = iter_batch(&body[..10]);
        assert!(failing.next().unwrap().is_err());
        assert!(failing.next().is_none());
    }
}
