//! Which committed state the database is in, read from SQLite's shared memory without a
//! lock or a system call.
//!
//! In WAL mode every connection to a database, in every process, shares the wal-index
//! (`<db>-shm`). It begins with two copies of the wal-index header
//! (<https://www.sqlite.org/walformat.html#the_wal_index_header>), which a commit
//! rewrites as its last step, the second copy first. A reader that finds the two copies
//! equal and their checksum right has a header no writer is in the middle of; SQLite's
//! own readers look at it the same way before they take any lock (`walIndexTryHdr` in
//! `wal.c`). Every commit, by any connection of any process, writes a new header: its
//! `mxFrame` (the WAL's last committed frame) moves forward, and when the WAL starts over
//! from its first frame its salts change, the second to a fresh random number; SQLite
//! itself tells WAL generations apart by those salts. So two equal headers name the same
//! committed state, and a changed header means something committed (or the WAL started
//! over, which changes nothing but costs a read).
//!
//! The header is read through SQLite's own mapping of the file, which a connection keeps
//! while it is open (`xShmMap`). Mapping it again would mean opening the file, and closing
//! any descriptor of a file drops every POSIX lock the process holds on it, SQLite's
//! included.
//!
//! Before, the view cache read `PRAGMA data_version`, which opens a read transaction and
//! so takes and drops a lock on the file with `fcntl`, under a mutex shared by every poll:
//! about a fifth of an idle agent's poll (BENCHMARKS.md).

use std::{
    ffi::c_void,
    ptr::NonNull,
    sync::atomic::{AtomicU32, Ordering, fence},
};

use rusqlite::{Connection, ffi};

/// `WALINDEX_MAX_VERSION` in `wal.c`: the header layout read here.
const WAL_INDEX_VERSION: u32 = 3_007_000;
/// `WALINDEX_PGSZ` in `wal.c`: the size of each region of the wal-index.
const REGION_BYTES: i32 = 32_768;
/// A header copy, in 32-bit words: `iVersion`, padding, `iChange`, `isInit` with
/// `bigEndCksum` and `szPage`, `mxFrame`, `nPage`, two frame checksums, two salts, and
/// the two words of the checksum over the ten before them.
pub(crate) const HEADER_WORDS: usize = 12;
const CHECKSUMMED_WORDS: usize = 10;
/// The first word of the copy that a commit writes second and a reader reads first.
const SECOND_COPY: usize = HEADER_WORDS;

/// A valid wal-index header: equal ones name the same committed state.
pub(crate) type Header = [u32; HEADER_WORDS];

/// The start of the wal-index of one connection's database, as SQLite mapped it for that
/// connection; valid while the connection is open.
pub(crate) struct WalIndex {
    region: NonNull<AtomicU32>,
}

// SAFETY: the region is shared memory that is only ever read here, through atomics; the
// owner keeps the connection that holds it open for as long as the value is used.
unsafe impl Send for WalIndex {}
// SAFETY: as above.
unsafe impl Sync for WalIndex {}

impl WalIndex {
    /// The wal-index of `connection`'s main database, which must be in WAL mode and have
    /// read (which maps it); `None` where SQLite has none mapped for it.
    ///
    /// # Safety
    ///
    /// The result points into memory that SQLite unmaps when the last connection of this
    /// process to the database closes: the caller must keep `connection` open, and not
    /// change its journal mode, while it uses the result.
    pub(crate) unsafe fn of(connection: &Connection) -> Option<WalIndex> {
        let mut file: *mut ffi::sqlite3_file = std::ptr::null_mut();
        // SAFETY: a valid handle, and the out pointer has the type this opcode writes.
        let found = unsafe {
            ffi::sqlite3_file_control(
                connection.handle(),
                c"main".as_ptr(),
                ffi::SQLITE_FCNTL_FILE_POINTER,
                (&raw mut file).cast::<c_void>(),
            )
        };
        if found != ffi::SQLITE_OK || file.is_null() {
            return None;
        }
        // SAFETY: SQLite gave an open file; its methods outlive it.
        let methods = unsafe { (*file).pMethods.as_ref() }?;
        let map = if methods.iVersion >= 2 { methods.xShmMap? } else { return None };
        let mut region: *mut c_void = std::ptr::null_mut();
        // SAFETY: region 0 of the size SQLite uses, without extending the file: SQLite
        // answers its existing mapping (or null), under its own mutex.
        let mapped = unsafe { map(file, 0, REGION_BYTES, 0, (&raw mut region).cast()) };
        if mapped != ffi::SQLITE_OK {
            return None;
        }
        let index = WalIndex { region: NonNull::new(region.cast())? };
        // A commit may be rewriting the header this very moment: look again.
        (0..100).any(|_| index.header().is_some()).then_some(index)
    }

    /// The header as it is now; `None` while a commit is rewriting it (or if it is not
    /// one this code knows), when the caller must read the database itself.
    pub(crate) fn header(&self) -> Option<Header> {
        let first = self.copy(0);
        // The writer writes the second copy, then the first: read the other way round.
        fence(Ordering::Acquire);
        let second = self.copy(SECOND_COPY);
        let initialised = first[3].to_ne_bytes()[0] == 1;
        let valid = first == second
            && first[0] == WAL_INDEX_VERSION
            && initialised
            && checksum(&first[..CHECKSUMMED_WORDS]) == [first[10], first[11]];
        valid.then_some(first)
    }

    fn copy(&self, from_word: usize) -> Header {
        std::array::from_fn(|word| {
            // SAFETY: both copies lie inside the region's first 96 bytes, 4-byte aligned
            // (a mapping starts on a page); other processes change them, so they are read
            // as atomics.
            unsafe { self.region.add(from_word + word).as_ref() }.load(Ordering::Relaxed)
        })
    }
}

/// `walChecksumBytes` in native byte order, as SQLite computes the header's checksum.
fn checksum(words: &[u32]) -> [u32; 2] {
    let (mut s1, mut s2) = (0u32, 0u32);
    for pair in words.chunks_exact(2) {
        s1 = s1.wrapping_add(pair[0]).wrapping_add(s2);
        s2 = s2.wrapping_add(pair[1]).wrapping_add(s1);
    }
    [s1, s2]
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn wal_database(path: &std::path::Path) -> Connection {
        let connection = Connection::open(path).unwrap();
        connection.pragma_update(None, "journal_mode", "WAL").unwrap();
        connection.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        connection.execute_batch("CREATE TABLE notes (text TEXT)").unwrap();
        connection
    }

    fn watch(connection: &Connection) -> WalIndex {
        let _: i64 = connection.query_row("PRAGMA data_version", [], |row| row.get(0)).unwrap();
        // SAFETY: the connection outlives the index in each test.
        unsafe { WalIndex::of(connection) }.expect("a WAL database has a wal-index")
    }

    /// Every commit, by this connection or another, however the WAL started over in
    /// between (this connection's own restart, another's `TRUNCATE` checkpoint), gives a
    /// header never seen before; reads and checkpoints that copy without starting over
    /// leave it as it is.
    #[test]
    fn every_commit_of_any_connection_gives_a_new_header_and_nothing_else_does() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.db");
        let writer = wal_database(&path);
        let other = Connection::open(&path).unwrap();
        let index = watch(&other);

        let mut seen = HashSet::new();
        let mut header = index.header().unwrap();
        seen.insert(header);
        for round in 0..12 {
            let _: i64 = other.query_row("SELECT count(*) FROM notes", [], |row| row.get(0)).unwrap();
            assert_eq!(index.header(), Some(header), "round {round}: a read commits nothing");
            match round % 4 {
                1 => {
                    writer.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())).unwrap();
                    assert_eq!(index.header(), Some(header), "round {round}: a copy commits nothing");
                }
                2 => other.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap(),
                _ => {}
            }
            let committer = if round % 3 == 0 { &other } else { &writer };
            committer.execute("INSERT INTO notes VALUES ('a')", []).unwrap();
            header = index.header().unwrap();
            assert!(seen.insert(header), "round {round}: a commit gave a header seen before");
        }
    }

    #[test]
    fn the_checksum_is_sqlite_s() {
        let dir = tempfile::tempdir().unwrap();
        let writer = wal_database(&dir.path().join("sum.db"));
        writer.execute("INSERT INTO notes VALUES ('a')", []).unwrap();
        let header = watch(&writer).header().expect("a header whose checksum SQLite wrote");
        let mut altered = header;
        altered[4] += 1;
        assert_ne!(checksum(&altered[..CHECKSUMMED_WORDS]), [header[10], header[11]]);
    }

    #[test]
    fn a_database_not_in_wal_mode_has_no_wal_index() {
        let dir = tempfile::tempdir().unwrap();
        let connection = Connection::open(dir.path().join("rollback.db")).unwrap();
        connection.execute_batch("CREATE TABLE notes (text TEXT)").unwrap();
        // SAFETY: the connection outlives the call.
        assert!(unsafe { WalIndex::of(&connection) }.is_none());
    }
}
