//! A lead-side claim belongs to the run that took it (issue 20): its runner releases
//! what the run left unfinished, guarded by the holder and the claimed state; an item
//! handed over too often becomes a dead letter, which an operator requeues; a restarted
//! runner releases everything its previous process held.

use std::sync::Arc;

use crate::{Applied, HeldItems, Store};
use swarm_domain::{
    chat::NewChatMessage,
    id::{AgentId, ChannelId, ChatMessageId, RunnerId},
    inbox::{InboxChange, InboxMessage, InboxStatus, NewInboxMessage, SlackContext},
    poll::{Trigger, TriggerKind},
    time::Timestamp,
};

use super::Fixture;

const LEASE: i64 = 60_000;
const MAX_DELIVERIES: i32 = 5;

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_run_claims {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            run_claims,
            [
                release_offers_again_what_the_run_left_unfinished,
                release_is_guarded_by_the_holder,
                an_item_handed_over_too_often_is_dead_lettered_and_requeued,
                a_restarted_runner_releases_its_previous_claims,
            ],
            multi_thread: []
        );
    };
}

async fn receive(fx: &Fixture, lead: AgentId, text: &str) -> InboxMessage {
    let new = NewInboxMessage::parse(lead, text, SlackContext::default(), None).expect("valid");
    fx.store.inbox_create(&new, fx.now()).await.expect("inbox_create")
}

async fn poll_inbox(fx: &Fixture, lead: AgentId, runner: RunnerId, now: Timestamp) -> Vec<InboxMessage> {
    let kinds = [TriggerKind::SlackInboxMessage];
    let claimed =
        fx.store.poll_claim_for_runner(lead, &kinds, now, now.plus_millis(LEASE), Some(runner)).await;
    match claimed.expect("poll_claim") {
        Some((_, Trigger::SlackInboxMessage { messages, .. })) => messages,
        None => Vec::new(),
        other => panic!("unexpected trigger {other:?}"),
    }
}

fn inbox_items(messages: &[InboxMessage]) -> HeldItems {
    HeldItems { inbox: messages.iter().map(|message| message.id).collect(), ..HeldItems::default() }
}

async fn status(fx: &Fixture, message: &InboxMessage) -> InboxStatus {
    fx.store.inbox_get(message.id).await.unwrap().unwrap().status
}

pub async fn release_offers_again_what_the_run_left_unfinished(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let lead = fx.register("lead", true, 1).await.id;
    let runner = RunnerId::new_v7();
    let answered = receive(&fx, lead, "answered by the run").await;
    let ignored = receive(&fx, lead, "left alone by the run").await;
    let taken = poll_inbox(&fx, lead, runner, fx.now()).await;
    assert_eq!(taken.len(), 2);
    let reply = InboxChange::Responded { response_text: "done".into() };
    assert!(matches!(
        fx.store.inbox_apply(answered.id, &reply, fx.now()).await.unwrap(),
        Applied::Changed { .. }
    ));

    let released = fx
        .store
        .claims_release(lead, runner, Some(&inbox_items(&taken)), MAX_DELIVERIES, fx.now())
        .await
        .unwrap();
    assert_eq!((released.returned, released.dead_lettered), (1, 0), "only the unfinished one");
    assert_eq!(status(&fx, &answered).await, InboxStatus::Responded, "a finished item is left alone");
    let back = fx.store.inbox_get(ignored.id).await.unwrap().unwrap();
    assert_eq!((back.status, back.lease_expires_at), (InboxStatus::Unread, None));
    let again = poll_inbox(&fx, lead, runner, fx.now()).await;
    assert_eq!(
        again.iter().map(|m| m.id).collect::<Vec<_>>(),
        vec![ignored.id],
        "the next poll gets it again"
    );
}

pub async fn release_is_guarded_by_the_holder(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let lead = fx.register("lead", true, 1).await.id;
    let (holder, other) = (RunnerId::new_v7(), RunnerId::new_v7());
    let message = receive(&fx, lead, "held by one runner").await;
    let taken = poll_inbox(&fx, lead, holder, fx.now()).await;
    let items = inbox_items(&taken);
    let by_other =
        fx.store.claims_release(lead, other, Some(&items), MAX_DELIVERIES, fx.now()).await.unwrap();
    assert_eq!(by_other.returned + by_other.dead_lettered, 0, "another runner's release changes nothing");
    assert_eq!(status(&fx, &message).await, InboxStatus::Processing);
    let not_owner = fx.register("worker", false, 1).await.id;
    let wrong_agent =
        fx.store.claims_release(not_owner, holder, Some(&items), MAX_DELIVERIES, fx.now()).await.unwrap();
    assert_eq!(wrong_agent.returned, 0, "nor a release naming another agent");
    let by_holder =
        fx.store.claims_release(lead, holder, Some(&items), MAX_DELIVERIES, fx.now()).await.unwrap();
    assert_eq!(by_holder.returned, 1);
    let twice = fx.store.claims_release(lead, holder, Some(&items), MAX_DELIVERIES, fx.now()).await.unwrap();
    assert_eq!(twice.returned, 0, "released once: no longer claimed");
}

pub async fn an_item_handed_over_too_often_is_dead_lettered_and_requeued(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let lead = fx.register("lead", true, 1).await.id;
    let runner = RunnerId::new_v7();
    let message = receive(&fx, lead, "nobody answers me").await;
    let max = 2;
    for delivery in 1..=max {
        let taken = poll_inbox(&fx, lead, runner, fx.now()).await;
        assert_eq!(taken.len(), 1, "delivery {delivery}");
        let released =
            fx.store.claims_release(lead, runner, Some(&inbox_items(&taken)), max, fx.now()).await.unwrap();
        let expected = if delivery < max { (1, 0) } else { (0, 1) };
        assert_eq!((released.returned, released.dead_lettered), expected, "delivery {delivery}");
    }
    assert_eq!(status(&fx, &message).await, InboxStatus::DeadLetter);
    assert!(poll_inbox(&fx, lead, runner, fx.now()).await.is_empty(), "a dead letter is not handed over");
    let listed = fx.store.inbox_list(lead, &[InboxStatus::DeadLetter], 10).await.unwrap();
    assert_eq!(listed.iter().map(|m| m.id).collect::<Vec<_>>(), vec![message.id]);

    let Applied::Changed { after, .. } = fx.store.inbox_requeue(message.id, fx.now()).await.unwrap() else {
        panic!("requeue a dead letter");
    };
    assert_eq!(after.status, InboxStatus::Unread);
    assert!(matches!(fx.store.inbox_requeue(message.id, fx.now()).await.unwrap(), Applied::Refused { .. }));
    // A fresh count: it may be handed over `max` times again before it is set aside.
    let taken = poll_inbox(&fx, lead, runner, fx.now()).await;
    let released =
        fx.store.claims_release(lead, runner, Some(&inbox_items(&taken)), max, fx.now()).await.unwrap();
    assert_eq!(released.returned, 1);
}

pub async fn a_restarted_runner_releases_its_previous_claims(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let lead = fx.register("lead", true, 1).await.id;
    let human = NewChatMessage {
        id: ChatMessageId::new_v7(),
        channel_id: ChannelId::general(),
        agent_id: None,
        content: "@lead look".into(),
        reply_to_id: None,
        mentions: vec![lead],
        tasks: Vec::new(),
    };
    fx.store.chat_post(&human, fx.now()).await.unwrap();
    let message = receive(&fx, lead, "before the crash").await;
    let (previous, next) = (RunnerId::new_v7(), RunnerId::new_v7());
    let now = fx.now();
    let kinds = [TriggerKind::SlackInboxMessage, TriggerKind::UnreadMentions];
    for _ in 0..2 {
        let claimed =
            fx.store.poll_claim_for_runner(lead, &kinds, now, now.plus_millis(LEASE), Some(previous));
        assert!(claimed.await.unwrap().is_some());
    }
    // The new process heartbeats: it does not keep the dead one's claims alive, and a
    // release of everything the previous process held brings both kinds back.
    fx.store.agent_heartbeat_from_runner(lead, now, now.plus_millis(LEASE), Some(next)).await.unwrap();
    let released = fx.store.claims_release(lead, previous, None, MAX_DELIVERIES, now).await.unwrap();
    assert_eq!(released.returned, 2, "the inbox message and the mentioning channel");
    assert_eq!(status(&fx, &message).await, InboxStatus::Unread);
    let again =
        fx.store.poll_claim_for_runner(lead, &kinds[1..], now, now.plus_millis(LEASE), Some(next)).await;
    let Some((_, Trigger::UnreadMentions { mentions_count, claimed_channels, .. })) = again.unwrap() else {
        panic!("the mention wakes the lead again");
    };
    assert_eq!((mentions_count, claimed_channels), (1, vec![ChannelId::general()]));
}
