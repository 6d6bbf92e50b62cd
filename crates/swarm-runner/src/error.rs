//! Why a runner cannot run: the errors of this crate's public API. Each message says
//! what to do, because it is what a person starting `swarm worker` reads last.

use std::{fmt, path::PathBuf};

use swarm_client::ClientError;
use swarm_domain::id::AgentId;

use crate::doctor::Check;

#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// A setting that cannot work (out of range, contradictory).
    #[error("{0}")]
    InvalidConfig(String),
    /// `--harness-cmd` / `HARNESS_CMD` is not a command line a shell would accept.
    #[error("--harness-cmd (HARNESS_CMD) {line:?} is not a valid command line: {reason}")]
    HarnessCommand { line: String, reason: String },
    /// A harness file (`--harness-file`, or `--harness <name>` found in the user's folder)
    /// the runner cannot use.
    #[error(
        "the harness file {origin} cannot be used: {reason} (docs/real-agent-clis.md, \"Adding an agent CLI\")"
    )]
    HarnessFile { origin: String, reason: String },
    /// The client could not be built for this hub URL.
    #[error("cannot talk to the hub at {url}: {source}")]
    Client {
        url: String,
        #[source]
        source: Box<ClientError>,
    },
    /// The hub answered, but not in a way that lets the runner go on.
    #[error("the hub's {what} failed: {source}")]
    Hub {
        what: &'static str,
        #[source]
        source: Box<ClientError>,
    },
    /// The hub refused the agent (bad key, a second lead, ...).
    #[error("cannot register agent {name} ({id}) with the hub: {source}")]
    Register {
        name: String,
        id: AgentId,
        #[source]
        source: Box<ClientError>,
    },
    /// Start-up checks failed: the agent CLI could not have worked, so nothing was claimed.
    #[error("{}", Failures(.0))]
    Preflight(Vec<Check>),
    /// A local file the runner needs (log folder, ...).
    #[error("cannot use {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

struct Failures<'a>(&'a [Check]);

impl fmt::Display for Failures<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the agent CLI cannot run here; nothing was claimed. Fix this first:")?;
        for check in self.0.iter().filter(|check| !check.passed) {
            write!(f, "\n  ✗ {}: {}", check.name, check.detail)?;
            if let Some(fix) = &check.fix {
                write!(f, "\n    fix: {fix}")?;
            }
        }
        Ok(())
    }
}
