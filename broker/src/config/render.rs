//! The key table as text: `comet-broker --help-config` and `docs/config/broker.md`.

use comet_proto::config_table;

use super::{BrokerConfig, ACL_2_KEYS, KEYS};

/// What precedes the table in the docs: where values come from and what the columns mean.
const DOCS_PREAMBLE: &str = "\
# Broker configuration keys

<!-- Generated from broker/src/config/table.rs; do not edit. Regenerate with
     COMET_WRITE_CONFIG_DOCS=1 cargo test -p comet-broker --lib config_docs -->

`comet-broker` reads RocketMQ's `broker.conf` keys under their RocketMQ names. Values apply in
this order, the last one winning: the defaults below, the `-c broker.conf` file, the keys
changed at run time with UPDATE_BROKER_CONFIG (`mqadmin updateBrokerConfig`, kept in
`<storePathRootDir>/config/broker.properties`), then the command line (`-n`, `--listen-port`,
`--store`, `--flush`, `--broker-ip`, `--bind-address` and `-o key=value`).

A key Comet does not know is logged and ignored. A known key with a value it cannot take stops
the start with an error naming the key; in an UPDATE_BROKER_CONFIG it refuses the whole
update. `haListenPort` follows `listenPort` (+1) unless it is set. `comet-broker --help-config`
prints the same table.

Change at run time: **live** keys take effect at once; **restart** keys are persisted and
reported at once and take effect at the next start; **start-up only** keys are refused by
UPDATE_BROKER_CONFIG.

";

/// The table as Markdown, as committed in `docs/config/broker.md`.
pub fn markdown() -> String {
    let mut text = String::from(DOCS_PREAMBLE);
    text.push_str(&config_table::markdown_table(
        KEYS,
        &BrokerConfig::default(),
    ));
    text.push_str(&format!(
        "\nAccepted only as `false`, since Comet has ACL 1.0 (`aclEnable`) and not RocketMQ \
         5's ACL 2.0, so that a broker asked for access control never runs open: {}.\n",
        ACL_2_KEYS.map(|key| format!("`{key}`")).join(", ")
    ));
    text
}

/// The table as plain text, for `comet-broker --help-config`.
pub fn help_text() -> String {
    let mut text = String::from(
        "Broker config keys (broker.conf, -o key=value, UPDATE_BROKER_CONFIG):\n\
         key = default [unit] (when a run-time change applies)\n\n",
    );
    text.push_str(&config_table::help_entries(KEYS, &BrokerConfig::default()));
    text.push_str(&format!(
        "\nAccepted only as false (no ACL 2.0; use aclEnable): {}\n",
        ACL_2_KEYS.join(", ")
    ));
    text
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use comet_test_support::config_docs::{assert_doc_matches, assert_help_lists};

    use super::*;

    // Proves docs/config/broker.md is what the key table renders, so the docs cannot drift
    // from the code; with COMET_WRITE_CONFIG_DOCS=1 it rewrites the file instead.
    #[test]
    fn config_docs_match_the_table() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/config/broker.md");
        let regenerate = "cargo test -p comet-broker --lib config_docs";
        assert_doc_matches(&path, &markdown(), regenerate);
    }

    // Proves the help text lists every key with its default, unit and change rule.
    #[test]
    fn help_lists_every_key() {
        let help = help_text();
        let keys = KEYS
            .iter()
            .map(|def| (def.key, def.unit, def.applies.label()));
        assert_help_lists(&help, keys);
        assert!(help.contains("listenPort = 10911 (restart)"), "{help}");
        assert!(
            help.contains("maxMessageSize = 4194304 [bytes] (live)"),
            "{help}"
        );
    }
}
