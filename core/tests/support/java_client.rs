//! The Java client of the interoperability tests (tests/interop/java/InteropClient.java, the
//! official Kafka consumer) as a process a scenario test runs beside lagless, to measure both in
//! the same conditions. It is compiled once per test binary the way tests/interop does it
//! (tests/interop/clients.py `build_java_client`, against the broker's own kafka-clients jar), and
//! its JSON lines are read as they come: each is handed to the test's sink and kept. The process
//! is stopped (SIGTERM, then SIGKILL) when the handle is dropped, also when the test fails.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `java ... InteropClient`: the command prefix tests/interop/clients.py builds, after compiling
/// the client into a directory of this process's own.
fn command() -> &'static [String] {
    static COMMAND: OnceLock<Vec<String>> = OnceLock::new();
    COMMAND.get_or_init(|| {
        let out = work_dir();
        let script = format!(
            "import json, sys; from pathlib import Path; sys.path.insert(0, {interop:?}); \
             import clients; print(json.dumps(clients.build_java_client(Path({out:?}))))",
            interop = repo().join("tests/interop").to_str().unwrap(),
            out = out.to_str().unwrap(),
        );
        let o = Command::new("python3")
            .args(["-c", &script])
            .output()
            .expect("python3 builds the Java client");
        assert!(
            o.status.success(),
            "building InteropClient.java failed: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice(&o.stdout).expect("the Java command as a JSON list")
    })
}

/// The instant of a wall-clock time in microseconds (the "ts_us" of the Java lines), so that
/// the Java client's times and the test's `Instant`s are on one axis. Both clocks are read
/// together once; a wall-clock step during a test would shift the Java times by as much.
pub fn instant_of(ts_us: i64) -> Instant {
    static ANCHOR: OnceLock<(Instant, i64)> = OnceLock::new();
    let (at, at_us) = *ANCHOR.get_or_init(|| {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        (Instant::now(), wall.as_micros() as i64)
    });
    let d = ts_us - at_us;
    if d >= 0 {
        at + Duration::from_micros(d as u64)
    } else {
        at.checked_sub(Duration::from_micros(d.unsigned_abs()))
            .expect("a time before the process started")
    }
}

/// What to do with each line, on the reader thread, as it comes.
pub type Sink = Box<dyn FnMut(&Value) + Send>;

/// A running InteropClient.
pub struct JavaClient {
    pub name: String,
    child: Child,
    lines: Arc<Mutex<Vec<Value>>>,
    reader: Option<JoinHandle<()>>,
    stderr: PathBuf,
}

impl JavaClient {
    /// Starts `InteropClient ARGS` (e.g. `consume --bootstrap B --topic T ...`); `log4j` names
    /// loggers to print at INFO on its stderr (the default shows warnings only).
    pub fn start(name: &str, args: &[&str], log4j: &[&str], mut sink: Sink) -> JavaClient {
        instant_of(0); // the anchor, before any line can come
        let mut cmd: Vec<String> = command().to_vec();
        let dir = work_dir();
        std::fs::create_dir_all(dir).unwrap();
        if !log4j.is_empty() {
            let props = dir.join(format!("{name}-log4j2.properties"));
            std::fs::write(&props, log4j_properties(log4j)).unwrap();
            // The last -D of a property wins: put it after the harness's own, before -cp.
            let cp = cmd
                .iter()
                .position(|a| a == "-cp")
                .expect("-cp in the command");
            cmd.insert(
                cp,
                format!("-Dlog4j2.configurationFile={}", props.to_str().unwrap()),
            );
        }
        let stderr = dir.join(format!("{name}.stderr"));
        let mut child = Command::new(&cmd[0])
            .args(&cmd[1..])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("java starts");
        let stdout = child.stdout.take().unwrap();
        let lines: Arc<Mutex<Vec<Value>>> = Arc::default();
        let kept = lines.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(v) = serde_json::from_str::<Value>(line.trim()) else {
                    eprintln!("not a JSON line from the Java client: {line}");
                    continue;
                };
                sink(&v);
                kept.lock().unwrap().push(v);
            }
        });
        JavaClient {
            name: name.to_string(),
            child,
            lines,
            reader: Some(reader),
            stderr,
        }
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<Value> {
        self.lines.lock().unwrap().clone()
    }

    /// The (partition, offset, value) of every record line so far.
    pub fn records(&self) -> Vec<(i32, i64, String)> {
        self.lines()
            .iter()
            .filter(|v| v.get("event").is_none() && v.get("offset").is_some())
            .map(|v| {
                (
                    v["partition"].as_i64().unwrap() as i32,
                    v["offset"].as_i64().unwrap(),
                    v["value"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    }

    /// The event lines (`{"event": ...}`) so far.
    pub fn events(&self) -> Vec<Value> {
        self.lines()
            .into_iter()
            .filter(|v| v.get("event").is_some())
            .collect()
    }

    /// The last lines of its stderr (its log), for a failure message or a report.
    pub fn stderr_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Its stderr lines that contain `what`.
    pub fn stderr_lines_with(&self, what: &str) -> Vec<String> {
        std::fs::read_to_string(&self.stderr)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(what))
            .map(str::to_string)
            .collect()
    }

    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM (the client closes its consumer, leaving the group, and prints its "done" line),
    /// SIGKILL if it is still running after `grace`; returns once its output is read.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        if self.alive() {
            let _ = Command::new("kill")
                .args(["-s", "TERM", &self.child.id().to_string()])
                .status();
            let deadline = Instant::now() + grace;
            while self.alive() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if self.alive() {
                let _ = self.child.kill();
            }
        }
        let status = self.child.wait().ok();
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        status
    }
}

impl Drop for JavaClient {
    fn drop(&mut self) {
        if self.reader.is_some() {
            self.stop(Duration::from_secs(10));
        }
    }
}

fn log4j_properties(info_loggers: &[&str]) -> String {
    let mut s = String::from(
        "status = error\n\
         appender.err.type = Console\nappender.err.name = STDERR\nappender.err.target = SYSTEM_ERR\n\
         appender.err.layout.type = PatternLayout\n\
         appender.err.layout.pattern = [%d] %p %m (%c)%n\n\
         rootLogger.level = WARN\nrootLogger.appenderRef.err.ref = STDERR\n",
    );
    for (i, logger) in info_loggers.iter().enumerate() {
        s += &format!("logger.l{i}.name = {logger}\nlogger.l{i}.level = INFO\n");
    }
    s
}

/// Where the compiled client and the logs of this test binary's Java clients are: a directory of
/// the target's own per test binary, used again by the next run (nothing piles up in /tmp).
pub fn work_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let binary = exe.file_stem().unwrap().to_string_lossy().into_owned();
        PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join("java-client")
            .join(binary)
    })
}
