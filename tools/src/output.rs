//! What a command prints: plain text for people and `grep` (one row a line, columns separated
//! by spaces, headed by `#Name` columns as mqadmin prints them), or with `--json` one JSON
//! object holding the same figures.

use serde_json::{Map, Value};

/// Text and JSON forms of one command's output, built together so they cannot drift apart.
#[derive(Debug, Default)]
pub struct Report {
    text: String,
    json: Map<String, Value>,
}

impl Report {
    /// An empty report.
    pub fn new() -> Report {
        Report::default()
    }

    /// A table under JSON key `key`: an array of objects keyed by the column names.
    pub fn table(&mut self, key: &str, table: Table) {
        self.text.push_str(&table.text());
        self.json.insert(key.to_owned(), table.to_json());
    }

    /// One figure: `line` in the text, `value` under `key` in the JSON.
    pub fn field(&mut self, key: &str, value: impl Into<Value>, line: impl std::fmt::Display) {
        self.line(line);
        self.json.insert(key.to_owned(), value.into());
    }

    /// A line of text only (the JSON holds its content under another key).
    pub fn line(&mut self, line: impl std::fmt::Display) {
        self.text.push_str(&line.to_string());
        self.text.push('\n');
    }

    /// A value in the JSON only (the text shows it in its own lines).
    pub fn json(&mut self, key: &str, value: impl Into<Value>) {
        self.json.insert(key.to_owned(), value.into());
    }

    /// Appends `part` (one broker's, one client's) to the text, and its JSON to the array
    /// under `key`.
    pub fn push(&mut self, key: &str, part: Report) {
        self.text.push_str(&part.text);
        let entry = self
            .json
            .entry(key.to_owned())
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(items) = entry {
            items.push(Value::Object(part.json));
        }
    }

    /// The text form.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The JSON form, pretty-printed.
    pub fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string_pretty(&self.json)
    }
}

/// Rows under named columns.
#[derive(Debug)]
pub struct Table {
    columns: Vec<&'static str>,
    rows: Vec<Vec<Value>>,
}

impl Table {
    /// A table with these columns, named as mqadmin heads them (`#BrokerName`).
    pub fn new(columns: &[&'static str]) -> Table {
        Table {
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; it must have one cell per column.
    pub fn row(&mut self, cells: Vec<Value>) {
        assert_eq!(cells.len(), self.columns.len(), "one cell per column");
        self.rows.push(cells);
    }

    fn text(&self) -> String {
        let mut text = self.columns.join(" ");
        text.push('\n');
        for row in &self.rows {
            let cells: Vec<String> = row.iter().map(cell_text).collect();
            text.push_str(&cells.join(" "));
            text.push('\n');
        }
        text
    }

    /// The rows as JSON objects keyed by the column names in camel case.
    pub fn to_json(&self) -> Value {
        let keys: Vec<String> = self.columns.iter().map(|c| json_key(c)).collect();
        let rows = self.rows.iter().map(|row| {
            let object: Map<String, Value> =
                keys.iter().cloned().zip(row.iter().cloned()).collect();
            Value::Object(object)
        });
        Value::Array(rows.collect())
    }
}

/// A cell as text: strings bare, rates with two decimals, absent values as `-`.
fn cell_text(cell: &Value) -> String {
    match cell {
        Value::String(text) if text.is_empty() => "-".to_owned(),
        Value::String(text) => text.clone(),
        Value::Null => "-".to_owned(),
        Value::Number(number) if number.is_f64() => {
            format!("{:.2}", number.as_f64().unwrap_or_default())
        }
        other => other.to_string(),
    }
}

/// `#BrokerName` → `brokerName`.
fn json_key(column: &str) -> String {
    let name = column.trim_start_matches('#');
    let mut chars = name.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // Proves a table prints as mqadmin's columns and as objects keyed by camel-case names.
    #[test]
    fn a_table_prints_as_text_and_as_json() {
        let mut table = Table::new(&["#BrokerName", "#QueueId", "#Tps"]);
        table.row(vec![json!("broker-a"), json!(3), json!(1.5)]);
        table.row(vec![json!(""), Value::Null, json!(2)]);
        let mut report = Report::new();
        report.table("queues", table);
        report.field("diffTotal", 7, "Diff Total: 7");
        assert_eq!(
            report.text(),
            "#BrokerName #QueueId #Tps\nbroker-a 3 1.50\n- - 2\nDiff Total: 7\n"
        );
        let json: Value = serde_json::from_str(&report.to_json().unwrap()).unwrap();
        assert_eq!(json["queues"][0]["brokerName"], "broker-a");
        assert_eq!(json["queues"][0]["queueId"], 3);
        assert_eq!(json["queues"][1]["tps"], 2);
        assert_eq!(json["diffTotal"], 7);
    }
}
