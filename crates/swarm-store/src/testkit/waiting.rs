//! The waiting pattern and an agent's status reason, on both backends: a reply to mail
//! its sender awaits wakes the sender (the `urgent_mail` claim) whatever its priority,
//! and is delivered at its next prompt even when low; a stop alert goes out once per set
//! of pending mail; a status reason is set, refused when unchanged, logged, and cleared
//! by the next claim of work.

use std::sync::Arc;

use crate::{Applied, Store};
use swarm_domain::{
    event::EventType,
    id::AgentId,
    mail::{Mail, MailDelivery, MailDraft, MailPriority, MailType, NewMail},
    poll::{Trigger, TriggerKind},
};

use super::{Fixture, of_type};

const LEASE: i64 = 60_000;

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_waiting {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            waiting,
            [
                a_reply_to_awaited_mail_wakes_its_sender_whatever_its_priority,
                a_stop_alert_goes_out_once_per_set_of_pending_mail,
                a_status_reason_is_set_logged_and_cleared_by_work,
            ],
            multi_thread: []
        );
    };
}

fn mail(from: AgentId, to: AgentId, subject: &str, priority: MailPriority, awaiting: bool) -> NewMail {
    let draft = MailDraft {
        mail_type: MailType::Question,
        subject: subject.into(),
        body: format!("body of {subject}"),
        priority,
        awaiting_response: awaiting,
        in_reply_to: None,
    };
    NewMail::parse(from, to, draft).expect("valid mail")
}

fn reply_to(original: &Mail, subject: &str, priority: MailPriority) -> NewMail {
    let draft = MailDraft {
        mail_type: MailType::Response,
        subject: subject.into(),
        body: "the answer".into(),
        priority,
        awaiting_response: false,
        in_reply_to: Some(original.id),
    };
    NewMail::parse(original.to_agent_id, original.from_agent_id, draft).expect("valid reply")
}

async fn waking(fx: &Fixture, agent: AgentId) -> Vec<String> {
    let now = fx.now();
    let view = fx.store.poll_view(agent).await.unwrap().expect("agent");
    let claimed = fx.store.poll_claim(agent, &[TriggerKind::UrgentMail], now, now.plus_millis(LEASE)).await;
    let subjects = match claimed.expect("poll_claim") {
        Some((_, Trigger::UrgentMail { mail, .. })) => mail.into_iter().map(|mail| mail.subject).collect(),
        None => Vec::new(),
        other => panic!("unexpected trigger {other:?}"),
    };
    assert_eq!(
        view.waiting.contains(&TriggerKind::UrgentMail),
        !subjects.is_empty(),
        "the poll's view and its claim agree"
    );
    subjects
}

pub async fn a_reply_to_awaited_mail_wakes_its_sender_whatever_its_priority(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let (asker, helper, other) =
        (fx.worker("asker").await, fx.worker("helper").await, fx.worker("other").await);
    let question = fx
        .store
        .mail_send(&mail(asker, helper, "which branch?", MailPriority::Low, true), fx.now())
        .await
        .unwrap();
    let fyi =
        fx.store.mail_send(&mail(asker, other, "fyi", MailPriority::Normal, false), fx.now()).await.unwrap();
    assert!(waking(&fx, helper).await.is_empty(), "a low question wakes nobody");

    // An answer to mail nobody waits on is ordinary mail.
    fx.store.mail_send(&reply_to(&fyi, "Re: fyi", MailPriority::Normal), fx.now()).await.unwrap();
    assert!(waking(&fx, asker).await.is_empty(), "nobody waited for that answer");

    fx.store.mail_send(&reply_to(&question, "Re: which branch?", MailPriority::Low), fx.now()).await.unwrap();
    assert_eq!(waking(&fx, asker).await, ["Re: which branch?"], "the awaited answer wakes the asker");
    assert!(waking(&fx, asker).await.is_empty(), "claimed once");

    // The next prompt's delivery (urgent and normal by default) includes it, low as it is.
    let second = fx
        .store
        .mail_send(&mail(asker, helper, "and the tag?", MailPriority::Low, true), fx.now())
        .await
        .unwrap();
    fx.store.mail_send(&reply_to(&second, "Re: and the tag?", MailPriority::Low), fx.now()).await.unwrap();
    let prompt = MailDelivery {
        ids: Vec::new(),
        priorities: vec![MailPriority::Urgent, MailPriority::Normal],
        include_waking: true,
        limit: 20,
    };
    let delivered = fx.store.mail_deliver(asker, &prompt, fx.now()).await.unwrap();
    let subjects: Vec<&str> = delivered.iter().map(|mail| mail.subject.as_str()).collect();
    assert!(subjects.contains(&"Re: and the tag?"), "{subjects:?}");
    assert!(subjects.contains(&"Re: which branch?"), "the claimed one is delivered too: {subjects:?}");
    assert!(subjects.contains(&"Re: fyi"), "{subjects:?}");
}

pub async fn a_stop_alert_goes_out_once_per_set_of_pending_mail(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let (worker, lead) = (fx.worker("worker").await, fx.register("lead", true, 1).await.id);
    let alert = || mail(worker, lead, "worker stopped", MailPriority::Urgent, false);
    let sent = fx.store.mail_stop_alert(worker, "k1", &alert(), fx.now()).await.unwrap();
    let sent = sent.expect("the first alert goes out");
    assert_eq!(sent.to_agent_id, lead);
    assert_eq!(waking(&fx, lead).await, ["worker stopped"], "an alert wakes the coordinator");
    assert!(
        fx.store.mail_stop_alert(worker, "k1", &alert(), fx.now()).await.unwrap().is_none(),
        "told already"
    );
    assert!(fx.store.mail_stop_alert(worker, "k2", &alert(), fx.now()).await.unwrap().is_some(), "news");
}

pub async fn a_status_reason_is_set_logged_and_cleared_by_work(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let worker = fx.worker("worker").await;
    assert_eq!(fx.agent(worker).await.status_reason, None);
    let why = "Claude Code exited at once 3 times: Invalid API key";
    match fx.store.agent_set_status_reason(worker, Some(why), fx.now()).await.unwrap() {
        Applied::Changed { before, after } => {
            assert_eq!(before.status_reason, None);
            assert_eq!(after.status_reason.as_deref(), Some(why));
        }
        other => panic!("expected a change, got {other:?}"),
    }
    assert!(matches!(
        fx.store.agent_set_status_reason(worker, Some(why), fx.now()).await.unwrap(),
        Applied::Refused { .. }
    ));
    assert!(matches!(
        fx.store.agent_set_status_reason(AgentId::new_v7(), Some(why), fx.now()).await.unwrap(),
        Applied::NotFound
    ));
    assert_eq!(fx.agent(worker).await.status_reason.as_deref(), Some(why));

    // Taking work again clears it, in the claim's transaction.
    fx.assigned_task("work again", worker).await;
    let now = fx.now();
    let claimed =
        fx.store.poll_claim(worker, &[TriggerKind::TaskAssigned], now, now.plus_millis(LEASE)).await;
    assert!(matches!(claimed.unwrap(), Some((TriggerKind::TaskAssigned, _))));
    assert_eq!(fx.agent(worker).await.status_reason, None, "cleared when it took work");
    let logged = fx.agent_events(worker).await;
    let reasons = of_type(&logged, EventType::AgentStatusReason);
    assert_eq!(reasons.len(), 2, "set and cleared: {reasons:?}");
}
