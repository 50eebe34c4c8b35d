use lagless::{Config, Consumer, RebalanceListener, TopicPartition};
use std::time::{Duration, Instant};
struct L(&'static str);
impl RebalanceListener for L {
    fn on_partitions_assigned(
        &mut self,
        _c: &Consumer,
        p: &[TopicPartition],
    ) -> lagless::Result<()> {
        println!("{} assigned {:?}", self.0, p);
        Ok(())
    }
    fn on_partitions_revoked(&mut self, c: &Consumer, p: &[TopicPartition]) -> lagless::Result<()> {
        println!("{} revoked {:?}", self.0, p);
        c.commit_sync(None, None)?;
        Ok(())
    }
    fn on_partitions_lost(&mut self, _c: &Consumer, p: &[TopicPartition]) -> lagless::Result<()> {
        println!("{} lost {:?}", self.0, p);
        Ok(())
    }
}
fn main() -> lagless::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or("info".into()))
        .init();
    let bootstrap = std::env::var("LAGLESS_BOOTSTRAP").unwrap();
    let mk = |name| -> lagless::Result<Consumer> {
        let cfg = Config::from_pairs([
            ("bootstrap.servers", bootstrap.as_str()),
            ("group.id", "smoke-g"),
            ("auto.offset.reset", "earliest"),
            ("session.timeout.ms", "6000"),
        ])?;
        let c = Consumer::from_config(&cfg)?;
        c.subscribe(&["smoke"], Some(Box::new(L(name))))?;
        Ok(c)
    };
    let a = mk("A")?;
    let t = Instant::now();
    let mut n = 0;
    while t.elapsed() < Duration::from_secs(8) {
        n += a.poll(Duration::from_millis(200))?.len();
    }
    println!("A alone: {n} records; {:?}", a.group_metadata());
    let b = mk("B")?;
    let t = Instant::now();
    let (mut na, mut nb) = (0, 0);
    while t.elapsed() < Duration::from_secs(12) {
        na += a.poll(Duration::from_millis(100))?.len();
        nb += b.poll(Duration::from_millis(100))?.len();
    }
    println!(
        "A {:?} B {:?} na={na} nb={nb}",
        a.assignment(),
        b.assignment()
    );
    println!("{:?} {:?}", a.group_metadata(), b.group_metadata());
    b.close(None)?;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(5) {
        a.poll(Duration::from_millis(100))?;
    }
    println!("after B closed: A {:?}", a.assignment());
    println!("committed {:?}", a.committed(&a.assignment(), None)?);
    a.close(None)?;
    Ok(())
}
