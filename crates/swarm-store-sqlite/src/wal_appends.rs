//! The writer's WAL appends: one `write` per commit instead of two per page.
//!
//! SQLite appends each WAL frame with two writes, the frame's 24-byte header and then its
//! page (`walWriteOneFrame` in `wal.c`), so a commit that changes 13 pages costs 26 system
//! calls, each of which takes the file's lock and stamps its modification time in the
//! kernel. On an idle hub they were about 30 % of the writer's profiled time; one write
//! per commit takes about 11 % off its busy time per transaction (BENCHMARKS.md), 5 to 14 %
//! more claims per second. When asked (`SqliteOptions::wal_batching`, `swarm serve
//! --sqlite-wal-batching`), the writer's connection opens the database through this VFS,
//! which is the default one with a different `xOpen`: a WAL file's appends are gathered in
//! memory and written with one call when the commit frame (the one whose header carries
//! the database size) is whole, or before anything else is done with the file.
//!
//! It is off by default: it had two data-corrupting bugs while it was written.
//! `scripts/power-loss` cuts the power under it (writes not yet synced lost, mid-commit,
//! torn) and finds nothing lost or corrupt, as with SQLite's own VFS (docs/reliability.md).
//! The store's file-level tests (`tests/sqlite_only`) and the conformance suite run with
//! it on and off.
//!
//! Why that hides nothing and loses nothing:
//! - Another connection, in this process or another, learns of new frames only from the
//!   wal-index header, which SQLite rewrites after the last frame's write returned
//!   (`walFrames`). That write is the commit frame's page, and it returns only after
//!   everything gathered is in the file.
//! - Its error (a full disk) is the commit's error, as it was; the transaction is rolled
//!   back and its frames were never announced.
//! - A crash before that write loses a transaction that had not committed.
//! - Any other call on the file (a read, a sync, its size, a truncation, closing it)
//!   writes what is gathered first, so the file is never seen without it; a write that is
//!   not the next append (SQLite rewriting a frame of the same transaction, or the WAL's
//!   own header when it starts over) does too, and goes through at once.
//!
//! Every other file (the database, the wal-index) is the default VFS's own object, so
//! locks, shared memory and memory maps are SQLite's unchanged.

use std::{
    ffi::{CStr, c_int, c_void},
    path::Path,
    ptr,
    sync::OnceLock,
};

use rusqlite::{Connection, OpenFlags, ffi};

/// The VFS the writer's connection opens the database with.
const VFS_NAME: &CStr = c"swarm-wal-appends";
/// `WAL_FRAME_HDRSIZE` in `wal.c`.
const FRAME_HEADER_BYTES: usize = 24;
/// The most the default VFS writes with one call: it masks the length of a write with
/// `0x1ffff` (`seekAndWriteFd` in `os_unix.c`), and a write of exactly 128 KiB would
/// write nothing and be taken for a full disk. A larger commit goes in several writes.
const MAX_WRITE_BYTES: usize = 0x1_ffff;

/// Opens the writer's connection: through this VFS, with a cache that never spills.
///
/// Gathered frames are written by the commit that announces them, and that is the only
/// case handled. SQLite also writes frames before a commit when a large transaction's
/// pages overflow the cache (`pagerStress`); those would stay gathered after SQLite was
/// done with them: after a rollback, to be written later over frames another process
/// had committed at the same place meanwhile, and a failure to write them, met in a
/// later read, would not fail the transaction as a failed spill does. Without spills
/// every batch of frames SQLite writes ends with a commit frame. The writer's
/// transactions are groups of small writes and batches of bounded size, so an unspilled
/// cache stays small.
pub(crate) fn open_writer(path: &Path) -> rusqlite::Result<Connection> {
    let vfs = register().map_err(|message| {
        rusqlite::Error::SqliteFailure(ffi::Error::new(ffi::SQLITE_ERROR), Some(message))
    })?;
    let connection = Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs)?;
    connection.pragma_update(None, "cache_spill", false)?;
    Ok(connection)
}

/// Registers the VFS (once per process) and says whether it can be used.
fn register() -> Result<&'static CStr, String> {
    static REGISTERED: OnceLock<c_int> = OnceLock::new();
    // SAFETY: `sqlite3_vfs_find(NULL)` returns the default VFS, which lives as long as
    // the process; the copy is leaked, as SQLite keeps the pointer it is given.
    let code = *REGISTERED.get_or_init(|| unsafe {
        let default = ffi::sqlite3_vfs_find(ptr::null());
        if default.is_null() {
            return ffi::SQLITE_ERROR;
        }
        let mut vfs = *default;
        vfs.szOsFile = c_int::try_from(size_of::<WalFile>()).expect("small") + (*default).szOsFile;
        vfs.pNext = ptr::null_mut();
        vfs.zName = VFS_NAME.as_ptr();
        vfs.pAppData = default.cast();
        vfs.xOpen = Some(open);
        ffi::sqlite3_vfs_register(Box::into_raw(Box::new(vfs)), 0)
    });
    if code == ffi::SQLITE_OK {
        Ok(VFS_NAME)
    } else {
        Err(format!("cannot register SQLite VFS (code {code})"))
    }
}

/// A WAL file: SQLite's file object first (its methods are ours), then what is gathered;
/// the default VFS's own object for the file follows in the same allocation.
#[repr(C)]
struct WalFile {
    base: ffi::sqlite3_file,
    inner: *mut ffi::sqlite3_file,
    gathered: Vec<u8>,
    /// Where `gathered` goes in the file.
    gathered_at: i64,
    /// The last gathered write was a frame's header: `Some(true)` for a commit frame's.
    header: Option<bool>,
    /// Where the file's last operation read, if it was a read: a frame header written
    /// there is `walRewriteChecksums` rewriting the header of the frame it just read, with
    /// no page after it, and goes through at once. (It runs only in a transaction whose
    /// pages were spilled, which the writer's never are; it is handled all the same.)
    last_read_at: Option<i64>,
}

/// A `static`: SQLite keeps a pointer to it in every WAL file it opens.
static WAL_METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    iVersion: 1,
    xClose: Some(close),
    xRead: Some(read),
    xWrite: Some(write),
    xTruncate: Some(truncate),
    xSync: Some(sync),
    xFileSize: Some(file_size),
    xLock: Some(lock),
    xUnlock: Some(unlock),
    xCheckReservedLock: Some(check_reserved_lock),
    xFileControl: Some(file_control),
    xSectorSize: Some(sector_size),
    xDeviceCharacteristics: Some(device_characteristics),
    xShmMap: None,
    xShmLock: None,
    xShmBarrier: None,
    xShmUnmap: None,
    xFetch: None,
    xUnfetch: None,
};

unsafe extern "C" fn open(
    vfs: *mut ffi::sqlite3_vfs,
    name: ffi::sqlite3_filename,
    file: *mut ffi::sqlite3_file,
    flags: c_int,
    out_flags: *mut c_int,
) -> c_int {
    // SAFETY: `pAppData` is the default VFS (see `register`); SQLite gives `file`
    // `szOsFile` bytes, which hold a `WalFile` followed by the default VFS's object.
    unsafe {
        let default = (*vfs).pAppData.cast::<ffi::sqlite3_vfs>();
        let default_open = (*default).xOpen.expect("the default VFS opens files");
        if flags & ffi::SQLITE_OPEN_WAL == 0 {
            return default_open(default, name, file, flags, out_flags);
        }
        let inner = file.cast::<u8>().add(size_of::<WalFile>()).cast::<ffi::sqlite3_file>();
        let code = default_open(default, name, inner, flags, out_flags);
        if code != ffi::SQLITE_OK {
            if !(*inner).pMethods.is_null()
                && let Some(close) = (*(*inner).pMethods).xClose
            {
                close(inner);
            }
            (*file).pMethods = ptr::null();
            return code;
        }
        file.cast::<WalFile>().write(WalFile {
            base: ffi::sqlite3_file { pMethods: &WAL_METHODS },
            inner,
            gathered: Vec::new(),
            gathered_at: 0,
            header: None,
            last_read_at: None,
        });
        ffi::SQLITE_OK
    }
}

impl WalFile {
    /// # Safety
    /// `file` is a file this VFS opened as a WAL file, used by one thread at a time (SQLite
    /// serializes calls on a connection's files).
    unsafe fn of<'a>(file: *mut ffi::sqlite3_file) -> &'a mut WalFile {
        // SAFETY: as the caller promises.
        unsafe { &mut *file.cast::<WalFile>() }
    }

    fn methods(&self) -> &ffi::sqlite3_io_methods {
        // SAFETY: the default VFS's object was opened successfully and stays open until
        // `close`.
        unsafe { &*(*self.inner).pMethods }
    }

    /// Writes what is gathered; after this the file holds every write SQLite made.
    fn flush(&mut self) -> c_int {
        if self.gathered.is_empty() {
            return ffi::SQLITE_OK;
        }
        let code = self.write_through(&self.gathered, self.gathered_at);
        // On an error too: the transaction fails and is rolled back, and its frames are
        // never announced.
        self.gathered.clear();
        code
    }

    /// One write of the default VFS (at most `MAX_WRITE_BYTES`).
    fn write_through(&self, bytes: &[u8], offset: i64) -> c_int {
        let write = self.methods().xWrite.expect("files are writable");
        let length = c_int::try_from(bytes.len()).expect("at most MAX_WRITE_BYTES, or what SQLite gave");
        // SAFETY: the buffer is valid for `length` bytes; the inner file is open.
        unsafe { write(self.inner, bytes.as_ptr().cast(), length, offset) }
    }

    /// Before any operation other than an append.
    fn settle(&mut self) -> c_int {
        self.header = None;
        self.flush()
    }

    fn write(&mut self, bytes: &[u8], offset: i64) -> c_int {
        let continues = !self.gathered.is_empty()
            && i64::try_from(self.gathered.len()).is_ok_and(|length| offset == self.gathered_at + length);
        let appends = if bytes.len() == FRAME_HEADER_BYTES {
            continues || (self.gathered.is_empty() && self.last_read_at != Some(offset))
        } else {
            continues && self.header.is_some()
        };
        self.last_read_at = None;
        if !appends {
            self.header = None;
            let code = self.flush();
            if code != ffi::SQLITE_OK {
                return code;
            }
            return self.write_through(bytes, offset);
        }
        if self.gathered.len() + bytes.len() > MAX_WRITE_BYTES {
            let code = self.flush();
            if code != ffi::SQLITE_OK {
                self.header = None;
                return code;
            }
        }
        if self.gathered.is_empty() {
            self.gathered_at = offset;
        }
        self.gathered.extend_from_slice(bytes);
        if bytes.len() == FRAME_HEADER_BYTES {
            // Bytes 4 to 8: the database's size in pages after a commit, 0 in other frames.
            self.header = Some(bytes[4..8] != [0; 4]);
            return ffi::SQLITE_OK;
        }
        if self.header.take() == Some(true) { self.flush() } else { ffi::SQLITE_OK }
    }
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: `file` is ours (SQLite calls this WAL file's methods), closed once.
    unsafe {
        let wal = WalFile::of(file);
        let flushed = wal.settle();
        let close = wal.methods().xClose.expect("files close");
        let closed = close(wal.inner);
        ptr::drop_in_place(&raw mut wal.gathered);
        (*file).pMethods = ptr::null();
        if flushed != ffi::SQLITE_OK { flushed } else { closed }
    }
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    buffer: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: ours; SQLite's buffer holds `amount` bytes.
    unsafe {
        let bytes = std::slice::from_raw_parts(buffer.cast::<u8>(), usize::try_from(amount).unwrap_or(0));
        WalFile::of(file).write(bytes, offset)
    }
}

/// The methods that only need what is gathered written first (`read_at`: where `xRead`
/// reads, see `last_read_at`).
macro_rules! settled_then_inner {
    ($name:ident, $method:ident ( $($arg:ident : $ty:ty),* ), read_at = $read_at:expr) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file, $($arg: $ty),*) -> c_int {
            // SAFETY: ours (SQLite calls this WAL file's methods).
            let wal = unsafe { WalFile::of(file) };
            let code = wal.settle();
            wal.last_read_at = $read_at;
            if code != ffi::SQLITE_OK {
                return code;
            }
            let method = wal.methods().$method.expect("the default VFS has every method of version 1");
            // SAFETY: the arguments are SQLite's, passed on.
            unsafe { method(wal.inner, $($arg),*) }
        }
    };
}

settled_then_inner!(read, xRead(buffer: *mut c_void, amount: c_int, offset: i64), read_at = Some(offset));
settled_then_inner!(truncate, xTruncate(size: i64), read_at = None);
settled_then_inner!(sync, xSync(flags: c_int), read_at = None);
settled_then_inner!(file_size, xFileSize(size: *mut i64), read_at = None);
settled_then_inner!(lock, xLock(level: c_int), read_at = None);
settled_then_inner!(unlock, xUnlock(level: c_int), read_at = None);
settled_then_inner!(check_reserved_lock, xCheckReservedLock(reserved: *mut c_int), read_at = None);
settled_then_inner!(file_control, xFileControl(operation: c_int, argument: *mut c_void), read_at = None);

unsafe extern "C" fn sector_size(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: ours.
    let wal = unsafe { WalFile::of(file) };
    let method = wal.methods().xSectorSize.expect("the default VFS has every method of version 1");
    // SAFETY: the inner file is open.
    unsafe { method(wal.inner) }
}

unsafe extern "C" fn device_characteristics(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: ours.
    let wal = unsafe { WalFile::of(file) };
    let method = wal.methods().xDeviceCharacteristics.expect("the default VFS has every method of version 1");
    // SAFETY: the inner file is open.
    unsafe { method(wal.inner) }
}

#[cfg(test)]
mod tests {
    use rusqlite::params;

    use super::*;

    fn open(path: &std::path::Path, gathered: bool) -> Connection {
        let connection = if gathered { open_writer(path).unwrap() } else { Connection::open(path).unwrap() };
        connection.pragma_update(None, "journal_mode", "WAL").unwrap();
        connection.pragma_update(None, "synchronous", "NORMAL").unwrap();
        connection.pragma_update(None, "wal_autocheckpoint", 0).unwrap();
        connection
    }

    /// A writer through this VFS with a cache of `cache_pages`, on a new file with a table
    /// `rows (id, body)`.
    fn writer_on(dir: &tempfile::TempDir, name: &str, cache_pages: i64) -> (std::path::PathBuf, Connection) {
        let path = dir.path().join(name);
        let writer = open(&path, true);
        writer.pragma_update(None, "cache_size", cache_pages).unwrap();
        writer.execute_batch("CREATE TABLE rows (id INTEGER PRIMARY KEY, body BLOB NOT NULL)").unwrap();
        (path, writer)
    }

    /// A deterministic payload of `length` bytes for row `id`.
    fn payload(id: i64, length: usize) -> Vec<u8> {
        (0..length).map(|at| (id as usize * 31 + at * 7) as u8).collect()
    }

    /// What a second connection, on the default VFS, reads at once after each commit:
    /// every row, whole, through commits of one page to several hundred KiB (more than
    /// one write of the default VFS can take), transactions larger than the writer's
    /// cache rolled back, and the WAL starting over after checkpoints.
    #[test]
    fn every_commit_is_read_whole_by_another_connection_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let (path, writer) = writer_on(&dir, "appends.db", 16);
        let reader = open(&path, false);
        let checkpointer = open(&path, false);
        let mut expected: Vec<(i64, usize)> = Vec::new();
        for commit in 0..120_i64 {
            let rows = match commit % 10 {
                3 => 80, // about 330 KiB of pages: three writes or more
                7 => 33, // close to one write's limit
                _ => 1,
            };
            let tx = writer.unchecked_transaction().unwrap();
            for row in 0..rows {
                let id = commit * 1_000 + row;
                let length = 100 + (id as usize * 997) % 4_000;
                tx.execute("INSERT INTO rows (id, body) VALUES (?1, ?2)", params![id, payload(id, length)])
                    .unwrap();
                expected.push((id, length));
            }
            tx.commit().unwrap();
            if commit % 25 == 24 {
                // A transaction larger than the cache, rolled back: never seen.
                let tx = writer.unchecked_transaction().unwrap();
                for row in 0..200 {
                    tx.execute(
                        "INSERT INTO rows (id, body) VALUES (?1, zeroblob(4000))",
                        [-(commit * 1_000 + row) - 1],
                    )
                    .unwrap();
                }
                tx.rollback().unwrap();
                checkpointer.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).unwrap();
            }
            let count: i64 = reader.query_row("SELECT count(*) FROM rows", [], |row| row.get(0)).unwrap();
            assert_eq!(count, expected.len() as i64, "after commit {commit}");
            let (id, length) = *expected.last().unwrap();
            let body: Vec<u8> =
                reader.query_row("SELECT body FROM rows WHERE id = ?1", [id], |row| row.get(0)).unwrap();
            assert!(body == payload(id, length), "row {id} after commit {commit}");
        }
        drop(writer);
        let integrity: String = reader.query_row("PRAGMA integrity_check", [], |row| row.get(0)).unwrap();
        assert_eq!(integrity, "ok");
        let mut statement = reader.prepare("SELECT id, body FROM rows ORDER BY id").unwrap();
        let stored: Vec<(i64, Vec<u8>)> = statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        expected.sort();
        assert_eq!(stored.len(), expected.len());
        for ((id, body), (expected_id, length)) in stored.iter().zip(&expected) {
            assert_eq!(id, expected_id);
            assert!(*body == payload(*id, *length), "row {id} read back after the writer closed");
        }
    }

    /// A transaction larger than the writer's cache is rolled back, then another
    /// connection commits where its frames would have gone: the writer reads that commit,
    /// and the file stays whole. (Had SQLite spilled the large transaction's pages into
    /// the WAL, they would have stayed gathered and been written over the other commit.)
    #[test]
    fn a_rolled_back_large_transaction_leaves_nothing_to_write_over_another_commit() {
        let dir = tempfile::tempdir().unwrap();
        let (path, writer) = writer_on(&dir, "rollback.db", 10);
        let other = open(&path, false);
        for round in 0..5_i64 {
            // Copied into the file: the rollback reads nothing back from the WAL.
            other.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())).unwrap();
            // About 120 KiB of pages, less than one write of the default VFS.
            let tx = writer.unchecked_transaction().unwrap();
            for row in 0..3 {
                tx.execute("INSERT INTO rows VALUES (?1, randomblob(40000))", [-(round * 1_000 + row) - 1])
                    .unwrap();
            }
            tx.rollback().unwrap();
            for row in 0..20 {
                other
                    .execute(
                        "INSERT INTO rows VALUES (?1, ?2)",
                        params![round * 1_000 + row, payload(row, 2_000)],
                    )
                    .unwrap();
            }
            let count: i64 = writer.query_row("SELECT count(*) FROM rows", [], |row| row.get(0)).unwrap();
            assert_eq!(count, (round + 1) * 20 + round, "rows after round {round}");
            writer.execute("INSERT INTO rows VALUES (?1, zeroblob(10))", [round * 1_000 + 999]).unwrap();
        }
        drop(writer);
        let fresh = open(&path, false);
        let integrity: String = fresh.query_row("PRAGMA integrity_check", [], |row| row.get(0)).unwrap();
        assert_eq!(integrity, "ok");
        let count: i64 = fresh.query_row("SELECT count(*) FROM rows", [], |row| row.get(0)).unwrap();
        assert_eq!(count, 5 * 21);
    }

    /// The `write` system calls of this thread so far (`syscw` of `/proc/thread-self/io`).
    fn writes_by_this_thread() -> u64 {
        let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
        io.lines().find_map(|line| line.strip_prefix("syscw: ")).unwrap().trim().parse().unwrap()
    }

    /// The point of the VFS: a commit that changes a dozen pages costs the default VFS two
    /// writes per page, and this one a single write.
    #[test]
    fn a_commit_of_many_pages_is_one_write() {
        let dir = tempfile::tempdir().unwrap();
        let mut writes = Vec::new();
        for gathered in [false, true] {
            let path = dir.path().join(format!("pages-{gathered}.db"));
            let connection = open(&path, gathered);
            connection
                .execute_batch("CREATE TABLE rows (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
                .unwrap();
            for id in 0..3 {
                connection.execute("INSERT INTO rows VALUES (?1, zeroblob(1000))", [id]).unwrap();
            }
            let before = writes_by_this_thread();
            // Twelve rows of 3,000 bytes: a page each.
            let tx = connection.unchecked_transaction().unwrap();
            for id in 10..22 {
                tx.execute("INSERT INTO rows VALUES (?1, zeroblob(3000))", [id]).unwrap();
            }
            tx.commit().unwrap();
            writes.push(writes_by_this_thread() - before);
        }
        assert!(writes[0] >= 24, "the default VFS wrote the commit with {} writes", writes[0]);
        assert_eq!(writes[1], 1, "this VFS wrote the commit with {} writes", writes[1]);
    }

    /// The same after the writer read pages back from the WAL (its cache emptied, as the
    /// hub's memory release does): the reads leave the next commit's first frame to be
    /// gathered like the others.
    #[test]
    fn a_commit_after_reads_from_the_wal_is_one_write() {
        let dir = tempfile::tempdir().unwrap();
        let (_, writer) = writer_on(&dir, "cold.db", 100);
        for id in 0..12 {
            writer.execute("INSERT INTO rows VALUES (?1, zeroblob(3000))", [id]).unwrap();
        }
        for round in 0..3 {
            writer.execute_batch("PRAGMA shrink_memory").unwrap();
            let before = writes_by_this_thread();
            let tx = writer.unchecked_transaction().unwrap();
            for id in 0..12 {
                tx.execute("UPDATE rows SET body = zeroblob(2999 - ?2) WHERE id = ?1", [id, round]).unwrap();
            }
            tx.commit().unwrap();
            let writes = writes_by_this_thread() - before;
            assert_eq!(writes, 1, "round {round}: the commit took {writes} writes");
        }
    }
}
