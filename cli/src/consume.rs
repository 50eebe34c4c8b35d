//! `lagless consume`: as a group member (subscribe, commit what was printed) or on assigned
//! partitions (from earliest, latest, an offset or a timestamp).
use std::io::{ErrorKind, IsTerminal, Write};
use std::time::{Duration, Instant};

use lagless::{Consumer, TopicPartition};

use crate::output::{render, Progress};
use crate::settings::{default_to, Position};
use crate::{Common, ConsumeArgs};

const POLL: Duration = Duration::from_millis(100);

/// What `consume` does about an offset before reading: group members start where the group
/// committed, falling back to `auto.offset.reset`, which only knows the two ends.
pub fn group_reset(from: Option<Position>) -> Result<Option<&'static str>, String> {
    match from {
        None => Ok(None),
        Some(Position::Earliest) => Ok(Some("earliest")),
        Some(Position::Latest) => Ok(Some("latest")),
        Some(p) => Err(format!(
            "--from {p:?} needs assigned partitions (-p), not a group: a group member starts at \
             its committed offset, else at earliest or latest"
        )),
    }
}

pub fn run(common: &Common, a: &ConsumeArgs) -> Result<(), String> {
    let mut c = common.config()?;
    let e = |e: lagless::Error| e.to_string();
    default_to(&mut c, "client.id", "lagless-cli").map_err(e)?;
    if let Some(g) = &a.group {
        c.set("group.id", g).map_err(e)?;
        // Commits follow what was printed, not a timer.
        default_to(&mut c, "enable.auto.commit", "false").map_err(e)?;
        if let Some(reset) = group_reset(a.from)? {
            c.set("auto.offset.reset", reset).map_err(e)?;
        }
    }
    let consumer = Consumer::from_config(&c).map_err(e)?;
    let result = read(&consumer, common, a);
    let closed = consumer.close(Some(common.timeout())).map_err(e);
    result.and(closed)
}

fn read(consumer: &Consumer, common: &Common, a: &ConsumeArgs) -> Result<(), String> {
    let e = |e: lagless::Error| e.to_string();
    let group = a.group.is_some();
    if group {
        consumer.subscribe(&[&a.topic], None).map_err(e)?;
    } else {
        let partitions = if a.partitions.is_empty() {
            consumer
                .partitions_for(&a.topic, Some(common.timeout()))
                .map_err(e)?
        } else {
            a.partitions.clone()
        };
        let tps: Vec<TopicPartition> = partitions
            .iter()
            .map(|p| TopicPartition::new(&a.topic, *p))
            .collect();
        consumer.assign(&tps).map_err(e)?;
        match a.from.unwrap_or(Position::Earliest) {
            Position::Earliest => consumer.seek_to_beginning(&tps).map_err(e)?,
            Position::Latest => consumer.seek_to_end(&tps).map_err(e)?,
            Position::Offset(o) => {
                for tp in &tps {
                    consumer.seek(tp, o).map_err(e)?;
                }
            }
            Position::Timestamp(ts) => {
                let query: Vec<(TopicPartition, i64)> =
                    tps.iter().map(|tp| (tp.clone(), ts)).collect();
                for (tp, found) in consumer
                    .offsets_for_times(&query, Some(common.timeout()))
                    .map_err(e)?
                {
                    match found {
                        Some((offset, _)) => consumer.seek(&tp, offset).map_err(e)?,
                        None => consumer.seek_to_end(std::slice::from_ref(&tp)).map_err(e)?,
                    }
                }
            }
        }
    }
    let stdout = std::io::stdout();
    let mut progress = Progress::new("consumed", stdout.is_terminal());
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut count: u64 = 0;
    let mut last_record = Instant::now();
    loop {
        let want = a.count.map_or(usize::MAX, |c| (c - count) as usize);
        if want == 0 {
            break;
        }
        let records = consumer.poll_at_most(POLL, want).map_err(e)?;
        if records.is_empty() {
            if a.exit_idle_ms
                .is_some_and(|ms| last_record.elapsed() >= Duration::from_millis(ms))
            {
                break;
            }
            continue;
        }
        last_record = Instant::now();
        for r in &records {
            let line = render(r, a.format);
            let written = out.write_all(&line).and_then(|()| out.write_all(b"\n"));
            match written {
                Ok(()) => {}
                // The reader went away (`| head`): stop as a pipe's writer does, quietly.
                Err(err) if err.kind() == ErrorKind::BrokenPipe => return Ok(()),
                Err(err) => return Err(format!("writing to stdout: {err}")),
            }
        }
        count += records.len() as u64;
        match out.flush() {
            Ok(()) => {}
            Err(err) if err.kind() == ErrorKind::BrokenPipe => return Ok(()),
            Err(err) => return Err(format!("writing to stdout: {err}")),
        }
        if group {
            consumer
                .commit_sync(None, Some(common.timeout()))
                .map_err(e)?;
        }
        progress.update(count);
    }
    progress.finish(count);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_starts_at_its_commit_or_an_end_of_the_log() {
        assert_eq!(group_reset(None), Ok(None));
        assert_eq!(group_reset(Some(Position::Earliest)), Ok(Some("earliest")));
        assert_eq!(group_reset(Some(Position::Latest)), Ok(Some("latest")));
        assert!(group_reset(Some(Position::Offset(3))).is_err());
        assert!(group_reset(Some(Position::Timestamp(3))).is_err());
    }
}
