//! The scripted model's HTTP surface, without a CLI.

use serde_json::{Value, json};
use swarm_scripted_model::{Failure, Script, ScriptedModel};

async fn post(url: String, body: Value) -> (u16, String) {
    let response = reqwest::Client::new().post(url).json(&body).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn anthropic_non_streaming_calls_the_tool_then_replies() {
    let model = ScriptedModel::start(
        Script::new()
            .call_tool("store-progress", |c| json!({"taskId": c.prompt_uuid()}))
            .reply_with(|c| format!("saw {}", c.last_tool_result().unwrap_or_default()))
            .with_usage(7, 3),
    )
    .await;
    let url = format!("{}/v1/messages", model.anthropic_base_url());
    let tools = json!([{"name": "Bash"}, {"name": "mcp__agent-swarm__store-progress"}]);
    let prompt = "Work on task 3f1e2d4c-1a2b-4c3d-8e9f-0a1b2c3d4e5f.";

    let (status, body) = post(
        url.clone(),
        json!({"model": "m", "tools": tools, "messages": [{"role": "user", "content": prompt}]}),
    )
    .await;
    assert_eq!(status, 200);
    let first: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(first["stop_reason"], "tool_use");
    assert_eq!(first["content"][0]["name"], "mcp__agent-swarm__store-progress");
    assert_eq!(first["content"][0]["input"]["taskId"], "3f1e2d4c-1a2b-4c3d-8e9f-0a1b2c3d4e5f");
    assert_eq!(first["usage"]["input_tokens"], 7);

    let (_, body) = post(
        url,
        json!({"model": "m", "tools": tools, "messages": [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": [first["content"][0]]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first["content"][0]["id"], "content": "stored"}]}
        ]}),
    )
    .await;
    let second: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(second["stop_reason"], "end_turn");
    assert_eq!(second["content"][0]["text"], "saw stored");
    assert_eq!(model.conversations().len(), 2);
}

#[tokio::test]
async fn openai_streaming_names_the_namespace_of_an_mcp_tool() {
    let model = ScriptedModel::start(Script::new().call_tool("get-swarm", |_| json!({}))).await;
    let (status, body) = post(
        format!("{}/responses", model.openai_base_url()),
        json!({"model": "m", "stream": true, "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
               "tools": [{"type": "namespace", "name": "mcp__agent_swarm", "tools": [{"type": "function", "name": "get_swarm"}]}]}),
    )
    .await;
    assert_eq!(status, 200);
    let done = body
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str::<Value>(data).unwrap())
        .find(|event| event["type"] == "response.output_item.done")
        .unwrap();
    assert_eq!(done["item"]["type"], "function_call");
    assert_eq!(done["item"]["namespace"], "mcp__agent_swarm");
    assert_eq!(done["item"]["name"], "get_swarm");
    assert_eq!(done["item"]["arguments"], "{}");
}

#[tokio::test]
async fn failures_unknown_paths_and_count_tokens() {
    let model = ScriptedModel::start(Script::new()).await;
    let base = model.anthropic_base_url();
    let (status, body) = post(format!("{base}/v1/messages/count_tokens"), json!({"messages": []})).await;
    assert_eq!((status, body.contains("input_tokens")), (200, true));
    let (status, _) = post(format!("{base}/v1/something"), json!({})).await;
    assert_eq!(status, 404);

    model.set_failure(Some(Failure::Reply401));
    let (status, body) = post(format!("{base}/v1/messages"), json!({"messages": []})).await;
    assert_eq!((status, body.contains("authentication_error")), (401, true), "{body}");
    let (status, body) = post(format!("{base}/v1/responses"), json!({"input": []})).await;
    assert_eq!((status, body.contains("invalid_api_key")), (401, true), "{body}");

    let paths: Vec<String> = model.requests().iter().map(|request| request.path.clone()).collect();
    assert_eq!(paths, ["/v1/messages/count_tokens", "/v1/something", "/v1/messages", "/v1/responses"]);

    model.stop().await;
    assert!(reqwest::get(format!("{base}/")).await.is_err(), "the port is closed");
}

/// Codex (0.169, `gpt-5.5`) defers MCP tools: they are not in `tools` but behind a
/// `tool_search` tool. The model searches first, then calls what the search returned.
#[tokio::test]
async fn openai_searches_for_a_deferred_mcp_tool_then_calls_it() {
    let model = ScriptedModel::start(
        Script::new().call_tool("store-progress", |_| json!({"progress": "p"})).reply("ok"),
    )
    .await;
    let url = format!("{}/responses", model.openai_base_url());
    let tools =
        json!([{"type": "function", "name": "exec_command"}, {"type": "tool_search", "execution": "client"}]);
    let prompt =
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]});
    let done = |body: &str| {
        let data: Value = serde_json::from_str(body).unwrap();
        data["output"][0].clone()
    };

    let (_, body) = post(url.clone(), json!({"model": "m", "tools": tools, "input": [prompt]})).await;
    let search = done(&body);
    assert_eq!(search["type"], "tool_search_call");
    assert_eq!(search["execution"], "client");
    assert!(search["arguments"]["query"].as_str().unwrap().contains("store_progress"));

    let found = json!({"type": "tool_search_output", "call_id": search["call_id"], "execution": "client", "status": "completed",
        "tools": [{"type": "namespace", "name": "mcp__agent_swarm", "tools": [{"type": "function", "name": "store_progress"}]}]});
    let (_, body) =
        post(url.clone(), json!({"model": "m", "tools": tools, "input": [prompt, search, found]})).await;
    let call = done(&body);
    assert_eq!(
        (call["type"].as_str(), call["namespace"].as_str()),
        (Some("function_call"), Some("mcp__agent_swarm"))
    );
    assert_eq!(call["name"], "store_progress");

    // A search that found nothing ends the turn with a text instead of searching forever.
    let nothing = json!({"type": "tool_search_output", "call_id": search["call_id"], "execution": "client", "tools": []});
    let (_, body) =
        post(url, json!({"model": "m", "tools": tools, "input": [prompt, search, nothing]})).await;
    let text = done(&body);
    assert_eq!(text["type"], "message");
    assert!(
        text["content"][0]["text"].as_str().unwrap().contains("no offered tool ends with `store-progress`")
    );
}
