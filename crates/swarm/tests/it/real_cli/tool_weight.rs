//! What the hub adds to every model call, as the real Claude Code sends it (issue 43): the
//! swarm tools (`mcp__agent-swarm__*`) in the first model request of a worker's and of the
//! lead's task run stay within a budget. Weighed from the request the CLI sent the scripted
//! model, not from our own rendering of the tools; `swarm-bench tools` reports the same.
//! A CLI that defers MCP tools (tool search; Claude Code from 2.1.3xx) sends their names only:
//! the budget holds what it sends, and every tool is still there, sent or named.

use serde_json::json;
use swarm_scripted_model::Script;

use super::{Cli, World, cli_tests, complete, first_request};
use crate::mcp_client::{WORKER_TOOLS, lead_tools};

/// Bytes of swarm tool definitions in a worker's first request. Measured 9,943 with Claude
/// Code 2.1.197 on 2026-11-28 (27,400 before issue 43). Every byte is paid in every model call
/// of every agent: raising this is a decision, never drift.
const WORKER_SWARM_TOOLS_BUDGET: usize = 10_000;
/// The lead's set (planning, its Slack inbox, steering): 21,471 measured likewise (34,624
/// before issue 43).
const LEAD_SWARM_TOOLS_BUDGET: usize = 22_000;

cli_tests!(
    claude: Claude;
    a_workers_first_request_carries_its_swarm_tools_within_budget,
    the_leads_first_request_carries_its_swarm_tools_within_budget
);

async fn a_workers_first_request_carries_its_swarm_tools_within_budget(cli: Cli) {
    weigh_first_request(cli, "worker", WORKER_TOOLS.len(), WORKER_SWARM_TOOLS_BUDGET).await;
}

async fn the_leads_first_request_carries_its_swarm_tools_within_budget(cli: Cli) {
    weigh_first_request(cli, "lead", lead_tools().len(), LEAD_SWARM_TOOLS_BUDGET).await;
}

async fn weigh_first_request(cli: Cli, role: &str, tools: usize, budget: usize) {
    let world = World::new(cli, Script::new().call_tool("store-progress", complete).reply("Done.")).await;
    let runner = world.runner(role, &[]);
    world.registered(&runner).await;
    let id = world.create(json!({"task": "Weigh the tools", "agentId": runner.agent_id})).await;
    let done = world.task_in(&id, &["completed", "failed", "unassigned"], &runner).await;
    assert_eq!(done["status"], "completed", "{done}\n{}", runner.output());

    let request = world
        .model
        .requests()
        .into_iter()
        .find(|request| request.conversation().is_some_and(|c| c.contains(&id) && first_request(&c)))
        .expect("the run's first model request");
    let weight = request.weight().unwrap();
    eprintln!("{role}'s first request: {weight:?}");
    assert_eq!(
        weight.mcp_tools + weight.deferred_mcp_tools,
        tools,
        "every tool the {role} is offered is sent or named: {weight:?}"
    );
    assert!(
        weight.mcp_tools_bytes <= budget,
        "the {role}'s swarm tools take {} bytes of every model call, budget {budget}: {weight:?}",
        weight.mcp_tools_bytes
    );
}
