//! The stand-in as a trigger session using the Inbox-MCP tools: it starts the stdio MCP
//! server its configuration names (`swarm mcp --trigger <name> ...`, as an agent CLI
//! starts a stdio server of its `.mcp.json`) with its own environment, so the server sees
//! the session the runner set (`SWARM_SESSION_TASK_ID`), and files the task's text with
//! `task_create`. Blocking I/O on purpose: a run makes one call and exits.

use std::{
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
};

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// `task_create` over a stdio server started with `command` (words split on whitespace):
/// the created task's id.
pub(super) fn task_create(command: &str, content: &str) -> anyhow::Result<String> {
    let mut words = command.split_whitespace();
    let program = words.next().context("the Inbox-MCP command is empty")?;
    let mut child = Command::new(program)
        .args(words)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start the Inbox-MCP server {command:?}"))?;
    let mut stdin = child.stdin.take().context("stdin is piped")?;
    let mut lines = BufReader::new(child.stdout.take().context("stdout is piped")?).lines();
    let mut answer = |stdin: &mut std::process::ChildStdin, request: Value| -> anyhow::Result<Value> {
        writeln!(stdin, "{request}")?;
        let id = request["id"].clone();
        loop {
            let line = lines.next().context("the Inbox-MCP server closed its output")??;
            let message: Value = serde_json::from_str(&line).context("the Inbox-MCP server spoke no JSON")?;
            if message["id"] == id {
                return Ok(message);
            }
        }
    };
    answer(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "stand-in-agent", "version": "1"}}}),
    )?;
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "task_create", "arguments": {"content": content}}});
    let mut reply = answer(&mut stdin, call)?;
    drop(stdin);
    let _ = child.wait();
    let content = reply["result"]["structuredContent"].take();
    if content["success"] != json!(true) {
        bail!("task_create was refused: {reply}");
    }
    content["task"]["id"]
        .as_str()
        .map(str::to_string)
        .with_context(|| format!("task_create named no task: {content}"))
}
