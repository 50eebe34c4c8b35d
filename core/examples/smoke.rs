use lagless::{Config, Consumer, TopicPartition};
use std::time::{Duration, Instant};
fn main() -> lagless::Result<()> {
    let bootstrap = std::env::var("LAGLESS_BOOTSTRAP").unwrap();
    let cfg = Config::from_pairs([
        ("bootstrap.servers", bootstrap.as_str()),
        ("auto.offset.reset", "earliest"),
    ])?;
    let c = Consumer::from_config(&cfg)?;
    let parts: Vec<_> = (0..3).map(|p| TopicPartition::new("smoke", p)).collect();
    c.assign(&parts)?;
    let t = Instant::now();
    let mut n = 0;
    while n < 100000 && t.elapsed() < Duration::from_secs(20) {
        match c.poll(Duration::from_millis(500)) {
            Ok(r) => n += r.len(),
            Err(e) => println!("poll error: {e}"),
        }
    }
    println!("{n} records in {:?}", t.elapsed());
    for p in &parts {
        println!(
            "{p}: position {:?} watermarks {:?}",
            c.position(p, None),
            c.watermarks(p, None)
        );
    }
    Ok(())
}
