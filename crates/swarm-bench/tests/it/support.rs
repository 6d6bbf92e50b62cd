//! What the tests share: the two binaries, the PostgreSQL server, a hub to bench by URL.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    sync::mpsc,
    time::Duration,
};

pub const SWARM_BENCH: &str = env!("CARGO_BIN_EXE_swarm-bench");

const POSTGRES_URL_VAR: &str = "SWARM_TEST_POSTGRES_URL";

/// The `swarm` binary of this build: beside swarm-bench in the same target folder, where
/// the bench itself finds it. `cargo nextest run --workspace` (scripts/test) builds it;
/// `cargo nextest run -p swarm-bench` alone does not.
pub fn swarm() -> PathBuf {
    let swarm = Path::new(SWARM_BENCH).with_file_name(format!("swarm{}", std::env::consts::EXE_SUFFIX));
    assert!(
        swarm.is_file(),
        "the swarm-bench tests start hubs with the swarm binary, and {} is missing: build it with \
         `cargo build -p swarm` (scripts/test builds every binary of the workspace)",
        swarm.display()
    );
    swarm
}

/// `swarm-bench <args>`, finding `swarm` beside itself as a user's would, with none of the
/// caller's hub settings.
pub fn swarm_bench(args: &[&str]) -> Output {
    swarm();
    Command::new(SWARM_BENCH)
        .args(args)
        .env_remove("SWARM_BIN")
        .env_remove("DATABASE_URL")
        .env_remove("API_KEY")
        .output()
        .expect("the swarm-bench binary runs")
}

/// The PostgreSQL server of the tests; missing, the test fails saying how to get one.
pub fn postgres_url() -> String {
    match std::env::var(POSTGRES_URL_VAR) {
        Ok(url) if !url.trim().is_empty() => url.trim().to_string(),
        _ => panic!(
            "{POSTGRES_URL_VAR} is not set: run `scripts/test`, which starts a throwaway \
             PostgreSQL cluster, or start one with `scripts/pg-cluster start DIR` and export \
             {POSTGRES_URL_VAR}=<the postgres:// URL it prints>"
        ),
    }
}

/// A `swarm serve` on a SQLite file in `dir`, with `api_key`; killed when dropped.
pub struct Hub {
    child: Child,
    pub base_url: String,
}

impl Hub {
    pub fn start(dir: &Path, api_key: &str) -> Hub {
        let mut child = Command::new(swarm())
            .args(["serve", "--host", "127.0.0.1", "--port", "0", "--db"])
            .arg(dir.join("swarm.db"))
            .env("API_KEY", api_key)
            .env("RUST_LOG", "warn")
            .env_remove("API_KEY_FILE")
            .env_remove("INSECURE_NO_AUTH")
            .env_remove("DATABASE_URL")
            .env_remove("DATABASE_PATH")
            .env_remove("PORT")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the swarm binary starts");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (lines_tx, lines_rx) = mpsc::channel();
        std::thread::spawn(move || {
            // Read to the end, so the hub never blocks on a full pipe.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = lines_tx.send(line);
            }
        });
        let base_url = loop {
            let line = lines_rx
                .recv_timeout(Duration::from_secs(60))
                .expect("the hub says where it listens within a minute");
            if let Some((_, url)) = line.split_once("listening on ") {
                break url.trim().to_string();
            }
        };
        Hub { child, base_url }
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
