//! The living Slack message of a task (issue 42), on both backends: the claim to post is
//! taken once, the `ts` written once, the ending rendered once (also for a task that never
//! had a message), and finished Slack tasks listed until their ending is rendered.

use std::sync::Arc;

use crate::Store;
use swarm_domain::{
    inbox::SlackMark,
    task::{TaskAction, TaskDraft, TaskOrigin},
};

use super::Fixture;

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_slack_status {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            slack_status,
            [
                slack_status_is_claimed_posted_and_finalized_once,
                slack_status_unfinalized_lists_finished_slack_tasks_until_rendered,
            ],
            multi_thread: [
                slack_status_concurrent_finalizers_take_the_ending_once,
            ]
        );
    };
}

fn slack_draft(text: &str, worker: swarm_domain::id::AgentId) -> TaskDraft {
    TaskDraft {
        task: text.into(),
        agent_id: Some(worker),
        source: Some("slack".into()),
        origin: TaskOrigin {
            slack_channel_id: Some("C1".into()),
            slack_thread_ts: Some("1.2".into()),
            ..TaskOrigin::default()
        },
        ..TaskDraft::default()
    }
}

pub async fn slack_status_is_claimed_posted_and_finalized_once(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.worker("worker").await;
    let task = fx.create(slack_draft("slack work", worker), None).await;
    assert_eq!(fx.store.slack_status_get(task.id).await.unwrap(), None);
    assert!(fx.store.slack_status_claim(task.id, "C1", fx.now()).await.unwrap(), "the first claim");
    assert!(!fx.store.slack_status_claim(task.id, "C1", fx.now()).await.unwrap(), "one message per task");
    let claimed = fx.store.slack_status_get(task.id).await.unwrap().expect("claimed");
    assert_eq!((claimed.message_ts, claimed.finalized_at), (None, None));
    assert_eq!(claimed.channel_id, "C1");

    assert!(fx.store.slack_status_posted(task.id, "9000.1").await.unwrap());
    assert!(!fx.store.slack_status_posted(task.id, "9000.2").await.unwrap(), "the ts is written once");
    let posted = fx.store.slack_status_get(task.id).await.unwrap().unwrap();
    assert_eq!(posted.message_ts.as_deref(), Some("9000.1"));

    assert!(fx.store.slack_status_finalize(task.id, "C1", fx.now()).await.unwrap());
    assert!(!fx.store.slack_status_finalize(task.id, "C1", fx.now()).await.unwrap(), "the ending once");
    let finalized = fx.store.slack_status_get(task.id).await.unwrap().unwrap();
    assert!(finalized.finalized_at.is_some());
    assert_eq!(finalized.message_ts.as_deref(), Some("9000.1"), "finalizing keeps the message");

    // A task whose ending comes before any message: the ending claims the row itself.
    let quick = fx.create(slack_draft("quick work", worker), None).await;
    assert!(fx.store.slack_status_finalize(quick.id, "C1", fx.now()).await.unwrap());
    let row = fx.store.slack_status_get(quick.id).await.unwrap().unwrap();
    assert_eq!(row.message_ts, None);
    assert!(row.finalized_at.is_some());
    assert!(!fx.store.slack_status_claim(quick.id, "C1", fx.now()).await.unwrap(), "no later post");
    assert!(fx.store.slack_status_posted(quick.id, "9000.3").await.unwrap(), "its final post's ts");
}

pub async fn slack_status_unfinalized_lists_finished_slack_tasks_until_rendered(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.worker("worker").await;
    let since = fx.now();
    let done = fx.create(slack_draft("done", worker), None).await;
    let failed = fx.create(slack_draft("failed", worker), None).await;
    let announced_before = fx.create(slack_draft("announced by an older hub", worker), None).await;
    let running = fx.create(slack_draft("running", worker), None).await;
    let plain = fx.create(TaskDraft { agent_id: Some(worker), ..super::draft("plain") }, None).await;
    // One at a time: a worker holds one task.
    for id in [done.id, announced_before.id, plain.id, failed.id] {
        fx.must_change(id, TaskAction::Start { agent: worker }).await;
        let ending = if id == failed.id { super::fail(worker) } else { super::complete(worker) };
        fx.must_change(id, ending).await;
    }
    fx.must_change(running.id, TaskAction::Start { agent: worker }).await;
    let mark = announced_before.id.to_string();
    assert!(fx.store.slack_mark_once(SlackMark::TaskOutcome, &mark, fx.now()).await.unwrap());

    let ids = |tasks: Vec<swarm_domain::task::Task>| tasks.into_iter().map(|t| t.id).collect::<Vec<_>>();
    let pending = ids(fx.store.slack_status_unfinalized(since, 10).await.unwrap());
    assert_eq!(super::sorted(pending), super::sorted(vec![done.id, failed.id]), "finished Slack tasks only");

    // A posted but not finalized message is still owed its ending.
    assert!(fx.store.slack_status_claim(done.id, "C1", fx.now()).await.unwrap());
    assert!(fx.store.slack_status_posted(done.id, "9000.1").await.unwrap());
    assert_eq!(fx.store.slack_status_unfinalized(since, 10).await.unwrap().len(), 2);
    assert!(fx.store.slack_status_finalize(done.id, "C1", fx.now()).await.unwrap());
    assert!(fx.store.slack_status_finalize(failed.id, "C1", fx.now()).await.unwrap());
    assert!(fx.store.slack_status_unfinalized(since, 10).await.unwrap().is_empty());
    let later = fx.now();
    assert!(fx.store.slack_status_unfinalized(later, 10).await.unwrap().is_empty(), "since bounds it");
}

pub async fn slack_status_concurrent_finalizers_take_the_ending_once(store: Arc<dyn Store>) {
    let fx = Arc::new(Fixture::new(store));
    let worker = fx.worker("worker").await;
    let mut tasks = Vec::new();
    for n in 0..10 {
        let task = fx.create(slack_draft(&format!("work {n}"), worker), None).await;
        if n % 2 == 0 {
            assert!(fx.store.slack_status_claim(task.id, "C1", fx.now()).await.unwrap());
        }
        tasks.push(task.id);
    }
    let mut racers = Vec::new();
    for _ in 0..4 {
        let (fx, tasks) = (fx.clone(), tasks.clone());
        racers.push(tokio::spawn(async move {
            let mut taken = Vec::new();
            for id in tasks {
                if fx.store.slack_status_finalize(id, "C1", fx.now()).await.unwrap() {
                    taken.push(id);
                }
            }
            taken
        }));
    }
    let mut taken = Vec::new();
    for racer in racers {
        taken.extend(racer.await.unwrap());
    }
    assert_eq!(super::sorted(taken), super::sorted(tasks), "each ending taken by exactly one finalizer");
}
