//! The accounts file (`plain_acl.yml`), read with `yaml-rust2`.
//!
//! ```yaml
//! globalWhiteRemoteAddresses:        # peers admitted without any check
//!   - 10.10.103.*
//! accounts:
//!   - accessKey: RocketMQ            # more than 6 characters
//!     secretKey: 12345678            # more than 6 characters
//!     whiteRemoteAddress: 192.168.0.*   # this account's peers admitted without a signature
//!     admin: false                   # admin accounts pass every check after the signature
//!     defaultTopicPerm: DENY         # topics not listed below (absent: DENY)
//!     defaultGroupPerm: SUB          # groups not listed below (absent: DENY)
//!     topicPerms: [topicA=DENY, topicB=PUB|SUB, topicC=SUB]
//!     groupPerms: [groupA=DENY, groupB=PUB|SUB]
//! dataVersion: [...]                 # written by Java's admin updates; ignored
//! ```
//!
//! Java binds the file to a bean, so an unknown key refuses it there too; Comet also refuses
//! an unknown permission word (Java reads it as DENY) and names what is wrong. As in Java, an
//! access key listed twice keeps its first entry (with a warning); an empty file has no
//! accounts, so only whitelisted peers get through.

use std::collections::HashMap;

use comet_proto::names::retry_topic;
use yaml_rust2::{Yaml, YamlLoader};

use super::address::AddressPattern;
use super::limits::{ACCOUNTS_MAX, KEY_CHARS_MIN, RESOURCES_PER_ACCOUNT_MAX, WHITE_ADDRESSES_MAX};
use super::{permission, AclFileError};

/// One account.
#[derive(Clone, Debug)]
pub struct Account {
    /// `accessKey`.
    pub access_key: String,
    /// `secretKey`: the signature key.
    pub secret_key: String,
    /// `whiteRemoteAddress`: peers admitted without a signature.
    pub white_remote_address: AddressPattern,
    /// `admin`.
    pub admin: bool,
    /// `defaultTopicPerm`.
    pub default_topic_perm: u8,
    /// `defaultGroupPerm`.
    pub default_group_perm: u8,
    /// `topicPerms` by topic and `groupPerms` by `%RETRY%<group>`.
    pub resources: HashMap<String, u8>,
}

/// The whole file.
#[derive(Clone, Debug, Default)]
pub struct AclTables {
    /// `globalWhiteRemoteAddresses`.
    pub global_white_remote_addresses: Vec<AddressPattern>,
    /// Accounts by access key.
    pub accounts: HashMap<String, Account>,
}

fn shape(what: impl Into<String>) -> AclFileError {
    AclFileError::Shape { what: what.into() }
}

/// Parses the file's text.
pub fn parse(text: &str) -> Result<AclTables, AclFileError> {
    let documents = YamlLoader::load_from_str(text).map_err(|e| AclFileError::Yaml {
        message: e.to_string(),
    })?;
    let mut tables = AclTables::default();
    let Some(document) = documents.first() else {
        return Ok(tables);
    };
    let top = match document {
        Yaml::Null => return Ok(tables),
        Yaml::Hash(top) => top,
        _ => {
            return Err(shape(
                "the file must be a mapping of globalWhiteRemoteAddresses, accounts",
            ))
        }
    };
    for (key, value) in top {
        match key.as_str() {
            Some("globalWhiteRemoteAddresses") => {
                for pattern in strings(value, "globalWhiteRemoteAddresses", WHITE_ADDRESSES_MAX)? {
                    let pattern = AddressPattern::parse(&pattern)?;
                    tables.global_white_remote_addresses.push(pattern);
                }
            }
            Some("accounts") => tables.accounts = accounts(value)?,
            Some("dataVersion") => {}
            _ => return Err(shape(format!("unknown key {key:?} at the top level"))),
        }
    }
    Ok(tables)
}

fn accounts(value: &Yaml) -> Result<HashMap<String, Account>, AclFileError> {
    let list = match value {
        Yaml::Null => return Ok(HashMap::new()),
        Yaml::Array(list) => list,
        _ => return Err(shape("`accounts` must be a list")),
    };
    if list.len() > ACCOUNTS_MAX {
        return Err(AclFileError::TooMany {
            what: "accounts",
            max: ACCOUNTS_MAX,
        });
    }
    let mut accounts = HashMap::new();
    for (index, entry) in list.iter().enumerate() {
        let account = account(entry).map_err(|e| shape(format!("accounts[{index}]: {e}")))?;
        if accounts.contains_key(&account.access_key) {
            log::warn!(
                "ACL: accessKey {} is listed twice; its first entry is used",
                account.access_key
            );
            continue;
        }
        accounts.insert(account.access_key.clone(), account);
    }
    Ok(accounts)
}

fn account(entry: &Yaml) -> Result<Account, AclFileError> {
    let Yaml::Hash(fields) = entry else {
        return Err(shape("an account must be a mapping"));
    };
    let mut account = Account {
        access_key: String::new(),
        secret_key: String::new(),
        white_remote_address: AddressPattern::Nothing,
        admin: false,
        default_topic_perm: permission::DENY,
        default_group_perm: permission::DENY,
        resources: HashMap::new(),
    };
    let (mut group_perms, mut topic_perms) = (Vec::new(), Vec::new());
    for (key, value) in fields {
        let key_name = key.as_str().unwrap_or("");
        match key_name {
            "accessKey" => account.access_key = scalar(value, key_name)?,
            "secretKey" => account.secret_key = scalar(value, key_name)?,
            "whiteRemoteAddress" => {
                let pattern = optional_scalar(value, key_name)?.unwrap_or_default();
                account.white_remote_address = AddressPattern::parse(&pattern)?;
            }
            "admin" => account.admin = boolean(value)?,
            "defaultTopicPerm" => account.default_topic_perm = perm_word(value, key_name)?,
            "defaultGroupPerm" => account.default_group_perm = perm_word(value, key_name)?,
            "topicPerms" => topic_perms = strings(value, key_name, RESOURCES_PER_ACCOUNT_MAX)?,
            "groupPerms" => group_perms = strings(value, key_name, RESOURCES_PER_ACCOUNT_MAX)?,
            _ => return Err(shape(format!("unknown key {key:?}"))),
        }
    }
    for (name, key) in [
        (&account.access_key, "accessKey"),
        (&account.secret_key, "secretKey"),
    ] {
        if name.encode_utf16().count() < KEY_CHARS_MIN {
            let min = KEY_CHARS_MIN;
            return Err(shape(format!(
                "`{key}` must be at least {min} characters long"
            )));
        }
    }
    if group_perms.len() + topic_perms.len() > RESOURCES_PER_ACCOUNT_MAX {
        return Err(AclFileError::TooMany {
            what: "topicPerms and groupPerms entries",
            max: RESOURCES_PER_ACCOUNT_MAX,
        });
    }
    // Groups first, then topics, as Java's PlainAccessResource.build: a later entry wins.
    for (entry, is_topic) in group_perms
        .iter()
        .map(|entry| (entry, false))
        .chain(topic_perms.iter().map(|entry| (entry, true)))
    {
        let (name, permission) = resource_perm(entry, is_topic)?;
        account.resources.insert(name, permission);
    }
    Ok(account)
}

/// `name=PERM`; a group's name becomes its retry topic.
fn resource_perm(entry: &str, is_topic: bool) -> Result<(String, u8), AclFileError> {
    let kind = if is_topic { "topicPerms" } else { "groupPerms" };
    let items: Vec<&str> = entry.split('=').filter(|item| !item.is_empty()).collect();
    let [name, word] = items[..] else {
        return Err(shape(format!("{kind} entry `{entry}` is not NAME=PERM")));
    };
    let permission = permission::parse(word).ok_or_else(|| {
        shape(format!(
            "{kind} entry `{entry}`: the permission must be DENY, PUB, SUB or PUB|SUB"
        ))
    })?;
    let name = name.trim();
    let resource = if is_topic {
        name.to_owned()
    } else {
        retry_topic(name)
    };
    Ok((resource, permission))
}

fn perm_word(value: &Yaml, key: &str) -> Result<u8, AclFileError> {
    match optional_scalar(value, key)? {
        None => Ok(permission::DENY),
        Some(word) => permission::parse(&word).ok_or_else(|| {
            shape(format!(
                "`{key}: {word}`: the permission must be DENY, PUB, SUB or PUB|SUB"
            ))
        }),
    }
}

fn boolean(value: &Yaml) -> Result<bool, AclFileError> {
    match value {
        Yaml::Boolean(flag) => Ok(*flag),
        Yaml::Null => Ok(false),
        Yaml::String(text) if text == "true" => Ok(true),
        Yaml::String(text) if text == "false" => Ok(false),
        _ => Err(shape("`admin` must be true or false")),
    }
}

/// A scalar as text (YAML reads `12345678` as a number; Java binds it to a String field).
fn optional_scalar(value: &Yaml, key: &str) -> Result<Option<String>, AclFileError> {
    match value {
        Yaml::Null => Ok(None),
        Yaml::String(text) | Yaml::Real(text) => Ok(Some(text.clone())),
        Yaml::Integer(number) => Ok(Some(number.to_string())),
        Yaml::Boolean(flag) => Ok(Some(flag.to_string())),
        _ => Err(shape(format!("`{key}` must be a single value"))),
    }
}

fn scalar(value: &Yaml, key: &str) -> Result<String, AclFileError> {
    optional_scalar(value, key)?.ok_or_else(|| shape(format!("`{key}` has no value")))
}

/// A list of scalars (absent or null: empty).
fn strings(value: &Yaml, key: &str, max: usize) -> Result<Vec<String>, AclFileError> {
    let list = match value {
        Yaml::Null => return Ok(Vec::new()),
        Yaml::Array(list) => list,
        _ => return Err(shape(format!("`{key}` must be a list"))),
    };
    if list.len() > max {
        return Err(AclFileError::TooMany {
            what: "list entries",
            max,
        });
    }
    list.iter().map(|item| scalar(item, key)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::permission::{DENY, PUB, SUB};

    const SAMPLE: &str = "\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
dataVersion:
  - counter: 1
    timestamp: 1700000000000
";

    // Proves Apache RocketMQ's sample plain_acl.yml parses into the permissions Java builds:
    // numbers read as text, groups keyed by retry topic, absent defaults DENY, whitelists.
    #[test]
    fn parses_the_java_sample() {
        let tables = parse(SAMPLE).unwrap();
        assert_eq!(tables.global_white_remote_addresses.len(), 2);
        let first = &tables.accounts["RocketMQ"];
        assert_eq!(first.secret_key, "12345678");
        assert_eq!(first.white_remote_address, AddressPattern::Nothing);
        assert!(!first.admin);
        assert_eq!(
            (first.default_topic_perm, first.default_group_perm),
            (DENY, SUB)
        );
        assert_eq!(first.resources["topicA"], DENY);
        assert_eq!(first.resources["topicB"], PUB | SUB);
        assert_eq!(first.resources["%RETRY%groupC"], SUB);
        let second = &tables.accounts["rocketmq2"];
        assert!(second.admin);
        assert_eq!(second.default_topic_perm, DENY);
        assert!(second
            .white_remote_address
            .matches("192.168.1.9".parse().unwrap()));
        assert!(parse("").unwrap().accounts.is_empty());
        assert!(parse("accounts:\n").unwrap().accounts.is_empty());
    }

    // Proves malformed files are refused with an error that says what is wrong.
    #[test]
    fn bad_files_are_refused() {
        let account = |extra: &str| format!("accounts:\n  - accessKey: RocketMQ\n{extra}");
        let cases = [
            ("accounts: [", "YAML".to_owned()),
            ("- a\n- b\n", "mapping".to_owned()),
            ("acounts: []\n", "unknown key".to_owned()),
            ("accounts: x\n", "must be a list".to_owned()),
            (&account("    secretKey: 123456\n"), "at least 7".to_owned()),
            (
                &account("    secretKey: 12345678\n    colour: red\n"),
                "unknown key".to_owned(),
            ),
            (
                &account("    secretKey: 12345678\n    topicPerms: [a=PUBSUB]\n"),
                "PUB|SUB".to_owned(),
            ),
            (
                &account("    secretKey: 12345678\n    topicPerms: [a]\n"),
                "NAME=PERM".to_owned(),
            ),
            (
                &account("    secretKey: 12345678\n    admin: yes please\n"),
                "true or false".to_owned(),
            ),
            (
                &account("    secretKey: 12345678\n    whiteRemoteAddress: 1.2.3\n"),
                "1.2.3".to_owned(),
            ),
            (
                &account("    secretKey: 12345678\n    defaultTopicPerm: ALL\n"),
                "ALL".to_owned(),
            ),
            (
                "globalWhiteRemoteAddresses: [localhost]\n",
                "localhost".to_owned(),
            ),
        ];
        for (text, expected) in cases.iter() {
            let error = parse(text).unwrap_err().to_string();
            assert!(error.contains(expected.as_str()), "{text:?}: {error}");
        }
    }

    // Proves an access key listed twice keeps its first entry, as Java's load does.
    #[test]
    fn first_entry_of_a_key_wins() {
        let text = "accounts:\n  - {accessKey: RocketMQ, secretKey: first-secret}\n  \
                    - {accessKey: RocketMQ, secretKey: second-secret}\n";
        assert_eq!(
            parse(text).unwrap().accounts["RocketMQ"].secret_key,
            "first-secret"
        );
    }
}
