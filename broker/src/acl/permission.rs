//! Permission bits of the plain ACL (Java's `acl.common.Permission`).
//!
//! ```text
//! bit 0  DENY  owned: refuses everything, whatever else is set
//! bit 1  ANY   needed: PUB or SUB will do
//! bit 2  PUB   send to a topic
//! bit 3  SUB   consume a topic; use a group (checked on the group's `%RETRY%` topic)
//! ```

/// Refuses everything.
pub const DENY: u8 = 1;
/// Needed only: either PUB or SUB is enough.
pub const ANY: u8 = 1 << 1;
/// Publish.
pub const PUB: u8 = 1 << 2;
/// Subscribe.
pub const SUB: u8 = 1 << 3;

/// True when `owned` grants `needed` (`Permission.checkPermission`).
pub fn grants(needed: u8, owned: u8) -> bool {
    if owned & DENY != 0 {
        return false;
    }
    if needed & ANY != 0 {
        return owned & (PUB | SUB) != 0;
    }
    needed & owned != 0
}

/// Parses a permission as the file writes it: `DENY`, `PUB`, `SUB`, `PUB|SUB` or `SUB|PUB`
/// (surrounding blanks ignored). `None` for anything else: Java quietly reads an unknown
/// word as DENY, Comet refuses the file instead so a typo cannot go unnoticed.
pub fn parse(text: &str) -> Option<u8> {
    match text.trim() {
        "DENY" => Some(DENY),
        "PUB" => Some(PUB),
        "SUB" => Some(SUB),
        "PUB|SUB" | "SUB|PUB" => Some(PUB | SUB),
        _ => None,
    }
}

/// The word for a permission, for messages.
pub fn name(permission: u8) -> &'static str {
    match permission {
        _ if permission & DENY != 0 => "DENY",
        PUB => "PUB",
        SUB => "SUB",
        ANY => "ANY",
        _ if permission == PUB | SUB => "PUB|SUB",
        _ => "DENY",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the words parse as Java's, unknown words are refused, and the grant rules match
    // Permission.checkPermission (DENY wins, ANY takes either, otherwise a shared bit).
    #[test]
    fn parse_and_grant() {
        assert_eq!(parse(" PUB|SUB "), Some(PUB | SUB));
        assert_eq!(parse("SUB|PUB"), Some(PUB | SUB));
        assert_eq!(parse("DENY"), Some(DENY));
        assert_eq!(parse("pub"), None);
        assert_eq!(parse("PUB SUB"), None);
        assert!(grants(PUB, PUB | SUB));
        assert!(!grants(PUB, SUB));
        assert!(!grants(SUB, DENY | SUB));
        assert!(grants(ANY, SUB));
        assert!(!grants(ANY, DENY));
        assert_eq!(name(PUB | SUB), "PUB|SUB");
    }
}
