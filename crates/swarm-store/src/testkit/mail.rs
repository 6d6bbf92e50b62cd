//! Agent mail on both backends: append and read back, pages in both orders with a
//! cursor, counts by priority, delivery urgent first (low only when asked, each piece
//! once), replies that deliver and answer the original (ending the sender's waiting),
//! and the `urgent_mail` claim: claimed once, cleared by delivery, back after its lease,
//! extended by heartbeats, never shared between concurrent polls.

use std::{collections::HashSet, sync::Arc};

use crate::{Store, StoreError};
use swarm_domain::{
    chat::{ChatMessage, NewChatMessage},
    id::{AgentId, ChannelId, ChatMessageId, MailId, RunnerId},
    lease::LeasePolicy,
    mail::{Mail, MailBox, MailDelivery, MailDraft, MailPriority, MailQuery, MailStatus, MailType, NewMail},
    poll::{Trigger, TriggerKind},
    time::Timestamp,
};

use super::Fixture;

const LEASE: i64 = 60_000;

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_mail {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            mail,
            [
                mail_is_appended_and_paged,
                mail_counts_and_delivery_order,
                mail_reply_answers_and_ends_waiting,
                mail_urgent_claim_is_cleared_by_delivery,
                mail_urgent_claim_returns_after_its_lease,
                lead_side_claims_are_extended_only_by_their_runner,
            ],
            multi_thread: [
                mail_concurrent_polls_never_share,
                mail_concurrent_deliveries_never_share,
            ]
        );
    };
}

fn new_mail(from: AgentId, to: AgentId, subject: &str, priority: MailPriority) -> NewMail {
    let draft = MailDraft {
        mail_type: MailType::Question,
        subject: subject.into(),
        body: format!("body of {subject}"),
        priority,
        awaiting_response: false,
        in_reply_to: None,
    };
    NewMail::parse(from, to, draft).expect("valid mail")
}

async fn send(fx: &Fixture, mail: NewMail) -> Mail {
    fx.store.mail_send(&mail, fx.now()).await.expect("mail_send")
}

fn query(agent: AgentId, mailbox: MailBox) -> MailQuery {
    MailQuery { agent: Some(agent), mailbox, limit: 50, ..MailQuery::default() }
}

fn subjects(mail: &[Mail]) -> Vec<&str> {
    mail.iter().map(|mail| mail.subject.as_str()).collect()
}

fn delivery(priorities: &[MailPriority], limit: i64) -> MailDelivery {
    MailDelivery { ids: Vec::new(), priorities: priorities.to_vec(), include_waking: false, limit }
}

async fn poll_urgent(store: &dyn Store, agent: AgentId, now: Timestamp) -> Option<Vec<Mail>> {
    let kinds = [TriggerKind::UrgentMail];
    match store.poll_claim(agent, &kinds, now, now.plus_millis(LEASE)).await.expect("poll_claim") {
        Some((TriggerKind::UrgentMail, Trigger::UrgentMail { count, mail })) => {
            assert_eq!(count, mail.len());
            Some(mail)
        }
        None => None,
        other => panic!("unexpected trigger {other:?}"),
    }
}

pub async fn mail_is_appended_and_paged(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let (alpha, beta) = (fx.worker("alpha").await, fx.worker("beta").await);
    let first = send(&fx, new_mail(alpha, beta, "one", MailPriority::Normal)).await;
    assert_eq!(first.status, MailStatus::Unread);
    assert_eq!((first.from_agent_id, first.to_agent_id), (alpha, beta));
    assert_eq!(first.body, "body of one");
    assert!(first.read_at.is_none() && first.answered_at.is_none());
    assert_eq!(fx.store.mail_get(first.id).await.unwrap(), Some(first.clone()));
    send(&fx, new_mail(beta, alpha, "two", MailPriority::Low)).await;
    send(&fx, new_mail(alpha, beta, "three", MailPriority::Urgent)).await;

    let inbox = fx.store.mail_list(&query(beta, MailBox::Inbox)).await.unwrap();
    assert_eq!(subjects(&inbox), ["three", "one"], "newest first");
    let outbox = fx.store.mail_list(&query(beta, MailBox::Outbox)).await.unwrap();
    assert_eq!(subjects(&outbox), ["two"]);
    let history = MailQuery { oldest_first: true, ..query(beta, MailBox::All) };
    assert_eq!(subjects(&fx.store.mail_list(&history).await.unwrap()), ["one", "two", "three"]);
    let page = MailQuery { limit: 2, ..history.clone() };
    let page_one = fx.store.mail_list(&page).await.unwrap();
    assert_eq!(subjects(&page_one), ["one", "two"]);
    let page_two = MailQuery { after: Some(page_one[1].id), ..page.clone() };
    assert_eq!(subjects(&fx.store.mail_list(&page_two).await.unwrap()), ["three"]);
    let newest_after = MailQuery { after: Some(page_one[1].id), ..query(beta, MailBox::All) };
    assert_eq!(subjects(&fx.store.mail_list(&newest_after).await.unwrap()), ["one"], "older than two");
    let urgent = MailQuery { priorities: vec![MailPriority::Urgent], ..query(beta, MailBox::Inbox) };
    assert_eq!(subjects(&fx.store.mail_list(&urgent).await.unwrap()), ["three"]);
    let everyone = MailQuery { agent: None, ..MailQuery { limit: 50, ..MailQuery::default() } };
    assert_eq!(fx.store.mail_list(&everyone).await.unwrap().len(), 3);

    let ghost = AgentId::new_v7();
    let refused = fx.store.mail_send(&new_mail(alpha, ghost, "lost", MailPriority::Normal), fx.now()).await;
    assert!(matches!(refused, Err(StoreError::MissingReference(_))), "{refused:?}");
    let mut orphan = new_mail(alpha, beta, "orphan", MailPriority::Normal);
    orphan.in_reply_to = Some(MailId::new_v7());
    let refused = fx.store.mail_send(&orphan, fx.now()).await;
    assert!(matches!(refused, Err(StoreError::MissingReference(_))), "{refused:?}");
    assert_eq!(fx.store.mail_list(&everyone).await.unwrap().len(), 3, "refusals wrote nothing");
}

pub async fn mail_counts_and_delivery_order(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let (alpha, beta) = (fx.worker("alpha").await, fx.worker("beta").await);
    send(&fx, new_mail(alpha, beta, "normal-1", MailPriority::Normal)).await;
    send(&fx, new_mail(alpha, beta, "low-1", MailPriority::Low)).await;
    send(&fx, new_mail(alpha, beta, "urgent-1", MailPriority::Urgent)).await;
    send(&fx, new_mail(alpha, beta, "normal-2", MailPriority::Normal)).await;
    let counts = fx.store.mail_counts(beta).await.unwrap();
    assert_eq!((counts.unread, counts.urgent, counts.normal, counts.low), (4, 1, 2, 1));
    assert_eq!(fx.store.mail_counts(alpha).await.unwrap().unread, 0);

    let urgent_and_normal = [MailPriority::Urgent, MailPriority::Normal];
    let first = fx.store.mail_deliver(beta, &delivery(&urgent_and_normal, 2), fx.now()).await.unwrap();
    assert_eq!(subjects(&first), ["urgent-1", "normal-1"], "urgent first, then oldest");
    assert!(first.iter().all(|mail| mail.status == MailStatus::Read && mail.read_at.is_some()));
    let rest = fx.store.mail_deliver(beta, &delivery(&urgent_and_normal, 20), fx.now()).await.unwrap();
    assert_eq!(subjects(&rest), ["normal-2"], "low is not delivered unless asked");
    assert!(
        fx.store.mail_deliver(beta, &delivery(&urgent_and_normal, 20), fx.now()).await.unwrap().is_empty()
    );
    let counts = fx.store.mail_counts(beta).await.unwrap();
    assert_eq!((counts.unread, counts.low), (1, 1));
    assert_eq!(
        subjects(&fx.store.mail_deliver(beta, &delivery(&[], 20), fx.now()).await.unwrap()),
        ["low-1"]
    );

    let other = send(&fx, new_mail(beta, alpha, "for alpha", MailPriority::Normal)).await;
    let by_id =
        MailDelivery { ids: vec![other.id], priorities: Vec::new(), include_waking: false, limit: 20 };
    assert!(
        fx.store.mail_deliver(beta, &by_id, fx.now()).await.unwrap().is_empty(),
        "only the recipient's mail is delivered to it"
    );
    assert_eq!(fx.store.mail_get(other.id).await.unwrap().unwrap().status, MailStatus::Unread);
    assert_eq!(fx.store.mail_deliver(alpha, &by_id, fx.now()).await.unwrap().len(), 1);
}

pub async fn mail_reply_answers_and_ends_waiting(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let (lead, worker) = (fx.register("lead", true, 1).await.id, fx.worker("worker").await);
    let mut ask = new_mail(worker, lead, "build fails", MailPriority::Urgent);
    ask.mail_type = MailType::HelpRequest;
    ask.awaiting_response = true;
    let ask = send(&fx, ask).await;
    assert!(ask.is_waiting());
    assert_eq!(fx.store.mail_counts(worker).await.unwrap().awaiting_response, 1);
    let pending = MailQuery { pending_only: true, ..query(worker, MailBox::Outbox) };
    assert_eq!(subjects(&fx.store.mail_list(&pending).await.unwrap()), ["build fails"]);

    // A reply by someone who is not the recipient answers nothing.
    let stranger = fx.worker("stranger").await;
    let mut wrong = new_mail(stranger, worker, "not mine", MailPriority::Normal);
    wrong.in_reply_to = Some(ask.id);
    send(&fx, wrong).await;
    assert!(fx.store.mail_get(ask.id).await.unwrap().unwrap().is_waiting());

    let mut answer = new_mail(lead, worker, "Re: build fails", MailPriority::Urgent);
    answer.mail_type = MailType::Response;
    answer.in_reply_to = Some(ask.id);
    let answer = send(&fx, answer).await;
    assert_eq!(answer.in_reply_to, Some(ask.id));
    let original = fx.store.mail_get(ask.id).await.unwrap().unwrap();
    assert_eq!(original.status, MailStatus::Read, "replying delivers it");
    assert!(original.answered_at.is_some() && !original.is_waiting());
    let counts = fx.store.mail_counts(worker).await.unwrap();
    assert_eq!((counts.awaiting_response, counts.urgent), (0, 1));
    assert!(!counts.waiting_for_response());
    assert!(fx.store.mail_list(&pending).await.unwrap().is_empty());
}

pub async fn mail_urgent_claim_is_cleared_by_delivery(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let (alpha, beta) = (fx.worker("alpha").await, fx.worker("beta").await);
    send(&fx, new_mail(alpha, beta, "normal", MailPriority::Normal)).await;
    assert!(!fx.store.poll_view(beta).await.unwrap().unwrap().waiting.contains(&TriggerKind::UrgentMail));
    assert!(poll_urgent(fx.store.as_ref(), beta, fx.now()).await.is_none(), "normal mail does not wake");
    let first = send(&fx, new_mail(alpha, beta, "urgent-1", MailPriority::Urgent)).await;
    let second = send(&fx, new_mail(alpha, beta, "urgent-2", MailPriority::Urgent)).await;
    assert!(fx.store.poll_view(beta).await.unwrap().unwrap().waiting.contains(&TriggerKind::UrgentMail));
    assert!(poll_urgent(fx.store.as_ref(), alpha, fx.now()).await.is_none(), "not alpha's");

    let claimed = poll_urgent(fx.store.as_ref(), beta, fx.now()).await.expect("claimed");
    assert_eq!(claimed.iter().map(|mail| mail.id).collect::<Vec<_>>(), vec![first.id, second.id]);
    assert!(
        claimed.iter().all(|mail| mail.status == MailStatus::Processing && mail.lease_expires_at.is_some())
    );
    assert!(poll_urgent(fx.store.as_ref(), beta, fx.now()).await.is_none(), "claimed once");
    assert_eq!(fx.store.mail_counts(beta).await.unwrap().urgent, 2, "claimed is not yet delivered");

    let delivered =
        fx.store.mail_deliver(beta, &delivery(&[MailPriority::Urgent], 20), fx.now()).await.unwrap();
    assert_eq!(delivered.len(), 2, "claimed mail is delivered");
    assert!(delivered.iter().all(|mail| mail.lease_expires_at.is_none()));
    let report = fx.store.rescue(&LeasePolicy::default(), fx.now().plus_millis(10 * LEASE)).await.unwrap();
    assert!(report.mail_returned_to.is_empty(), "delivered mail never comes back");
    assert!(poll_urgent(fx.store.as_ref(), beta, fx.now()).await.is_none());
}

pub async fn mail_urgent_claim_returns_after_its_lease(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let (alpha, beta) = (fx.worker("alpha").await, fx.worker("beta").await);
    send(&fx, new_mail(alpha, beta, "help", MailPriority::Urgent)).await;
    let claimed_at = fx.now();
    assert!(poll_urgent(fx.store.as_ref(), beta, claimed_at).await.is_some());
    let policy = LeasePolicy::default();
    let early = fx.store.rescue(&policy, claimed_at.plus_millis(LEASE - 1)).await.unwrap();
    assert!(early.mail_returned_to.is_empty(), "the lease still runs");
    let beat = claimed_at.plus_millis(LEASE / 2);
    fx.store.agent_heartbeat(beta, beat, beat.plus_millis(LEASE)).await.unwrap();
    let extended = fx.store.rescue(&policy, claimed_at.plus_millis(LEASE + 1)).await.unwrap();
    assert!(extended.mail_returned_to.is_empty(), "the heartbeat extended it");
    let late = fx.store.rescue(&policy, beat.plus_millis(LEASE + 1)).await.unwrap();
    assert_eq!(late.mail_returned_to, vec![beta]);
    let again = poll_urgent(fx.store.as_ref(), beta, fx.now()).await.expect("claimable again");
    assert_eq!(subjects(&again), ["help"]);
}

pub async fn mail_concurrent_polls_never_share(store: Arc<dyn Store>) {
    let fx = Arc::new(Fixture::new(store));
    let (alpha, beta) = (fx.worker("alpha").await, fx.register("beta", false, 3).await.id);
    let mut sent = HashSet::new();
    for n in 0..40 {
        sent.insert(send(&fx, new_mail(alpha, beta, &format!("urgent {n}"), MailPriority::Urgent)).await.id);
    }
    let mut pollers = Vec::new();
    for _ in 0..8 {
        let fx = fx.clone();
        pollers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            while let Some(mail) = poll_urgent(fx.store.as_ref(), beta, fx.now()).await {
                mine.extend(mail.into_iter().map(|mail| mail.id));
                tokio::task::yield_now().await;
            }
            mine
        }));
    }
    let mut seen = Vec::new();
    for poller in pollers {
        seen.extend(poller.await.expect("poller"));
    }
    let unique: HashSet<MailId> = seen.iter().copied().collect();
    assert_eq!(unique.len(), seen.len(), "no mail claimed twice");
    assert_eq!(unique, sent, "every piece claimed");
}

pub async fn mail_concurrent_deliveries_never_share(store: Arc<dyn Store>) {
    let fx = Arc::new(Fixture::new(store));
    let (alpha, beta) = (fx.worker("alpha").await, fx.worker("beta").await);
    let mut sent = HashSet::new();
    for n in 0..40 {
        sent.insert(send(&fx, new_mail(alpha, beta, &format!("note {n}"), MailPriority::Normal)).await.id);
    }
    let mut readers = Vec::new();
    for _ in 0..8 {
        let fx = fx.clone();
        readers.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let got = fx.store.mail_deliver(beta, &delivery(&[], 3), fx.now()).await.expect("deliver");
                if got.is_empty() {
                    break mine;
                }
                mine.extend(got.into_iter().map(|mail| mail.id));
            }
        }));
    }
    let mut seen = Vec::new();
    for reader in readers {
        seen.extend(reader.await.expect("reader"));
    }
    let unique: HashSet<MailId> = seen.iter().copied().collect();
    assert_eq!(unique.len(), seen.len(), "no mail delivered twice");
    assert_eq!(unique, sent, "every piece delivered");
}

/// A runner's heartbeats extend the claims it took and those no runner holds, never a
/// crashed runner's of the same agent: those run out and come back.
pub async fn lead_side_claims_are_extended_only_by_their_runner(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let (alpha, lead) = (fx.worker("alpha").await, fx.register("lead", true, 1).await.id);
    let (crashed, alive) = (RunnerId::new_v7(), RunnerId::new_v7());
    send(&fx, new_mail(alpha, lead, "urgent", MailPriority::Urgent)).await;
    let mention = NewChatMessage {
        id: ChatMessageId::new_v7(),
        channel_id: ChannelId::general(),
        agent_id: Some(alpha),
        content: "@lead look".into(),
        reply_to_id: None,
        mentions: vec![lead],
        tasks: Vec::new(),
    };
    let _: ChatMessage = fx.store.chat_post(&mention, fx.now()).await.unwrap();
    let claimed_at = fx.now();
    let lease_until = claimed_at.plus_millis(LEASE);
    for kind in [TriggerKind::UrgentMail, TriggerKind::UnreadMentions] {
        let claimed = fx
            .store
            .poll_claim_for_runner(lead, &[kind], claimed_at, lease_until, Some(crashed))
            .await
            .unwrap();
        assert!(claimed.is_some(), "{kind:?} claimed by the first runner");
    }
    let beat = claimed_at.plus_millis(LEASE / 2);
    fx.store.agent_heartbeat_from_runner(lead, beat, beat.plus_millis(LEASE), Some(alive)).await.unwrap();
    fx.store.agent_heartbeat(lead, beat, beat.plus_millis(LEASE)).await.unwrap();
    let report = fx.store.rescue(&LeasePolicy::default(), claimed_at.plus_millis(LEASE + 1)).await.unwrap();
    assert_eq!(report.mail_returned_to, vec![lead], "another runner's heartbeat does not hold it");
    assert_eq!(report.mentions_returned_to, vec![lead]);

    // The claims of a runner that heartbeats stay.
    let now = fx.now();
    let until = now.plus_millis(LEASE);
    for kind in [TriggerKind::UrgentMail, TriggerKind::UnreadMentions] {
        assert!(
            fx.store.poll_claim_for_runner(lead, &[kind], now, until, Some(alive)).await.unwrap().is_some()
        );
    }
    let beat = now.plus_millis(LEASE / 2);
    fx.store.agent_heartbeat_from_runner(lead, beat, beat.plus_millis(LEASE), Some(alive)).await.unwrap();
    let report = fx.store.rescue(&LeasePolicy::default(), now.plus_millis(LEASE + 1)).await.unwrap();
    assert!(report.mail_returned_to.is_empty() && report.mentions_returned_to.is_empty(), "{report:?}");
}
