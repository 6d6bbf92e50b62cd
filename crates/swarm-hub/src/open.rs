//! Opening the store the flags name: a `postgres://` URL, a `sqlite:` URL or a file.

use std::{path::Path, sync::Arc};

use swarm_store::Store;
use swarm_store_postgres::PgStore;
use swarm_store_sqlite::SqliteStore;

use crate::{DatabaseArgs, HubError};

/// The store, and a line describing it for the start-up message.
pub async fn open_store(args: &DatabaseArgs) -> Result<(Arc<dyn Store>, String), HubError> {
    match args.database_url.as_deref().filter(|url| !url.is_empty()) {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            let store = PgStore::connect(url).await.map_err(|source| HubError::OpenStore {
                what: "PostgreSQL database".into(),
                hint: "check DATABASE_URL and that the server is up",
                source,
            })?;
            let description = store.describe();
            Ok((Arc::new(store), description))
        }
        Some(url) => match url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) {
            Some(path) => open_sqlite(Path::new(path)).await,
            None => Err(HubError::DatabaseUrl),
        },
        None => open_sqlite(&args.db).await,
    }
}

pub async fn open_sqlite(path: &Path) -> Result<(Arc<dyn Store>, String), HubError> {
    let store = SqliteStore::open(path).await.map_err(|source| HubError::OpenStore {
        what: format!("SQLite database {}", path.display()),
        hint: "check the path and its permissions",
        source,
    })?;
    let description = store.describe();
    Ok((Arc::new(store), description))
}

/// The SQLite file the flags name, for the commands that work on the file itself
/// (`swarm backup`, `swarm restore`); PostgreSQL has tools of its own for that.
pub fn sqlite_path(args: &DatabaseArgs) -> Result<std::path::PathBuf, HubError> {
    match args.database_url.as_deref().filter(|url| !url.is_empty()) {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            Err(HubError::NotSqlite)
        }
        Some(url) => match url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) {
            Some(path) => Ok(path.into()),
            None => Err(HubError::DatabaseUrl),
        },
        None => Ok(args.db.clone()),
    }
}

/// `swarm backup`: a consistent copy of the (possibly live) database into `file`.
pub async fn backup(args: &DatabaseArgs, file: &Path) -> Result<swarm_store_sqlite::CopySummary, HubError> {
    let database = sqlite_path(args)?;
    let file = file.to_path_buf();
    // The copy is blocking file work: keep it off the runtime's workers.
    tokio::task::spawn_blocking(move || swarm_store_sqlite::backup(&database, &file))
        .await
        .map_err(|join| HubError::Serve(std::io::Error::other(join)))?
        .map_err(HubError::Backup)
}

/// `swarm restore`: checks `file` and puts it in place of the database, which no
/// process may have open.
pub async fn restore(args: &DatabaseArgs, file: &Path) -> Result<swarm_store_sqlite::CopySummary, HubError> {
    let database = sqlite_path(args)?;
    let file = file.to_path_buf();
    tokio::task::spawn_blocking(move || swarm_store_sqlite::restore(&file, &database))
        .await
        .map_err(|join| HubError::Serve(std::io::Error::other(join)))?
        .map_err(HubError::Backup)
}
