//! Java properties text: the body of UPDATE_BROKER_CONFIG, GET_BROKER_CONFIG,
//! UPDATE_NAMESRV_CONFIG and GET_NAMESRV_CONFIG, and the syntax of `broker.conf` and
//! `namesrv.properties` files.
//!
//! Reading follows `java.util.Properties.load` for what such files contain in practice:
//! `#` and `!` comment lines, `key=value`, `key:value` or `key value`, surrounding
//! whitespace trimmed, a trailing backslash continuing a line, and the escapes `\t`, `\n`,
//! `\r`, `\\`, `\=`, `\:` and `\uXXXX`. Writing produces `key=value` lines in the given order.

/// Parses properties text into (key, value) pairs in file order; a repeated key keeps every
/// occurrence (callers apply them in order, so the last wins).
pub fn parse(text: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut logical = String::new();
    for raw_line in text.lines() {
        let line = raw_line.trim_start();
        if logical.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
        {
            continue;
        }
        if ends_with_continuation(line) {
            logical.push_str(&line[..line.len() - 1]);
            continue;
        }
        logical.push_str(line);
        if let Some(pair) = parse_logical_line(&logical) {
            pairs.push(pair);
        }
        logical.clear();
    }
    if !logical.is_empty() {
        if let Some(pair) = parse_logical_line(&logical) {
            pairs.push(pair);
        }
    }
    pairs
}

/// Writes pairs as `key=value` lines, escaping what `parse` would otherwise misread.
pub fn write<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut text = String::new();
    for (key, value) in pairs {
        escape_into(&mut text, key, true);
        text.push('=');
        escape_into(&mut text, value, false);
        text.push('\n');
    }
    text
}

fn ends_with_continuation(line: &str) -> bool {
    let backslashes = line.bytes().rev().take_while(|&b| b == b'\\').count();
    backslashes % 2 == 1
}

fn parse_logical_line(line: &str) -> Option<(String, String)> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let mut key_end = line.len();
    let mut escaped = false;
    for (index, character) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match character {
            '\\' => escaped = true,
            '=' | ':' | ' ' | '\t' => {
                key_end = index;
                break;
            }
            _ => {}
        }
    }
    let key = unescape(&line[..key_end]);
    let rest = line[key_end..].trim_start();
    let rest = rest.strip_prefix(['=', ':']).unwrap_or(rest).trim_start();
    Some((key, unescape(rest)))
}

fn unescape(text: &str) -> String {
    let mut output = String::with_capacity(text.len());
    let mut characters = text.chars();
    while let Some(character) = characters.next() {
        if character != '\\' {
            output.push(character);
            continue;
        }
        match characters.next() {
            Some('t') => output.push('\t'),
            Some('n') => output.push('\n'),
            Some('r') => output.push('\r'),
            Some('f') => output.push('\u{c}'),
            Some('u') => {
                let digits: String = characters.by_ref().take(4).collect();
                match u32::from_str_radix(&digits, 16)
                    .ok()
                    .and_then(char::from_u32)
                {
                    Some(decoded) => output.push(decoded),
                    None => output.push_str(&digits),
                }
            }
            Some(other) => output.push(other),
            None => {}
        }
    }
    output
}

fn escape_into(output: &mut String, text: &str, is_key: bool) {
    for (index, character) in text.chars().enumerate() {
        match character {
            '\\' => output.push_str("\\\\"),
            '\n' => output.push_str("\\n"),
            '\r' => output.push_str("\\r"),
            '\t' => output.push_str("\\t"),
            '=' | ':' if is_key => {
                output.push('\\');
                output.push(character);
            }
            ' ' if is_key || index == 0 => output.push_str("\\ "),
            '#' | '!' if index == 0 && is_key => {
                output.push('\\');
                output.push(character);
            }
            _ => output.push(character),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the forms real broker.conf files use: comments, `=`, `:` and space separators,
    // whitespace, continuation lines and escapes.
    #[test]
    fn parses_broker_conf_forms() {
        let text = "# comment\n! also\nbrokerClusterName = DefaultCluster\nbrokerName:broker-a\n\
                    brokerId 0\n  namesrvAddr=127.0.0.1:9876;\\\n   127.0.0.2:9876\nempty=\n\
                    path=C\\:\\\\store\nunicode=\\u00e9\n";
        let pairs = parse(text);
        let get = |key: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("brokerClusterName"), Some("DefaultCluster"));
        assert_eq!(get("brokerName"), Some("broker-a"));
        assert_eq!(get("brokerId"), Some("0"));
        assert_eq!(get("namesrvAddr"), Some("127.0.0.1:9876;127.0.0.2:9876"));
        assert_eq!(get("empty"), Some(""));
        assert_eq!(get("path"), Some("C:\\store"));
        assert_eq!(get("unicode"), Some("é"));
        assert_eq!(pairs.len(), 7);
    }

    // Proves write and parse are inverse, including awkward characters.
    #[test]
    fn write_parse_round_trip() {
        let pairs = [
            ("a key", " leading space"),
            ("k=v:", "line\nbreak\\"),
            ("#x", "y"),
        ];
        let text = write(pairs.iter().map(|(k, v)| (*k, *v)));
        let parsed = parse(&text);
        let expected: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(parsed, expected);
    }
}
