//! A Kafka cluster of a test's own, started and restarted through the project's harness
//! (tests/kafka_broker.py), for tests that stop or restart brokers. Stopped on drop, also when
//! the test fails.
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

fn harness() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/kafka_broker.py")
}

/// A broker of this test's own; stopped on drop.
pub struct OwnBroker {
    pub dir: PathBuf,
    pub bootstrap: String,
}

impl OwnBroker {
    pub fn start(nodes: u32) -> OwnBroker {
        let dir =
            std::env::temp_dir().join(format!("lagless-own-broker-{}-{nodes}", std::process::id()));
        let out = Command::new("python3")
            .arg(harness())
            .args(["start", "--nodes", &nodes.to_string(), "--dir"])
            .arg(&dir)
            .output()
            .expect("python3 runs the broker harness");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "broker did not start: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let bootstrap = stdout
            .lines()
            .find_map(|l| l.strip_prefix("bootstrap="))
            .expect("the harness prints bootstrap=")
            .to_string();
        OwnBroker { dir, bootstrap }
    }

    /// SIGTERM node `node` (1-based), then, after `down_for`, start it again on the same port
    /// with its data (`None`: leave it down).
    pub fn restart(&self, node: u32, down_for: Option<Duration>) {
        let script = format!(
            "import sys, time; sys.path.insert(0, {tests:?}); from kafka_broker import KafkaCluster; \
             c = KafkaCluster.from_state({dir:?}); c.stop_node({node}); {again}; c.detach()",
            tests = harness().parent().unwrap().to_str().unwrap(),
            dir = self.dir.to_str().unwrap(),
            again = match down_for {
                Some(d) => format!("time.sleep({}); c.start_node({node})", d.as_secs_f64()),
                None => "pass".to_string(),
            }
        );
        let out = Command::new("python3")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "restart failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for OwnBroker {
    fn drop(&mut self) {
        let _ = Command::new("python3")
            .arg(harness())
            .args(["stop", "--dir"])
            .arg(&self.dir)
            .output();
    }
}
