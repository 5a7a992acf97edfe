//! `comet-nameserver --help-config`: the key table on standard output.

use comet_nameserver::config::KEYS;
use comet_test_support::config_docs::help_config_output;

// Proves `comet-nameserver --help-config` prints every key of the table and exits 0 without
// starting a name server.
#[test]
fn help_config_prints_the_table() {
    let binary = env!("CARGO_BIN_EXE_comet-nameserver");
    let text = help_config_output(binary, KEYS.iter().map(|def| def.key));
    assert!(text.contains("listenPort = 9876 (restart)"), "{text}");
}
