//! `swarm backup` and `swarm restore`: a consistent copy of a live database, and putting
//! one back in place when no process has the database open.
//!
//! The copy is `VACUUM INTO` on a read-only connection of its own: one read transaction,
//! so the copy is the database as of one commit, while the hub's writer goes on
//! committing beside it (WAL readers never block the writer). Nothing of the hub's
//! writer thread is involved; the only cost to a live hub is the I/O of the read and
//! that its checkpointer cannot recycle the WAL past the copy's snapshot until it ends.

use std::{
    fs::File,
    path::{Path, PathBuf},
    time::Duration,
};

use rusqlite::{Connection, OpenFlags};

/// Why a backup or a restore did not happen, in words for the person who asked.
#[derive(Debug)]
pub struct BackupError(String);

impl std::fmt::Display for BackupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BackupError {}

fn fail<T>(message: impl Into<String>) -> Result<T, BackupError> {
    Err(BackupError(message.into()))
}

/// What a backup or a restore copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopySummary {
    pub tasks: i64,
    pub bytes: u64,
    /// Restore only: where the database that was replaced was put aside.
    pub previous: Option<PathBuf>,
}

/// How long the copy's read transaction may wait for a lock (a checkpoint in a WAL
/// database never holds one long).
const BUSY: Duration = Duration::from_secs(10);

/// Copies the live database at `database` into the new file `destination`.
pub fn backup(database: &Path, destination: &Path) -> Result<CopySummary, BackupError> {
    if !database.is_file() {
        return fail(format!(
            "no database at {}: point --db (or DATABASE_PATH) at the hub's SQLite file",
            database.display()
        ));
    }
    // `symlink_metadata`: a symbolic link there, even a dangling one, is a file too.
    if destination.symlink_metadata().is_ok() {
        return fail(format!(
            "{} already exists: a backup never overwrites a file; choose a new name",
            destination.display()
        ));
    }
    let source = open_read_only(database)?;
    migrated_versions(&source, database)?;
    // Written beside the destination, then linked to its name: a backup that stops
    // halfway never leaves a file under the name an operator would restore from. The
    // partial file is created here, empty, new (`O_EXCL`: never a file or link someone
    // put there) under a name no one can guess, readable by its owner only before the
    // first byte of the database goes in; `VACUUM INTO` writes into an empty file.
    let (partial, _) = create_private_sibling(destination, "partial")?;
    let target = partial.to_str().ok_or_else(|| BackupError("the backup's path is not UTF-8".into()))?;
    if let Err(error) = source.execute("VACUUM INTO ?1", [target]) {
        let _ = std::fs::remove_file(&partial);
        return fail(format!("cannot copy {} into {}: {error}", database.display(), destination.display()));
    }
    drop(source);
    let summary = check_copy(&partial).inspect_err(|_| {
        let _ = std::fs::remove_file(&partial);
    })?;
    sync(&partial)?;
    publish(&partial, destination)?;
    sync_parent(destination);
    Ok(summary)
}

/// Gives the finished copy `partial` the name `destination`, which must still not exist:
/// a hard link fails on any file there (a symbolic link included, never followed), where
/// a rename would replace it. On a file system without hard links, a rename after a
/// last look.
fn publish(partial: &Path, destination: &Path) -> Result<(), BackupError> {
    let exists = || {
        fail(format!(
            "{} appeared while the backup was written: a backup never overwrites a file; choose a new name",
            destination.display()
        ))
    };
    match std::fs::hard_link(partial, destination) {
        Ok(()) => {
            let _ = std::fs::remove_file(partial);
            Ok(())
        }
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            let _ = std::fs::remove_file(partial);
            exists()
        }
        Err(_) if destination.symlink_metadata().is_ok() => {
            let _ = std::fs::remove_file(partial);
            exists()
        }
        Err(_) => std::fs::rename(partial, destination).or_else(|error| {
            let _ = std::fs::remove_file(partial);
            fail(format!("cannot name the backup {}: {error}", destination.display()))
        }),
    }
}

/// A new empty file beside `path`, `<path>.<what>-<random>`, created exclusively and
/// readable by its owner only.
fn create_private_sibling(path: &Path, what: &str) -> Result<(PathBuf, File), BackupError> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut last_error = None;
    for _ in 0..8 {
        let candidate = sibling(path, &format!("{what}-{}", unpredictable_suffix()));
        match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&candidate) {
            Ok(file) => return Ok((candidate, file)),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => last_error = Some(error),
            Err(error) => {
                return fail(format!("cannot create a file beside {}: {error}", path.display()));
            }
        }
    }
    fail(format!(
        "cannot create a file beside {}: {}",
        path.display(),
        last_error.map(|error| error.to_string()).unwrap_or_default()
    ))
}

/// 128 bits from the kernel as hex (the process id and the time if it cannot give them:
/// the file is still created exclusively).
fn unpredictable_suffix() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    match File::open("/dev/urandom").and_then(|mut random| random.read_exact(&mut bytes)) {
        Ok(()) => bytes.iter().map(|byte| format!("{byte:02x}")).collect(),
        Err(_) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|elapsed| elapsed.as_nanos())
                .unwrap_or(0);
            format!("{}-{nanos}", std::process::id())
        }
    }
}

/// Checks the backup at `backup` and puts it in place of `database`, which no process
/// may have open. The database it replaces is kept beside it, renamed.
pub fn restore(backup: &Path, database: &Path) -> Result<CopySummary, BackupError> {
    if !backup.is_file() {
        return fail(format!("no backup at {}", backup.display()));
    }
    check_backup(backup)?;
    if let Some(why) = in_use(database)? {
        return fail(format!(
            "{} is in use ({why}): stop every `swarm serve` and `swarm mcp` on it, then restore again",
            database.display()
        ));
    }
    // Staged in a new private file (the backup's own mode does not matter: the database
    // is 0600, as `swarm serve` creates it).
    let (staged, mut staging) = create_private_sibling(database, "restoring")?;
    File::open(backup).and_then(|mut from| std::io::copy(&mut from, &mut staging)).or_else(|error| {
        let _ = std::fs::remove_file(&staged);
        fail(format!("cannot copy the backup next to {}: {error}", database.display()))
    })?;
    drop(staging);
    let summary = check_copy(&staged).inspect_err(|_| {
        let _ = std::fs::remove_file(&staged);
    })?;
    sync(&staged)?;
    let previous = if database.exists() { Some(set_aside(database)?) } else { None };
    std::fs::rename(&staged, database).or_else(|error| {
        fail(format!("cannot put the backup in place at {}: {error}", database.display()))
    })?;
    sync_parent(database);
    Ok(CopySummary { previous, ..summary })
}

/// `PRAGMA integrity_check` and the migrations table: a file this binary can serve.
pub fn check_backup(backup: &Path) -> Result<(), BackupError> {
    let connection = open_read_only(backup)?;
    let problems: Vec<String> = connection
        .prepare("PRAGMA integrity_check")
        .and_then(|mut statement| statement.query_map([], |row| row.get(0))?.collect())
        .or_else(|error| fail(format!("{} is not a readable SQLite database: {error}", backup.display())))?;
    if problems != ["ok"] {
        let shown: Vec<&str> = problems.iter().take(5).map(String::as_str).collect();
        return fail(format!("{} fails its integrity check: {}", backup.display(), shown.join("; ")));
    }
    migrated_versions(&connection, backup)?;
    Ok(())
}

fn open_read_only(path: &Path) -> Result<Connection, BackupError> {
    let connection = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY)
        .or_else(|error| fail(format!("cannot open {}: {error}", path.display())))?;
    connection
        .busy_timeout(BUSY)
        .or_else(|error| fail(format!("cannot open {}: {error}", path.display())))?;
    Ok(connection)
}

/// The migrations applied to the file, checked against the ones this binary carries: a
/// file from a newer swarm, or one whose migration differs, is refused (this binary
/// would misread it); an older one is fine, `swarm serve` brings it up to date.
fn migrated_versions(connection: &Connection, path: &Path) -> Result<usize, BackupError> {
    let not_swarm = |error: rusqlite::Error| {
        BackupError(format!("{} is not a swarm database (no migrations table: {error})", path.display()))
    };
    let applied: Vec<(i64, bool, Vec<u8>)> = connection
        .prepare("SELECT version, success, checksum FROM _sqlx_migrations ORDER BY version")
        .and_then(|mut statement| {
            statement.query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))?.collect()
        })
        .map_err(not_swarm)?;
    if applied.is_empty() {
        return fail(format!("{} is not a swarm database: no migration was ever applied", path.display()));
    }
    let migrator = sqlx::migrate!("./migrations");
    for (version, success, checksum) in &applied {
        if !success {
            return fail(format!("{}: migration {version} did not finish", path.display()));
        }
        let known = migrator
            .migrations
            .iter()
            .find(|migration| migration.version == *version && migration.migration_type.is_up_migration());
        match known {
            None => {
                return fail(format!(
                    "{}: migration {version} is unknown to this swarm {}; restore it with the swarm that made it",
                    path.display(),
                    env!("CARGO_PKG_VERSION")
                ));
            }
            Some(migration) if migration.checksum.as_ref() != checksum.as_slice() => {
                return fail(format!("{}: migration {version} differs from this swarm's", path.display()));
            }
            Some(_) => {}
        }
    }
    Ok(applied.len())
}

/// Integrity and task count of a copy just written.
fn check_copy(path: &Path) -> Result<CopySummary, BackupError> {
    check_backup(path)?;
    let connection = open_read_only(path)?;
    let tasks = connection
        .query_row("SELECT count(*) FROM tasks", [], |row| row.get(0))
        .or_else(|error| fail(format!("{}: cannot count its tasks: {error}", path.display())))?;
    let bytes = std::fs::metadata(path).map(|metadata| metadata.len()).unwrap_or(0);
    Ok(CopySummary { tasks, bytes, previous: None })
}

/// Whether any process (this one included) has the database open, and how we know.
///
/// Every connection to a WAL database holds a shared lock on one byte of its `-shm`
/// file (SQLite's "DMS" byte, offset 128 in the unix VFS) for as long as it is open,
/// idle or not, so a test for a conflicting write lock on that byte finds any open
/// hub, `swarm mcp` or `sqlite3` shell. Open-file-description locks (Linux) see this
/// process's own locks too. A database file with no `-shm` has no WAL connection; we
/// also test SQLite's lock bytes on the file itself, for a connection in rollback mode.
/// When a test cannot be made, we answer "in use": refusing is safe, guessing is not.
///
/// For a process that has no connection to `database` (the `swarm restore` command):
/// closing the descriptor opened here would drop this process's own SQLite locks on
/// the file, as closing any descriptor drops a process's POSIX locks.
pub fn in_use(database: &Path) -> Result<Option<String>, BackupError> {
    const DMS_BYTE: i64 = 128;
    // SQLite's PENDING byte and the SHARED range after it (os_unix.c).
    const PENDING_BYTE: i64 = 0x4000_0000;
    const LOCK_RANGE: i64 = 2 + 510;
    let shm = sibling_suffix(database, "-shm");
    if shm.exists() && locked(&shm, DMS_BYTE, 1)? {
        return Ok(Some(format!("a process holds its {} open", shm.display())));
    }
    if database.exists() && locked(database, PENDING_BYTE, LOCK_RANGE)? {
        return Ok(Some("a process holds a lock on it".into()));
    }
    Ok(None)
}

#[cfg(unix)]
fn locked(path: &Path, start: i64, len: i64) -> Result<bool, BackupError> {
    use std::os::fd::AsRawFd;
    // Read and write, so that a write lock may be asked about; nothing is written.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .or_else(|error| fail(format!("cannot tell whether {} is in use: {error}", path.display())))?;
    // SAFETY: a zeroed `flock` is a valid value of this plain C struct.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as _;
    lock.l_whence = libc::SEEK_SET as _;
    lock.l_start = start as _;
    lock.l_len = len as _;
    #[cfg(target_os = "linux")]
    let command = libc::F_OFD_GETLK;
    #[cfg(not(target_os = "linux"))]
    let command = libc::F_GETLK;
    // SAFETY: the descriptor is open for the call's duration and `lock` is a valid
    // `flock` that the kernel only writes into.
    let result = unsafe { libc::fcntl(file.as_raw_fd(), command, &mut lock) };
    if result == -1 {
        let error = std::io::Error::last_os_error();
        return fail(format!("cannot tell whether {} is in use: {error}", path.display()));
    }
    Ok(i32::from(lock.l_type) != libc::F_UNLCK)
}

#[cfg(not(unix))]
fn locked(path: &Path, _start: i64, _len: i64) -> Result<bool, BackupError> {
    fail(format!(
        "cannot tell whether {} is in use on this system: stop the hub and copy it by hand",
        path.display()
    ))
}

/// Moves the database being replaced (after folding its WAL into it) to
/// `<name>.before-restore-<unix seconds>`, and removes its `-wal` and `-shm`, which
/// would otherwise be read as part of the restored file.
fn set_aside(database: &Path) -> Result<PathBuf, BackupError> {
    let connection = Connection::open(database)
        .or_else(|error| fail(format!("cannot open {} to set it aside: {error}", database.display())))?;
    connection
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .or_else(|error| fail(format!("cannot checkpoint {}: {error}", database.display())))?;
    drop(connection);
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0);
    let aside = sibling(database, &format!("before-restore-{seconds}"));
    std::fs::rename(database, &aside)
        .or_else(|error| fail(format!("cannot set {} aside: {error}", database.display())))?;
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(sibling_suffix(database, suffix));
    }
    Ok(aside)
}

/// `<path>.<extension>` in the same directory.
fn sibling(path: &Path, extension: &str) -> PathBuf {
    sibling_suffix(path, &format!(".{extension}"))
}

fn sibling_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn sync(path: &Path) -> Result<(), BackupError> {
    File::open(path)
        .and_then(|file| file.sync_all())
        .or_else(|error| fail(format!("cannot flush {} to disk: {error}", path.display())))
}

/// The rename is durable once the directory is flushed; failing that is not worth
/// failing a copy that is complete.
fn sync_parent(path: &Path) {
    if let Some(parent) = path.parent().filter(|parent| !parent.as_os_str().is_empty()) {
        let _ = File::open(parent).and_then(|directory| directory.sync_all());
    }
}
