//! A Kafka cluster of a test's own, started and restarted through the project's harness
//! (tests/kafka_broker.py), for tests that stop or restart brokers. Stopped on drop, also when
//! the test fails; and when the test process ends without dropping it (an abort, a cluster held
//! in a static), by the harness's watchdog (`start --stop-with-pid`), once this process is gone.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

fn harness() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/kafka_broker.py")
}

/// A broker of this test's own; stopped on drop.
pub struct OwnBroker {
    pub dir: PathBuf,
    pub bootstrap: String,
    /// Per proxied listener (`start_proxied`), per node: (advertised port, where the test's
    /// proxy listens; bound port, where it forwards to).
    pub proxied: Vec<Vec<(u16, u16)>>,
}

impl OwnBroker {
    pub fn start(nodes: u32) -> OwnBroker {
        OwnBroker::start_with(nodes, &[])
    }

    /// A cluster whose node i has `broker.rack` = `racks[i-1]`, with the rack-aware replica
    /// selector on (KIP-392).
    pub fn start_with_racks(nodes: u32, racks: &[&str]) -> OwnBroker {
        OwnBroker::start_with(nodes, &["--racks", &racks.join(",")])
    }

    /// A cluster whose nodes have `listeners` proxied listeners each (see `proxied`, and
    /// `support/proxy.rs` for the proxy that goes in front of them).
    pub fn start_proxied(nodes: u32, listeners: u32) -> OwnBroker {
        OwnBroker::start_with(nodes, &["--proxied-listeners", &listeners.to_string()])
    }

    pub fn start_with(nodes: u32, extra: &[&str]) -> OwnBroker {
        // Tests of one binary run side by side: each cluster gets a directory of its own.
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "lagless-own-broker-{}-{nodes}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let out = Command::new("python3")
            .arg(harness())
            .args(["start", "--nodes", &nodes.to_string(), "--dir"])
            .arg(&dir)
            .args(["--stop-with-pid", &std::process::id().to_string()])
            .args(extra)
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
        let ports = |key: String| -> Option<Vec<u16>> {
            let list = stdout.lines().find_map(|l| l.strip_prefix(key.as_str()))?;
            Some(
                list.split(',')
                    .map(|a| a.rsplit(':').next().unwrap().parse().expect("a port"))
                    .collect(),
            )
        };
        let mut proxied = Vec::new();
        for k in 1.. {
            let Some(advertised) = ports(format!("proxied.{k}=")) else {
                break;
            };
            let bound = ports(format!("proxied.{k}.targets=")).expect("proxied.k.targets=");
            proxied.push(advertised.into_iter().zip(bound).collect());
        }
        OwnBroker {
            dir,
            bootstrap,
            proxied,
        }
    }

    /// SIGTERM node `node` (1-based), then, after `down_for`, start it again on the same port
    /// with its data (`None`: leave it down).
    pub fn restart(&self, node: u32, down_for: Option<Duration>) {
        self.python(&format!(
            "import time; c.stop_node({node}); {again}; c.detach()",
            again = match down_for {
                Some(d) => format!("time.sleep({}); c.start_node({node})", d.as_secs_f64()),
                None => "pass".to_string(),
            }
        ));
    }
}

impl OwnBroker {
    /// Runs `code` in Python with `c` bound to this cluster (the harness's `KafkaCluster`) and
    /// returns what it printed.
    fn python(&self, code: &str) -> String {
        let script = format!(
            "import sys; sys.path.insert(0, {tests:?}); import kafka_broker; \
             from kafka_broker import KafkaCluster; c = KafkaCluster.from_state({dir:?}); {code}",
            tests = harness().parent().unwrap().to_str().unwrap(),
            dir = self.dir.to_str().unwrap(),
        );
        let out = Command::new("python3")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{code}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Creates `topic` with one partition on `replicas` (node ids, the first the preferred
    /// leader) and topic configs `configs`, and waits until it has a leader.
    pub fn create_topic_on(&self, topic: &str, replicas: &[u32], configs: &[(&str, &str)]) {
        let replicas: Vec<String> = replicas.iter().map(|r| r.to_string()).collect();
        let configs: Vec<String> = configs
            .iter()
            .map(|(k, v)| format!("({k:?}, {v:?})"))
            .collect();
        // CreateTopics v4 with a replica assignment (the harness's own request has none).
        self.python(&format!(
            "import struct; from kafka_broker import _str, _Reader, kafka_request, wait_for_topic; \
             replicas = [{replicas}]; configs = [{configs}]; \
             body = (struct.pack('>i', 1) + _str({topic:?}) + struct.pack('>ih', -1, -1) \
               + struct.pack('>ii', 1, 0) + struct.pack('>i', len(replicas)) \
               + b''.join(struct.pack('>i', r) for r in replicas) \
               + struct.pack('>i', len(configs)) + b''.join(_str(k) + _str(v) for k, v in configs) \
               + struct.pack('>ib', 30000, 0)); \
             r = _Reader(kafka_request(c._running_bootstrap(), 19, 4, body, timeout=35)); r.i32(); \
             errs = r.array(lambda: (r.string(), r.i16(), r.string())); \
             assert all(e == 0 for _, e, _ in errs), errs; \
             wait_for_topic(c._running_bootstrap(), {topic:?}, 1)",
            replicas = replicas.join(", "),
            configs = configs.join(", "),
        ));
    }

    /// SIGTERMs node `node` (a controlled shutdown); its data is kept.
    pub fn stop_node(&self, node: u32) {
        self.python(&format!("c.stop_node({node}); c.detach()"));
    }

    /// SIGKILLs node `node`; its data is kept.
    pub fn kill_node(&self, node: u32) {
        self.python(&format!("c.kill_node({node}); c.detach()"));
    }

    /// Starts a stopped node again with its data; returns once it is back in the metadata.
    pub fn start_node(&self, node: u32) {
        self.python(&format!("c.start_node({node}); c.detach()"));
    }

    /// The address of node `node` (1-based).
    pub fn address(&self, node: u32) -> String {
        self.bootstrap
            .split(',')
            .nth(node as usize - 1)
            .unwrap()
            .to_string()
    }

    /// The node leading `topic`-`partition`, as the cluster's metadata says now.
    pub fn leader_of(&self, topic: &str, partition: i32) -> u32 {
        self.python(&format!(
            "print(kafka_broker.metadata(c.bootstrap, [{topic:?}])['topics'][{topic:?}]['partitions'][{partition}])"
        ))
        .parse()
        .expect("a node id")
    }

    /// The leader of `topic`-`partition` as node `node` sees it (-1: none).
    pub fn leader_seen_by(&self, node: u32, topic: &str, partition: i32) -> i32 {
        self.python(&format!(
            "print(kafka_broker.metadata(c.nodes[{node}].address, [{topic:?}])['topics'][{topic:?}]['partitions'][{partition}])"
        ))
        .parse()
        .expect("a node id")
    }

    /// SIGSTOPs node `node`: its sockets stay open but it answers nothing, as a hung machine
    /// does. The node continues (SIGCONT) when the guard is dropped, also when the test fails.
    pub fn freeze(&self, node: u32) -> Frozen {
        let pid = self.python(&format!("print(c.nodes[{node}].pid)"));
        signal(&pid, "STOP");
        Frozen { pid }
    }
}

fn signal(pid: &str, sig: &str) {
    let ok = Command::new("kill")
        .args(["-s", sig, pid])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill -s {sig} {pid} failed");
}

/// A node stopped with SIGSTOP; continued on drop.
pub struct Frozen {
    pid: String,
}

impl Frozen {
    /// Continues the node now.
    pub fn thaw(self) {}
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-s", "CONT", &self.pid])
            .status();
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
