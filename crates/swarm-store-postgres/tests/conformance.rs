//! The store conformance suite (`swarm_store::testkit`) on PostgreSQL.
//!
//! Each test gets a new database `swarm_test_<uuid>` on the cluster named by
//! `SWARM_TEST_POSTGRES_URL`. Without that variable every test fails, naming it: a
//! suite that passes by skipping would report work it did not do.

use std::sync::Arc;

use swarm_store::Store;
use swarm_store_postgres::PgStore;

mod support;

async fn fresh_store() -> (Arc<dyn Store>, ()) {
    let database_url = support::fresh_database_url().await;
    let store = PgStore::connect(&database_url)
        .await
        .unwrap_or_else(|err| panic!("connect the PostgreSQL store to {database_url}: {err}"));
    (Arc::new(store), ())
}

swarm_store::store_conformance!(postgres, fresh_store);
