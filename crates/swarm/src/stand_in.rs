//! `swarm stand-in-agent <prompt>` (hidden): a scripted agent CLI with no LLM, for tests
//! and demos. A runner starts it like any agent (`--harness cmd --harness-cmd swarm --
//! stand-in-agent`): it reads the prompt (its last argument), acts on the hub through the
//! real MCP endpoint (`POST $MCP_BASE_URL/mcp`, JSON-RPC `tools/call`, as `$AGENT_ID`),
//! prints Claude-style stream-json lines, and exits.
//!
//! What it does depends on the prompt's first line and `STAND_IN_BEHAVIOUR`:
//! - `/work-on-task <id>`: `complete` (default) reports the task completed with an
//!   output; `fail` reports it failed; `silent` reports nothing; `hang` never ends.
//! - `/review-offered-task <id>`: accepts the offer, or rejects it with `reject`
//!   (`silent` and `hang` as above).
//! - anything else: nothing.
//!
//! `STAND_IN_EXIT_CODE` is its exit code after acting (default 0), `STAND_IN_SLEEP_MS` a
//! pause before acting, and `STAND_IN_RECORD_DIR` a folder where it writes one
//! `<pid>.start` and `<pid>.end` JSON file per run (for tests to count and time runs).

use std::{
    path::{Path, PathBuf},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};

#[derive(Debug, Args)]
pub struct StandInArgs {
    /// Arguments as an agent CLI gets them; the last one is the prompt.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
    args: Vec<String>,
}

pub async fn run(args: StandInArgs) -> anyhow::Result<()> {
    let prompt = args.args.last().cloned().unwrap_or_default();
    let behaviour = std::env::var("STAND_IN_BEHAVIOUR").unwrap_or_else(|_| "complete".into());
    let exit_code: i32 = env_number("STAND_IN_EXIT_CODE").unwrap_or(0);
    let record_dir = std::env::var_os("STAND_IN_RECORD_DIR").map(PathBuf::from);
    let session_id = format!("stand-in-{}", std::process::id());
    let first_line = prompt.lines().next().unwrap_or_default().to_string();

    if let Some(dir) = &record_dir {
        record(dir, "start", &first_line)?;
    }
    println!(
        "{}",
        json!({"type": "system", "subtype": "init", "session_id": session_id, "model": "stand-in"})
    );
    if let Some(millis) = env_number::<u64>("STAND_IN_SLEEP_MS") {
        tokio::time::sleep(Duration::from_millis(millis)).await;
    }
    if behaviour == "hang" {
        println!("{}", json!({"type": "assistant", "message": {"content": "working forever"}}));
        std::future::pending::<()>().await;
    }

    let mut words = first_line.split_whitespace();
    let command = words.next().unwrap_or_default();
    let task_id = words.next().unwrap_or_default().to_string();
    let answer = match (command, behaviour.as_str()) {
        (_, "silent") => "said nothing".to_string(),
        ("/work-on-task", "fail") => {
            let args = json!({"taskId": task_id, "status": "failed", "failureReason": "the stand-in was told to fail"});
            call_tool("store-progress", args).await?
        }
        ("/work-on-task", _) => {
            let text = prompt.lines().nth(3).unwrap_or_default();
            let output = format!("stand-in finished: {text}");
            call_tool("store-progress", json!({"taskId": task_id, "status": "completed", "output": output}))
                .await?
        }
        ("/review-offered-task", "reject") => {
            let args =
                json!({"action": "reject", "taskId": task_id, "reason": "the stand-in was told to reject"});
            call_tool("task-action", args).await?
        }
        ("/review-offered-task", _) => {
            call_tool("task-action", json!({"action": "accept", "taskId": task_id})).await?
        }
        _ => "nothing to do".to_string(),
    };

    let result = json!({
        "type": "result", "subtype": "success", "is_error": exit_code != 0, "result": answer,
        "session_id": session_id, "total_cost_usd": 0.0, "duration_ms": 1, "num_turns": 1,
        "usage": {"input_tokens": 1, "output_tokens": 1}
    });
    println!("{result}");
    if let Some(dir) = &record_dir {
        record(dir, "end", &first_line)?;
    }
    if exit_code != 0 {
        std::process::exit(exit_code);
    }
    Ok(())
}

/// One MCP `tools/call` as `$AGENT_ID`; the tool's message, or an error when it refused.
async fn call_tool(name: &str, arguments: Value) -> anyhow::Result<String> {
    let base = std::env::var("MCP_BASE_URL").context("MCP_BASE_URL is not set: a runner sets it")?;
    let agent_id = std::env::var("AGENT_ID").context("AGENT_ID is not set: a runner sets it")?;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}});
    let mut request = reqwest::Client::new()
        .post(format!("{}/mcp", base.trim_end_matches('/')))
        .header("X-Agent-ID", agent_id)
        // The stateless endpoint answers plain JSON, but the transport wants both accepted.
        .header("Accept", "application/json, text/event-stream")
        .json(&body);
    if let Ok(key) = std::env::var("API_KEY")
        && !key.is_empty()
    {
        request = request.bearer_auth(key);
    }
    let response =
        request.send().await.with_context(|| format!("cannot reach the hub's MCP endpoint at {base}"))?;
    let status = response.status();
    let answer: Value =
        response.json().await.with_context(|| format!("{name}: the answer ({status}) is not JSON"))?;
    let content = &answer["result"]["structuredContent"];
    let message = content["message"].as_str().unwrap_or_default().to_string();
    if content["success"] != json!(true) {
        bail!("{name} was refused: {}", if message.is_empty() { answer.to_string() } else { message });
    }
    Ok(message)
}

fn record(dir: &Path, what: &str, first_line: &str) -> anyhow::Result<()> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_nanos();
    let entry = json!({
        "pid": std::process::id(),
        "at": nanos.to_string(),
        "prompt": first_line,
        "taskIdEnv": std::env::var("TASK_ID").ok(),
        "trigger": std::env::var("SWARM_TRIGGER").ok(),
    });
    let path = dir.join(format!("{}.{what}", std::process::id()));
    std::fs::write(&path, entry.to_string()).with_context(|| format!("cannot write {}", path.display()))
}

fn env_number<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|text| text.trim().parse().ok())
}
