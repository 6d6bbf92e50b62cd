//! Which committed state the database is in, read from SQLite's shared memory without a
//! lock or a system call.
//!
//! In WAL mode every connection to a database, in every process, shares the wal-index
//! file `<db>-shm`. It begins with two copies of the wal-index header
//! (<https://www.sqlite.org/walformat.html#the_wal_index_header>), which a commit
//! rewrites as its last step, the second copy first. A reader that finds the two copies
//! equal has a header no writer is in the middle of; SQLite's own readers look at it the
//! same way before they take any lock (`walIndexTryHdr` in `wal.c`). Two of its fields
//! name the committed state: `mxFrame`, the WAL's last committed frame, which every commit
//! moves forward, and the first salt, which SQLite adds one to (big-endian) each time the
//! WAL starts over from its first frame. Salt first, frame second, they make a number that
//! grows with every commit made by any connection of any process.
//!
//! Before, the view cache read `PRAGMA data_version`, which opens a read transaction and
//! so takes and drops a lock on the file with `fcntl`, under a mutex shared by every poll:
//! about a fifth of an idle agent's poll. (The measurements are in BENCHMARKS.md.)
//!
//! The mapping is only read while this process has the database open: SQLite truncates
//! the file only when a connection finds itself the first one on the database, which it
//! cannot while any of ours is open.

use std::{
    path::Path,
    ptr::NonNull,
    sync::atomic::{AtomicU32, Ordering, fence},
};

/// `WALINDEX_MAX_VERSION` in `wal.c`: the header layout read here.
const WAL_INDEX_VERSION: u32 = 3_007_000;
/// A header copy, in 32-bit words: `iVersion`, padding, `iChange`, `isInit` with
/// `bigEndCksum` and `szPage`, `mxFrame`, `nPage`, two frame checksums, two salts, two
/// header checksums.
const HEADER_WORDS: usize = 12;
const MX_FRAME: usize = 4;
const FIRST_SALT: usize = 8;
/// The two header copies and the checkpoint information after them.
const MAPPED_BYTES: usize = 136;

/// A read-only view of the start of a database's `-shm` file.
pub(crate) struct WalIndex {
    header: NonNull<AtomicU32>,
}

// SAFETY: the mapping is shared memory that is only ever read, through atomics, and it
// lives as long as the value.
unsafe impl Send for WalIndex {}
// SAFETY: as above.
unsafe impl Sync for WalIndex {}

impl WalIndex {
    /// Without `mmap`, the view cache reads `PRAGMA data_version` instead.
    #[cfg(not(unix))]
    pub(crate) fn map(_database: &Path) -> Option<WalIndex> {
        None
    }

    /// Map the wal-index of the database at `database` (the path SQLite reports for the
    /// main database of a connection that has read in WAL mode); `None` when there is no
    /// such file of the expected size, e.g. a database not in WAL mode.
    #[cfg(unix)]
    pub(crate) fn map(database: &Path) -> Option<WalIndex> {
        use std::{fs::File, os::fd::AsRawFd};
        let mut shm = database.as_os_str().to_owned();
        shm.push("-shm");
        let file = File::open(shm).ok()?;
        if file.metadata().ok()?.len() < MAPPED_BYTES as u64 {
            return None;
        }
        // SAFETY: a fresh read-only shared mapping of a file at least MAPPED_BYTES long;
        // the result is checked before use. The file stays mapped after `file` closes.
        let address = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MAPPED_BYTES,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if address == libc::MAP_FAILED {
            return None;
        }
        let index = WalIndex { header: NonNull::new(address.cast())? };
        index.committed_state().is_some().then_some(index)
    }

    /// A number that changes with every commit to the database, by any connection of any
    /// process, and grows with them; `None` while a commit is rewriting the header (or the
    /// header is not one this code knows), when the caller must read the database itself.
    pub(crate) fn committed_state(&self) -> Option<u64> {
        let first = self.copy(0);
        // The writer writes the second copy first: read in the other order.
        fence(Ordering::Acquire);
        let second = self.copy(HEADER_WORDS);
        let initialised = first[3].to_ne_bytes()[0] == 1;
        if first != second || first[0] != WAL_INDEX_VERSION || !initialised {
            return None;
        }
        let salt = u32::from_be_bytes(first[FIRST_SALT].to_ne_bytes());
        Some(u64::from(salt) << 32 | u64::from(first[MX_FRAME]))
    }

    fn copy(&self, from_word: usize) -> [u32; HEADER_WORDS] {
        std::array::from_fn(|word| {
            // SAFETY: the words lie inside the mapping (2 × HEADER_WORDS × 4 < MAPPED_BYTES),
            // are 4-byte aligned (a mapping starts on a page) and other processes change
            // them, so they are read as atomics.
            unsafe { self.header.add(from_word + word).as_ref() }.load(Ordering::Relaxed)
        })
    }
}

impl Drop for WalIndex {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, not used after this.
        #[cfg(unix)]
        unsafe {
            libc::munmap(self.header.as_ptr().cast(), MAPPED_BYTES)
        };
    }
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::*;

    fn wal_database(path: &Path) -> Connection {
        let connection = Connection::open(path).unwrap();
        connection.pragma_update(None, "journal_mode", "WAL").unwrap();
        connection.execute_batch("CREATE TABLE notes (text TEXT)").unwrap();
        connection
    }

    #[test]
    fn every_commit_of_any_connection_moves_the_state_forward_and_reads_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let writer = wal_database(&path);
        let other = Connection::open(&path).unwrap();
        let index = WalIndex::map(Path::new(writer.path().unwrap())).expect("a WAL database has a wal-index");

        let mut state = index.committed_state().unwrap();
        for round in 0..3 {
            let _: i64 = other.query_row("SELECT count(*) FROM notes", [], |row| row.get(0)).unwrap();
            assert_eq!(index.committed_state(), Some(state), "a read commits nothing");
            let committer = if round % 2 == 0 { &writer } else { &other };
            committer.execute("INSERT INTO notes VALUES ('a')", []).unwrap();
            let next = index.committed_state().unwrap();
            assert!(next > state, "round {round}: {next} after {state}");
            state = next;
        }
    }

    #[test]
    fn the_state_still_grows_when_the_wal_starts_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("restart.db");
        let writer = wal_database(&path);
        writer.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        let index = WalIndex::map(Path::new(writer.path().unwrap())).unwrap();
        for _ in 0..20 {
            writer.execute("INSERT INTO notes VALUES ('a')", []).unwrap();
        }
        let before = index.committed_state().unwrap();
        // Everything copied back into the database: the next commit writes from frame 1.
        writer.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())).unwrap();
        writer.execute("INSERT INTO notes VALUES ('b')", []).unwrap();
        let after = index.committed_state().unwrap();
        assert!(after as u32 <= 2, "the WAL started over (last frame {})", after as u32);
        assert!(after > before, "{after} after {before}");
    }

    #[test]
    fn a_database_without_a_wal_index_has_none_to_map() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rollback.db");
        let connection = Connection::open(&path).unwrap();
        connection.execute_batch("CREATE TABLE notes (text TEXT)").unwrap();
        assert!(WalIndex::map(&path).is_none());
    }
}
