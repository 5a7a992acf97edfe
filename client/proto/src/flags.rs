//! Flag words of the protocol (docs/protocol.md#flag-words): the message sysflag stored in every
//! record and sent in send headers, the pull sysflag of pull requests, the topic sysflag and the
//! permission bits of brokers and topics.
//!
//! ```text
//! MessageSysFlag (i32)
//!  bit 10..8  7      6      5         4         3..2        1          0
//!  +--------+------+------+---------+---------+-----------+----------+------------+
//!  | compr. | inner| need | store   | born    | trans-    | multi    | compressed |
//!  | type   | batch|unwrap| host v6 | host v6 | action    | tags     |            |
//!  +--------+------+------+---------+---------+-----------+----------+------------+
//! ```

/// Message sysflag bits (`MessageSysFlag`), carried in send headers and stored records.
pub mod message {
    /// Bit 0: the body is compressed; the type lives in bits 8-10.
    pub const COMPRESSED: i32 = 0x1;
    /// Bit 1: the topic filters on multiple tags (set by the broker).
    pub const MULTI_TAGS: i32 = 0x2;
    /// Bits 2-3: transaction type mask.
    pub const TRANSACTION_TYPE_MASK: i32 = 0xC;
    /// Transaction type: an ordinary message.
    pub const TRANSACTION_NOT_TYPE: i32 = 0x0;
    /// Transaction type: a half (prepared) message.
    pub const TRANSACTION_PREPARED_TYPE: i32 = 0x4;
    /// Transaction type: a committed transaction message.
    pub const TRANSACTION_COMMIT_TYPE: i32 = 0x8;
    /// Transaction type: a rolled-back transaction message.
    pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0xC;
    /// Bit 4: the born host is stored as a 16-byte IPv6 address.
    pub const BORN_HOST_V6: i32 = 0x10;
    /// Bit 5: the store host is stored as a 16-byte IPv6 address.
    pub const STORE_HOST_V6: i32 = 0x20;
    /// Bit 6: 5.x inner batch that the client must unwrap.
    pub const NEED_UNWRAP: i32 = 0x40;
    /// Bit 7: 5.x inner batch record.
    pub const INNER_BATCH: i32 = 0x80;
    /// Bits 8-10: compression type mask; see [`crate::compression::CompressionType`].
    pub const COMPRESSION_TYPE_MASK: i32 = 0x700;
    /// Shift of the compression type field.
    pub const COMPRESSION_TYPE_SHIFT: u32 = 8;

    /// The transaction type bits of `sysflag`.
    pub const fn transaction_type(sysflag: i32) -> i32 {
        sysflag & TRANSACTION_TYPE_MASK
    }

    /// `sysflag` with its transaction type replaced by `transaction_type`.
    pub const fn with_transaction_type(sysflag: i32, transaction_type: i32) -> i32 {
        (sysflag & !TRANSACTION_TYPE_MASK) | (transaction_type & TRANSACTION_TYPE_MASK)
    }

    /// True when the body is compressed.
    pub const fn is_compressed(sysflag: i32) -> bool {
        sysflag & COMPRESSED != 0
    }

    /// Bytes a host address takes in a record for the given IPv6 bit: 4 + port, or 16 + port.
    pub const fn host_bytes(sysflag: i32, v6_bit: i32) -> usize {
        if sysflag & v6_bit == 0 {
            8
        } else {
            20
        }
    }
}

/// Pull request sysflag bits (`PullSysFlag`).
pub mod pull {
    /// Bit 0: store the header's `commitOffset`.
    pub const COMMIT_OFFSET: i32 = 0x1;
    /// Bit 1: the broker may hold the request (long polling).
    pub const SUSPEND: i32 = 0x2;
    /// Bit 2: the header's `subscription`/`expressionType` are authoritative.
    pub const SUBSCRIPTION: i32 = 0x4;
    /// Bit 3: legacy class filter.
    pub const CLASS_FILTER: i32 = 0x8;
    /// Bit 4: lite pull consumer.
    pub const LITE_PULL: i32 = 0x10;

    /// Builds a pull sysflag as the Java `PullSysFlag.buildSysFlag` does.
    pub const fn build(
        commit_offset: bool,
        suspend: bool,
        subscription: bool,
        class_filter: bool,
    ) -> i32 {
        let mut flag = 0;
        if commit_offset {
            flag |= COMMIT_OFFSET;
        }
        if suspend {
            flag |= SUSPEND;
        }
        if subscription {
            flag |= SUBSCRIPTION;
        }
        if class_filter {
            flag |= CLASS_FILTER;
        }
        flag
    }

    /// `sysflag` without the commit-offset bit (a pull served by a slave).
    pub const fn clear_commit_offset(sysflag: i32) -> i32 {
        sysflag & !COMMIT_OFFSET
    }
}

/// Topic config sysflag bits (`TopicSysFlag`).
pub mod topic {
    /// Bit 0: unit topic.
    pub const UNIT: i32 = 0x1;
    /// Bit 1: unit subscription.
    pub const UNIT_SUBSCRIPTION: i32 = 0x2;
}

/// Permission bits of brokers and topics (`PermName`).
pub mod perm {
    /// Bit 3: priority.
    pub const PRIORITY: i32 = 0x8;
    /// Bit 2: readable.
    pub const READ: i32 = 0x4;
    /// Bit 1: writable.
    pub const WRITE: i32 = 0x2;
    /// Bit 0: inheritable (template topics such as `TBW102`).
    pub const INHERIT: i32 = 0x1;
    /// Read and write: the usual topic permission.
    pub const READ_WRITE: i32 = READ | WRITE;

    /// True when `perm` allows reading.
    pub const fn is_readable(perm: i32) -> bool {
        perm & READ != 0
    }

    /// True when `perm` allows writing.
    pub const fn is_writeable(perm: i32) -> bool {
        perm & WRITE != 0
    }

    /// True when `perm` is inheritable.
    pub const fn is_inherited(perm: i32) -> bool {
        perm & INHERIT != 0
    }

    /// The Java `PermName.perm2String` rendering: `R`, `W`, `X` or `-` each.
    pub fn to_text(perm: i32) -> String {
        let mut text = String::with_capacity(3);
        text.push(if is_readable(perm) { 'R' } else { '-' });
        text.push(if is_writeable(perm) { 'W' } else { '-' });
        text.push(if is_inherited(perm) { 'X' } else { '-' });
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the transaction type helpers keep the other bits and the documented values.
    #[test]
    fn transaction_type_round_trip() {
        let sysflag = message::COMPRESSED | message::TRANSACTION_PREPARED_TYPE | 0x300;
        assert_eq!(message::transaction_type(sysflag), 0x4);
        let committed = message::with_transaction_type(sysflag, message::TRANSACTION_COMMIT_TYPE);
        assert_eq!(committed, message::COMPRESSED | 0x8 | 0x300);
        assert_eq!(
            message::host_bytes(message::BORN_HOST_V6, message::BORN_HOST_V6),
            20
        );
        assert_eq!(message::host_bytes(0, message::STORE_HOST_V6), 8);
    }

    // Proves the pull flag builder and the permission text match the Java values.
    #[test]
    fn pull_and_perm() {
        assert_eq!(pull::build(true, true, true, false), 7);
        assert_eq!(pull::clear_commit_offset(7), 6);
        assert_eq!(perm::to_text(6), "RW-");
        assert_eq!(perm::to_text(7), "RWX");
        assert_eq!(perm::to_text(1), "--X");
    }
}
