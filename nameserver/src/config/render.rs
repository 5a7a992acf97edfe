//! The key table as text: `comet-nameserver --help-config` and `docs/config/nameserver.md`.

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

fn default_text(def: &super::KeyDef, defaults: &NamesrvConfig) -> String {
    def.default_doc
        .map_or_else(|| (def.show)(defaults), str::to_owned)
}

/// The table as Markdown, as committed in `docs/config/nameserver.md`.
pub fn markdown() -> String {
    let defaults = NamesrvConfig::default();
    let mut text = String::from(DOCS_PREAMBLE);
    text.push_str("| Key | Default | Unit | Change at run time | Description |\n");
    text.push_str("| --- | --- | --- | --- | --- |\n");
    for def in KEYS {
        text.push_str(&format!(
            "| `{}` | `{}` | {} | {} | {} |\n",
            def.key,
            default_text(def, &defaults).replace('|', "\\|"),
            def.unit,
            def.applies.label(),
            def.doc.replace('|', "\\|"),
        ));
    }
    text
}

/// The table as plain text, for `comet-nameserver --help-config`.
pub fn help_text() -> String {
    let defaults = NamesrvConfig::default();
    let mut text = String::from(
        "Name server config keys (namesrv.properties, UPDATE_NAMESRV_CONFIG):\n\
         key = default [unit] (when a run-time change applies)\n\n",
    );
    for def in KEYS {
        let unit = if def.unit.is_empty() {
            String::new()
        } else {
            format!(" [{}]", def.unit)
        };
        text.push_str(&format!(
            "{} = {}{} ({})\n    {}\n",
            def.key,
            default_text(def, &defaults),
            unit,
            def.applies.label(),
            def.doc
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn docs_path() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/config/nameserver.md")
    }

    // Proves docs/config/nameserver.md is what the key table renders, so the docs cannot
    // drift from the code; with COMET_WRITE_CONFIG_DOCS=1 it rewrites the file instead.
    #[test]
    fn config_docs_match_the_table() {
        let rendered = markdown();
        let path = docs_path();
        if std::env::var_os("COMET_WRITE_CONFIG_DOCS").is_some() {
            std::fs::write(&path, &rendered).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == rendered,
            "{} differs from the key table; regenerate it with \
             COMET_WRITE_CONFIG_DOCS=1 cargo test -p comet-nameserver --lib config_docs",
            path.display()
        );
    }

    // Proves the help text lists every key with its default, unit and change rule, and
    // states a machine-dependent default in words.
    #[test]
    fn help_lists_every_key() {
        let help = help_text();
        for def in KEYS {
            let line = help
                .lines()
                .find(|line| line.starts_with(&format!("{} = ", def.key)))
                .unwrap_or_else(|| panic!("{} missing from --help-config", def.key));
            assert!(line.contains(def.applies.label()), "{line}");
            assert!(line.contains(def.unit), "{line}");
        }
        assert!(help.contains("listenPort = 9876 (restart)"), "{help}");
        assert!(
            help.contains("kvConfigPath = $HOME/namesrv/kvConfig.json"),
            "{help}"
        );
    }
}
