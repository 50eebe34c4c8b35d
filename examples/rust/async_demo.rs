//! The README's async demo: a tokio service that produces records with `lagless::aio::Producer`
//! and consumes them in a consumer group with `lagless::aio::Consumer`, whose rebalance listener
//! commits on revoke with an await. Everything runs on the application's runtime. Run it against
//! a broker at LAGLESS_BOOTSTRAP (default 127.0.0.1:9092).
use std::future::poll_fn;
use std::pin::Pin;
use std::time::Duration;

use futures_core::Stream;
use lagless::aio::{BoxFuture, Consumer, Producer, RebalanceListener};
use lagless::{Config, ProducerRecord, TopicPartition};

struct CommitOnRevoke;

impl RebalanceListener for CommitOnRevoke {
    fn on_partitions_revoked<'a>(
        &'a mut self,
        consumer: &'a Consumer,
        partitions: &'a [TopicPartition],
    ) -> BoxFuture<'a, lagless::Result<()>> {
        Box::pin(async move {
            // Runs inside the application's recv(), on its task: the commit is awaited.
            consumer.commit(None).await?;
            println!("revoked {} partitions after committing", partitions.len());
            Ok(())
        })
    }
}

#[tokio::main]
async fn main() -> lagless::Result<()> {
    let bootstrap = std::env::var("LAGLESS_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into());
    let topic = format!("async-demo-{}", std::process::id());
    lagless::admin::create_topic(&bootstrap, &topic, 3, 1)?;

    let producer = Producer::from_config(&Config::from_pairs([(
        "bootstrap.servers",
        bootstrap.as_str(),
    )])?)?;
    let mut reports = Vec::new();
    for i in 0..1000 {
        reports.push(
            producer
                .send(ProducerRecord::new(&topic, format!("order {i}")))
                .await?,
        );
    }
    for report in reports {
        report.await?; // the delivery report: where the record was written
    }
    println!("produced 1000 records");

    let consumer = Consumer::from_config(&Config::from_pairs([
        ("bootstrap.servers", bootstrap.as_str()),
        ("group.id", "async-demo"),
        ("auto.offset.reset", "earliest"),
        ("enable.auto.commit", "false"),
    ])?)?;
    consumer.subscribe(&[&topic], Some(Box::new(CommitOnRevoke)))?;
    let mut stream = consumer.stream();
    let mut count = 0;
    while count < 1000 {
        let next = poll_fn(|cx| Pin::new(&mut stream).poll_next(cx));
        match tokio::time::timeout(Duration::from_secs(60), next).await {
            Ok(Some(record)) => {
                let _ = record?;
                count += 1;
            }
            Ok(None) => break,
            Err(_) => return Err(lagless::Error::Timeout("no record for 60 s".into())),
        }
    }
    drop(stream);
    consumer.commit(None).await?;
    consumer.close().await?;
    producer.close(Duration::from_secs(10)).await?;
    println!("consumed {count} records");
    Ok(())
}
