//! Checks shared by the processes' declarative config tables (broker and name server): the
//! generated `docs/config/*.md` matches the table, every key round-trips, and the binary's
//! `--help-config` lists every key. Each test names its own table, samples and binary.

use std::fmt::Debug;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::run_to_exit;

/// Set to rewrite a generated config doc from its table instead of comparing it.
pub const WRITE_DOCS_ENV: &str = "COMET_WRITE_CONFIG_DOCS";

/// Asserts the committed file at `path` is `rendered`, so the docs cannot drift from the
/// table; with [`WRITE_DOCS_ENV`] set it rewrites the file first. `regenerate` is the
/// command that rewrites it, for the failure message.
pub fn assert_doc_matches(path: &Path, rendered: &str, regenerate: &str) {
    if std::env::var_os(WRITE_DOCS_ENV).is_some() {
        std::fs::write(path, rendered).unwrap();
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == rendered,
        "{} differs from the key table; regenerate it with {WRITE_DOCS_ENV}=1 {regenerate}",
        path.display()
    );
}

/// Asserts `help` (a `--help-config` text) has a `key = ...` line for every `(key, unit,
/// applies label)` naming its unit and change rule.
pub fn assert_help_lists<'a>(
    help: &str,
    keys: impl IntoIterator<Item = (&'a str, &'a str, &'a str)>,
) {
    for (key, unit, applies) in keys {
        let line = help
            .lines()
            .find(|line| line.starts_with(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("{key} missing from --help-config"));
        assert!(line.contains(applies), "{line}");
        assert!(line.contains(unit), "{line}");
    }
}

/// Runs `binary --help-config`, asserts it exits 0 listing every key of `keys` on a line of
/// its own, and returns what it printed.
pub fn help_config_output<'a>(binary: &str, keys: impl IntoIterator<Item = &'a str>) -> String {
    let mut command = Command::new(binary);
    command
        .arg("--help-config")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let output = run_to_exit("--help-config", &mut command, Duration::from_secs(60));
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    for key in keys {
        assert!(text.contains(&format!("\n{key} = ")), "{key}: {text}");
    }
    text
}

/// Proves every key of a table round-trips through `apply` and `report` (the run-time config
/// dump): `samples` name every key of `keys` once, each sample applies and is reported back
/// unchanged, and differs from the default unless its key is in `default_samples`. Returns
/// the config with every sample applied, for the caller's whole-report checks.
pub fn assert_samples_round_trip<C: Default + Debug, E: Debug + PartialEq>(
    keys: &[&str],
    samples: &[(&str, &str)],
    default_samples: &[&str],
    apply: impl Fn(&mut C, &str, &str) -> Result<bool, E>,
    report: impl Fn(&C) -> Vec<(&'static str, String)>,
) -> C {
    let sampled: std::collections::BTreeSet<&str> = samples.iter().map(|(key, _)| *key).collect();
    let table: std::collections::BTreeSet<&str> = keys.iter().copied().collect();
    assert_eq!(table.len(), keys.len(), "a key is declared twice");
    assert_eq!(sampled.len(), samples.len(), "a key is sampled twice");
    assert_eq!(sampled, table, "every key needs a sample here");
    let default_report = report(&C::default());
    let mut config = C::default();
    for (key, sample) in samples {
        assert_eq!(apply(&mut config, key, sample), Ok(true), "{key}");
        let reported = report(&config);
        let value = &reported.iter().find(|(k, _)| k == key).unwrap().1;
        assert_eq!(value, sample, "{key}");
        if !default_samples.contains(key) {
            let default = &default_report.iter().find(|(k, _)| k == key).unwrap().1;
            assert_ne!(value, default, "{key}: the sample must not be the default");
        }
    }
    config
}
