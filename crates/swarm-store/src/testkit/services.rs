//! The services registry: an upsert per agent and name, filters, guarded status
//! changes, unregistering, each logged.

use std::{collections::BTreeMap, sync::Arc};

use crate::{Applied, ServiceFilter, Store, StoreError};
use swarm_domain::{
    event::EventType,
    id::{AgentId, ServiceId},
    registry::{ServiceDraft, ServiceStatus},
};

use super::{Fixture, of_type};

/// The tests of this module, for [`crate::store_conformance!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __store_conformance_services {
    ($fresh:ident) => {
        $crate::__store_conformance_area!(
            $fresh,
            services,
            [registering_again_updates_the_same_service, status_changes_are_guarded_and_unregistering_logs],
            multi_thread: []
        );
    };
}

fn web(name: &str, port: i64) -> ServiceDraft {
    ServiceDraft {
        name: Some(name.to_string()),
        port: Some(port),
        script: "server.js".into(),
        cwd: Some("/srv/app".into()),
        interpreter: Some("node".into()),
        args: Some(vec!["--port".into(), port.to_string()]),
        env: Some(BTreeMap::from([("MODE".to_string(), "dev".to_string())])),
        metadata: Some(serde_json::json!({"team": "web", "nested": {"n": 1}})),
        ..ServiceDraft::default()
    }
}

pub async fn registering_again_updates_the_same_service(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let alice = fx.worker("alice").await;
    let bob = fx.worker("bob").await;
    let first = fx.store.service_upsert(&web("site", 3000).parse(alice).unwrap(), fx.now()).await.unwrap();
    assert_eq!((first.status, first.port, first.agent_id), (ServiceStatus::Starting, 3000, alice));
    assert_eq!(first.args.as_deref(), Some(&["--port".to_string(), "3000".to_string()][..]));
    assert_eq!(first.env.as_ref().and_then(|env| env.get("MODE")).map(String::as_str), Some("dev"));
    assert_eq!(first.metadata["nested"]["n"], 1);
    assert_eq!(fx.store.service_get(first.id).await.unwrap().as_ref(), Some(&first));

    let changed = fx.store.service_set_status(
        first.id,
        ServiceStatus::Starting,
        ServiceStatus::Healthy,
        Some(alice),
        fx.now(),
    );
    assert!(matches!(changed.await.unwrap(), Applied::Changed { .. }));
    let again = fx.store.service_upsert(&web("site", 4000).parse(alice).unwrap(), fx.now()).await.unwrap();
    assert_eq!(again.id, first.id, "the same service, updated");
    assert_eq!(
        (again.port, again.status, again.created_at),
        (4000, ServiceStatus::Healthy, first.created_at)
    );
    assert!(again.last_updated_at > first.last_updated_at);

    // Same name, other agent: another service.
    let bobs = fx.store.service_upsert(&web("site", 5000).parse(bob).unwrap(), fx.now()).await.unwrap();
    assert_ne!(bobs.id, first.id);
    let other = fx.store.service_upsert(&web("api", 6000).parse(alice).unwrap(), fx.now()).await.unwrap();
    let names = |filter: ServiceFilter| {
        let store = fx.store.clone();
        async move {
            store
                .service_list(&filter)
                .await
                .unwrap()
                .into_iter()
                .map(|service| service.id)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(names(ServiceFilter::default()).await.len(), 3);
    assert_eq!(
        names(ServiceFilter { agent_id: Some(alice), ..ServiceFilter::default() }).await,
        [other.id, first.id],
        "by name within an agent"
    );
    assert_eq!(
        names(ServiceFilter { status: Some(ServiceStatus::Healthy), ..ServiceFilter::default() }).await,
        [first.id]
    );
    assert_eq!(
        names(ServiceFilter { name: Some("AP".into()), ..ServiceFilter::default() }).await,
        [other.id]
    );

    let stranger = web("x", 1).parse(AgentId::new_v7()).unwrap();
    assert!(matches!(
        fx.store.service_upsert(&stranger, fx.now()).await,
        Err(StoreError::MissingReference(_))
    ));
    let registered = of_type(&fx.agent_events(alice).await, EventType::ServiceRegistered).len();
    assert_eq!(registered, 3, "each registration is logged");
}

pub async fn status_changes_are_guarded_and_unregistering_logs(store: Arc<dyn Store>) {
    let fx = Fixture::new(store);
    let alice = fx.worker("alice").await;
    let service = fx.store.service_upsert(&web("site", 3000).parse(alice).unwrap(), fx.now()).await.unwrap();
    let Applied::Changed { after, .. } = fx
        .store
        .service_set_status(
            service.id,
            ServiceStatus::Starting,
            ServiceStatus::Unhealthy,
            Some(alice),
            fx.now(),
        )
        .await
        .unwrap()
    else {
        panic!("changed");
    };
    assert_eq!(after.status, ServiceStatus::Unhealthy);
    // A change read before that one: refused, nothing changes.
    let stale = fx
        .store
        .service_set_status(
            service.id,
            ServiceStatus::Starting,
            ServiceStatus::Healthy,
            Some(alice),
            fx.now(),
        )
        .await
        .unwrap();
    assert_eq!(stale, Applied::Refused { current: after.clone() });
    assert_eq!(fx.store.service_get(service.id).await.unwrap(), Some(after));
    let unknown = ServiceId::new_v7();
    let missing =
        fx.store.service_set_status(unknown, ServiceStatus::Starting, ServiceStatus::Healthy, None, fx.now());
    assert_eq!(missing.await.unwrap(), Applied::NotFound);
    let events = fx.agent_events(alice).await;
    let changes = of_type(&events, EventType::ServiceStatusChange);
    assert_eq!(changes.len(), 1);
    assert_eq!(
        (changes[0].old_value.as_deref(), changes[0].new_value.as_deref()),
        (Some("starting"), Some("unhealthy"))
    );

    let removed = fx.store.service_delete(service.id, Some(alice), fx.now()).await.unwrap().expect("deleted");
    assert_eq!(removed.id, service.id);
    assert_eq!(fx.store.service_get(service.id).await.unwrap(), None);
    assert_eq!(fx.store.service_delete(service.id, Some(alice), fx.now()).await.unwrap(), None);
    assert_eq!(of_type(&fx.agent_events(alice).await, EventType::ServiceUnregistered).len(), 1);
}
