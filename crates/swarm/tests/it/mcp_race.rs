//! Concurrent MCP calls from many sessions: contested claims have one winner, and
//! sessions doing their own work never see each other's identity or results.

use futures_util::future::join_all;
use serde_json::{Value, json};

use crate::{
    hub::{Database, Hub, sqlite_file},
    mcp_client::{
        Revision, WORKER_TOOLS, call, connect_http, connect_stdio, lead_tools, new_agent_id, ok, tool_names,
    },
    support,
};

const N_WORKERS: usize = 8;
const N_ROUNDS: usize = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mcp_concurrent_sessions_do_not_interfere_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    concurrent_sessions(sqlite_file(dir.path())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mcp_concurrent_sessions_do_not_interfere_postgres() {
    let database = support::postgres_database().await;
    concurrent_sessions(database.database()).await;
}

async fn concurrent_sessions(database: Database) {
    let hub = Hub::start(&database, None);
    let lead = new_agent_id();
    let lead_client = connect_http(&hub, Some(&lead), Revision::Initialize).await;
    ok(&lead_client, "join-swarm", json!({"name": "lead", "lead": true})).await;
    let workers: Vec<String> = (0..N_WORKERS).map(|_| new_agent_id()).collect();
    let mut clients = Vec::new();
    for (i, worker) in workers.iter().enumerate() {
        let revision = if i % 2 == 0 { Revision::Initialize } else { Revision::Stateless };
        let client = connect_http(&hub, Some(worker), revision).await;
        ok(&client, "join-swarm", json!({"name": format!("worker-{i}")})).await;
        clients.push(client);
    }

    // Every worker claims the same pool task at once: exactly one wins, each round.
    for round in 0..N_ROUNDS {
        let created =
            ok(&lead_client, "task-action", json!({"action": "create", "task": format!("round {round}")}))
                .await;
        let task_id = created["task"]["id"].as_str().unwrap().to_string();
        let claims = clients
            .iter()
            .map(|client| call(client, "task-action", json!({"action": "claim", "taskId": task_id})));
        let results: Vec<Value> = join_all(claims).await;
        let winners: Vec<&Value> = results.iter().filter(|result| result["success"] == true).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        let winner = winners[0]["yourAgentId"].as_str().unwrap();
        assert_eq!(winners[0]["task"]["agentId"], winner);
        for loser in results.iter().filter(|result| result["success"] == false) {
            assert!(loser["message"].as_str().unwrap().contains("pending"), "round {round}: {loser}");
        }
        let (_, task) = hub.get(&format!("/api/tasks/{task_id}"), None).await;
        assert_eq!((task["status"].as_str(), task["agentId"].as_str()), (Some("pending"), Some(winner)));
    }

    // Each worker gets its own task and works it while every other session does the same,
    // interleaved with listings: every answer is about the session's own agent.
    let mut task_ids = Vec::new();
    for worker in &workers {
        let sent =
            ok(&lead_client, "send-task", json!({"agentId": worker, "task": format!("for {worker}")})).await;
        task_ids.push(sent["task"]["id"].as_str().unwrap().to_string());
    }
    let work = clients.iter().zip(&workers).zip(&task_ids).map(|((client, worker), task_id)| async move {
        let progress =
            ok(client, "store-progress", json!({"taskId": task_id, "progress": format!("by {worker}")}))
                .await;
        assert_eq!(progress["yourAgentId"], worker.as_str());
        assert_eq!(tool_names(client).await, WORKER_TOOLS);
        let info = ok(client, "my-agent-info", json!({})).await;
        assert_eq!(info["agent"]["id"], worker.as_str());
        let done =
            ok(client, "store-progress", json!({"taskId": task_id, "status": "completed", "output": worker}))
                .await;
        assert_eq!(
            (done["yourAgentId"].as_str(), done["task"]["status"].as_str()),
            (Some(worker.as_str()), Some("completed"))
        );
    });
    let lead_lists = (0..N_WORKERS).map(|_| async {
        assert_eq!(tool_names(&lead_client).await, lead_tools());
    });
    tokio::join!(join_all(work), join_all(lead_lists));
    for (worker, task_id) in workers.iter().zip(&task_ids) {
        let (_, task) = hub.get(&format!("/api/tasks/{task_id}"), None).await;
        assert_eq!(task["status"], "completed");
        assert_eq!(
            (task["agentId"].as_str(), task["output"].as_str()),
            (Some(worker.as_str()), Some(worker.as_str()))
        );
        assert_eq!(task["progress"], format!("by {worker}"));
    }
}

/// Two `swarm mcp` processes on one SQLite file race for one pool task: one wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn mcp_two_stdio_processes_claim_one_pool_task_once() {
    let dir = tempfile::tempdir().unwrap();
    let database = sqlite_file(dir.path());
    let (first, second) = (new_agent_id(), new_agent_id());
    let first_client = connect_stdio(&database, Some(&first), &[]).await;
    let second_client = connect_stdio(&database, Some(&second), &[]).await;
    ok(&first_client, "join-swarm", json!({"name": "first"})).await;
    ok(&second_client, "join-swarm", json!({"name": "second"})).await;
    for round in 0..N_ROUNDS {
        let created =
            ok(&first_client, "task-action", json!({"action": "create", "task": format!("round {round}")}))
                .await;
        let task_id = created["task"]["id"].as_str().unwrap().to_string();
        let claim = json!({"action": "claim", "taskId": task_id});
        let (a, b) = tokio::join!(
            call(&first_client, "task-action", claim.clone()),
            call(&second_client, "task-action", claim.clone())
        );
        let n_wins = [&a, &b].iter().filter(|result| result["success"] == true).count();
        assert_eq!(n_wins, 1, "round {round}: {a} {b}");
    }
}
