#![allow(dead_code)]

//! Tiny `--flag value` parsing shared by the examples (std only).

use std::collections::HashMap;

/// Flags given as `--name value`.
pub struct Args {
    values: HashMap<String, String>,
}

impl Args {
    /// Parses the process arguments; `--help` prints `usage` and exits.
    pub fn parse(usage: &str) -> Args {
        let mut values = HashMap::new();
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            if arg == "--help" || arg == "-h" {
                println!("{usage}");
                std::process::exit(0);
            }
            let Some(name) = arg.strip_prefix("--") else {
                eprintln!("unexpected argument {arg}\n{usage}");
                std::process::exit(2);
            };
            let Some(value) = args.next() else {
                eprintln!("--{name} needs a value\n{usage}");
                std::process::exit(2);
            };
            values.insert(name.to_owned(), value);
        }
        Args { values }
    }

    /// A string flag with a default.
    pub fn get(&self, name: &str, default: &str) -> String {
        self.values
            .get(name)
            .cloned()
            .unwrap_or_else(|| default.to_owned())
    }

    /// A numeric flag with a default.
    pub fn number(&self, name: &str, default: u64) -> u64 {
        match self.values.get(name) {
            Some(value) => value.parse().unwrap_or_else(|_| {
                eprintln!("--{name} must be a number, got {value}");
                std::process::exit(2);
            }),
            None => default,
        }
    }
}
