//! Opening the store the flags name: a `postgres://` URL, a `sqlite:` URL or a file.

use std::{
    os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::Arc,
};

use swarm_store::Store;
use swarm_store_postgres::PgStore;
use swarm_store_sqlite::{SqliteOptions, SqliteStore};

use crate::{DatabaseArgs, HubError, HubKey};

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
            Some(path) => open_sqlite(Path::new(path), sqlite_options(args)).await,
            None => Err(HubError::DatabaseUrl),
        },
        None => open_sqlite(&args.db, sqlite_options(args)).await,
    }
}

fn sqlite_options(args: &DatabaseArgs) -> SqliteOptions {
    SqliteOptions { wal_batching: args.sqlite_wal_batching }
}

pub async fn open_sqlite(path: &Path, options: SqliteOptions) -> Result<(Arc<dyn Store>, String), HubError> {
    create_private(path).map_err(|source| HubError::OpenStore {
        what: format!("SQLite database {}", path.display()),
        hint: "check the path and its permissions",
        source: swarm_store::StoreError::Backend(Box::new(source)),
    })?;
    let store = SqliteStore::open_with(path, options).await.map_err(|source| HubError::OpenStore {
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

/// A new database file, empty and readable by its owner only, before SQLite opens it:
/// SQLite creates the `-wal` and `-shm` files with the main file's permissions, so all
/// three stay 0600 (they hold webhook secrets, tokens' hashes, every task). A folder it
/// has to create is 0700. An existing file is left as it is (see [`at_rest_lines`]).
pub(crate) fn create_private(path: &Path) -> std::io::Result<()> {
    if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty())
        && !parent.exists()
    {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(parent)?;
    }
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(error),
    }
}

/// What the hub's banner says about its files and the secrets in them: a warning for a
/// SQLite database (or its `-wal`/`-shm`) that other users can read, with the `chmod` to
/// run; the files it asked git to ignore; whether webhook secrets and `env` values are
/// sealed (and how many clear ones from before it just sealed).
pub(crate) async fn at_rest_lines(
    service: &swarm_service::Service,
    database: &DatabaseArgs,
    hub_key: &HubKey,
) -> Vec<String> {
    let mut lines = Vec::new();
    if let Ok(path) = sqlite_path(database) {
        let files: Vec<PathBuf> = ["", "-wal", "-shm"]
            .iter()
            .map(|suffix| {
                let mut name = path.as_os_str().to_owned();
                name.push(suffix);
                PathBuf::from(name)
            })
            .filter(|file| {
                std::fs::metadata(file).is_ok_and(|metadata| metadata.permissions().mode() & 0o077 != 0)
            })
            .collect();
        if !files.is_empty() {
            let names: Vec<String> =
                files.iter().map(|file| shell_word(&file.display().to_string())).collect();
            lines.push(format!(
                "WARNING: other users on this machine can read the database ({}), with every task and \
                 the hub's secrets: run `chmod 600 {}`",
                names.join(", "),
                names.join(" ")
            ));
        }
        let mut ignored = Vec::new();
        if let Some(exclude) = exclude_from_git(&path, "*") {
            ignored.push(exclude);
        }
        if let HubKey::Stored { file, .. } = hub_key
            && let Some(exclude) = exclude_from_git(file, "")
        {
            ignored.push(exclude);
        }
        if let Some(exclude) = ignored.first() {
            lines.push(format!(
                "git: the database and key files are in a git work tree; {} now ignores them",
                exclude.display()
            ));
        }
    } else if let HubKey::Stored { file, .. } = hub_key
        && let Some(exclude) = exclude_from_git(file, "")
    {
        lines.push(format!("git: the key file is in a git work tree; {} now ignores it", exclude.display()));
    }
    if !service.seals_secrets() {
        lines.push(
            "WARNING: without an API key, webhook secrets and services' env values are stored in clear"
                .to_string(),
        );
        return lines;
    }
    match service.seal_stored_secrets().await {
        Ok((0, 0)) => {}
        Ok((triggers, services)) => lines.push(format!(
            "secrets: sealed the clear webhook secrets of {triggers} trigger(s) and env values of \
             {services} service(s) under the operator key"
        )),
        Err(error) => lines.push(format!("WARNING: could not seal the secrets stored in clear: {error}")),
    }
    lines
}

fn shell_word(word: &str) -> String {
    if word.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:@".contains(c)) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// When `file` lies in a git work tree and git does not ignore it yet, adds `/<its path
/// in the tree><suffix>` to the repository's `.git/info/exclude` (local, never committed)
/// so that `git add -A` cannot commit the hub's key or database. Returns the exclude file
/// when it added a line; does nothing without git or outside a work tree.
pub(crate) fn exclude_from_git(file: &Path, suffix: &str) -> Option<PathBuf> {
    let dir = file.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let dir = std::fs::canonicalize(dir).ok()?;
    let name = file.file_name()?;
    if git(&dir, &["rev-parse", "--is-inside-work-tree"]).as_deref() != Some("true") {
        return None;
    }
    let ignored = Command::new("git")
        .arg("-C")
        .arg(&dir)
        .args(["check-ignore", "-q", "--no-index", "--"])
        .arg(name)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    if ignored.success() {
        return None;
    }
    let top = PathBuf::from(git(&dir, &["rev-parse", "--show-toplevel"])?);
    let top = std::fs::canonicalize(&top).unwrap_or(top);
    let inside = dir.join(name);
    let inside = inside.strip_prefix(&top).ok()?;
    let mut pattern = String::from("/");
    let parts: Vec<String> = inside.iter().map(|part| glob_escape(&part.to_string_lossy())).collect();
    pattern.push_str(&parts.join("/"));
    pattern.push_str(suffix);
    let exclude = dir.join(git(&dir, &["rev-parse", "--git-path", "info/exclude"])?);
    if let Some(parent) = exclude.parent() {
        std::fs::create_dir_all(parent).ok()?;
    }
    let before = std::fs::read_to_string(&exclude).unwrap_or_default();
    let separator = if before.is_empty() || before.ends_with('\n') { "" } else { "\n" };
    let mut out = std::fs::OpenOptions::new().create(true).append(true).open(&exclude).ok()?;
    std::io::Write::write_all(
        &mut out,
        format!("{separator}# swarm serve: the hub's database and key, never to be committed\n{pattern}\n")
            .as_bytes(),
    )
    .ok()?;
    Some(exclude)
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim_end().to_string())
}

/// A file name as a gitignore pattern that matches it literally.
fn glob_escape(name: &str) -> String {
    let mut escaped = String::new();
    for (index, c) in name.chars().enumerate() {
        if matches!(c, '*' | '?' | '[' | '\\') || (index == 0 && matches!(c, '#' | '!')) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}
