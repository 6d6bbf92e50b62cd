//! `swarm-bench tools` with the real, pinned Claude Code (scripts/install-agent-clis): a row per
//! role and tool groups, each with its `tools/list` answer and the first model request the CLI
//! sent, swarm's tools in it as many as `tools/list` offered. Counts and bytes, never timings.

use serde_json::Value;

use crate::support::swarm_bench;

#[test]
fn tools_weighs_each_roles_tools_list_and_claude_codes_first_request() {
    let output = swarm_bench(&["tools", "--cli", "claude", "--json"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "swarm-bench tools exits 0; stderr:\n{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).expect("--json prints JSON");
    let rows = report["rows"].as_array().expect("rows");
    let shape: Vec<(&str, &str)> =
        rows.iter().map(|row| (row["role"].as_str().unwrap(), row["groups"].as_str().unwrap())).collect();
    assert_eq!(shape, [("worker", "default"), ("lead", "default"), ("worker", "every"), ("lead", "every")]);
    let count = |row: &Value, key: &str| row[key].as_u64().unwrap_or_else(|| panic!("{key} in {row}"));
    for row in rows {
        let [request] = row["firstRequests"].as_array().expect("firstRequests").as_slice() else {
            panic!("one first request, Claude Code's: {row}")
        };
        assert_eq!(request["cli"], "claude", "{row}");
        // The pinned Claude Code sends every MCP tool in full, and only those the hub offers.
        assert_eq!(count(request, "swarmTools"), count(row, "toolsListTools"), "{row}");
        assert_eq!(count(request, "swarmToolsNamedOnly"), 0, "{row}");
        assert!(
            count(request, "swarmToolsBytes") > count(row, "toolsListModelBytes"),
            "names get a prefix: {row}"
        );
        assert!(count(row, "toolsListBytes") > count(row, "toolsListModelBytes"), "{row}");
        assert!(count(request, "bodyBytes") > count(request, "toolsBytes"), "{row}");
        assert!(count(request, "toolsBytes") > count(request, "swarmToolsBytes"), "{row}");
    }
    // A worker gets fewer tools than the lead; every group adds to both.
    let tools: Vec<u64> = rows.iter().map(|row| count(row, "toolsListTools")).collect();
    assert!(tools[0] < tools[1] && tools[0] < tools[2] && tools[1] < tools[3], "{tools:?}");
    assert!(
        report["clis"][0]["version"].as_str().is_some_and(|version| version.contains("Claude Code")),
        "{report}"
    );
}

#[test]
fn tools_without_a_cli_prints_the_tools_list_table() {
    let output = swarm_bench(&["tools", "--no-cli"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "stderr:\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("| role | groups | MCP `tools/list` |\n"), "{stdout}");
    for row in
        ["| worker | default | 14 tools, ", "| lead | default | ", "| worker | every | ", "| lead | every | "]
    {
        assert!(stdout.contains(row), "a row {row:?}:\n{stdout}");
    }
}
