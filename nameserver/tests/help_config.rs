//! `comet-nameserver --help-config`: the key table on standard output.

use std::process::Command;

use comet_nameserver::config::KEYS;

// Proves `comet-nameserver --help-config` prints every key of the table and exits 0 without
// starting a name server.
#[test]
fn help_config_prints_the_table() {
    let output = Command::new(env!("CARGO_BIN_EXE_comet-nameserver"))
        .arg("--help-config")
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    for def in KEYS {
        assert!(
            text.contains(&format!("\n{} = ", def.key)),
            "{}: {text}",
            def.key
        );
    }
    assert!(text.contains("listenPort = 9876 (restart)"), "{text}");
}
