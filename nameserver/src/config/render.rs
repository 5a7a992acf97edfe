//! The key table as text: `comet-nameserver --help-config` and `docs/config/nameserver.md`.

use comet_proto::config_table;

use super::{NamesrvConfig, KEYS};

/// What precedes the table in the docs: where values come from and what the columns mean.
const DOCS_PREAMBLE: &str = "\
# Name server configuration keys

<!-- Generated from nameserver/src/config.rs; do not edit. Regenerate with
     COMET_WRITE_CONFIG_DOCS=1 cargo test -p comet-nameserver --lib config_docs -->

`comet-nameserver` reads RocketMQ's `namesrv.properties` keys under their RocketMQ names;
Comet's own keys carry their unit last (`brokerExpiryMs`). Values apply in this order, the
last one winning: the defaults below, the `-c namesrv.properties` file, then the command line
(`--listen-port`, `--bind-address`, `--kv-config-path`, `--scan-interval-ms`,
`--broker-expiry-ms`). A key Comet does not know is logged and ignored; a known key with a
value it cannot take stops the start with an error naming the key. `comet-nameserver
--help-config` prints the same table. The name server embedded in `comet-broker
--standalone` takes its address and KV file from the broker's configuration.

Change at run time (UPDATE_NAMESRV_CONFIG): **live** keys take effect at once; **restart**
keys are reported at once and take effect at the next start (they are not persisted);
**start-up only** keys are refused.

";

/// The table as Markdown, as committed in `docs/config/nameserver.md`.
pub fn markdown() -> String {
    let mut text = String::from(DOCS_PREAMBLE);
    text.push_str(&config_table::markdown_table(
        KEYS,
        &NamesrvConfig::default(),
    ));
    text
}

/// The table as plain text, for `comet-nameserver --help-config`.
pub fn help_text() -> String {
    let mut text = String::from(
        "Name server config keys (namesrv.properties, UPDATE_NAMESRV_CONFIG):\n\
         key = default [unit] (when a run-time change applies)\n\n",
    );
    text.push_str(&config_table::help_entries(KEYS, &NamesrvConfig::default()));
    text
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use comet_test_support::config_docs::{assert_doc_matches, assert_help_lists};

    use super::*;

    // Proves docs/config/nameserver.md is what the key table renders, so the docs cannot
    // drift from the code; with COMET_WRITE_CONFIG_DOCS=1 it rewrites the file instead.
    #[test]
    fn config_docs_match_the_table() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/config/nameserver.md");
        let regenerate = "cargo test -p comet-nameserver --lib config_docs";
        assert_doc_matches(&path, &markdown(), regenerate);
    }

    // Proves the help text lists every key with its default, unit and change rule, and
    // states a machine-dependent default in words.
    #[test]
    fn help_lists_every_key() {
        let help = help_text();
        let keys = KEYS
            .iter()
            .map(|def| (def.key, def.unit, def.applies.label()));
        assert_help_lists(&help, keys);
        assert!(help.contains("listenPort = 9876 (restart)"), "{help}");
        assert!(
            help.contains("kvConfigPath = $HOME/namesrv/kvConfig.json"),
            "{help}"
        );
    }
}
