//! How records and tables are printed: pure functions of what is printed, and a progress line
//! shown only on a terminal.
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use lagless::ConsumerRecord;
use serde_json::{json, Map, Value};

/// How `consume` prints a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The value alone, as it is (then a newline).
    Value,
    /// One JSON object per line: topic, partition, offset, timestamp, key, headers, value.
    Json,
    /// The value as lowercase hex.
    Hex,
}

/// Bytes as JSON: a string when they are UTF-8, else `{"hex": "..."}`; null for none.
pub fn bytes_json(b: Option<&[u8]>) -> Value {
    match b {
        None => Value::Null,
        Some(b) => match std::str::from_utf8(b) {
            Ok(s) => Value::String(s.to_string()),
            Err(_) => json!({ "hex": hex(b) }),
        },
    }
}

/// Lowercase hex of `b`.
pub fn hex(b: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

/// One record as `format` prints it (without the newline).
pub fn render(r: &ConsumerRecord, format: Format) -> Vec<u8> {
    match format {
        Format::Value => r.value.as_deref().unwrap_or_default().to_vec(),
        Format::Hex => hex(r.value.as_deref().unwrap_or_default()).into_bytes(),
        Format::Json => {
            let mut o = Map::new();
            o.insert("topic".into(), json!(&*r.topic));
            o.insert("partition".into(), json!(r.partition));
            o.insert("offset".into(), json!(r.offset));
            o.insert("timestamp".into(), json!(r.timestamp));
            o.insert("key".into(), bytes_json(r.key.as_deref()));
            let headers: Vec<Value> = r
                .headers
                .iter()
                .map(|h| json!({ "key": h.key, "value": bytes_json(h.value.as_deref()) }))
                .collect();
            o.insert("headers".into(), Value::Array(headers));
            o.insert("value".into(), bytes_json(r.value.as_deref()));
            Value::Object(o).to_string().into_bytes()
        }
    }
}

/// Rows as a table: columns padded to their widest cell, two spaces apart.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(cell.len());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$}  ", w = widths[i]));
            }
        }
        s.push('\n');
        s
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// An optional number as a table cell: `-` when unknown, as Kafka's tools print it.
pub fn cell(v: Option<i64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// A line on stderr that counts records, redrawn at most once a second, and only when stderr is
/// a terminal (and, for `consume`, when the records do not go to that terminal too).
pub struct Progress {
    on: bool,
    what: &'static str,
    started: Instant,
    last: Instant,
    shown: bool,
}

impl Progress {
    pub fn new(what: &'static str, records_to_terminal: bool) -> Progress {
        let now = Instant::now();
        Progress {
            on: std::io::stderr().is_terminal() && !records_to_terminal,
            what,
            started: now,
            last: now,
            shown: false,
        }
    }

    pub fn update(&mut self, count: u64) {
        if self.on && self.last.elapsed() >= Duration::from_secs(1) {
            self.last = Instant::now();
            self.draw(count);
        }
    }

    fn draw(&mut self, count: u64) {
        let secs = self.started.elapsed().as_secs_f64().max(0.001);
        let _ = write!(
            std::io::stderr(),
            "\r{} {count} records ({:.0}/s)   ",
            self.what,
            count as f64 / secs
        );
        self.shown = true;
    }

    pub fn finish(&mut self, count: u64) {
        if self.on {
            self.draw(count);
            let _ = writeln!(std::io::stderr());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use lagless::Header;
    use std::sync::Arc;

    fn record() -> ConsumerRecord {
        ConsumerRecord {
            topic: Arc::from("t"),
            partition: 2,
            offset: 41,
            timestamp: 1_700_000_000_000,
            key: Some(Bytes::from_static(b"k1")),
            value: Some(Bytes::from_static(b"hello")),
            headers: vec![
                Header {
                    key: "h".into(),
                    value: Some(Bytes::from_static(b"v")),
                },
                Header {
                    key: "bin".into(),
                    value: Some(Bytes::from_static(&[0xff, 0x00])),
                },
                Header {
                    key: "none".into(),
                    value: None,
                },
            ],
            from_recovery: false,
        }
    }

    #[test]
    fn records_in_each_format() {
        let r = record();
        assert_eq!(render(&r, Format::Value), b"hello");
        assert_eq!(render(&r, Format::Hex), b"68656c6c6f");
        let json: Value = serde_json::from_slice(&render(&r, Format::Json)).unwrap();
        assert_eq!(
            json,
            json!({
                "topic": "t", "partition": 2, "offset": 41, "timestamp": 1_700_000_000_000i64,
                "key": "k1",
                "headers": [
                    {"key": "h", "value": "v"},
                    {"key": "bin", "value": {"hex": "ff00"}},
                    {"key": "none", "value": null},
                ],
                "value": "hello",
            })
        );
        let mut empty = record();
        empty.key = None;
        empty.value = None;
        empty.headers.clear();
        let json: Value = serde_json::from_slice(&render(&empty, Format::Json)).unwrap();
        assert_eq!((&json["key"], &json["value"]), (&Value::Null, &Value::Null));
        assert_eq!(render(&empty, Format::Value), b"");
    }

    #[test]
    fn tables_pad_columns_to_the_widest_cell() {
        let t = table(
            &["TOPIC", "PARTITION", "LAG"],
            &[
                vec!["orders".into(), "0".into(), cell(Some(12))],
                vec!["o".into(), "10".into(), cell(None)],
            ],
        );
        assert_eq!(
            t,
            "TOPIC   PARTITION  LAG\norders  0          12\no       10         -\n"
        );
    }
}
