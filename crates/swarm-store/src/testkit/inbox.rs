//! The lead's inbox and the Slack marks, on both backends: creation, the poll's claim
//! (`unread` → `processing`, at most five, each once), guarded closes, delegation in
//! one transaction, lease expiry back to `unread`, heartbeats extending leases, and the
//! once-only marks.

use std::{collections::HashSet, sync::Arc, time::Duration};

use crate::{Applied, Store};
use swarm_domain::{
    id::{AgentId, InboxMessageId},
    inbox::{InboxChange, InboxMessage, InboxStatus, NewInboxMessage, SlackContext, SlackMark},
    lease::LeasePolicy,
    poll::{Trigger, TriggerKind},
    task::{NewTask, TaskAction, TaskDraft, TaskOrigin, TaskStatus},
    time::Timestamp,
};

use super::Fixture;

const LEASE: i64 = 60_000;

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_inbox {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            inbox,
            [
                inbox_message_is_created_unread,
                inbox_poll_claims_at_most_five_once,
                inbox_poll_is_for_leads_only,
                inbox_close_is_guarded,
                inbox_delegate_creates_the_task_and_marks_in_one_step,
                inbox_lease_expiry_returns_processing_to_unread,
                inbox_heartbeat_extends_the_lease,
                slack_marks_are_taken_once,
                slack_outcomes_unannounced_until_marked,
            ],
            multi_thread: [
                inbox_concurrent_polls_never_share_a_message,
            ]
        );
    };
}

fn slack() -> SlackContext {
    SlackContext {
        slack_channel_id: Some("C1".into()),
        slack_thread_ts: Some("1700000000.000100".into()),
        slack_user_id: Some("U1".into()),
    }
}

async fn receive(fx: &Fixture, lead: AgentId, text: &str) -> InboxMessage {
    let new = NewInboxMessage::parse(lead, text, slack(), Some("mention".into())).expect("valid");
    fx.store.inbox_create(&new, fx.now()).await.expect("inbox_create")
}

async fn poll_inbox(fx: &Fixture, agent: AgentId, now: Timestamp) -> Vec<InboxMessage> {
    let kinds = [TriggerKind::SlackInboxMessage];
    match fx.store.poll_claim(agent, &kinds, now, now.plus_millis(LEASE)).await.expect("poll_claim") {
        Some((TriggerKind::SlackInboxMessage, Trigger::SlackInboxMessage { count, messages })) => {
            assert_eq!(count, messages.len());
            messages
        }
        None => Vec::new(),
        other => panic!("unexpected trigger {other:?}"),
    }
}

pub async fn inbox_message_is_created_unread(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let lead = fx.register("lead", true, 1).await.id;
    let message = receive(&fx, lead, "  hello swarm  ").await;
    assert_eq!(message.status, InboxStatus::Unread);
    assert_eq!(message.content, "hello swarm");
    assert_eq!(message.source, "slack");
    assert_eq!(message.slack, slack());
    assert_eq!(message.matched_text.as_deref(), Some("mention"));
    assert_eq!(fx.store.inbox_get(message.id).await.unwrap(), Some(message.clone()));
    let listed = fx.store.inbox_list(lead, &[InboxStatus::Unread], 10).await.unwrap();
    assert_eq!(listed, vec![message]);

    let nobody = NewInboxMessage::parse(AgentId::new_v7(), "x", slack(), None).unwrap();
    let missing = fx.store.inbox_create(&nobody, fx.now()).await;
    assert!(matches!(missing, Err(crate::StoreError::MissingReference(_))), "{missing:?}");
}

pub async fn inbox_poll_claims_at_most_five_once(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let lead = fx.register("lead", true, 1).await.id;
    let mut sent = Vec::new();
    for n in 0..7 {
        sent.push(receive(&fx, lead, &format!("message {n}")).await.id);
    }
    let view = fx.store.poll_view(lead).await.unwrap().unwrap();
    assert!(view.waiting.contains(&TriggerKind::SlackInboxMessage));

    let now = fx.now();
    let first = poll_inbox(&fx, lead, now).await;
    assert_eq!(first.iter().map(|m| m.id).collect::<Vec<_>>(), sent[..5], "oldest five, in order");
    for message in &first {
        assert_eq!(message.status, InboxStatus::Processing);
        assert_eq!(message.lease_expires_at, Some(now.plus_millis(LEASE)));
    }
    let second = poll_inbox(&fx, lead, fx.now()).await;
    assert_eq!(second.iter().map(|m| m.id).collect::<Vec<_>>(), sent[5..]);
    assert!(poll_inbox(&fx, lead, fx.now()).await.is_empty(), "each message is handed out once");
    let view = fx.store.poll_view(lead).await.unwrap().unwrap();
    assert!(!view.waiting.contains(&TriggerKind::SlackInboxMessage));
}

pub async fn inbox_poll_is_for_leads_only(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let lead = fx.register("lead", true, 1).await.id;
    let worker = fx.worker("worker").await;
    receive(&fx, lead, "for the lead").await;
    let view = fx.store.poll_view(worker).await.unwrap().unwrap();
    assert!(!view.waiting.contains(&TriggerKind::SlackInboxMessage));
    assert!(poll_inbox(&fx, worker, fx.now()).await.is_empty(), "a worker never gets the lead's inbox");
    assert!(!TriggerKind::SlackInboxMessage.audience().admits(false));
}

pub async fn inbox_close_is_guarded(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let lead = fx.register("lead", true, 1).await.id;
    let message = receive(&fx, lead, "question").await;
    poll_inbox(&fx, lead, fx.now()).await;

    let answered = InboxChange::Responded { response_text: "the answer".into() };
    let res = fx.store.inbox_apply(message.id, &answered, fx.now()).await.unwrap();
    let Applied::Changed { before, after } = res else { panic!("respond: {res:?}") };
    assert_eq!(before.status, InboxStatus::Processing);
    assert_eq!(after.status, InboxStatus::Responded);
    assert_eq!(after.response_text.as_deref(), Some("the answer"));
    assert_eq!(after.lease_expires_at, None);

    let again = fx.store.inbox_apply(message.id, &InboxChange::Read, fx.now()).await.unwrap();
    assert_eq!(again, Applied::Refused { current: after }, "a closed message stays closed");
    let unknown = fx.store.inbox_apply(InboxMessageId::new_v7(), &InboxChange::Read, fx.now()).await;
    assert_eq!(unknown.unwrap(), Applied::NotFound);
}

pub async fn inbox_delegate_creates_the_task_and_marks_in_one_step(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let lead = fx.register("lead", true, 1).await.id;
    let worker = fx.worker("worker").await;
    let message = receive(&fx, lead, "please fix the build").await;
    let task = |text: &str| {
        let draft = TaskDraft {
            task: text.into(),
            agent_id: Some(worker),
            source: Some("slack".into()),
            origin: TaskOrigin {
                slack_channel_id: message.slack.slack_channel_id.clone(),
                slack_thread_ts: message.slack.slack_thread_ts.clone(),
                slack_user_id: message.slack.slack_user_id.clone(),
                ..TaskOrigin::default()
            },
            ..TaskDraft::default()
        };
        NewTask::parse(draft, Some(lead)).unwrap()
    };

    let stranger = fx.register("other-lead-ish", false, 1).await.id;
    let refused = fx.store.inbox_delegate(message.id, stranger, &task("not yours"), fx.now()).await.unwrap();
    assert!(matches!(refused, Applied::Refused { .. }), "only the owner delegates");

    let new_task = task("please fix the build");
    let res = fx.store.inbox_delegate(message.id, lead, &new_task, fx.now()).await.unwrap();
    let Applied::Changed { after, .. } = res else { panic!("delegate: {res:?}") };
    assert_eq!(after.status, InboxStatus::Delegated);
    assert_eq!(after.delegated_to_task_id, Some(new_task.id));
    let created = fx.task(new_task.id).await;
    assert_eq!(created.status, TaskStatus::Pending);
    assert_eq!(created.source, "slack");
    assert_eq!(created.origin.slack_thread_ts, message.slack.slack_thread_ts);

    let twice = task("again");
    let res = fx.store.inbox_delegate(message.id, lead, &twice, fx.now()).await.unwrap();
    assert!(matches!(res, Applied::Refused { .. }), "{res:?}");
    assert!(fx.store.task_get(twice.id).await.unwrap().is_none(), "a refused delegation creates no task");
}

pub async fn inbox_lease_expiry_returns_processing_to_unread(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let lead = fx.register("lead", true, 1).await.id;
    let message = receive(&fx, lead, "anyone?").await;
    let claimed_at = fx.now();
    assert_eq!(poll_inbox(&fx, lead, claimed_at).await.len(), 1);

    let policy = LeasePolicy { period: Duration::from_secs(3600), ..LeasePolicy::default() };
    let early = fx.store.rescue(&policy, claimed_at.plus_millis(LEASE - 1)).await.unwrap();
    assert!(early.inbox_returned_to.is_empty(), "the lease still runs");
    let late = fx.store.rescue(&policy, claimed_at.plus_millis(LEASE + 1)).await.unwrap();
    assert_eq!(late.inbox_returned_to, vec![lead]);
    let back = fx.store.inbox_get(message.id).await.unwrap().unwrap();
    assert_eq!(back.status, InboxStatus::Unread);
    assert_eq!(back.lease_expires_at, None);
    let again = poll_inbox(&fx, lead, claimed_at.plus_millis(LEASE + 2)).await;
    assert_eq!(again.iter().map(|m| m.id).collect::<Vec<_>>(), vec![message.id], "handed out again");
}

pub async fn inbox_heartbeat_extends_the_lease(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let lead = fx.register("lead", true, 1).await.id;
    let message = receive(&fx, lead, "long thought").await;
    poll_inbox(&fx, lead, fx.now()).await;
    let until = fx.now().plus_millis(10 * LEASE);
    fx.store.agent_heartbeat(lead, fx.now(), until).await.unwrap();
    let held = fx.store.inbox_get(message.id).await.unwrap().unwrap();
    assert_eq!(held.lease_expires_at, Some(until));
}

pub async fn slack_marks_are_taken_once(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    assert!(fx.store.slack_mark_once(SlackMark::Event, "Ev1", fx.now()).await.unwrap());
    assert!(!fx.store.slack_mark_once(SlackMark::Event, "Ev1", fx.now()).await.unwrap());
    assert!(
        fx.store.slack_mark_once(SlackMark::TaskOutcome, "Ev1", fx.now()).await.unwrap(),
        "kinds are apart"
    );
}

pub async fn slack_outcomes_unannounced_until_marked(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.worker("worker").await;
    let draft = TaskDraft {
        task: "slack work".into(),
        agent_id: Some(worker),
        source: Some("slack".into()),
        origin: TaskOrigin {
            slack_channel_id: Some("C1".into()),
            slack_thread_ts: Some("1.2".into()),
            ..TaskOrigin::default()
        },
        ..TaskDraft::default()
    };
    let task = fx.create(draft, None).await;
    let plain = fx.create(TaskDraft { agent_id: Some(worker), ..super::draft("plain") }, None).await;
    let since = fx.now();
    for id in [task.id, plain.id] {
        fx.must_change(id, TaskAction::Start { agent: worker }).await;
        fx.must_change(id, super::complete(worker)).await;
    }
    let pending = fx.store.slack_outcomes_unannounced(since, 10).await.unwrap();
    assert_eq!(pending.iter().map(|t| t.id).collect::<Vec<_>>(), vec![task.id], "only Slack tasks");
    assert!(fx.store.slack_mark_once(SlackMark::TaskOutcome, &task.id.to_string(), fx.now()).await.unwrap());
    assert!(fx.store.slack_outcomes_unannounced(since, 10).await.unwrap().is_empty());
}

pub async fn inbox_concurrent_polls_never_share_a_message(store: Arc<dyn Store>) {
    let fx = Arc::new(Fixture::new(store));
    let lead = fx.register("lead", true, 3).await.id;
    let mut sent = HashSet::new();
    for n in 0..60 {
        sent.insert(receive(&fx, lead, &format!("message {n}")).await.id);
    }
    let mut pollers = Vec::new();
    for _ in 0..16 {
        let fx = fx.clone();
        pollers.push(tokio::spawn(async move {
            let mut got = Vec::new();
            loop {
                let batch = poll_inbox(&fx, lead, Timestamp::now()).await;
                if batch.is_empty() {
                    return got;
                }
                got.extend(batch.into_iter().map(|m| m.id));
            }
        }));
    }
    let mut delivered = Vec::new();
    for poller in pollers {
        delivered.extend(poller.await.unwrap());
    }
    let unique: HashSet<InboxMessageId> = delivered.iter().copied().collect();
    assert_eq!(unique.len(), delivered.len(), "an inbox message was handed out twice");
    assert_eq!(unique, sent, "every message was handed out");
}
