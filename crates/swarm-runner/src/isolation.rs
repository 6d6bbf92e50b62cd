//! An agent token isolates an agent only from what the agent cannot read. A runner
//! started with one (`AGENT_TOKEN`) checks the hub's key and database files, as the
//! hub lists them and as this machine keeps them for local commands: if this process
//! can read one, so can every agent CLI it starts, which could then mint itself a
//! lead's token or edit the database. It refuses to start unless told to accept that.

use std::path::PathBuf;

use serde_json::json;
use swarm_client::Client;

use crate::{RunnerConfig, RunnerError, view::View};

/// Refuses (or, with `accept_readable_hub_files`, warns) when this process can read a
/// file that holds the hub's key or data.
pub(crate) async fn check(client: &Client, config: &RunnerConfig, view: &View) -> Result<(), RunnerError> {
    let mut files = client.hub_private_files().await.unwrap_or_default();
    if let Ok(url) = reqwest::Url::parse(&config.hub_url)
        && let Some(file) = url.port_or_known_default().and_then(swarm_domain::local_key::key_file_for_port)
    {
        files.push(file);
    }
    files.sort();
    files.dedup();
    let readable: Vec<PathBuf> = files.into_iter().filter(|file| std::fs::File::open(file).is_ok()).collect();
    if readable.is_empty() {
        return Ok(());
    }
    let list = readable.iter().map(|file| file.display().to_string()).collect::<Vec<_>>().join(", ");
    let why = format!(
        "this runner holds an agent token, but it (and every agent CLI it starts) can read the hub's {list}: \
         with the key or the database an agent can make itself any agent, the lead included, so the token \
         isolates nothing"
    );
    if config.accept_readable_hub_files {
        view.warn(
            "isolation",
            &format!("WARNING: {why}. Starting anyway (--accept-readable-hub-files)."),
            &[("readable", json!(readable))],
        );
        return Ok(());
    }
    Err(RunnerError::InvalidConfig(format!(
        "{why}. Run the agent as another OS user or in a container that cannot see those files \
         (docs/deployment.md, \"Trust model\"), or pass --accept-readable-hub-files \
         (ACCEPT_READABLE_HUB_FILES=1) to run it anyway"
    )))
}
