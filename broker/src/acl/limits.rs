//! Bounds of the plain ACL. The accounts file is read at start-up and when it changes; these
//! keep a wrong or hostile file from taking the broker's memory, and say so by name when one
//! is hit.

/// Largest accounts file read (`plain_acl.yml`): 4 MiB, far above any real account list.
pub const ACL_FILE_BYTES_MAX: u64 = 4 * 1024 * 1024;

/// Most accounts in the file.
pub const ACCOUNTS_MAX: usize = 10_000;

/// Most `topicPerms` plus `groupPerms` entries of one account.
pub const RESOURCES_PER_ACCOUNT_MAX: usize = 100_000;

/// Most `globalWhiteRemoteAddresses` entries, and most addresses in one list pattern.
pub const WHITE_ADDRESSES_MAX: usize = 4096;

/// Shortest `accessKey` and `secretKey`: Java refuses keys of 6 characters or fewer
/// (`AclConstants.ACCESS_KEY_MIN_LENGTH` / `SECRET_KEY_MIN_LENGTH`, compared with `<=`).
pub const KEY_CHARS_MIN: usize = 7;
