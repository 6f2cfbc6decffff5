//! A Ballista cluster on 127.0.0.1 — one scheduler and two executors, started here as
//! `pcmap-fleet scheduler` / `pcmap-fleet executor` processes on free ports and killed at the end
//! even when the test fails — merges shards into the same bytes as the embedded engine.

#[path = "../../pcmap-perf2bolt/tests/support/mod.rs"]
mod support;

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pcmap_testkit as tk;

fn fleet() -> Command {
    Command::new(env!("CARGO_BIN_EXE_pcmap-fleet"))
}

/// Kills and reaps the cluster's processes when dropped (also on panic).
struct Cluster {
    children: Vec<Child>,
    logs: Vec<PathBuf>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Cluster {
    fn spawn(&mut self, log: PathBuf, cmd: &mut Command) {
        let file = std::fs::File::create(&log).unwrap();
        let child = cmd
            .stdout(Stdio::from(file.try_clone().unwrap()))
            .stderr(Stdio::from(file))
            .spawn()
            .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
        self.children.push(child);
        self.logs.push(log);
    }

    fn logs(&self) -> String {
        self.logs
            .iter()
            .map(|l| {
                format!(
                    "== {}\n{}",
                    l.display(),
                    std::fs::read_to_string(l).unwrap_or_default()
                )
            })
            .collect()
    }

    /// Wait until `port` accepts connections, or fail with the logs.
    fn wait_for(&mut self, port: u16) {
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            for c in &mut self.children {
                if let Ok(Some(status)) = c.try_wait() {
                    panic!("a cluster process exited ({status}):\n{}", self.logs());
                }
            }
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "port {port} not listening after 120 s:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `n` free TCP ports on 127.0.0.1 (held together so they are distinct).
fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    listeners
        .iter()
        .map(|l| l.local_addr().unwrap().port())
        .collect()
}

fn shards(dir: &Path) -> PathBuf {
    let bin = tk::build_eh(tk::EH_FIXTURES[0]);
    let funcs = support::disassemble(&bin);
    let shard_dir = dir.join("shards");
    std::fs::create_dir_all(&shard_dir).unwrap();
    for (i, seed) in [101u64, 102, 103, 104].into_iter().enumerate() {
        let p = dir.join(format!("prof-{i}.pa"));
        std::fs::write(&p, support::generate(&funcs, 3000, seed, false)).unwrap();
        tk::run_ok(
            fleet()
                .arg("perf2bolt")
                .arg(&bin)
                .arg("--pa")
                .arg("-p")
                .arg(&p)
                .arg("-o")
                .arg(shard_dir.join(format!("host{i}.parquet")))
                .args(["--host", &format!("host{i}")]),
        );
    }
    shard_dir
}

#[test]
fn ballista_cluster_merges_like_the_embedded_engine() {
    let dir = tk::scratch_dir("fleet-ballista");
    let shard_dir = shards(&dir);
    let embedded = dir.join("embedded.fdata");
    tk::run_ok(
        fleet()
            .arg("merge")
            .arg(&shard_dir)
            .arg("-o")
            .arg(&embedded),
    );
    let embedded = std::fs::read(&embedded).unwrap();
    assert!(embedded.len() > 1000);

    let ports = free_ports(5);
    let mut cluster = Cluster {
        children: Vec::new(),
        logs: Vec::new(),
    };
    let scheduler = format!("127.0.0.1:{}", ports[0]);
    cluster.spawn(
        dir.join("scheduler.log"),
        fleet()
            .arg("scheduler")
            .args(["--bind", "127.0.0.1", "--port", &ports[0].to_string()]),
    );
    cluster.wait_for(ports[0]);
    for e in 0..2 {
        let work = dir.join(format!("executor{e}"));
        std::fs::create_dir_all(&work).unwrap();
        cluster.spawn(
            dir.join(format!("executor{e}.log")),
            fleet()
                .arg("executor")
                .args(["--bind", "127.0.0.1"])
                .args(["--port", &ports[1 + 2 * e].to_string()])
                .args(["--grpc-port", &ports[2 + 2 * e].to_string()])
                .args(["--scheduler", &scheduler, "--vcores", "2"])
                .arg("--work-dir")
                .arg(&work),
        );
    }
    cluster.wait_for(ports[1]);
    cluster.wait_for(ports[3]);

    let out = dir.join("ballista.fdata");
    let r = tk::run(
        fleet()
            .arg("merge")
            .arg(&shard_dir)
            .args(["--engine", "ballista", "--scheduler", &scheduler])
            .arg("-o")
            .arg(&out),
    );
    assert!(
        r.status.success(),
        "ballista merge: {}\n{}\n{}",
        r.status,
        String::from_utf8_lossy(&r.stderr),
        cluster.logs()
    );
    assert_eq!(
        std::fs::read(&out).unwrap(),
        embedded,
        "Ballista vs embedded ({})",
        dir.display()
    );
    let sql = "SELECT host, SUM(count) AS n FROM shards GROUP BY host ORDER BY host";
    let q = |engine: &[&str]| {
        tk::run_ok(
            fleet()
                .arg("query")
                .arg(sql)
                .arg(&shard_dir)
                .args(["--format", "csv"])
                .args(engine),
        )
    };
    assert_eq!(
        q(&["--engine", "ballista", "--scheduler", &scheduler]),
        q(&[]),
        "query on Ballista vs embedded"
    );
    eprintln!(
        "Ballista (1 scheduler, 2 executors): {} bytes of fdata, same as embedded",
        embedded.len()
    );
}
