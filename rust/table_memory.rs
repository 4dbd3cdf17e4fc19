//! Zeroed memory for big lookup tables (the encoder's, the de-duplication's set), backed by
//! 2 MiB pages where the kernel gives them.
//!
//! Why: the tables are tens of MiB (Qwen's whole-token table 16 MiB, a thread's piece cache up
//! to 32 MiB) and each piece is a lookup at a random slot. With 4 KiB pages nearly every lookup
//! also misses the TLB and walks the page table, and the profile shows the time at the
//! prefetches; with 2 MiB pages the tables span a few dozen TLB entries. On Linux the memory
//! is an anonymous mapping with `MADV_HUGEPAGE` (transparent huge pages are usually enabled in
//! `madvise` mode, so only memory that asks gets them); elsewhere, or when the mapping fails,
//! it is an ordinary zeroed allocation.

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// Tables smaller than this stay on ordinary pages (a huge page would be mostly empty).
const HUGE_PAGE: usize = 2 << 20;

/// Types for which all-zero bytes are a valid value (plain integers, atomics of them, and
/// arrays and structs of those).
///
/// # Safety
/// Implement only for such types.
pub unsafe trait ZeroValid {}

// SAFETY: integers and atomic integers are valid as zeros.
unsafe impl ZeroValid for u64 {}
unsafe impl ZeroValid for std::sync::atomic::AtomicU64 {}
unsafe impl<T: ZeroValid, const N: usize> ZeroValid for [T; N] {}

/// A fixed-length slice of `T` whose bytes start as zeros.
pub struct ZeroedTable<T: ZeroValid> {
    ptr: NonNull<T>,
    len: usize,
    backing: Backing,
}

enum Backing {
    /// From `mmap` (anonymous, or a shared file): unmapped on drop (`bytes` as mapped).
    #[cfg(target_os = "linux")]
    Mapped {
        base: *mut libc::c_void,
        bytes: usize,
    },
    /// From the global allocator.
    Heap(std::alloc::Layout),
    /// Zero elements: nothing allocated.
    Empty,
}

// SAFETY: the table owns its memory exclusively, like a `Box<[T]>`.
unsafe impl<T: ZeroValid + Send> Send for ZeroedTable<T> {}
// SAFETY: shared access only hands out `&[T]`.
unsafe impl<T: ZeroValid + Sync> Sync for ZeroedTable<T> {}

impl<T: ZeroValid> ZeroedTable<T> {
    /// `len` zeroed elements.
    pub fn new(len: usize) -> ZeroedTable<T> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .expect("table size overflows usize");
        if bytes == 0 {
            return ZeroedTable {
                ptr: NonNull::dangling(),
                len,
                backing: Backing::Empty,
            };
        }
        #[cfg(target_os = "linux")]
        if bytes >= HUGE_PAGE {
            if let Some(table) = Self::mapped(len, bytes) {
                return table;
            }
        }
        let layout = std::alloc::Layout::array::<T>(len).expect("table layout");
        // SAFETY: the layout has a non-zero size (checked above).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(raw.cast::<T>()) else {
            std::alloc::handle_alloc_error(layout)
        };
        ZeroedTable {
            ptr,
            len,
            backing: Backing::Heap(layout),
        }
    }

    /// `len` elements of `file` from byte `offset` on (a multiple of the page size), mapped
    /// shared: every process that maps the file sees the others' writes (the node-wide piece
    /// tables, `node_tables`). The file's bytes must be valid `T`s, as a file grown by
    /// `set_len` (zeros) or written through such a mapping is.
    #[cfg(target_os = "linux")]
    pub fn shared_file(file: &std::fs::File, offset: u64, len: usize) -> std::io::Result<Self> {
        use std::os::fd::AsRawFd;
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .filter(|&bytes| bytes > 0)
            .ok_or_else(|| std::io::Error::other("a shared table needs a size that fits"))?;
        let offset = libc::off_t::try_from(offset).map_err(std::io::Error::other)?;
        // SAFETY: a fresh shared mapping of an open file; no existing memory is touched. The
        // caller made the file at least `offset + bytes` long.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                offset,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the range is the mapping just made. Huge pages for shared memory follow the
        // tmpfs mount and `shmem_enabled`; where they allow advice, this asks for them.
        unsafe {
            libc::madvise(base, bytes, libc::MADV_HUGEPAGE);
        }
        Ok(ZeroedTable {
            // A mapping is page aligned, so aligned for any table type.
            ptr: NonNull::new(base.cast::<T>())
                .ok_or_else(|| std::io::Error::other("null mapping"))?,
            len,
            backing: Backing::Mapped { base, bytes },
        })
    }

    /// An anonymous mapping with room to start on a huge-page boundary, advised to use huge
    /// pages; `None` if the kernel refuses the mapping.
    #[cfg(target_os = "linux")]
    fn mapped(len: usize, bytes: usize) -> Option<ZeroedTable<T>> {
        let mapped = bytes.checked_add(HUGE_PAGE)?;
        // SAFETY: a fresh private anonymous mapping; no existing memory is touched.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        let start = (base as usize).next_multiple_of(HUGE_PAGE);
        // SAFETY: [start, start + bytes) lies inside the mapping (at most HUGE_PAGE - 1 bytes
        // are skipped at its start). The advice only changes how pages are backed; it may be
        // refused (THP disabled), which leaves ordinary pages and is not an error.
        unsafe {
            libc::madvise(start as *mut libc::c_void, bytes, libc::MADV_HUGEPAGE);
        }
        // Anonymous mappings read as zeros and `start` is aligned for any `T` (2 MiB).
        Some(ZeroedTable {
            ptr: NonNull::new(start as *mut T)?,
            len,
            backing: Backing::Mapped {
                base,
                bytes: mapped,
            },
        })
    }
}

impl<T: ZeroValid> Deref for ZeroedTable<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        // SAFETY: `ptr` points to `len` initialised (zeroed, then written) elements that this
        // table owns, or is dangling with `len == 0`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: ZeroValid> DerefMut for ZeroedTable<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: ZeroValid> Drop for ZeroedTable<T> {
    fn drop(&mut self) {
        // The elements are plain data (`Zeroable` types the tables use have no `Drop`).
        match self.backing {
            #[cfg(target_os = "linux")]
            Backing::Mapped { base, bytes } => {
                // SAFETY: `base`/`bytes` are exactly the mapping made in `mapped`.
                unsafe {
                    libc::munmap(base, bytes);
                }
            }
            // SAFETY: allocated in `new` with this layout.
            Backing::Heap(layout) => unsafe {
                std::alloc::dealloc(self.ptr.as_ptr().cast(), layout)
            },
            Backing::Empty => {}
        }
    }
}

/// Give the memory freed so far back to the system now. With the extension's allocator
/// (mimalloc, the `python` feature) freed pages otherwise stay with the process until the
/// freeing thread allocates again, and a DataLoader worker's memory counts them: the parsing
/// of an encoder's load (80 MB), the scratch of the whole-characters table (about 4 MB).
/// Elsewhere (the system allocator) it does nothing.
pub fn release_freed() {
    #[cfg(feature = "python")]
    // SAFETY: a plain call into the allocator, which is the extension's global one.
    unsafe {
        libmimalloc_sys::mi_collect(true)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_huge_tables_start_zeroed_and_hold_writes() {
        for len in [0usize, 1, 1000, (HUGE_PAGE / 8) * 3 + 5] {
            let mut table = ZeroedTable::<u64>::new(len);
            assert_eq!(table.len(), len);
            assert!(table.iter().all(|&v| v == 0));
            for (i, slot) in table.iter_mut().enumerate() {
                *slot = i as u64;
            }
            assert!(table.iter().enumerate().all(|(i, &v)| v == i as u64));
            if len > 0 {
                assert_eq!(table.as_ptr() as usize % std::mem::align_of::<u64>(), 0);
            }
        }
    }
}
