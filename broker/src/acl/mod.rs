//! RocketMQ's plain ACL (ACL 1.0), as Apache RocketMQ's `PlainAccessValidator` applies it.
//!
//! Turned on by `aclEnable=true`; the accounts come from the file named by `plainAclFile`
//! (see [`file`]), read at start-up and again whenever it changes (shard 0 checks it every
//! second; a changed file that does not parse leaves the accounts in force).
//! Every request with a processor is checked on the shard it arrived on, before routing:
//!
//! ```text
//! 1. needed resources from the request code (resource::needed); unreadable -> refused
//! 2. peer matches a globalWhiteRemoteAddresses pattern          -> admitted
//! 3. no AccessKey ext field                                      -> refused
//! 4. AccessKey unknown                                           -> refused
//! 5. peer matches the account's whiteRemoteAddress               -> admitted
//! 6. Signature differs from Base64(HmacSHA1(secretKey, content)) -> refused
//! 7. needs PUB on RMQ_SYS_TRACE_TOPIC (message traces)           -> admitted
//! 8. admin account                                               -> admitted
//! 9. admin-only code                                             -> refused
//! 10. each needed resource: its listed permission, else the account's default topic or
//!     group permission, must grant what is needed                -> else refused
//! ```
//!
//! A refused request is answered as the Java broker answers an exception from its ACL hook:
//! `SYSTEM_ERROR` (1) with the remark `org.apache.rocketmq.acl.common.AclException: <why>`
//! (no answer to a one-way request). The tables are immutable after loading and shared by
//! every shard.

pub mod address;
pub mod file;
pub mod limits;
pub mod permission;
pub mod resource;

use std::io::Read;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use comet_proto::acl::{request_signature, signatures_equal, ACCESS_KEY, SIGNATURE};
use comet_proto::names;
use comet_proto::{RemotingCommand, ResponseCode};
use thiserror::Error;

use self::file::{Account, AclTables};
use self::limits::ACL_FILE_BYTES_MAX;
use self::resource::{describe, is_group, needs_admin, Needed};

/// The ext field Java clients up to 4.9.3 left out of the signed content.
const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";
/// `MQVersion.Version.V4_9_3.ordinal()`: requests from this version or older are checked
/// without [`UNIQUE_KEY_QUERY`], as the Java broker does.
const VERSION_4_9_3: i32 = 399;
/// Prefix of every refusal remark: the exception text Java clients show.
pub const REMARK_PREFIX: &str = "org.apache.rocketmq.acl.common.AclException: ";

/// What is wrong with the accounts file.
#[derive(Debug, Error)]
pub enum AclFileError {
    /// The file cannot be read.
    #[error("cannot read it: {0}")]
    Read(#[source] std::io::Error),
    /// The file is larger than [`ACL_FILE_BYTES_MAX`].
    #[error("it is larger than {max} bytes", max = ACL_FILE_BYTES_MAX)]
    TooLarge,
    /// Not YAML.
    #[error("not valid YAML: {message}")]
    Yaml {
        /// The parser's message (with line and column).
        message: String,
    },
    /// YAML, but not an accounts file.
    #[error("{what}")]
    Shape {
        /// What is wrong, and where.
        what: String,
    },
    /// A bad address pattern.
    #[error("address pattern `{pattern}`: {source}")]
    Address {
        /// The pattern as written.
        pattern: String,
        /// What is wrong with it.
        #[source]
        source: address::AddressError,
    },
    /// A list longer than its limit.
    #[error("too many {what} (at most {max})")]
    TooMany {
        /// What the list holds.
        what: &'static str,
        /// The limit.
        max: usize,
    },
}

/// The accounts file could not be used: which file, and why.
#[derive(Debug, Error)]
#[error("ACL accounts file {}: {reason}", path.display())]
pub struct AclLoadError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    #[source]
    pub reason: AclFileError,
}

/// Why a request was refused (the text after [`REMARK_PREFIX`]).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{message}")]
pub struct Denied {
    /// Java's message for the same refusal.
    pub message: String,
}

impl Denied {
    fn new(message: impl Into<String>) -> Denied {
        Denied {
            message: message.into(),
        }
    }

    /// The answer Java's broker gives: SYSTEM_ERROR with the exception as the remark.
    pub fn response_to(&self, request: &RemotingCommand) -> RemotingCommand {
        let remark = format!("{REMARK_PREFIX}{}", self.message);
        RemotingCommand::error_to(request, ResponseCode::SYSTEM_ERROR, remark)
    }
}

/// The loaded plain ACL.
#[derive(Debug)]
pub struct AccessControl {
    /// The accounts in force, replaced whole when the file changes (readers take an `Arc`).
    tables: RwLock<Arc<AclTables>>,
    /// Where the accounts came from and how the file looked when last read (`None` for
    /// tables given directly).
    source: Option<Mutex<Source>>,
}

#[derive(Debug)]
struct Source {
    path: PathBuf,
    /// Hash of the file's bytes when last read (Java compares an MD5 of the content too, so
    /// an edit within one timestamp tick is not missed).
    content_hash: u64,
    /// The last check could not read the file (already reported).
    unreadable: bool,
}

fn content_hash(bytes: &[u8]) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(bytes, &mut hasher);
    std::hash::Hasher::finish(&hasher)
}

/// Reads the accounts file's bytes (at most [`ACL_FILE_BYTES_MAX`]).
fn read_bytes(path: &Path) -> Result<Vec<u8>, AclLoadError> {
    let error = |reason| AclLoadError {
        path: path.to_owned(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|e| error(AclFileError::Read(e)))?;
    let mut bytes = Vec::new();
    file.take(ACL_FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| error(AclFileError::Read(e)))?;
    if bytes.len() as u64 > ACL_FILE_BYTES_MAX {
        return Err(error(AclFileError::TooLarge));
    }
    Ok(bytes)
}

/// Parses the accounts file's bytes.
fn parse_tables(path: &Path, bytes: Vec<u8>) -> Result<AclTables, AclLoadError> {
    let error = |reason| AclLoadError {
        path: path.to_owned(),
        reason,
    };
    let text = String::from_utf8(bytes).map_err(|_| {
        error(AclFileError::Yaml {
            message: "the file is not UTF-8".to_owned(),
        })
    })?;
    let tables = file::parse(&text).map_err(error)?;
    if tables.accounts.is_empty() {
        log::warn!(
            "ACL: {} lists no account; only whitelisted peers are admitted",
            path.display()
        );
    }
    Ok(tables)
}

impl AccessControl {
    /// Reads and parses the accounts file (at most [`ACL_FILE_BYTES_MAX`] bytes).
    pub fn load(path: &Path) -> Result<AccessControl, AclLoadError> {
        let bytes = read_bytes(path)?;
        let hash = content_hash(&bytes);
        let tables = parse_tables(path, bytes)?;
        Ok(AccessControl {
            tables: RwLock::new(Arc::new(tables)),
            source: Some(Mutex::new(Source {
                path: path.to_owned(),
                content_hash: hash,
                unreadable: false,
            })),
        })
    }

    /// Access control over already parsed tables.
    pub fn from_tables(tables: AclTables) -> AccessControl {
        AccessControl {
            tables: RwLock::new(Arc::new(tables)),
            source: None,
        }
    }

    /// Reads the accounts file again and applies it if its content changed since it was last read
    /// (Java watches it too). A file that parses replaces the accounts in force (`Ok(true)`); one
    /// that does not is an error and the accounts in force stay until the file changes again.
    /// Blocking file I/O: callers run it off the shard threads.
    pub fn reload_if_changed(&self) -> Result<bool, AclLoadError> {
        let Some(source) = &self.source else {
            return Ok(false);
        };
        let mut source = source.lock().unwrap_or_else(PoisonError::into_inner);
        let bytes = match read_bytes(&source.path) {
            Ok(bytes) => {
                source.unreadable = false;
                bytes
            }
            // Reported once, not at every check while the file stays unreadable.
            Err(_) if source.unreadable => return Ok(false),
            Err(error) => {
                source.unreadable = true;
                return Err(error);
            }
        };
        let hash = content_hash(&bytes);
        if hash == source.content_hash {
            return Ok(false);
        }
        source.content_hash = hash;
        let tables = parse_tables(&source.path, bytes)?;
        *self.tables.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(tables);
        Ok(true)
    }

    /// The accounts in force.
    fn current(&self) -> Arc<AclTables> {
        self.tables
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Admits or refuses `request` from `peer` (steps 1 to 10 of the module docs).
    pub fn check(&self, request: &RemotingCommand, peer: IpAddr) -> Result<(), Denied> {
        let needed = resource::needed(request).map_err(|error| Denied::new(error.to_string()))?;
        let tables = self.current();
        let global = &tables.global_white_remote_addresses;
        if global.iter().any(|pattern| pattern.matches(peer)) {
            return Ok(());
        }
        let Some(access_key) = request.ext_fields.get(ACCESS_KEY) else {
            return Err(Denied::new("No accessKey is configured"));
        };
        let Some(account) = tables.accounts.get(access_key) else {
            return Err(Denied::new(format!("No acl config for {access_key}")));
        };
        if account.white_remote_address.matches(peer) {
            return Ok(());
        }
        if !signature_valid(request, &account.secret_key) {
            return Err(Denied::new(format!(
                "Check signature failed for accessKey={access_key}"
            )));
        }
        let traces = needed
            .iter()
            .any(|n| n.resource == names::TRACE_TOPIC && n.permission == permission::PUB);
        if traces || account.admin {
            return Ok(());
        }
        if needs_admin(request.code) {
            return Err(Denied::new(format!(
                "Need admin permission for request code={}, but accessKey={access_key} is not",
                request.code
            )));
        }
        needed
            .iter()
            .try_for_each(|needed| check_resource(account, needed))
    }
}

/// The signature the request carries against the one its content and the secret give.
fn signature_valid(request: &RemotingCommand, secret_key: &str) -> bool {
    let Some(given) = request.ext_fields.get(SIGNATURE) else {
        return false;
    };
    let old_client = request.version <= VERSION_4_9_3;
    let fields = request
        .ext_fields
        .iter()
        .filter(|(key, _)| !(old_client && *key == UNIQUE_KEY_QUERY));
    signatures_equal(&request_signature(fields, &request.body, secret_key), given)
}

/// One resource against the account's listed or default permission.
fn check_resource(account: &Account, needed: &Needed) -> Result<(), Denied> {
    let group = is_group(&needed.resource);
    match account.resources.get(&needed.resource) {
        Some(owned) if permission::grants(needed.permission, *owned) => Ok(()),
        Some(_) => Err(Denied::new(format!(
            "No permission for {}",
            describe(&needed.resource)
        ))),
        None => {
            let owned = if group {
                account.default_group_perm
            } else {
                account.default_topic_perm
            };
            if permission::grants(needed.permission, owned) {
                return Ok(());
            }
            Err(Denied::new(format!(
                "No default permission for {}",
                describe(&needed.resource)
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use comet_proto::acl::{sign, Credentials};
    use comet_proto::RequestCode;

    const FILE: &str = "\
globalWhiteRemoteAddresses: [10.9.*.*]
accounts:
  - {accessKey: producer1, secretKey: secret-p, defaultTopicPerm: PUB, topicPerms: [closed=DENY]}
  - {accessKey: admin001, secretKey: secret-a, admin: true}
  - {accessKey: trusted1, secretKey: secret-t, whiteRemoteAddress: 127.0.0.*}
";

    fn control() -> AccessControl {
        AccessControl::from_tables(file::parse(FILE).unwrap())
    }

    fn send(topic: &str, access_key: &str, secret: &str) -> RemotingCommand {
        let mut request = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2, 1);
        request.ext_fields.insert("b", topic);
        request.ext_fields.insert("a", "P");
        request.body = comet_proto::bytes::Bytes::from_static(b"body");
        sign(&mut request, &Credentials::new(access_key, secret));
        request
    }

    fn peer(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn refusal(result: Result<(), Denied>) -> String {
        result.unwrap_err().message
    }

    // Proves the validation order and messages: signed with the right secret passes; a wrong
    // secret, an unknown key, no key, a DENY topic and a topic outside the default are
    // refused with Java's messages; whitelists admit without a signature.
    #[test]
    fn checks_as_java() {
        let acl = control();
        let local = peer("127.0.0.1");
        assert_eq!(
            acl.check(&send("open", "producer1", "secret-p"), local),
            Ok(())
        );
        let wrong = refusal(acl.check(&send("open", "producer1", "nope"), local));
        assert_eq!(wrong, "Check signature failed for accessKey=producer1");
        let unknown = refusal(acl.check(&send("open", "stranger", "x"), local));
        assert_eq!(unknown, "No acl config for stranger");
        let mut unsigned = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2, 1);
        unsigned.ext_fields.insert("b", "open");
        assert_eq!(
            refusal(acl.check(&unsigned, local)),
            "No accessKey is configured"
        );
        assert_eq!(acl.check(&unsigned, peer("10.9.1.2")), Ok(()));
        let denied = refusal(acl.check(&send("closed", "producer1", "secret-p"), local));
        assert_eq!(denied, "No permission for topic:closed");
        let mut tampered = send("open", "producer1", "secret-p");
        tampered.body = comet_proto::bytes::Bytes::from_static(b"other");
        assert!(acl.check(&tampered, local).is_err());
        let trusted = send("open", "trusted1", "not-the-secret");
        assert_eq!(acl.check(&trusted, local), Ok(()));
        assert!(acl.check(&trusted, peer("10.0.0.1")).is_err());
    }

    // Proves admin-only codes need an admin account, and a pull needs SUB on the topic and
    // the group (a PUB-only account with default DENY groups is refused on the group).
    #[test]
    fn admin_codes_and_groups() {
        let acl = control();
        let local = peer("127.0.0.1");
        let mut create = RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_TOPIC, 1);
        create.ext_fields.insert("topic", "T");
        let mut by_producer = create.clone();
        sign(&mut by_producer, &Credentials::new("producer1", "secret-p"));
        let refused = refusal(acl.check(&by_producer, local));
        assert_eq!(
            refused,
            "Need admin permission for request code=17, but accessKey=producer1 is not"
        );
        sign(&mut create, &Credentials::new("admin001", "secret-a"));
        assert_eq!(acl.check(&create, local), Ok(()));
        let mut pull = RemotingCommand::request(RequestCode::PULL_MESSAGE, 1);
        pull.ext_fields.insert("topic", "open");
        pull.ext_fields.insert("consumerGroup", "G");
        sign(&mut pull, &Credentials::new("producer1", "secret-p"));
        let message = refusal(acl.check(&pull, local));
        assert!(
            message.starts_with("No default permission for "),
            "{message}"
        );
        let response = Denied::new("x").response_to(&pull);
        assert_eq!(response.code, ResponseCode::SYSTEM_ERROR.value());
        assert_eq!(
            response.remark.as_deref(),
            Some("org.apache.rocketmq.acl.common.AclException: x")
        );
    }

    // Proves requests of clients up to 4.9.3 are checked without `_UNIQUE_KEY_QUERY` in the
    // content, and newer ones with it.
    #[test]
    fn old_clients_leave_out_the_unique_key_flag() {
        let acl = control();
        let mut request = RemotingCommand::request(RequestCode::GET_MAX_OFFSET, 1);
        request.version = VERSION_4_9_3;
        sign(&mut request, &Credentials::new("producer1", "secret-p"));
        request.ext_fields.insert(UNIQUE_KEY_QUERY, "false");
        assert_eq!(acl.check(&request, peer("127.0.0.1")), Ok(()));
        request.version = VERSION_4_9_3 + 1;
        assert!(acl.check(&request, peer("127.0.0.1")).is_err());
    }

    // Proves a missing file and an oversized one are errors naming the file.
    #[test]
    fn unreadable_files() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("plain_acl.yml");
        let error = AccessControl::load(&missing).unwrap_err().to_string();
        assert!(
            error.contains("plain_acl.yml") && error.contains("cannot read"),
            "{error}"
        );
        let large = dir.path().join("large.yml");
        let size = usize::try_from(ACL_FILE_BYTES_MAX).unwrap() + 1;
        std::fs::write(&large, vec![b'#'; size]).unwrap();
        let error = AccessControl::load(&large).unwrap_err().to_string();
        assert!(error.contains("larger than"), "{error}");
        std::fs::write(&large, FILE).unwrap();
        assert!(AccessControl::load(&large).is_ok());
    }

    // Proves a changed accounts file replaces the accounts in force, an unchanged one is not
    // read again, and a malformed one is an error that leaves the accounts in force until the
    // file changes again.
    #[test]
    fn changed_files_are_reloaded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain_acl.yml");
        std::fs::write(&path, FILE).unwrap();
        let acl = AccessControl::load(&path).unwrap();
        let local = peer("127.0.0.1");
        let request = send("open", "producer1", "secret-p");
        assert!(acl.check(&request, local).is_ok());
        assert!(!acl.reload_if_changed().unwrap(), "unchanged");
        let closed = FILE.replace("topicPerms: [closed=DENY]", "topicPerms: [open=DENY]");
        std::fs::write(&path, &closed).unwrap();
        assert!(acl.reload_if_changed().unwrap());
        assert!(refusal(acl.check(&request, local)).contains("open"));
        std::fs::write(&path, "accounts: [unclosed").unwrap();
        assert!(acl.reload_if_changed().is_err());
        assert!(
            acl.check(&request, local).is_err(),
            "the last good accounts stay"
        );
        assert!(
            !acl.reload_if_changed().unwrap(),
            "a bad file is reported once"
        );
        std::fs::write(&path, FILE).unwrap();
        assert!(acl.reload_if_changed().unwrap());
        assert!(acl.check(&request, local).is_ok());
        std::fs::remove_file(&path).unwrap();
        assert!(acl.reload_if_changed().is_err());
        assert!(
            !acl.reload_if_changed().unwrap(),
            "a missing file is reported once"
        );
        assert!(
            acl.check(&request, local).is_ok(),
            "the accounts in force stay"
        );
    }
}
