//! Declarative config key tables: one entry per key declares a process's config field, its
//! default, RocketMQ key, unit, when a run-time change takes effect, a line of doc, and how the
//! value is read and written back. The broker (`broker.conf`) and the name server
//! (`namesrv.properties`) each declare their own table with [`config_table!`]; parsing, the
//! run-time config requests, `--help-config` and the `docs/config/*.md` tables all read it.
//!
//! It lives here because both processes need it and this is the one crate both may depend on
//! without a forbidden edge (docs/style.md#crate-dependencies): the name server never sees
//! the broker. Like [`crate::java_properties`], the `.properties` reader it sits beside, it
//! is pure: no I/O, only values and text. Each process keeps its own entries, value parsers,
//! error type and docs preamble.

/// When a config key changed at run time (UPDATE_BROKER_CONFIG, UPDATE_NAMESRV_CONFIG) takes
/// effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applies {
    /// At once: the process reads the value each time it uses it.
    Live,
    /// At the next start: the value is read when the process starts (listeners, files,
    /// periodic tasks). An update is reported at once.
    AtRestart,
    /// Set only in the config file or on the command line: the run-time update refuses it.
    StartUpOnly,
}

impl Applies {
    /// How `--help-config` and the docs say it.
    pub fn label(self) -> &'static str {
        match self {
            Applies::Live => "live",
            Applies::AtRestart => "restart",
            Applies::StartUpOnly => "start-up only",
        }
    }
}

/// One config key of a process whose config is `C` and whose value errors are `E`: what its
/// table declares for it.
pub struct KeyDef<C: 'static, E: 'static> {
    /// The RocketMQ key, e.g. `listenPort`.
    pub key: &'static str,
    /// Unit of the value (`ms`, `s`, `hours`, `bytes`, ...), empty for none.
    pub unit: &'static str,
    /// When a change at run time takes effect.
    pub applies: Applies,
    /// One line for operators.
    pub doc: &'static str,
    /// The default as the docs state it, where it depends on the machine (`$HOME`).
    pub default_doc: Option<&'static str>,
    /// Parses a value into its field; the error names the key.
    pub parse: fn(&mut C, &str) -> Result<(), E>,
    /// The field's value in the form `parse` takes back.
    pub show: fn(&C) -> String,
}

impl<C, E> KeyDef<C, E> {
    /// The default as `--help-config` and the docs state it: the words of `default_doc`, else
    /// the value in `defaults`.
    pub fn default_text(&self, defaults: &C) -> String {
        self.default_doc
            .map_or_else(|| (self.show)(defaults), str::to_owned)
    }
}

/// The entry of `key` in `keys`, if the table declares it.
pub fn find<C, E>(keys: &'static [KeyDef<C, E>], key: &str) -> Option<&'static KeyDef<C, E>> {
    keys.iter().find(|def| def.key == key)
}

/// `Some` of the one `default_doc` an entry may give, else `None`; used by [`config_table!`].
#[doc(hidden)]
pub const fn optional_doc(docs: &[&'static str]) -> Option<&'static str> {
    match docs {
        [doc] => Some(doc),
        _ => None,
    }
}

/// The table as a Markdown table (header, then one row per key with `defaults`' values).
pub fn markdown_table<C, E>(keys: &[KeyDef<C, E>], defaults: &C) -> String {
    let mut text = String::from("| Key | Default | Unit | Change at run time | Description |\n");
    text.push_str("| --- | --- | --- | --- | --- |\n");
    for def in keys {
        text.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            def.key,
            markdown_value(&def.default_text(defaults)),
            def.unit,
            def.applies.label(),
            def.doc.replace('|', "\\|"),
        ));
    }
    text
}

fn markdown_value(value: &str) -> String {
    if value.is_empty() {
        return "(empty)".to_owned();
    }
    format!("`{}`", value.replace('|', "\\|"))
}

/// The table as plain text for `--help-config`: per key, `key = default [unit] (applies)`
/// and its doc indented on the next line.
pub fn help_entries<C, E>(keys: &[KeyDef<C, E>], defaults: &C) -> String {
    let mut text = String::new();
    for def in keys {
        let unit = if def.unit.is_empty() {
            String::new()
        } else {
            format!(" [{}]", def.unit)
        };
        text.push_str(&format!(
            "{} = {}{} ({})\n    {}\n",
            def.key,
            def.default_text(defaults),
            unit,
            def.applies.label(),
            def.doc
        ));
    }
    text
}

/// Declares a config struct, its `Default` and its key table from one entry per key:
///
/// ```text
/// /// Doc of the struct.
/// pub struct BrokerConfig;
/// /// Doc of the table.
/// pub static KEYS: [KeyDef<_, ConfigError>];
/// /// More about the field, for maintainers (optional).
/// field_name: FieldType = default_value => {
///     key: "rocketmqKey", unit: "ms", applies: Live | AtRestart | StartUpOnly,
///     doc: "One line for operators.",
///     default_doc: "$HOME/...", // optional: a default that depends on the machine
///     parse: fn(key: &str, value: &str) -> Result<FieldType, ConfigError>,
///     show: fn(&FieldType) -> String,
/// },
/// ```
#[macro_export]
macro_rules! config_table {
    (
        $(#[doc = $struct_doc:literal])*
        pub struct $config:ident;
        $(#[doc = $keys_doc:literal])*
        pub static $keys:ident: [KeyDef<_, $error:ty>];
        $(
            $(#[doc = $extra:literal])*
            $field:ident: $ty:ty = $default:expr => {
                key: $key:literal, unit: $unit:literal, applies: $applies:ident,
                doc: $doc:literal,
                $(default_doc: $default_doc:literal,)?
                parse: $parse:expr, show: $show:expr $(,)?
            }
        ),* $(,)?
    ) => {
        $(#[doc = $struct_doc])*
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct $config {
            $(
                #[doc = ::core::concat!("`", $key, "`: ", $doc)]
                $(#[doc = $extra])*
                pub $field: $ty,
            )*
        }

        impl Default for $config {
            fn default() -> $config {
                $config { $($field: $default,)* }
            }
        }

        $(#[doc = $keys_doc])*
        pub static $keys: &[$crate::config_table::KeyDef<$config, $error>] = &[$(
            $crate::config_table::KeyDef {
                key: $key,
                unit: $unit,
                applies: $crate::config_table::Applies::$applies,
                doc: $doc,
                default_doc: $crate::config_table::optional_doc(&[$($default_doc)?]),
                parse: |config, value| {
                    let parse: fn(&str, &str) -> Result<$ty, $error> = $parse;
                    config.$field = parse($key, value)?;
                    Ok(())
                },
                show: |config| $show(&config.$field),
            },
        )*];
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Eq)]
    pub struct BadValue(String);

    fn parse_u32(key: &str, value: &str) -> Result<u32, BadValue> {
        value.parse().map_err(|_| BadValue(key.to_owned()))
    }

    fn parse_text(_key: &str, value: &str) -> Result<String, BadValue> {
        Ok(value.to_owned())
    }

    config_table! {
        /// A two-key config for the tests.
        pub struct Sample;
        /// Its keys.
        pub static SAMPLE_KEYS: [KeyDef<_, BadValue>];
        port: u32 = 9876 => {
            key: "listenPort", unit: "", applies: AtRestart,
            doc: "A port | a number.",
            parse: parse_u32, show: ToString::to_string,
        },
        home: String = String::new() => {
            key: "homeDir", unit: "", applies: Live,
            doc: "A directory.",
            default_doc: "$HOME",
            parse: parse_text, show: ToString::to_string,
        },
        note: String = String::new() => {
            key: "noteText", unit: "chars", applies: StartUpOnly,
            doc: "Free text.",
            parse: parse_text, show: ToString::to_string,
        },
    }

    // Proves the macro wires each entry to its field: parse sets it, show reads it, a bad
    // value is the parser's error, and a stated default replaces the value in the docs.
    #[test]
    fn entries_parse_show_and_state_defaults() {
        let mut config = Sample::default();
        let port = find(SAMPLE_KEYS, "listenPort").unwrap();
        assert_eq!((port.parse)(&mut config, "10"), Ok(()));
        assert_eq!((port.show)(&config), "10");
        assert_eq!(
            (port.parse)(&mut config, "x"),
            Err(BadValue("listenPort".to_owned()))
        );
        assert!(find(SAMPLE_KEYS, "noSuchKey").is_none());
        let home = find(SAMPLE_KEYS, "homeDir").unwrap();
        assert_eq!(home.default_text(&Sample::default()), "$HOME");
        assert_eq!(port.default_text(&Sample::default()), "9876");
    }

    // Proves the rendered texts: Markdown escapes `|`, shows an empty default as (empty), and
    // the help text gives unit and change rule per key.
    #[test]
    fn renders_markdown_and_help() {
        let markdown = markdown_table(SAMPLE_KEYS, &Sample::default());
        assert!(markdown.contains("| `listenPort` | `9876` |  | restart | A port \\| a number. |"));
        assert!(markdown.contains("| `noteText` | (empty) | chars | start-up only |"));
        let help = help_entries(SAMPLE_KEYS, &Sample::default());
        assert!(help.contains("listenPort = 9876 (restart)\n    A port | a number.\n"));
        assert!(help.contains("homeDir = $HOME (live)\n"));
        assert!(help.contains("noteText =  [chars] (start-up only)\n"));
    }
}
