//! Channels (agent chat) on both backends: `general` exists, names are unique, posts
//! with mentions and `/task` tasks in one step, reading windows and threads, read state,
//! and the `unread_mentions` claim: each channel claimed once, cleared by reading,
//! back after its lease runs out, extended by heartbeats.

use std::{collections::HashSet, sync::Arc};

use crate::{Store, StoreError};
use swarm_domain::{
    chat::{ChannelType, ChatMessage, MessageQuery, NewChannel, NewChatMessage},
    id::{AgentId, ChannelId, ChatMessageId},
    lease::LeasePolicy,
    poll::{Trigger, TriggerKind},
    task::{NewTask, TaskDraft, TaskStatus},
    time::Timestamp,
};

use super::{Fixture, draft};

const LEASE: i64 = 60_000;

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_chat {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            chat,
            [
                chat_general_exists_and_names_are_unique,
                chat_post_records_mentions_and_tasks,
                chat_messages_windows_and_threads,
                chat_mention_claim_is_cleared_by_reading,
                chat_mention_claim_returns_after_its_lease,
            ],
            multi_thread: [
                chat_concurrent_polls_never_share_mentions,
            ]
        );
    };
}

fn message(
    channel: ChannelId,
    author: Option<AgentId>,
    text: &str,
    mentions: Vec<AgentId>,
) -> NewChatMessage {
    NewChatMessage {
        id: ChatMessageId::new_v7(),
        channel_id: channel,
        agent_id: author,
        content: text.to_string(),
        reply_to_id: None,
        mentions,
        tasks: Vec::new(),
    }
}

async fn post(fx: &Fixture, new: NewChatMessage) -> ChatMessage {
    fx.store.chat_post(&new, fx.now()).await.expect("chat_post")
}

async fn poll_mentions(
    store: &dyn Store,
    agent: AgentId,
    now: Timestamp,
) -> Option<(Vec<ChannelId>, Vec<ChatMessage>)> {
    let kinds = [TriggerKind::UnreadMentions];
    match store.poll_claim(agent, &kinds, now, now.plus_millis(LEASE)).await.expect("poll_claim") {
        Some((
            TriggerKind::UnreadMentions,
            Trigger::UnreadMentions { mentions_count, claimed_channels, messages },
        )) => {
            assert_eq!(mentions_count, messages.len());
            Some((claimed_channels, messages))
        }
        None => None,
        other => panic!("unexpected trigger {other:?}"),
    }
}

pub async fn chat_general_exists_and_names_are_unique(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let general = fx.store.channel_get(ChannelId::general()).await.unwrap().expect("general exists");
    assert_eq!(general.name, "general");
    let alpha = fx.worker("alpha").await;
    let dev =
        NewChannel::parse("dev", Some("builders".into()), ChannelType::Public, Some(alpha), vec![]).unwrap();
    let created = fx.store.channel_create(&dev, fx.now()).await.unwrap();
    assert_eq!(created.name, "dev");
    let again = NewChannel::parse("dev", None, ChannelType::Public, None, vec![]).unwrap();
    assert!(matches!(fx.store.channel_create(&again, fx.now()).await, Err(StoreError::Conflict(_))));
    let ghost =
        NewChannel::parse("dm1", None, ChannelType::Dm, Some(alpha), vec![AgentId::new_v7()]).unwrap();
    assert!(matches!(fx.store.channel_create(&ghost, fx.now()).await, Err(StoreError::MissingReference(_))));
    let names: Vec<_> = fx.store.channel_list().await.unwrap().into_iter().map(|c| c.name).collect();
    assert_eq!(names, vec!["dev", "general"], "the refused dm left nothing behind");
}

pub async fn chat_post_records_mentions_and_tasks(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let (alpha, beta) = (fx.worker("alpha").await, fx.worker("beta").await);
    let general = ChannelId::general();
    let mut new = message(general, None, "/task @alpha @beta fix the build", vec![alpha, beta]);
    new.tasks = [alpha, beta]
        .into_iter()
        .map(|agent| {
            NewTask::parse(TaskDraft { agent_id: Some(agent), ..draft("fix the build") }, None).unwrap()
        })
        .collect();
    let posted = post(&fx, new.clone()).await;
    assert_eq!(posted.mentions, vec![alpha, beta]);
    assert_eq!(posted.task_ids, new.tasks.iter().map(|t| t.id).collect::<Vec<_>>());
    for (task_id, agent) in posted.task_ids.iter().zip([alpha, beta]) {
        let task = fx.task(*task_id).await;
        assert_eq!((task.status, task.agent_id), (TaskStatus::Pending, Some(agent)));
    }
    assert_eq!(fx.store.chat_unread_mentions(alpha).await.unwrap(), vec![(general, 1)]);
    let bad = message(general, None, "hi @ghost", vec![AgentId::new_v7()]);
    assert!(matches!(fx.store.chat_post(&bad, fx.now()).await, Err(StoreError::MissingReference(_))));
    let nowhere = message(ChannelId::new_v7(), None, "hi", vec![]);
    assert!(matches!(fx.store.chat_post(&nowhere, fx.now()).await, Err(StoreError::MissingReference(_))));
    assert_eq!(
        fx.store.chat_messages(general, &MessageQuery { limit: 10, ..Default::default() }).await.unwrap(),
        vec![posted]
    );
}

pub async fn chat_messages_windows_and_threads(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let alpha = fx.worker("alpha").await;
    let general = ChannelId::general();
    let mut posted = Vec::new();
    for n in 0..5 {
        let mentions = if n % 2 == 0 { vec![alpha] } else { vec![] };
        posted.push(post(&fx, message(general, None, &format!("m{n}"), mentions)).await);
    }
    let texts = |messages: Vec<ChatMessage>| messages.into_iter().map(|m| m.content).collect::<Vec<_>>();
    let latest =
        fx.store.chat_messages(general, &MessageQuery { limit: 2, ..Default::default() }).await.unwrap();
    assert_eq!(texts(latest), vec!["m3", "m4"], "the newest, oldest first");
    let since = MessageQuery { since: Some(posted[1].created_at), limit: 2, ..Default::default() };
    assert_eq!(texts(fx.store.chat_messages(general, &since).await.unwrap()), vec!["m2", "m3"]);
    let before = MessageQuery { before: Some(posted[2].created_at), limit: 10, ..Default::default() };
    assert_eq!(texts(fx.store.chat_messages(general, &before).await.unwrap()), vec!["m0", "m1"]);
    let mentioning = MessageQuery { mentioning: Some(alpha), limit: 10, ..Default::default() };
    assert_eq!(texts(fx.store.chat_messages(general, &mentioning).await.unwrap()), vec!["m0", "m2", "m4"]);

    let mut reply = message(general, Some(alpha), "re m0", vec![]);
    reply.reply_to_id = Some(posted[0].id);
    let reply = post(&fx, reply).await;
    assert_eq!(texts(fx.store.chat_thread(posted[0].id).await.unwrap()), vec!["m0", "re m0"]);
    assert_eq!(fx.store.chat_message_get(reply.id).await.unwrap(), Some(reply));
    let mut orphan = message(general, None, "re nothing", vec![]);
    orphan.reply_to_id = Some(ChatMessageId::new_v7());
    assert!(matches!(fx.store.chat_post(&orphan, fx.now()).await, Err(StoreError::MissingReference(_))));
}

pub async fn chat_mention_claim_is_cleared_by_reading(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let lead = fx.register("lead", true, 1).await.id;
    let general = ChannelId::general();
    assert!(poll_mentions(fx.store.as_ref(), lead, fx.now()).await.is_none());
    let first = post(&fx, message(general, None, "@lead one", vec![lead])).await;
    post(&fx, message(general, None, "not you", vec![])).await;
    let second = post(&fx, message(general, None, "@lead two", vec![lead])).await;
    assert!(fx.store.poll_view(lead).await.unwrap().unwrap().waiting.contains(&TriggerKind::UnreadMentions));

    let (channels, messages) = poll_mentions(fx.store.as_ref(), lead, fx.now()).await.expect("claimed");
    assert_eq!(channels, vec![general]);
    assert_eq!(messages.iter().map(|m| m.id).collect::<Vec<_>>(), vec![first.id, second.id]);
    assert!(poll_mentions(fx.store.as_ref(), lead, fx.now()).await.is_none(), "claimed once");
    assert!(!fx.store.poll_view(lead).await.unwrap().unwrap().waiting.contains(&TriggerKind::UnreadMentions));

    fx.store.chat_mark_read(lead, general, second.created_at).await.unwrap();
    assert_eq!(fx.store.chat_last_read(lead, general).await.unwrap(), Some(second.created_at));
    assert!(fx.store.chat_unread_mentions(lead).await.unwrap().is_empty());
    assert!(poll_mentions(fx.store.as_ref(), lead, fx.now()).await.is_none(), "read: nothing left");
    let third = post(&fx, message(general, None, "@lead three", vec![lead])).await;
    let (_, messages) = poll_mentions(fx.store.as_ref(), lead, fx.now()).await.expect("a new mention");
    assert_eq!(messages.iter().map(|m| m.id).collect::<Vec<_>>(), vec![third.id]);
    fx.store.chat_mark_read(lead, general, first.created_at).await.unwrap();
    assert_eq!(fx.store.chat_last_read(lead, general).await.unwrap(), Some(second.created_at), "never back");
    assert_eq!(fx.store.chat_unread_mentions(lead).await.unwrap(), vec![(general, 1)]);
}

pub async fn chat_mention_claim_returns_after_its_lease(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let lead = fx.register("lead", true, 1).await.id;
    post(&fx, message(ChannelId::general(), None, "@lead look", vec![lead])).await;
    let claimed_at = fx.now();
    assert!(poll_mentions(fx.store.as_ref(), lead, claimed_at).await.is_some());
    let policy = LeasePolicy::default();
    let early = fx.store.rescue(&policy, claimed_at.plus_millis(LEASE - 1)).await.unwrap();
    assert!(early.mentions_returned_to.is_empty(), "the lease still runs");
    let beat = claimed_at.plus_millis(LEASE / 2);
    fx.store.agent_heartbeat(lead, beat, beat.plus_millis(LEASE)).await.unwrap();
    let extended = fx.store.rescue(&policy, claimed_at.plus_millis(LEASE + 1)).await.unwrap();
    assert!(extended.mentions_returned_to.is_empty(), "the heartbeat extended it");
    let late = fx.store.rescue(&policy, beat.plus_millis(LEASE + 1)).await.unwrap();
    assert_eq!(late.mentions_returned_to, vec![lead]);
    assert!(poll_mentions(fx.store.as_ref(), lead, fx.now()).await.is_some(), "claimable again");
}

pub async fn chat_concurrent_polls_never_share_mentions(store: Arc<dyn Store>) {
    let fx = Arc::new(Fixture::new(store));
    let lead = fx.register("lead", true, 3).await.id;
    let mut channels = HashSet::new();
    for n in 0..12 {
        let channel = NewChannel::parse(&format!("c{n}"), None, ChannelType::Public, None, vec![]).unwrap();
        let channel = fx.store.channel_create(&channel, fx.now()).await.unwrap();
        post(&fx, message(channel.id, None, "@lead ping", vec![lead])).await;
        channels.insert(channel.id);
    }
    let mut pollers = Vec::new();
    for _ in 0..8 {
        let fx = fx.clone();
        pollers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            while let Some((claimed, messages)) = poll_mentions(fx.store.as_ref(), lead, fx.now()).await {
                assert_eq!(claimed.len(), messages.len());
                mine.extend(claimed);
                tokio::task::yield_now().await;
            }
            mine
        }));
    }
    let mut seen = Vec::new();
    for poller in pollers {
        seen.extend(poller.await.expect("poller"));
    }
    let unique: HashSet<_> = seen.iter().copied().collect();
    assert_eq!(unique.len(), seen.len(), "no channel claimed twice");
    assert_eq!(unique, channels, "every channel claimed");
}
