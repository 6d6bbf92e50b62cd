//! Retention on both backends: each kind removes exactly the rows older than its cutoff
//! whose work is over (a finished task's logs and events, delivered task results, read
//! mail, handled inbox messages), in batches of the limit, and nothing of unfinished
//! work, whatever its age.

use std::sync::Arc;

use crate::{NewTaskAwait, Store};
use swarm_domain::{
    id::{AgentId, MailId, TaskId},
    inbox::{InboxChange, InboxStatus, NewInboxMessage, SlackContext, SlackMark},
    mail::{Mail, MailDelivery, MailDraft, MailPriority, MailQuery, MailType, NewMail},
    retention::Expiring,
    session::NewSessionLogs,
    task::{NewTask, TaskAction, TaskDraft},
    time::Timestamp,
};

use super::{Fixture, cancel, complete, draft};

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_retention {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            retention,
            [
                retention_removes_old_logs_and_events_of_finished_work_only,
                retention_works_in_batches_of_the_limit,
                retention_removes_read_mail_and_handled_inbox_messages_only,
                retention_removes_delivered_task_results_and_old_slack_marks_only,
                retention_removes_finished_tasks_nothing_refers_to,
            ],
            multi_thread: []
        );
    };
}

const ALL_AT_ONCE: u32 = 10_000;

async fn log(fx: &Fixture, session: &str, task: Option<TaskId>, lines: &[&str], now: Timestamp) {
    let logs = NewSessionLogs::parse(
        session.to_string(),
        0,
        task,
        Some("claude".into()),
        lines.iter().map(|line| line.to_string()).collect(),
    )
    .expect("valid logs");
    fx.store.session_logs_append(&logs, now).await.expect("session_logs_append");
}

async fn lines_of(fx: &Fixture, task: TaskId) -> usize {
    fx.store.session_logs_for_task(task).await.expect("session_logs_for_task").len()
}

async fn remove(fx: &Fixture, kind: Expiring, cutoff: Timestamp) -> u64 {
    fx.store.retention_remove(kind, cutoff, ALL_AT_ONCE).await.expect("retention_remove")
}

pub async fn retention_removes_old_logs_and_events_of_finished_work_only(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.register("worker-1", false, 5).await.id;
    // Before the cutoff: one task finished, one that will finish after it, one still
    // running; each wrote logs, and a lead session wrote lines about no task.
    let old_done = fx.started_task("finished long ago", agent).await;
    let late_done = fx.started_task("finished after the cutoff", agent).await;
    let running = fx.started_task("still running", agent).await;
    for task in [&old_done, &late_done, &running] {
        log(&fx, &format!("s-{}", task.id), Some(task.id), &["one", "two", "three"], fx.now()).await;
    }
    log(&fx, "lead-session", None, &["an old line about no task"], fx.now()).await;
    fx.must_change(old_done.id, complete(agent)).await;
    let cutoff = fx.now();
    fx.must_change(late_done.id, complete(agent)).await;
    log(&fx, &format!("s-{}", running.id), Some(running.id), &["a new line"], fx.now()).await;
    let old_done_events = fx.task_events(old_done.id).await.len();
    assert!(old_done_events >= 3, "created, started, completed were logged");
    let late_events = fx.task_events(late_done.id).await.len();
    let running_events = fx.task_events(running.id).await.len();

    let removed = remove(&fx, Expiring::SessionLogs, cutoff).await;
    assert_eq!(removed, 4, "the finished task's three lines and the old line about no task");
    assert_eq!(lines_of(&fx, old_done.id).await, 0);
    assert_eq!(lines_of(&fx, late_done.id).await, 3, "its task ended after the cutoff");
    assert_eq!(lines_of(&fx, running.id).await, 4, "a running task keeps every line, old or new");
    assert_eq!(remove(&fx, Expiring::SessionLogs, cutoff).await, 0, "nothing left to remove");

    let agent_events_before = fx.agent_events(agent).await;
    let removed = remove(&fx, Expiring::Events, cutoff).await;
    assert!(removed >= u64::try_from(old_done_events).unwrap(), "removed {removed}");
    assert!(fx.task_events(old_done.id).await.is_empty());
    assert_eq!(fx.task_events(late_done.id).await.len(), late_events, "its task ended after the cutoff");
    assert_eq!(fx.task_events(running.id).await.len(), running_events, "a running task keeps its events");
    let cutoff_millis = cutoff.unix_millis();
    let agent_events_after = fx.agent_events(agent).await;
    for event in &agent_events_after {
        let of_kept_task = event.task_id.is_some_and(|task| task == late_done.id || task == running.id);
        assert!(
            of_kept_task || event.created_at.unix_millis() >= cutoff_millis,
            "an old event of finished work or of no task stayed: {event:?}"
        );
    }
    let kept_old = agent_events_before
        .iter()
        .filter(|event| event.task_id.is_some_and(|task| task == late_done.id || task == running.id))
        .count();
    assert!(
        agent_events_after.len() >= kept_old,
        "the agent's listing still shows the kept tasks' events ({kept_old})"
    );
    assert_eq!(remove(&fx, Expiring::Events, cutoff).await, 0, "nothing left to remove");
    // A task that is over is still there, only its record went.
    assert_eq!(fx.task(old_done.id).await.id, old_done.id);
}

pub async fn retention_works_in_batches_of_the_limit(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let task = fx.started_task("chatty", agent).await;
    log(&fx, "s-1", Some(task.id), &["1", "2", "3", "4", "5"], fx.now()).await;
    fx.must_change(task.id, complete(agent)).await;
    let cutoff = fx.now();
    let mut batches = Vec::new();
    loop {
        let removed = fx.store.retention_remove(Expiring::SessionLogs, cutoff, 2).await.unwrap();
        batches.push(removed);
        if removed < 2 {
            break;
        }
    }
    assert_eq!(batches, [2, 2, 1]);
    assert_eq!(lines_of(&fx, task.id).await, 0);
}

fn mail(from: AgentId, to: AgentId, subject: &str, in_reply_to: Option<MailId>) -> NewMail {
    let draft = MailDraft {
        mail_type: MailType::Question,
        subject: subject.into(),
        body: format!("body of {subject}"),
        priority: MailPriority::Normal,
        awaiting_response: false,
        in_reply_to,
    };
    NewMail::parse(from, to, draft).expect("valid mail")
}

async fn read(fx: &Fixture, reader: AgentId, mail: &Mail) {
    let delivery =
        MailDelivery { ids: vec![mail.id], priorities: Vec::new(), include_waking: false, limit: 10 };
    let delivered = fx.store.mail_deliver(reader, &delivery, fx.now()).await.expect("mail_deliver");
    assert_eq!(delivered.len(), 1, "{} read", mail.subject);
}

async fn exists(fx: &Fixture, id: MailId) -> bool {
    fx.store.mail_get(id).await.expect("mail_get").is_some()
}

pub async fn retention_removes_read_mail_and_handled_inbox_messages_only(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let alpha = fx.worker("alpha").await;
    let beta = fx.worker("beta").await;
    let lead = fx.register("lead", true, 1).await.id;

    let old_read = fx.store.mail_send(&mail(alpha, beta, "old and read", None), fx.now()).await.unwrap();
    let old_unread = fx.store.mail_send(&mail(alpha, beta, "old, never read", None), fx.now()).await.unwrap();
    let replied =
        fx.store.mail_send(&mail(alpha, beta, "old, read, replied to", None), fx.now()).await.unwrap();
    read(&fx, beta, &old_read).await;
    read(&fx, beta, &replied).await;
    let reply =
        fx.store.mail_send(&mail(beta, alpha, "the unread reply", Some(replied.id)), fx.now()).await.unwrap();
    let slack = SlackContext::default();
    let inbox = |text: &str| NewInboxMessage::parse(lead, text, slack.clone(), None).expect("valid");
    let answered = fx.store.inbox_create(&inbox("answered long ago"), fx.now()).await.unwrap();
    let answer = InboxChange::Responded { response_text: "done".into() };
    fx.store.inbox_apply(answered.id, &answer, fx.now()).await.unwrap();
    let waiting = fx.store.inbox_create(&inbox("never handled"), fx.now()).await.unwrap();
    let cutoff = fx.now();
    let late_read =
        fx.store.mail_send(&mail(alpha, beta, "read after the cutoff", None), fx.now()).await.unwrap();
    read(&fx, beta, &late_read).await;
    let late_answered = fx.store.inbox_create(&inbox("answered after the cutoff"), fx.now()).await.unwrap();
    fx.store.inbox_apply(late_answered.id, &answer, fx.now()).await.unwrap();

    assert_eq!(remove(&fx, Expiring::ReadMail, cutoff).await, 2, "one piece of mail, one inbox message");
    assert!(!exists(&fx, old_read.id).await);
    assert!(exists(&fx, old_unread.id).await, "unread mail stays");
    assert!(exists(&fx, replied.id).await, "a kept reply points at it");
    assert!(exists(&fx, reply.id).await);
    assert!(exists(&fx, late_read.id).await, "read after the cutoff");
    assert_eq!(fx.store.inbox_get(answered.id).await.unwrap(), None);
    let waiting = fx.store.inbox_get(waiting.id).await.unwrap().expect("an unhandled message stays");
    assert_eq!(waiting.status, InboxStatus::Unread);
    assert!(fx.store.inbox_get(late_answered.id).await.unwrap().is_some(), "answered after the cutoff");
    let listed =
        fx.store.mail_list(&MailQuery { agent: Some(beta), limit: 50, ..MailQuery::default() }).await;
    assert!(listed.unwrap().iter().all(|mail| mail.id != old_read.id), "gone from the mailbox too");
}

pub async fn retention_removes_delivered_task_results_and_old_slack_marks_only(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let triage = fx.worker("triage").await;
    let worker = fx.register("worker", false, 5).await.id;
    let parent = fx.started_task("a webhook arrived", triage).await;
    let mut awaited = Vec::new();
    for key in ["delivered", "undelivered"] {
        let awaiting = NewTaskAwait {
            agent_id: triage,
            parent_task_id: parent.id,
            trigger_name: "alerts".into(),
            session_key: key.into(),
        };
        let child =
            NewTask::parse(TaskDraft { agent_id: Some(worker), ..draft(key) }, Some(triage)).expect("a task");
        fx.store.task_create_awaited(&child, &awaiting, fx.now()).await.unwrap();
        fx.must_change(child.id, TaskAction::Start { agent: worker }).await;
        fx.must_change(child.id, complete(worker)).await;
        awaited.push(child.id);
    }
    assert!(fx.store.task_await_deliver(awaited[0], triage, fx.now()).await.unwrap());
    assert!(fx.store.slack_mark_once(SlackMark::Event, "Ev-old", fx.now()).await.unwrap());
    let cutoff = fx.now();
    assert!(fx.store.slack_mark_once(SlackMark::Event, "Ev-new", fx.now()).await.unwrap());

    assert_eq!(remove(&fx, Expiring::DeliveredTriggers, cutoff).await, 2, "a result and a Slack mark");
    assert!(fx.store.slack_mark_once(SlackMark::Event, "Ev-old", fx.now()).await.unwrap(), "forgotten");
    assert!(!fx.store.slack_mark_once(SlackMark::Event, "Ev-new", fx.now()).await.unwrap(), "kept");
    assert_eq!(fx.store.task_await_get(awaited[0]).await.unwrap(), None);
    assert!(fx.store.task_await_get(awaited[1]).await.unwrap().is_some(), "not delivered yet");
    assert_eq!(fx.task(awaited[0]).await.id, awaited[0], "the task itself stays");
}

pub async fn retention_removes_finished_tasks_nothing_refers_to(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let agent = fx.worker("worker-1").await;
    let tagged = TaskDraft { tags: vec!["ops".into()], ..draft("old and cancelled") };
    let old = fx.create(tagged, None).await;
    log(&fx, "s-old", Some(old.id), &["a line"], fx.now()).await;
    fx.must_change(old.id, cancel()).await;
    let needed = fx.pool_task("cancelled, but a waiting task depends on it").await;
    fx.must_change(needed.id, cancel()).await;
    let dependent = fx.create(TaskDraft { depends_on: vec![needed.id], ..draft("waits") }, None).await;
    let unreported = fx.started_task("completed, the lead not told yet", agent).await;
    fx.must_change(unreported.id, complete(agent)).await;
    let running = fx.assigned_task("still pending", fx.register("worker-2", false, 1).await.id).await;
    let cutoff = fx.now();
    let recent = fx.pool_task("cancelled after the cutoff").await;
    fx.must_change(recent.id, cancel()).await;

    assert_eq!(remove(&fx, Expiring::FinishedTasks, cutoff).await, 1);
    assert_eq!(fx.store.task_get(old.id).await.unwrap(), None);
    assert!(fx.task_events(old.id).await.is_empty(), "its events went with it");
    assert_eq!(lines_of(&fx, old.id).await, 0, "and its logs");
    for kept in [&needed, &dependent, &unreported, &running, &recent] {
        assert!(fx.store.task_get(kept.id).await.unwrap().is_some(), "{} stays", kept.task);
    }
    let listed = fx.store.task_list(&crate::TaskFilter { limit: 100, ..crate::TaskFilter::default() }).await;
    assert_eq!(listed.unwrap().1, 5, "the listing counts what is left");

    // Once the task that depended on it is over and gone, the other goes too.
    fx.must_change(dependent.id, cancel()).await;
    let later = fx.now();
    assert_eq!(remove(&fx, Expiring::FinishedTasks, later).await, 2, "the dependent, and the recent one");
    assert_eq!(remove(&fx, Expiring::FinishedTasks, later).await, 1, "then the one it depended on");
    assert_eq!(fx.store.task_get(needed.id).await.unwrap(), None);
}
