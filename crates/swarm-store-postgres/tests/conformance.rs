//! The store conformance suite (`swarm_store::testkit`) on PostgreSQL.
//!
//! Each test gets a new database `swarm_test_<uuid>` on the cluster named by
//! `SWARM_TEST_POSTGRES_URL`, dropped when the test ends. Without that variable every test fails, naming it: a
//! suite that passes by skipping would report work it did not do.

use std::sync::Arc;

use swarm_store::Store;
use swarm_store_postgres::PgStore;

mod support;

/// A store on a new database; the database goes with the guard, after the test's store.
async fn fresh_store() -> (Arc<dyn Store>, support::FreshDatabase) {
    let database = support::fresh_database().await;
    let store = PgStore::connect(&database.url)
        .await
        .unwrap_or_else(|err| panic!("connect the PostgreSQL store to {}: {err}", database.url));
    (Arc::new(store), database)
}

swarm_store::store_conformance!(postgres, fresh_store);
