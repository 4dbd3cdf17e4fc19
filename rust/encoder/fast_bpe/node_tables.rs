//! The piece tables in a file that every process on the node maps (`--tables node`): the
//! DataLoader workers and executor processes that encode with one tokenizer share one copy of
//! the whole-token pieces and of every piece any of them has merged, instead of each holding
//! its own (about 150 MiB for Qwen's vocabulary).
//!
//! Why it works across processes: the tables are written once per slot and read without locks
//! (`shared_cache`), with atomics on the slots' words; atomics on a shared mapping order the
//! same way between processes as between threads, and the counters live in the file's header.
//!
//! The file's life:
//! - Its name holds the user's id and a key: the BLAKE3 of the tokenizer file, the layout and the
//!   table sizes. A process that finds it checks its header, its size and a sample of its
//!   pieces, then maps it.
//! - A process that does not find it makes it under a temporary name (reserving its memory
//!   with `fallocate`, so that a full `/dev/shm` is an error now, not a `SIGBUS` later), fills
//!   the whole-token pieces, and links it under its name; if another process linked one first,
//!   it maps that one.
//! - Every process holds a shared `flock` on the file while it maps it. The last one to let go
//!   (its exclusive lock succeeds) removes it; a file left by killed processes is removed by
//!   the next process that makes one. Memory in `/dev/shm` is the node's until the file goes.
//! - Anything that fails leaves the encoder on tables of its own process, and says why.
//!
//! Trust: the file is the user's own (mode 0600, the user's id in its name, another user's
//! never opened), and its pieces are trusted as the process's own memory would be: a process
//! of the same user that wrote garbage into it could change the others' ids. Offsets read from
//! it are bounds-checked (a bad one panics, never reads outside the mapping).

use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError};

use super::shared_cache::{
    table_bytes, SharedPieces, ARENA_WORDS_AT, KEY_AT, LAYOUT, LAYOUT_AT, LONG_BITS_AT, MAGIC,
    READY, SHORT_BITS_AT,
};
use crate::table_memory::ZeroedTable;

/// Where the files go unless `DATA_IO_NODE_TABLES_DIR` names another folder.
pub const DEFAULT_DIR: &str = "/dev/shm";
pub const DIR_VARIABLE: &str = "DATA_IO_NODE_TABLES_DIR";
const PREFIX: &str = "data_io-pieces-";

/// The tables' sizes: bits of the short and long tables and the arena's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    pub short_bits: u32,
    pub long_bits: u32,
    pub arena_words: usize,
}

/// The open file under the mapped tables; dropped after them (see `FastBpe`'s field order).
pub struct NodeFile {
    file: File,
    path: PathBuf,
    /// The process that opened it: a forked child inherits the descriptor and its lock, and
    /// must neither convert that lock (the parent's too) nor remove the file.
    pid: u32,
}

impl Drop for NodeFile {
    fn drop(&mut self) {
        OPEN.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|&(fd, _, _)| fd != self.file.as_raw_fd());
        if std::process::id() == self.pid {
            let_go(&self.file, &self.path);
        }
    }
}

/// The node files open here (descriptor, path, the process that opened it), for `leave_all`
/// at exit. A forked child inherits the list and the descriptors, and must leave its parent's
/// alone: unlocking a shared descriptor would drop the parent's lock too.
static OPEN: Mutex<Vec<(RawFd, PathBuf, u32)>> = Mutex::new(Vec::new());

/// Give up this process's hold on `file`, removing it if no other process holds it. The shared
/// lock goes first, then an exclusive one is tried: of processes letting go at once, the last
/// to try finds none holding it (a failed try holds nothing), so one of them removes it. The
/// mapping stays valid either way: a removed file's memory lasts until it is unmapped.
fn let_go(file: &File, path: &Path) {
    let _ = file.unlock();
    // Only if the name is still this file (not a newer one made after this was removed).
    if file.try_lock().is_ok() && same_file(file, path) {
        let _ = std::fs::remove_file(path);
    }
}

/// At the end of a process (`multiprocessing`'s exit hooks call it in DataLoader workers,
/// which end with `os._exit`, and Rust never drops the process-wide encoder): let go of every
/// node file this process holds, so that the last process of the node removes it. The tables
/// stay mapped and usable.
pub fn leave_all() {
    let open = OPEN.lock().unwrap_or_else(PoisonError::into_inner);
    let here = std::process::id();
    for (fd, path, _) in open.iter().filter(|&&(_, _, pid)| pid == here) {
        // SAFETY: the descriptor is open: a `NodeFile` removes its entry before it closes it,
        // under this lock. `ManuallyDrop` keeps it open after this borrow.
        let file = std::mem::ManuallyDrop::new(unsafe { File::from_raw_fd(*fd) });
        let_go(&file, path);
    }
}

impl NodeFile {
    /// Hold `file` (locked shared) as the node file at `path`.
    fn new(file: File, path: &Path) -> NodeFile {
        OPEN.lock().unwrap_or_else(PoisonError::into_inner).push((
            file.as_raw_fd(),
            path.to_path_buf(),
            std::process::id(),
        ));
        NodeFile {
            file,
            path: path.to_path_buf(),
            pid: std::process::id(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The folder for the files: `DATA_IO_NODE_TABLES_DIR`, or `/dev/shm`.
pub fn folder() -> PathBuf {
    std::env::var_os(DIR_VARIABLE)
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_DIR), PathBuf::from)
}

/// Map the node's tables for `key` (the tokenizer file's BLAKE3) in `dir`, making them with
/// `prefill` if no process has; `check` tells whether found tables hold what this process
/// would have put in them. `Err` says why this process should keep tables of its own.
pub fn attach(
    dir: &Path,
    key: &blake3::Hash,
    sizes: Sizes,
    prefill: impl Fn(&SharedPieces) -> bool,
    check: impl Fn(&SharedPieces) -> bool,
) -> Result<(SharedPieces, NodeFile), String> {
    let name_key = name_key(key, sizes);
    let path = dir.join(file_name(&name_key));
    // Three tries: the file can go (its last user let go) between finding and locking it.
    for _ in 0..3 {
        match open_existing(&path, &name_key, sizes) {
            Ok(Some(found)) => {
                return if check(&found.0) {
                    Ok(found)
                } else {
                    Err(format!(
                        "{} does not hold this tokenizer's pieces",
                        path.display()
                    ))
                };
            }
            Ok(None) => {}
            Err(reason) => return Err(reason),
        }
        remove_unused(dir, &user_prefix());
        if let Some(made) = create(dir, &path, &name_key, sizes, &prefill)? {
            return Ok(made);
        }
    }
    Err(format!(
        "{} kept appearing and disappearing; another process may be removing it",
        path.display()
    ))
}

/// What the file's name and header hold: the tokenizer's key, the layout and the sizes.
fn name_key(key: &blake3::Hash, sizes: Sizes) -> blake3::Hash {
    let mut hasher = blake3::Hasher::new();
    hasher.update(key.as_bytes());
    hasher.update(&LAYOUT.to_le_bytes());
    hasher.update(&u64::from(sizes.short_bits).to_le_bytes());
    hasher.update(&u64::from(sizes.long_bits).to_le_bytes());
    hasher.update(&(sizes.arena_words as u64).to_le_bytes());
    hasher.finalize()
}

/// `data_io-pieces-<uid>-`: this user's files (another user's are never opened).
fn user_prefix() -> String {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    format!("{PREFIX}{uid}-")
}

fn file_name(name_key: &blake3::Hash) -> String {
    format!("{}{}", user_prefix(), &name_key.to_hex()[..32])
}

/// The tables in `path` (locked shared, checked), `None` if there is no file there.
fn open_existing(
    path: &Path,
    key: &blake3::Hash,
    sizes: Sizes,
) -> Result<Option<(SharedPieces, NodeFile)>, String> {
    let file = match OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot open {}: {e}", path.display())),
    };
    file.lock_shared()
        .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
    // Removed by its last user between the open and the lock: look again.
    if !same_file(&file, path) {
        return Ok(None);
    }
    let node = NodeFile::new(file, path);
    let size = node
        .file
        .metadata()
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .len();
    let total = file_bytes(sizes);
    let pieces = if size == total as u64 {
        let pieces =
            map(&node.file, sizes).map_err(|e| format!("cannot map {}: {e}", path.display()))?;
        header_matches(&pieces, key, sizes).then_some(pieces)
    } else {
        None
    };
    let Some(pieces) = pieces else {
        // Not tables of this layout (a file cut short, say): made again if no process holds it.
        if node.file.try_lock().is_ok() && same_file(&node.file, path) {
            let _ = std::fs::remove_file(path);
            return Ok(None);
        }
        return Err(format!(
            "{} ({size} bytes) does not hold tables of this layout, and a process holds it",
            path.display()
        ));
    };
    Ok(Some((pieces, node)))
}

/// Whether the header of `pieces` says they are ready tables of `sizes` for `key`.
fn header_matches(pieces: &SharedPieces, key: &blake3::Hash, sizes: Sizes) -> bool {
    pieces.header(READY).load(Ordering::Acquire) == MAGIC
        && pieces.header(LAYOUT_AT).load(Ordering::Relaxed) == LAYOUT
        && pieces.header(SHORT_BITS_AT).load(Ordering::Relaxed) == u64::from(sizes.short_bits)
        && pieces.header(LONG_BITS_AT).load(Ordering::Relaxed) == u64::from(sizes.long_bits)
        && pieces.header(ARENA_WORDS_AT).load(Ordering::Relaxed) == sizes.arena_words as u64
        && key_words(key)
            .iter()
            .enumerate()
            .all(|(i, &word)| pieces.header(KEY_AT + i).load(Ordering::Relaxed) == word)
}

/// Make the tables under a temporary name, fill them and link them as `path`; `None` if
/// another process linked its tables there first, or swept the temporary file away before it
/// was locked.
fn create(
    dir: &Path,
    path: &Path,
    key: &blake3::Hash,
    sizes: Sizes,
    prefill: &impl Fn(&SharedPieces) -> bool,
) -> Result<Option<(SharedPieces, NodeFile)>, String> {
    let total = file_bytes(sizes);
    let temporary = path.with_extension(format!("{}.tmp", std::process::id()));
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC)
        .open(&temporary)
        .map_err(|e| format!("cannot make {}: {e}", temporary.display()))?;
    let remove = |reason: String| {
        let _ = std::fs::remove_file(&temporary);
        reason
    };
    // Held from the start, so that a sweep by another process leaves the file alone.
    file.lock_shared()
        .map_err(|e| remove(format!("cannot lock {}: {e}", temporary.display())))?;
    // A sweep (`remove_unused`) that ran between the making and the lock found the file
    // unlocked and removed it: its link would fail ("No such file or directory", seen with two
    // DataLoader workers starting at once on a loaded machine). Start again.
    if !same_file(&file, &temporary) {
        return Ok(None);
    }
    reserve(&file, total).map_err(|e| {
        remove(format!(
            "{} has no room for the {} MiB of tables ({e}); free space there, or point {DIR_VARIABLE} at a folder in memory with room",
            dir.display(),
            total >> 20
        ))
    })?;
    let pieces = map(&file, sizes)
        .map_err(|e| remove(format!("cannot map {}: {e}", temporary.display())))?;
    pieces.stamp_layout();
    for (i, word) in key_words(key).into_iter().enumerate() {
        pieces.header(KEY_AT + i).store(word, Ordering::Relaxed);
    }
    if !prefill(&pieces) {
        return Err(remove(
            "the whole-token pieces do not fit the tables".into(),
        ));
    }
    pieces.header(READY).store(MAGIC, Ordering::Release);
    let linked = std::fs::hard_link(&temporary, path);
    let _ = std::fs::remove_file(&temporary);
    match linked {
        Ok(()) => Ok(Some((pieces, NodeFile::new(file, path)))),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(format!("cannot link {}: {e}", path.display())),
    }
}

/// Reserve the file's memory now (`fallocate`): on tmpfs a page that cannot be had when it is
/// first written kills the process with `SIGBUS`. A file system without `fallocate` is on a
/// disk, where the file grows as it is written.
fn reserve(file: &File, bytes: usize) -> io::Result<()> {
    let bytes = libc::off_t::try_from(bytes).map_err(io::Error::other)?;
    // SAFETY: a plain system call on an open descriptor.
    if unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, bytes) } == 0 {
        return Ok(());
    }
    let error = io::Error::last_os_error();
    if error.raw_os_error() == Some(libc::EOPNOTSUPP) {
        return file.set_len(bytes as u64);
    }
    Err(error)
}

/// Each table starts on a multiple of this in the file: a mapping's offset must be a multiple
/// of the page size (4 KiB here, up to 64 KiB on some ARM kernels).
const REGION_ALIGN: usize = 64 << 10;

/// Where the header and the three tables lie in the file: (offset, bytes) each.
fn regions(sizes: Sizes) -> [(usize, usize); 4] {
    let bytes = table_bytes(sizes.short_bits, sizes.long_bits, sizes.arena_words);
    let mut offset = 0;
    bytes.map(|size| {
        let region = (offset, size);
        offset += size.next_multiple_of(REGION_ALIGN);
        region
    })
}

/// The file's length.
fn file_bytes(sizes: Sizes) -> usize {
    let (offset, bytes) = regions(sizes)[3];
    offset + bytes
}

/// The header and the three tables of `file`, mapped shared.
fn map(file: &File, sizes: Sizes) -> io::Result<SharedPieces> {
    let [header, short, long, arena] = regions(sizes);
    Ok(SharedPieces::from_tables(
        ZeroedTable::shared_file(file, header.0 as u64, header.1 / 8)?,
        ZeroedTable::shared_file(file, short.0 as u64, 1 << sizes.short_bits)?,
        ZeroedTable::shared_file(file, long.0 as u64, 1 << sizes.long_bits)?,
        ZeroedTable::shared_file(file, arena.0 as u64, sizes.arena_words)?,
    ))
}

/// Remove this user's files in `dir` that no process holds (left by killed processes).
fn remove_unused(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.starts_with(prefix));
        if !ours {
            continue;
        }
        let Ok(file) = OpenOptions::new().read(true).open(&path) else {
            continue;
        };
        match file.try_lock() {
            Ok(()) if same_file(&file, &path) => {
                let _ = std::fs::remove_file(&path);
            }
            Ok(()) | Err(TryLockError::WouldBlock) | Err(TryLockError::Error(_)) => {}
        }
    }
}

/// Whether `path` still names the file open as `file`.
fn same_file(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
        _ => false,
    }
}

fn key_words(key: &blake3::Hash) -> [u64; 4] {
    let bytes = key.as_bytes();
    std::array::from_fn(|i| {
        u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("eight bytes"))
    })
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::super::cache::Probe;
    use super::*;

    const SIZES: Sizes = Sizes {
        short_bits: 10,
        long_bits: 6,
        arena_words: 1 << 12,
    };

    fn key() -> blake3::Hash {
        blake3::hash(b"a tokenizer file")
    }

    fn ids_of(pieces: &SharedPieces, piece: &[u8]) -> Option<Vec<u32>> {
        let mut out = Vec::new();
        let probe = Probe::new(piece)?;
        pieces.get_short(&probe, &mut out).then_some(out)
    }

    fn prefill(pieces: &SharedPieces) -> bool {
        let probe = Probe::new(b"ab").expect("short");
        pieces.insert_short(&probe, &[7], &mut Default::default())
    }

    fn holds_ab(pieces: &SharedPieces) -> bool {
        ids_of(pieces, b"ab") == Some(vec![7])
    }

    fn ours(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("folder")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .into_string()
                    .expect("utf-8")
            })
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_second_user_maps_the_first_ones_tables_and_the_last_removes_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (first, first_file) =
            attach(dir.path(), &key(), SIZES, prefill, holds_ab).expect("made");
        assert!(holds_ab(&first));
        let filled = Cell::new(false);
        let (second, second_file) = attach(
            dir.path(),
            &key(),
            SIZES,
            |_| {
                filled.set(true);
                true
            },
            holds_ab,
        )
        .expect("found");
        assert!(!filled.get(), "found tables are not filled again");
        assert_eq!(first_file.path(), second_file.path());
        // A piece one user merges is there for the other (the same memory).
        let probe = Probe::new(b"xyz").expect("short");
        assert!(first.insert_short(&probe, &[1, 2, 3, 4], &mut Default::default()));
        assert_eq!(ids_of(&second, b"xyz"), Some(vec![1, 2, 3, 4]));
        assert_eq!(ours(dir.path()).len(), 1, "no temporary file is left");
        drop((first, first_file));
        assert_eq!(
            ours(dir.path()).len(),
            1,
            "kept while the second user holds it"
        );
        drop((second, second_file));
        assert!(ours(dir.path()).is_empty(), "the last user removes it");
    }

    #[test]
    fn leaving_at_exit_removes_the_file_and_keeps_the_tables_usable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (pieces, node) = attach(dir.path(), &key(), SIZES, prefill, holds_ab).expect("made");
        let holder = File::open(node.path()).expect("open");
        holder.lock_shared().expect("lock");
        leave_all();
        assert_eq!(
            ours(dir.path()).len(),
            1,
            "kept while another process holds it"
        );
        drop(holder);
        leave_all();
        assert!(ours(dir.path()).is_empty(), "removed by the last to leave");
        assert!(holds_ab(&pieces), "the mapping outlives the name");
        drop((pieces, node));
    }

    #[test]
    fn files_no_process_holds_are_removed_and_held_ones_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let stale = dir.path().join(format!("{}dead", user_prefix()));
        let stale_temporary = dir.path().join(format!("{}dead.123.tmp", user_prefix()));
        let held = dir.path().join(format!("{}held", user_prefix()));
        let someone_elses = dir.path().join("data_io-pieces-other");
        for path in [&stale, &stale_temporary, &held, &someone_elses] {
            std::fs::write(path, b"x").expect("write");
        }
        let holder = File::open(&held).expect("open");
        holder.lock_shared().expect("lock");
        let made = attach(dir.path(), &key(), SIZES, prefill, holds_ab).expect("made");
        let names = ours(dir.path());
        assert!(!stale.exists() && !stale_temporary.exists(), "{names:?}");
        assert!(held.exists() && someone_elses.exists(), "{names:?}");
        drop(made);
    }

    #[test]
    fn a_file_of_other_tables_is_made_again_unless_a_process_holds_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(file_name(&name_key(&key(), SIZES)));
        // Cut short, and the right size without a header (another layout's, a crash's).
        for bad in [b"not tables".to_vec(), vec![0u8; file_bytes(SIZES)]] {
            std::fs::write(&path, &bad).expect("write");
            let holder = File::open(&path).expect("open");
            holder.lock_shared().expect("lock");
            let Err(reason) = attach(dir.path(), &key(), SIZES, prefill, holds_ab) else {
                panic!("a file of other tables was mapped");
            };
            assert!(
                reason.contains("does not hold tables of this layout"),
                "{reason}"
            );
            assert!(
                std::fs::read(&path).expect("read") == bad,
                "a held file is left alone"
            );
            drop(holder);
            let (pieces, node) = attach(dir.path(), &key(), SIZES, prefill, holds_ab)
                .expect("made again once no process holds it");
            assert!(holds_ab(&pieces));
            drop((pieces, node));
        }
    }

    #[test]
    fn tables_that_do_not_hold_the_pieces_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let made = attach(dir.path(), &key(), SIZES, prefill, holds_ab).expect("made");
        let Err(reason) = attach(dir.path(), &key(), SIZES, prefill, |_| false) else {
            panic!("the check was skipped");
        };
        assert!(reason.contains("does not hold"), "{reason}");
        drop(made);
    }

    #[test]
    fn a_missing_folder_is_a_reason_not_a_panic() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("no/such/folder");
        let Err(reason) = attach(&missing, &key(), SIZES, prefill, holds_ab) else {
            panic!("made tables in a missing folder");
        };
        assert!(reason.contains("cannot make"), "{reason}");
    }
}
