//! A broker's controller id and the two files that make claiming one crash-safe.
//!
//! In controller mode a broker's id within its broker set (1, 2, ...; Java's
//! `brokerControllerId`) is handed out by the controller and kept by the broker across
//! restarts. Java's `ReplicasManager` claims it in three steps, each leaving a file behind so
//! that a crash between two steps resumes instead of claiming a second id:
//!
//! 1. CONTROLLER_GET_NEXT_BROKER_ID gives a candidate id; the broker writes the *temp* file
//!    (cluster, broker name, candidate id and a register check code `brokerAddr;unixMillis`).
//! 2. CONTROLLER_APPLY_BROKER_ID claims the candidate with that check code. The controller
//!    accepts an id nobody holds, or one held under the same check code, so repeating an
//!    apply after a crash or a lost answer is safe. Refused (someone else took the id), the
//!    broker deletes the temp file and starts over at step 1.
//! 3. Accepted, the broker writes the *confirmed* file (cluster, broker name, id), then
//!    deletes the temp file; from then on it only registers (CONTROLLER_REGISTER_BROKER).
//!
//! At start-up a confirmed file wins; else a temp file resumes at step 2; else step 1. A file
//! naming another cluster or broker name than the configuration is refused: the store belongs
//! to another broker. The file texts are Java's (`cluster#broker#id` and
//! `cluster#broker#id#checkCode`), so the same rules hold for a store moved between brokers.

use thiserror::Error;

use crate::limits::NAME_BYTES_MAX;

/// A broker's id within its broker set, as the controller assigns it (1 for the first).
pub type BrokerControllerId = i64;

/// File name of the confirmed identity inside the store root (Java's
/// `storePathBrokerIdentity` default).
pub const CONFIRMED_FILE_NAME: &str = "brokerIdentity";

/// File name of the temp identity (the confirmed name plus Java's `-temp`).
pub const TEMP_FILE_NAME: &str = "brokerIdentity-temp";

/// Separator of the fields of both files.
const SEPARATOR: char = '#';

/// The confirmed identity: the controller accepted this id for this broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfirmedIdentity {
    /// Cluster name.
    pub cluster_name: String,
    /// Logical broker name (the broker set).
    pub broker_name: String,
    /// The broker's controller id.
    pub broker_id: BrokerControllerId,
}

/// A claim in progress: the candidate id and the check code it is applied with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TempIdentity {
    /// Cluster name.
    pub cluster_name: String,
    /// Logical broker name.
    pub broker_name: String,
    /// The candidate id.
    pub broker_id: BrokerControllerId,
    /// `brokerAddr;unixMillis`, unique to this claim.
    pub register_check_code: String,
}

/// What a broker found on disk at start-up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoredIdentity {
    /// The confirmed file, when present.
    pub confirmed: Option<ConfirmedIdentity>,
    /// The temp file, when present.
    pub temp: Option<TempIdentity>,
}

/// An identity file that cannot be read or written, or that belongs to another broker.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum IdentityError {
    /// The file does not have the expected number of `#`-separated fields.
    #[error("{file}: expected {expected} '#'-separated fields, found {found} in {text:?}")]
    FieldCount {
        /// Which file.
        file: &'static str,
        /// Fields expected.
        expected: usize,
        /// Fields found.
        found: usize,
        /// The text read (first 200 characters).
        text: String,
    },
    /// A field is empty.
    #[error("{file}: field {field} is empty")]
    Empty {
        /// Which file.
        file: &'static str,
        /// The field.
        field: &'static str,
    },
    /// The id is not a positive decimal number.
    #[error("{file}: broker id {text:?} is not a positive number")]
    BadId {
        /// Which file.
        file: &'static str,
        /// The id text.
        text: String,
    },
    /// A name cannot be stored: it holds the separator, or is empty or too long.
    #[error("{field} {value:?} cannot be stored: empty, longer than {max} bytes, or holds '#'")]
    Unstorable {
        /// The field.
        field: &'static str,
        /// Its value.
        value: String,
        /// The length bound.
        max: usize,
    },
    /// A stored file names another cluster or broker than the configuration.
    #[error("{file} names {field} {stored:?} but this broker is configured as {configured:?}")]
    Mismatch {
        /// Which file.
        file: &'static str,
        /// The differing field.
        field: &'static str,
        /// Its value in the file.
        stored: String,
        /// Its configured value.
        configured: String,
    },
}

impl ConfirmedIdentity {
    /// The file text, Java's `cluster#broker#id`.
    pub fn encode(&self) -> Result<String, IdentityError> {
        check_storable("clusterName", &self.cluster_name)?;
        check_storable("brokerName", &self.broker_name)?;
        Ok(format!(
            "{}{SEPARATOR}{}{SEPARATOR}{}",
            self.cluster_name, self.broker_name, self.broker_id
        ))
    }

    /// Reads the file text (surrounding whitespace ignored).
    pub fn decode(text: &str) -> Result<ConfirmedIdentity, IdentityError> {
        let fields = split_fields(CONFIRMED_FILE_NAME, text, 3)?;
        Ok(ConfirmedIdentity {
            cluster_name: fields[0].to_owned(),
            broker_name: fields[1].to_owned(),
            broker_id: parse_id(CONFIRMED_FILE_NAME, fields[2])?,
        })
    }
}

impl TempIdentity {
    /// The file text, Java's `cluster#broker#id#checkCode`.
    pub fn encode(&self) -> Result<String, IdentityError> {
        check_storable("clusterName", &self.cluster_name)?;
        check_storable("brokerName", &self.broker_name)?;
        check_storable("registerCheckCode", &self.register_check_code)?;
        Ok(format!(
            "{}{SEPARATOR}{}{SEPARATOR}{}{SEPARATOR}{}",
            self.cluster_name, self.broker_name, self.broker_id, self.register_check_code
        ))
    }

    /// Reads the file text (surrounding whitespace ignored).
    pub fn decode(text: &str) -> Result<TempIdentity, IdentityError> {
        let fields = split_fields(TEMP_FILE_NAME, text, 4)?;
        Ok(TempIdentity {
            cluster_name: fields[0].to_owned(),
            broker_name: fields[1].to_owned(),
            broker_id: parse_id(TEMP_FILE_NAME, fields[2])?,
            register_check_code: fields[3].to_owned(),
        })
    }
}

/// The register check code of a claim: the broker's address and a wall-clock time, so two
/// brokers (or two boots of one) never share one.
pub fn register_check_code(broker_addr: &str, unix_ms: i64) -> String {
    format!("{broker_addr};{unix_ms}")
}

/// Checks that stored files belong to this broker (Java's `checkMetadataValid`): each file
/// present must name the configured cluster and broker name.
pub fn check_belongs(
    stored: &StoredIdentity,
    cluster_name: &str,
    broker_name: &str,
) -> Result<(), IdentityError> {
    if let Some(confirmed) = &stored.confirmed {
        check_field(
            CONFIRMED_FILE_NAME,
            "clusterName",
            &confirmed.cluster_name,
            cluster_name,
        )?;
        check_field(
            CONFIRMED_FILE_NAME,
            "brokerName",
            &confirmed.broker_name,
            broker_name,
        )?;
    }
    if let Some(temp) = &stored.temp {
        check_field(
            TEMP_FILE_NAME,
            "clusterName",
            &temp.cluster_name,
            cluster_name,
        )?;
        check_field(TEMP_FILE_NAME, "brokerName", &temp.broker_name, broker_name)?;
    }
    Ok(())
}

fn check_field(
    file: &'static str,
    field: &'static str,
    stored: &str,
    configured: &str,
) -> Result<(), IdentityError> {
    if stored == configured {
        return Ok(());
    }
    Err(IdentityError::Mismatch {
        file,
        field,
        stored: stored.to_owned(),
        configured: configured.to_owned(),
    })
}

fn check_storable(field: &'static str, value: &str) -> Result<(), IdentityError> {
    if value.is_empty() || value.len() > NAME_BYTES_MAX || value.contains(SEPARATOR) {
        return Err(IdentityError::Unstorable {
            field,
            value: value.chars().take(200).collect(),
            max: NAME_BYTES_MAX,
        });
    }
    Ok(())
}

fn split_fields<'a>(
    file: &'static str,
    text: &'a str,
    expected: usize,
) -> Result<Vec<&'a str>, IdentityError> {
    let fields: Vec<&str> = text.trim().split(SEPARATOR).collect();
    if fields.len() != expected {
        return Err(IdentityError::FieldCount {
            file,
            expected,
            found: fields.len(),
            text: text.chars().take(200).collect(),
        });
    }
    const NAMES: [&str; 4] = ["clusterName", "brokerName", "brokerId", "registerCheckCode"];
    for (field, value) in NAMES.iter().zip(&fields) {
        if value.is_empty() {
            return Err(IdentityError::Empty { file, field });
        }
    }
    Ok(fields)
}

fn parse_id(file: &'static str, text: &str) -> Result<BrokerControllerId, IdentityError> {
    match text.parse::<BrokerControllerId>() {
        Ok(id) if id > 0 => Ok(id),
        _ => Err(IdentityError::BadId {
            file,
            text: text.chars().take(40).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves both files read and write Java's `#`-separated text and refuse what Java's
    // reader would misread.
    #[test]
    fn identity_files_round_trip_in_java_text() {
        let confirmed = ConfirmedIdentity {
            cluster_name: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_id: 2,
        };
        assert_eq!(confirmed.encode().unwrap(), "DefaultCluster#broker-a#2");
        assert_eq!(
            ConfirmedIdentity::decode("DefaultCluster#broker-a#2\n").unwrap(),
            confirmed
        );
        let temp = TempIdentity {
            cluster_name: "c".into(),
            broker_name: "b".into(),
            broker_id: 3,
            register_check_code: register_check_code("127.0.0.1:30911", 1_795_960_828_956),
        };
        let text = temp.encode().unwrap();
        assert_eq!(text, "c#b#3#127.0.0.1:30911;1795960828956");
        assert_eq!(TempIdentity::decode(&text).unwrap(), temp);

        assert!(matches!(
            ConfirmedIdentity::decode("c#b"),
            Err(IdentityError::FieldCount { found: 2, .. })
        ));
        assert!(matches!(
            ConfirmedIdentity::decode("c#b#x"),
            Err(IdentityError::BadId { .. })
        ));
        assert!(matches!(
            ConfirmedIdentity::decode("c#b#0"),
            Err(IdentityError::BadId { .. })
        ));
        assert!(matches!(
            TempIdentity::decode("c##1#code"),
            Err(IdentityError::Empty {
                field: "brokerName",
                ..
            })
        ));
        let unstorable = ConfirmedIdentity {
            broker_name: "a#b".into(),
            ..confirmed
        };
        assert!(matches!(
            unstorable.encode(),
            Err(IdentityError::Unstorable { .. })
        ));
    }

    // Proves a store whose files name another cluster or broker is refused, file by file.
    #[test]
    fn files_of_another_broker_are_refused() {
        let stored = StoredIdentity {
            confirmed: None,
            temp: Some(TempIdentity {
                cluster_name: "c".into(),
                broker_name: "other".into(),
                broker_id: 1,
                register_check_code: "a;1".into(),
            }),
        };
        assert_eq!(
            check_belongs(&stored, "c", "b"),
            Err(IdentityError::Mismatch {
                file: TEMP_FILE_NAME,
                field: "brokerName",
                stored: "other".into(),
                configured: "b".into(),
            })
        );
        assert_eq!(check_belongs(&stored, "c", "other"), Ok(()));
        assert_eq!(check_belongs(&StoredIdentity::default(), "c", "b"), Ok(()));
    }
}
