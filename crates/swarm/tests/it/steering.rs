//! Steering over HTTP (issue 40): a steer recorded and listed, refused or made a follow-up
//! on a finished task, who may steer, bad input, and a run taking its messages once.
//! Delivery into the real agent CLIs: `real_cli::steering`.

use serde_json::{Value, json};

use crate::hub::{Hub, sqlite_file};

const KEY: &str = "steering-key-0123456789";

struct Crew {
    _dir: tempfile::TempDir,
    hub: Hub,
    worker: String,
    other: String,
    lead: String,
}

async fn crew() -> Crew {
    let dir = tempfile::tempdir().unwrap();
    let hub = Hub::start(&sqlite_file(dir.path()), Some(KEY));
    let worker = hub.register_agent_with("worker-a", json!({"maxTasks": 3})).await;
    let other = hub.register_agent("worker-b", false).await;
    let lead = hub.register_agent("lead-1", true).await;
    Crew { _dir: dir, hub, worker, other, lead }
}

impl Crew {
    /// A task assigned to the worker and started by it; created by `creator` (the
    /// operator when `None`).
    async fn running_task(&self, creator: Option<&str>) -> String {
        let (status, task) = self
            .hub
            .post("/api/tasks", creator, json!({"task": "Write the parser", "agentId": self.worker}))
            .await;
        assert_eq!(status, 201, "{task}");
        let id = task["id"].as_str().unwrap().to_string();
        let (status, started) =
            self.hub.post(&format!("/api/tasks/{id}/start"), Some(&self.worker), json!({})).await;
        assert_eq!(status, 200, "{started}");
        id
    }

    async fn steer(&self, task: &str, caller: Option<&str>, body: Value) -> (u16, Value) {
        self.hub.post(&format!("/api/tasks/{task}/steer"), caller, body).await
    }

    async fn messages(&self, task: &str) -> Vec<Value> {
        let (status, body) = self.hub.get(&format!("/api/tasks/{task}/steering-messages"), None).await;
        assert_eq!(status, 200, "{body}");
        body["messages"].as_array().unwrap().clone()
    }
}

#[tokio::test]
async fn a_steer_is_recorded_and_listed() {
    let crew = crew().await;
    let task = crew.running_task(None).await;
    let (status, queued) = crew.steer(&task, None, json!({"message": "Use the nom crate"})).await;
    assert_eq!(status, 200, "{queued}");
    assert_eq!(queued["outcome"], "queued");
    assert_eq!(queued["effectiveMode"], "queue");
    assert!(queued.get("degradedFrom").is_none(), "{queued}");
    let (status, steered) = crew
        .steer(
            &task,
            Some(&crew.lead),
            json!({"message": "Stop: keep the old API", "mode": "steer", "source": "ui"}),
        )
        .await;
    assert_eq!(status, 200, "{steered}");
    assert_eq!(
        (steered["outcome"].as_str(), steered["effectiveMode"].as_str()),
        (Some("steered"), Some("steer"))
    );

    let listed = crew.messages(&task).await;
    let shown: Vec<_> = listed
        .iter()
        .map(|m| (m["message"].as_str().unwrap(), m["mode"].as_str().unwrap(), m["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        shown,
        vec![("Use the nom crate", "queue", "pending"), ("Stop: keep the old API", "steer", "pending")]
    );
    assert_eq!(listed[0]["id"], queued["steeringMessageId"]);
    assert_eq!(listed[1]["source"], "ui");
    assert_eq!(listed[1]["createdByAgentId"], crew.lead.as_str());

    // Not started yet: there is no tool call to interrupt, so `steer` waits for the turn.
    let waiting = crew.hub.create_task(json!({"task": "Later", "agentId": crew.worker})).await;
    let (status, degraded) = crew.steer(&waiting, None, json!({"message": "Go", "mode": "steer"})).await;
    assert_eq!(status, 200, "{degraded}");
    assert_eq!(
        (degraded["outcome"].as_str(), degraded["effectiveMode"].as_str(), degraded["degradedFrom"].as_str()),
        (Some("queued"), Some("queue"), Some("steer"))
    );
}

#[tokio::test]
async fn a_finished_task_refuses_a_steer_or_makes_it_a_follow_up() {
    let crew = crew().await;
    let task = crew.running_task(None).await;
    let (status, done) = crew
        .hub
        .post(
            &format!("/api/tasks/{task}/finish"),
            Some(&crew.worker),
            json!({"status": "completed", "output": "ok"}),
        )
        .await;
    assert_eq!(status, 200, "{done}");

    let (status, refused) =
        crew.steer(&task, None, json!({"message": "Add tests", "onUnsupported": "fail"})).await;
    assert_eq!(status, 409, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("degrade"), "says what to do: {refused}");
    assert!(crew.messages(&task).await.is_empty(), "a refused steer records nothing");

    let (status, promoted) = crew.steer(&task, None, json!({"message": "Add tests"})).await;
    assert_eq!(status, 200, "{promoted}");
    assert_eq!(promoted["outcome"], "promoted");
    let follow_up = promoted["promotedTaskId"].as_str().expect("a follow-up task");
    let (status, follow_up) = crew.hub.get(&format!("/api/tasks/{follow_up}"), None).await;
    assert_eq!(status, 200, "{follow_up}");
    assert_eq!(follow_up["agentId"], crew.worker.as_str(), "for the same agent");
    assert_eq!(
        (follow_up["status"].as_str(), follow_up["taskType"].as_str()),
        (Some("pending"), Some("follow-up"))
    );
    assert!(follow_up["task"].as_str().unwrap().contains("Add tests"), "{follow_up}");
    let listed = crew.messages(&task).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0]["status"].as_str(), &listed[0]["promotedTaskId"]),
        (Some("promoted"), &promoted["promotedTaskId"])
    );
}

#[tokio::test]
async fn only_the_operator_the_lead_or_the_creator_may_steer() {
    let crew = crew().await;
    let by_operator = crew.running_task(None).await;
    let (status, refused) =
        crew.steer(&by_operator, Some(&crew.other), json!({"message": "Do it my way"})).await;
    assert_eq!(status, 403, "{refused}");
    let (status, refused) =
        crew.steer(&by_operator, Some(&crew.worker), json!({"message": "Steer myself"})).await;
    assert_eq!(status, 403, "the assignee is not its creator: {refused}");
    assert!(crew.messages(&by_operator).await.is_empty());
    let (status, _) = crew.steer(&by_operator, Some(&crew.lead), json!({"message": "Lead says"})).await;
    assert_eq!(status, 200);

    let by_other = crew.running_task(Some(&crew.other)).await;
    let (status, body) = crew.steer(&by_other, Some(&crew.other), json!({"message": "Creator says"})).await;
    assert_eq!(status, 200, "the creator may: {body}");
}

#[tokio::test]
async fn bad_steer_input_is_a_400_and_changes_nothing() {
    let crew = crew().await;
    let task = crew.running_task(None).await;
    for body in [
        json!({"message": "   "}),
        json!({}),
        json!({"message": "x", "mode": "now"}),
        json!({"message": "x", "onUnsupported": "maybe"}),
        json!({"message": "x", "source": "not a word"}),
        json!({"message": "x", "extra": true}),
        json!({"message": "x".repeat(20_001)}),
    ] {
        let (status, answer) = crew.steer(&task, None, body.clone()).await;
        assert_eq!(status, 400, "{body} → {answer}");
        assert!(answer["error"].as_str().is_some_and(|e| !e.is_empty()), "{answer}");
    }
    let (status, _) = crew.steer("not-a-uuid", None, json!({"message": "x"})).await;
    assert_eq!(status, 400);
    let unknown = uuid::Uuid::now_v7().to_string();
    let (status, _) = crew.steer(&unknown, None, json!({"message": "x"})).await;
    assert_eq!(status, 404);
    let (status, _) = crew.hub.get(&format!("/api/tasks/{unknown}/steering-messages"), None).await;
    assert_eq!(status, 404);
    assert!(crew.messages(&task).await.is_empty());
}

#[tokio::test]
async fn a_run_takes_each_message_once_and_leaves_none_behind() {
    let crew = crew().await;
    let task = crew.running_task(None).await;
    crew.steer(&task, None, json!({"message": "Now", "mode": "steer"})).await;
    crew.steer(&task, None, json!({"message": "At the end"})).await;
    let deliver = |agent: String, modes: Value| {
        let hub = &crew.hub;
        let path = format!("/api/tasks/{task}/steering-messages/deliver");
        async move { hub.post(&path, Some(&agent), json!({"modes": modes})).await }
    };
    let (status, refused) = deliver(crew.other.clone(), json!(["steer"])).await;
    assert_eq!(status, 403, "not its task: {refused}");
    let (status, at_tool) = deliver(crew.worker.clone(), json!(["steer"])).await;
    assert_eq!(status, 200, "{at_tool}");
    let texts = |body: &Value| -> Vec<String> {
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["message"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(texts(&at_tool), vec!["Now"]);
    let (_, again) = deliver(crew.worker.clone(), json!(["steer"])).await;
    assert!(texts(&again).is_empty(), "once: {again}");

    crew.steer(&task, None, json!({"message": "Never shown"})).await;
    let (_, at_end) = deliver(crew.worker.clone(), json!(["steer", "queue"])).await;
    assert_eq!(texts(&at_end), vec!["At the end", "Never shown"]);
    crew.steer(&task, None, json!({"message": "Too late for this run"})).await;
    let settle_path = format!("/api/tasks/{task}/steering-messages/settle");
    let (status, settled) = crew.hub.post(&settle_path, Some(&crew.worker), json!({})).await;
    assert_eq!(status, 200, "{settled}");
    assert_eq!(settled["handled"], 2, "{settled}");
    assert_eq!(settled["promoted"], json!([]), "the task goes on: its next run takes it");
    let (status, _) = crew
        .hub
        .post(&format!("/api/tasks/{task}/finish"), Some(&crew.worker), json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200);
    let (_, settled) = crew.hub.post(&settle_path, Some(&crew.worker), json!({})).await;
    assert_eq!(settled["handled"], 0, "{settled}");
    let promoted = settled["promoted"].as_array().unwrap();
    assert_eq!(promoted.len(), 1, "{settled}");
    let follow_up = promoted[0]["taskId"].as_str().unwrap();
    let (_, follow_up) = crew.hub.get(&format!("/api/tasks/{follow_up}"), None).await;
    assert!(follow_up["task"].as_str().unwrap().contains("Too late for this run"), "{follow_up}");
    assert_eq!(follow_up["agentId"], crew.worker.as_str());
    let statuses: Vec<_> =
        crew.messages(&task).await.iter().map(|m| m["status"].as_str().unwrap().to_string()).collect();
    assert_eq!(statuses, vec!["handled", "handled", "handled", "promoted"]);
    let (_, again) = crew
        .hub
        .post(&format!("/api/tasks/{task}/steering-messages/settle"), Some(&crew.worker), json!({}))
        .await;
    assert_eq!((again["handled"].as_u64(), again["promoted"].as_array().map(Vec::len)), (Some(0), Some(0)));
}

#[tokio::test]
async fn steer_task_over_mcp_is_the_same_call() {
    use crate::mcp_client::{Revision, connect_http, ok, refused};
    let crew = crew().await;
    let task = crew.running_task(None).await;
    let lead = connect_http(&crew.hub, Some(&crew.lead), Revision::Initialize).await;
    let answer =
        ok(&lead, "steer-task", json!({"taskId": task, "message": "Prefer small commits", "mode": "steer"}))
            .await;
    assert_eq!(
        (answer["outcome"].as_str(), answer["effectiveMode"].as_str()),
        (Some("steered"), Some("steer"))
    );
    let listed = crew.messages(&task).await;
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0]["source"].as_str(), listed[0]["id"].as_str()),
        (Some("mcp"), answer["steeringMessageId"].as_str())
    );

    let other = connect_http(&crew.hub, Some(&crew.other), Revision::Initialize).await;
    let reason = refused(&other, "steer-task", json!({"taskId": task, "message": "Mine now"})).await;
    assert!(reason.contains("creator"), "{reason}");
    let reason = refused(&lead, "steer-task", json!({"taskId": task, "message": "x", "mode": "later"})).await;
    assert!(reason.contains("steer, queue"), "{reason}");
    assert_eq!(crew.messages(&task).await.len(), 1, "refusals record nothing");

    let own = crew.running_task(Some(&crew.other)).await;
    let answer = ok(&other, "steer-task", json!({"taskId": own, "message": "Creator's note"})).await;
    assert_eq!(answer["outcome"], "queued");
}

fn swarm(hub: &Hub, args: &[&str]) -> std::process::Output {
    std::process::Command::new(crate::hub::SWARM)
        .args(args)
        .env("MCP_BASE_URL", &hub.base_url)
        .env("API_KEY", KEY)
        .env_remove("AGENT_ID")
        .output()
        .expect("the swarm binary runs")
}

#[tokio::test]
async fn swarm_task_steer_records_refuses_and_follows_up() {
    let crew = crew().await;
    let task = crew.running_task(None).await;
    let said = swarm(&crew.hub, &["task", "steer", &task, "Rename the module to parser", "--mode", "steer"]);
    assert!(said.status.success(), "{}", String::from_utf8_lossy(&said.stderr));
    let text = String::from_utf8_lossy(&said.stdout);
    assert!(text.contains("next tool call"), "{text}");
    let listed = crew.messages(&task).await;
    assert_eq!(
        (listed[0]["message"].as_str(), listed[0]["mode"].as_str(), listed[0]["source"].as_str()),
        (Some("Rename the module to parser"), Some("steer"), Some("cli"))
    );

    let (status, _) = crew
        .hub
        .post(&format!("/api/tasks/{task}/finish"), Some(&crew.worker), json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200);
    let refused = swarm(&crew.hub, &["task", "steer", &task, "One more thing", "--fail-if-finished"]);
    assert!(!refused.status.success());
    let error = String::from_utf8_lossy(&refused.stderr);
    assert!(error.contains("409") || error.contains("finished"), "{error}");
    assert!(error.contains("--fail-if-finished"), "says what to do next: {error}");
    let followed = swarm(&crew.hub, &["task", "steer", &task, "One more thing", "--json"]);
    assert!(followed.status.success(), "{}", String::from_utf8_lossy(&followed.stderr));
    let answer: Value = serde_json::from_slice(&followed.stdout).unwrap();
    assert_eq!(answer["outcome"], "promoted", "{answer}");
    let bad = swarm(&crew.hub, &["task", "steer", &task, "x", "--mode", "soon"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("steer, queue"));
}

/// The box under a task on the dashboard: typed, sent, listed with its status, through the
/// same REST call (`source: ui`); a finished task's box sends a follow-up task.
#[tokio::test]
async fn the_dashboard_steers_a_task_from_its_page() {
    let browser = crate::webdriver::Browser::start().await;
    let crew = crew().await;
    let task = crew.running_task(None).await;
    browser.goto(&crew.hub.url(&format!("/#key={KEY}"))).await;
    browser.goto(&crew.hub.url(&format!("/#/tasks/{task}"))).await;
    browser.type_into("#steer-task textarea", "Check the edge cases first").await;
    browser.script("document.querySelector('#steer-task select').value = 'steer'; return true").await;
    browser.click("#steer-task button[type=submit]").await;
    let shown = browser
        .wait_for(
            "the message in the steering list",
            "const t = document.getElementById('task-steering')?.textContent || ''; \
             return t.includes('Check the edge cases first') && t",
        )
        .await;
    assert!(shown.as_str().unwrap().contains("pending"), "{shown}");
    let listed = crew.messages(&task).await;
    assert_eq!(
        (listed[0]["mode"].as_str(), listed[0]["source"].as_str()),
        (Some("steer"), Some("ui")),
        "{listed:?}"
    );

    let (status, _) = crew
        .hub
        .post(&format!("/api/tasks/{task}/finish"), Some(&crew.worker), json!({"status": "completed"}))
        .await;
    assert_eq!(status, 200);
    browser
        .wait_for(
            "the box of a finished task",
            "return document.querySelector('#steer-task button')?.textContent === 'Send as follow-up'",
        )
        .await;
    browser.type_into("#steer-task textarea", "Now the docs").await;
    browser.click("#steer-task button[type=submit]").await;
    browser
        .wait_for(
            "the follow-up in the list",
            "return (document.getElementById('task-steering')?.textContent || '').includes('follow-up')",
        )
        .await;
    let listed = crew.messages(&task).await;
    assert_eq!(listed[1]["status"], "promoted", "{listed:?}");
    browser.close().await;
}

/// A task cancelled before any run took its steering (here: before it started) leaves none
/// behind: each message becomes a follow-up task for its agent, as the reference does for a
/// task that reached its end.
#[tokio::test]
async fn a_cancelled_task_leaves_no_steering_behind() {
    let crew = crew().await;
    let task = crew.hub.create_task(json!({"task": "Later", "agentId": crew.worker})).await;
    let (status, queued) = crew.steer(&task, None, json!({"message": "Use the staging database"})).await;
    assert_eq!((status, queued["outcome"].as_str()), (200, Some("queued")), "{queued}");
    let (status, cancelled) =
        crew.hub.post(&format!("/api/tasks/{task}/cancel"), None, json!({"reason": "replanned"})).await;
    assert_eq!(status, 200, "{cancelled}");
    let listed = crew.messages(&task).await;
    assert_eq!(listed[0]["status"], "promoted", "{listed:?}");
    let follow_up = listed[0]["promotedTaskId"].as_str().unwrap();
    let (_, follow_up) = crew.hub.get(&format!("/api/tasks/{follow_up}"), None).await;
    assert_eq!(
        (follow_up["agentId"].as_str(), follow_up["status"].as_str()),
        (Some(crew.worker.as_str()), Some("pending"))
    );
    // Cancelling again changes nothing and makes no second follow-up.
    crew.hub.post(&format!("/api/tasks/{task}/cancel"), None, json!({})).await;
    let (_, tasks) =
        crew.hub.get(&format!("/api/tasks?agentId={}&taskType=follow-up", crew.worker), None).await;
    assert_eq!(tasks["total"], 1, "{tasks}");
}
