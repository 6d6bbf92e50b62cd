//! Test only: a power cut, simulated under SQLite (`scripts/power-loss`).
//!
//! Killing the hub with SIGKILL loses nothing the kernel holds: every `write` it made
//! survives in the page cache. A power cut also loses what was not yet `fsync`ed, and that
//! is where a write path's ordering mistakes show. When `SWARM_TEST_POWER_LOSS=1` is set,
//! the store installs this VFS as the process's default before it opens anything, so that
//! every connection (sqlx's migrator, the writer, directly or under the WAL-batching VFS,
//! the readers, the checkpointer) goes through it. It keeps every write and truncation of
//! a file since that file's last `xSync` in this process's memory, shared by every handle
//! on the same path (readers see them, as they would see the page cache), and hands them
//! to the real file, in order, only at `xSync`. The real file therefore holds exactly what
//! a disk that honoured each `fsync` and nothing else would hold, and a SIGKILL at any
//! moment is a power cut that lost every unsynced write: the most pessimistic outcome that
//! keeps the order of synced writes.
//!
//! `SWARM_TEST_POWER_LOSS_CRASH_AT=N` cuts the power from inside, at the N-th write, sync
//! or truncation of any file (the harness picks N at random, so cuts land mid-commit,
//! between a WAL sync and the database writes of a checkpoint, in a WAL restart...).
//! With `SWARM_TEST_POWER_LOSS_TORN=<seed>`, that cut first lets a random subset of the
//! unsynced writes through, cut into 4 KiB pieces (what the page cache's writeback may
//! have done in any order before the power went), to find writes SQLite or we rely on
//! reaching the disk in order without a sync between them.
//!
//! Not modelled, argued instead (docs/reliability.md): a new file's directory entry. SQLite
//! syncs the directory at the first sync of a new WAL or journal (`unixOpen`'s `syncDir`
//! in `os_unix.c`); the database file is new only on a hub's first start, and the store
//! syncs its directory after creating it (`sync_new_file_directory`). The real `fsync` is
//! not called: the kernel is never the one that crashes here, so what the layer gave it
//! at a sync is on "disk" already, and the run is not bound by this VM's fsync latency.

use std::{
    collections::HashMap,
    ffi::{CStr, c_char, c_int, c_void},
    ptr,
    sync::{Mutex, MutexGuard, OnceLock, PoisonError},
};

use rusqlite::ffi;

/// The variable that turns the layer on (`1`); hidden from `--help`: it loses data.
const ENABLE_VAR: &str = "SWARM_TEST_POWER_LOSS";
const CRASH_AT_VAR: &str = "SWARM_TEST_POWER_LOSS_CRASH_AT";
const TORN_VAR: &str = "SWARM_TEST_POWER_LOSS_TORN";
/// The exit status of a cut made from inside, for the harness to tell it from a failure.
const POWER_CUT_EXIT: i32 = 86;
const VFS_NAME: &CStr = c"swarm-power-loss";
/// The unit of the page cache's writeback, for a torn cut.
const PIECE_BYTES: u64 = 4096;

/// Installs the layer as the default VFS when the environment asks; before any connection.
pub(crate) fn install_if_requested() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    if std::env::var(ENABLE_VAR).as_deref() != Ok("1") {
        return;
    }
    INSTALLED.get_or_init(|| {
        let crash_at = std::env::var(CRASH_AT_VAR).ok().and_then(|value| value.parse().ok());
        let torn = std::env::var(TORN_VAR).ok().and_then(|value| value.parse().ok());
        let _ = SETTINGS.set(Settings { crash_at, torn });
        // SAFETY: `sqlite3_vfs_find(NULL)` is the default VFS, alive for the process; the
        // copy is leaked, as SQLite keeps the pointer it is given.
        let code = unsafe {
            let default = ffi::sqlite3_vfs_find(ptr::null());
            assert!(!default.is_null(), "SQLite has a default VFS");
            let mut vfs = *default;
            vfs.szOsFile = c_int::try_from(size_of::<LayerFile>()).expect("small") + (*default).szOsFile;
            vfs.pNext = ptr::null_mut();
            vfs.zName = VFS_NAME.as_ptr();
            vfs.pAppData = default.cast();
            vfs.xOpen = Some(open);
            vfs.xDelete = Some(delete);
            ffi::sqlite3_vfs_register(Box::into_raw(Box::new(vfs)), 1)
        };
        assert_eq!(code, ffi::SQLITE_OK, "registering the power-loss VFS");
        tracing::warn!("SQLite writes are held until fsync and lost at a crash ({ENABLE_VAR}=1): tests only");
    });
}

struct Settings {
    crash_at: Option<u64>,
    torn: Option<u64>,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();

enum Op {
    Write { offset: u64, bytes: Vec<u8> },
    Truncate(u64),
}

#[derive(Default)]
struct State {
    /// Unsynced operations by file name, in the order they were made.
    pending: HashMap<String, Vec<Op>>,
    /// Writes, syncs and truncations so far, for `CRASH_AT_VAR`.
    operations: u64,
}

fn state() -> MutexGuard<'static, State> {
    static STATE: OnceLock<Mutex<State>> = OnceLock::new();
    STATE.get_or_init(Mutex::default).lock().unwrap_or_else(PoisonError::into_inner)
}

/// A file SQLite opened through the layer; the default VFS's object follows it.
#[repr(C)]
struct LayerFile {
    base: ffi::sqlite3_file,
    inner: *mut ffi::sqlite3_file,
    /// The file's name, the key of its pending operations (temporary files have none and
    /// are passed through).
    name: Option<String>,
}

static METHODS: ffi::sqlite3_io_methods = ffi::sqlite3_io_methods {
    // 2: shared memory goes to the default VFS; no `xFetch`, so SQLite never maps the
    // file and reads every page through `read`, which sees the pending writes.
    iVersion: 2,
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
    xShmMap: Some(shm_map),
    xShmLock: Some(shm_lock),
    xShmBarrier: Some(shm_barrier),
    xShmUnmap: Some(shm_unmap),
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
    // SAFETY: `pAppData` is the default VFS; `file` has `szOsFile` bytes: a `LayerFile`
    // and then the default VFS's object.
    unsafe {
        let default = (*vfs).pAppData.cast::<ffi::sqlite3_vfs>();
        let default_open = (*default).xOpen.expect("the default VFS opens files");
        let inner = file.cast::<u8>().add(size_of::<LayerFile>()).cast::<ffi::sqlite3_file>();
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
        let name = (!name.is_null()).then(|| CStr::from_ptr(name).to_string_lossy().into_owned());
        file.cast::<LayerFile>().write(LayerFile {
            base: ffi::sqlite3_file { pMethods: &METHODS },
            inner,
            name,
        });
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn delete(vfs: *mut ffi::sqlite3_vfs, name: *const c_char, sync_dir: c_int) -> c_int {
    // SAFETY: as in `open`; `name` is SQLite's NUL-terminated path.
    unsafe {
        let default = (*vfs).pAppData.cast::<ffi::sqlite3_vfs>();
        let key = CStr::from_ptr(name).to_string_lossy().into_owned();
        let mut state = state();
        state.pending.remove(&key);
        (*default).xDelete.expect("the default VFS deletes files")(default, name, sync_dir)
    }
}

impl LayerFile {
    /// # Safety
    /// `file` was opened by `open` and not yet closed.
    unsafe fn of<'a>(file: *mut ffi::sqlite3_file) -> &'a mut LayerFile {
        // SAFETY: as the caller promises; SQLite serializes calls on one file object.
        unsafe { &mut *file.cast::<LayerFile>() }
    }

    fn methods(&self) -> &ffi::sqlite3_io_methods {
        // SAFETY: the default VFS's object is open until `close`.
        unsafe { &*(*self.inner).pMethods }
    }

    fn real_size(&self) -> Result<u64, c_int> {
        let mut size = 0_i64;
        // SAFETY: the inner file is open; `size` outlives the call.
        let code = unsafe { self.methods().xFileSize.expect("sized")(self.inner, &raw mut size) };
        if code == ffi::SQLITE_OK { Ok(u64::try_from(size).unwrap_or(0)) } else { Err(code) }
    }

    fn apply(&self, op: &Op) -> c_int {
        // SAFETY: the inner file is open; buffers are valid for their lengths.
        unsafe {
            match op {
                Op::Write { offset, bytes } => self.methods().xWrite.expect("writable")(
                    self.inner,
                    bytes.as_ptr().cast(),
                    c_int::try_from(bytes.len()).expect("SQLite's own write"),
                    i64::try_from(*offset).expect("file offset"),
                ),
                Op::Truncate(size) => self.methods().xTruncate.expect("truncatable")(
                    self.inner,
                    i64::try_from(*size).expect("file size"),
                ),
            }
        }
    }
}

/// Counts an operation and cuts the power at the chosen one: with `torn`, a random subset
/// of the pending writes (in 4 KiB pieces) reaches the files first. Never returns then;
/// the lock stays held, so no other thread writes anything after the cut.
fn count_operation(state: &mut MutexGuard<'static, State>) {
    state.operations += 1;
    let Some(settings) = SETTINGS.get() else { return };
    if settings.crash_at != Some(state.operations) {
        return;
    }
    if let Some(seed) = settings.torn {
        let mut random = seed | 1;
        let mut next = move || {
            random ^= random << 13;
            random ^= random >> 7;
            random ^= random << 17;
            random
        };
        for (name, ops) in &state.pending {
            let Ok(real) = std::fs::OpenOptions::new().write(true).open(name) else { continue };
            for op in ops {
                match op {
                    Op::Write { offset, bytes } => {
                        let mut at = *offset;
                        let end = offset + bytes.len() as u64;
                        while at < end {
                            let piece_end = ((at / PIECE_BYTES + 1) * PIECE_BYTES).min(end);
                            if next() % 2 == 0 {
                                let slice = &bytes[(at - offset) as usize..(piece_end - offset) as usize];
                                let _ = std::os::unix::fs::FileExt::write_all_at(&real, slice, at);
                            }
                            at = piece_end;
                        }
                    }
                    Op::Truncate(size) => {
                        if next() % 2 == 0 {
                            let _ = real.set_len(*size);
                        }
                    }
                }
            }
        }
    }
    eprintln!("power-loss: power cut at operation {}", state.operations);
    // The lock is held: every other thread that touches a file waits here until the end.
    std::process::exit(POWER_CUT_EXIT);
}

unsafe extern "C" fn close(file: *mut ffi::sqlite3_file) -> c_int {
    // SAFETY: ours, closed once. Pending writes stay with the name: they are in the
    // "page cache", not in the handle.
    unsafe {
        let layer = LayerFile::of(file);
        let code = layer.methods().xClose.expect("files close")(layer.inner);
        ptr::drop_in_place(&raw mut layer.name);
        (*file).pMethods = ptr::null();
        code
    }
}

unsafe extern "C" fn read(
    file: *mut ffi::sqlite3_file,
    buffer: *mut c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: ours; `buffer` holds `amount` bytes.
    unsafe {
        let layer = LayerFile::of(file);
        let state = state();
        let code = layer.methods().xRead.expect("readable")(layer.inner, buffer, amount, offset);
        let Some(ops) = layer.name.as_ref().and_then(|name| state.pending.get(name)) else { return code };
        if code != ffi::SQLITE_OK && code != ffi::SQLITE_IOERR_SHORT_READ {
            return code;
        }
        let bytes = std::slice::from_raw_parts_mut(buffer.cast::<u8>(), usize::try_from(amount).unwrap_or(0));
        let start = u64::try_from(offset).unwrap_or(0);
        let end = start + bytes.len() as u64;
        let mut size = match layer.real_size() {
            Ok(size) => size,
            Err(code) => return code,
        };
        for op in ops {
            match op {
                Op::Write { offset, bytes: written } => {
                    let written_end = offset + written.len() as u64;
                    let (from, to) = ((*offset).max(start), written_end.min(end));
                    if from < to {
                        bytes[(from - start) as usize..(to - start) as usize]
                            .copy_from_slice(&written[(from - offset) as usize..(to - offset) as usize]);
                    }
                    size = size.max(written_end);
                }
                Op::Truncate(new_size) => {
                    if *new_size < end {
                        bytes[(new_size.max(&start) - start) as usize..].fill(0);
                    }
                    size = *new_size;
                }
            }
        }
        if end > size {
            bytes[(size.max(start) - start) as usize..].fill(0);
            ffi::SQLITE_IOERR_SHORT_READ
        } else {
            ffi::SQLITE_OK
        }
    }
}

unsafe extern "C" fn write(
    file: *mut ffi::sqlite3_file,
    buffer: *const c_void,
    amount: c_int,
    offset: i64,
) -> c_int {
    // SAFETY: ours; `buffer` holds `amount` bytes.
    unsafe {
        let layer = LayerFile::of(file);
        let mut state = state();
        count_operation(&mut state);
        let Some(name) = layer.name.clone() else {
            return layer.methods().xWrite.expect("writable")(layer.inner, buffer, amount, offset);
        };
        let bytes = std::slice::from_raw_parts(buffer.cast::<u8>(), usize::try_from(amount).unwrap_or(0));
        let offset = u64::try_from(offset).unwrap_or(0);
        state.pending.entry(name).or_default().push(Op::Write { offset, bytes: bytes.to_vec() });
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn truncate(file: *mut ffi::sqlite3_file, size: i64) -> c_int {
    // SAFETY: ours.
    unsafe {
        let layer = LayerFile::of(file);
        let mut state = state();
        count_operation(&mut state);
        let Some(name) = layer.name.clone() else {
            return layer.methods().xTruncate.expect("truncatable")(layer.inner, size);
        };
        state.pending.entry(name).or_default().push(Op::Truncate(u64::try_from(size).unwrap_or(0)));
        ffi::SQLITE_OK
    }
}

unsafe extern "C" fn sync(file: *mut ffi::sqlite3_file, _flags: c_int) -> c_int {
    // SAFETY: ours.
    let layer = unsafe { LayerFile::of(file) };
    let mut state = state();
    count_operation(&mut state);
    let Some(ops) = layer.name.as_ref().and_then(|name| state.pending.remove(name)) else {
        return ffi::SQLITE_OK;
    };
    for op in &ops {
        let code = layer.apply(op);
        if code != ffi::SQLITE_OK {
            return code;
        }
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn file_size(file: *mut ffi::sqlite3_file, size: *mut i64) -> c_int {
    // SAFETY: ours; `size` is SQLite's out-parameter.
    unsafe {
        let layer = LayerFile::of(file);
        let state = state();
        let mut logical = match layer.real_size() {
            Ok(size) => size,
            Err(code) => return code,
        };
        if let Some(ops) = layer.name.as_ref().and_then(|name| state.pending.get(name)) {
            for op in ops {
                logical = match op {
                    Op::Write { offset, bytes } => logical.max(offset + bytes.len() as u64),
                    Op::Truncate(new_size) => *new_size,
                };
            }
        }
        *size = i64::try_from(logical).unwrap_or(i64::MAX);
        ffi::SQLITE_OK
    }
}

/// The methods that act on the real file alone (locks, shared memory, file controls).
macro_rules! passed_through {
    ($name:ident, $method:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty) => {
        unsafe extern "C" fn $name(file: *mut ffi::sqlite3_file, $($arg: $ty),*) -> $ret {
            // SAFETY: ours; the arguments are SQLite's, passed on to the open inner file.
            unsafe {
                let layer = LayerFile::of(file);
                layer.methods().$method.expect("the default VFS has every method of version 2")(
                    layer.inner, $($arg),*
                )
            }
        }
    };
}

passed_through!(lock, xLock(level: c_int) -> c_int);
passed_through!(unlock, xUnlock(level: c_int) -> c_int);
passed_through!(check_reserved_lock, xCheckReservedLock(reserved: *mut c_int) -> c_int);
passed_through!(file_control, xFileControl(operation: c_int, argument: *mut c_void) -> c_int);
passed_through!(sector_size, xSectorSize() -> c_int);
passed_through!(device_characteristics, xDeviceCharacteristics() -> c_int);
passed_through!(shm_map, xShmMap(region: c_int, size: c_int, extend: c_int, mapped: *mut *mut c_void) -> c_int);
passed_through!(shm_lock, xShmLock(offset: c_int, count: c_int, flags: c_int) -> c_int);
passed_through!(shm_unmap, xShmUnmap(delete: c_int) -> c_int);

unsafe extern "C" fn shm_barrier(file: *mut ffi::sqlite3_file) {
    // SAFETY: ours.
    unsafe {
        let layer = LayerFile::of(file);
        if let Some(barrier) = layer.methods().xShmBarrier {
            barrier(layer.inner);
        }
    }
}
