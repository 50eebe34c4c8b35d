//! `lagless produce`: one record per line of stdin (or of each file), with an optional key
//! split off each line, headers given once for every record, and the library's compression.
use std::io::{BufRead, BufReader, IsTerminal, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use lagless::{Producer, ProducerRecord};

use crate::output::Progress;
use crate::settings::default_to;
use crate::{Common, ProduceArgs};

/// How long the final flush may wait: each record is bounded by `delivery.timeout.ms` anyway.
const FLUSH: Duration = Duration::from_secs(3600);

/// A line without its line ending (`\n` or `\r\n`), split at the first `separator` into key
/// and value; a line without the separator is a value without a key.
pub fn split_line<'a>(line: &'a [u8], separator: Option<&[u8]>) -> (Option<&'a [u8]>, &'a [u8]) {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let Some(sep) = separator.filter(|s| !s.is_empty()) else {
        return (None, line);
    };
    match line.windows(sep.len()).position(|w| w == sep) {
        Some(i) => (Some(&line[..i]), &line[i + sep.len()..]),
        None => (None, line),
    }
}

#[derive(Default)]
struct Outcome {
    delivered: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
}

pub fn run(common: &Common, a: &ProduceArgs) -> Result<(), String> {
    let mut c = common.config()?;
    let e = |e: lagless::Error| e.to_string();
    default_to(&mut c, "client.id", "lagless-cli").map_err(e)?;
    if let Some(codec) = &a.compression {
        c.set("compression.type", codec).map_err(e)?;
    }
    let producer = Producer::from_config(&c).map_err(e)?;
    let outcome = Arc::new(Outcome::default());
    let sent = send_all(&producer, a, &outcome);
    let flushed = producer.flush(FLUSH).map_err(e);
    let closed = producer.close(common.timeout()).map_err(e);
    let sent = sent?;
    flushed?;
    closed?;
    let failed = outcome.failed.load(Ordering::Relaxed);
    if failed > 0 {
        let first = outcome
            .first_error
            .lock()
            .ok()
            .and_then(|g| g.clone())
            .unwrap_or_default();
        return Err(format!(
            "{failed} of {sent} records were not delivered; the first failure: {first}"
        ));
    }
    Ok(())
}

fn send_all(producer: &Producer, a: &ProduceArgs, outcome: &Arc<Outcome>) -> Result<u64, String> {
    let headers: Vec<(String, Bytes)> = a
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), Bytes::from(v.clone().into_bytes())))
        .collect();
    let separator = a.key_separator.as_deref().map(str::as_bytes);
    let mut progress = Progress::new("produced", false);
    let mut sent: u64 = 0;
    let sources: Vec<(String, Box<dyn Read>)> = if a.files.is_empty() {
        vec![("stdin".to_string(), Box::new(std::io::stdin()))]
    } else {
        let mut v: Vec<(String, Box<dyn Read>)> = Vec::new();
        for f in &a.files {
            let file =
                std::fs::File::open(f).map_err(|err| format!("opening {}: {err}", f.display()))?;
            v.push((f.display().to_string(), Box::new(file)));
        }
        v
    };
    for (name, source) in sources {
        let mut reader = BufReader::new(source);
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = reader
                .read_until(b'\n', &mut line)
                .map_err(|err| format!("reading {name}: {err}"))?;
            if n == 0 {
                break;
            }
            let (key, value) = split_line(&line, separator);
            let mut record = ProducerRecord::new(&a.topic, Bytes::copy_from_slice(value));
            if let Some(k) = key {
                record = record.with_key(Bytes::copy_from_slice(k));
            }
            if let Some(p) = a.partition {
                record = record.with_partition(p);
            }
            for (k, v) in &headers {
                record = record.with_header(k.clone(), Some(v.clone()));
            }
            let o = outcome.clone();
            producer
                .send_with_callback(record, move |r| match r {
                    Ok(_) => {
                        o.delivered.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(err) => {
                        o.failed.fetch_add(1, Ordering::Relaxed);
                        if let Ok(mut first) = o.first_error.lock() {
                            first.get_or_insert_with(|| err.to_string());
                        }
                    }
                })
                .map_err(|err| err.to_string())?;
            sent += 1;
            progress.update(sent);
        }
    }
    progress.finish(sent);
    if std::io::stderr().is_terminal() {
        eprintln!("sent {sent} records to {}", a.topic);
    }
    Ok(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_into_key_and_value() {
        type Row<'a> = (&'a [u8], Option<&'a [u8]>, (Option<&'a [u8]>, &'a [u8]));
        let table: [Row; 7] = [
            (b"hello\n", None, (None, b"hello")),
            (b"hello\r\n", None, (None, b"hello")),
            (b"k1:v1\n", Some(b":"), (Some(b"k1"), b"v1")),
            (b"k1:v:1", Some(b":"), (Some(b"k1"), b"v:1")),
            (b"novalue\n", Some(b":"), (None, b"novalue")),
            (b"k::v", Some(b"::"), (Some(b"k"), b"v")),
            (b":v", Some(b":"), (Some(b""), b"v")),
        ];
        for (line, sep, want) in table {
            assert_eq!(
                split_line(line, sep),
                want,
                "{:?}",
                String::from_utf8_lossy(line)
            );
        }
    }
}
