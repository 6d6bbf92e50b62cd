//! Which CLI a scenario runs, at which version, on which Node: the same scenarios run against
//! the pinned CLIs and, in CI, against the newest (`scripts/install-newest-agent-clis`), so a
//! failure must say which one broke. Every [`super::World`] prints [`under_test`] first, and
//! the runner's waits repeat it when they give up.
//!
//! `SWARM_TEST_NODE_DIR`: a folder with the `node` the CLIs run on, put first on their `PATH`
//! (the newest Claude Code needs Node 22; the machine's may be 20).

use std::{
    collections::HashMap,
    ffi::OsString,
    path::{Path, PathBuf},
    process::Command,
    sync::Mutex,
};

use super::Cli;

/// The variable naming the folder of the `node` to run the CLIs on.
pub const NODE_DIR_VAR: &str = "SWARM_TEST_NODE_DIR";

/// `SWARM_TEST_NODE_DIR` when set; it must hold a `node` (a wrong folder fails, naming it,
/// rather than testing on the machine's Node).
fn node_dir() -> Option<PathBuf> {
    let dir = std::env::var_os(NODE_DIR_VAR).filter(|dir| !dir.is_empty())?;
    let dir = PathBuf::from(dir);
    assert!(
        dir.join("node").is_file(),
        "{NODE_DIR_VAR}={} has no `node` in it (scripts/install-newest-agent-clis prints the one to use)",
        dir.display()
    );
    Some(dir)
}

/// The `PATH` a CLI runs with: Node's folder (`SWARM_TEST_NODE_DIR`), the CLI's folder, then
/// the machine's.
pub fn search_path(cli_dir: &Path) -> OsString {
    let mut dirs: Vec<PathBuf> = node_dir().into_iter().collect();
    dirs.push(cli_dir.to_path_buf());
    dirs.extend(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()));
    std::env::join_paths(dirs).expect("PATH entries have no `:`")
}

/// One line naming the CLI under test: its path, what its `--version` says and the Node it
/// runs on. Asked once per CLI and process.
pub fn under_test(cli: Cli) -> String {
    static SEEN: Mutex<Option<HashMap<&'static str, String>>> = Mutex::new(None);
    let mut seen = SEEN.lock().unwrap();
    let seen = seen.get_or_insert_with(HashMap::new);
    seen.entry(cli.name()).or_insert_with(|| describe(cli)).clone()
}

fn describe(cli: Cli) -> String {
    let dir = cli.bin_dir();
    let path = search_path(&dir);
    let ask = |program: &Path| {
        let output = Command::new(program).arg("--version").env("PATH", &path).output();
        match output {
            Ok(output) if output.status.success() => {
                String::from_utf8_lossy(&output.stdout).lines().next().unwrap_or("").trim().to_owned()
            }
            Ok(output) => format!("--version failed: {}", String::from_utf8_lossy(&output.stderr).trim()),
            Err(err) => format!("--version did not run: {err}"),
        }
    };
    let node = match which("node", &path) {
        Some(node) => format!("node {} ({})", ask(&node), node.display()),
        None => "no node on PATH".to_owned(),
    };
    let program = dir.join(cli.name());
    format!("real CLI under test: {} {} ({}), {node}", cli.name(), ask(&program), program.display())
}

fn which(program: &str, path: &OsString) -> Option<PathBuf> {
    std::env::split_paths(path).map(|dir| dir.join(program)).find(|candidate| candidate.is_file())
}
