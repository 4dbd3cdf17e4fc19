//! The extension's allocator (mimalloc) and the two options it is run with.

/// mimalloc for everything the extension allocates: the HF encoder and the readers allocate
/// per text, and glibc's malloc costs them a third of their speed (see Cargo.toml).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its 16th option in v2 and v3's `mimalloc.h`; the
/// crate exports no constant for it).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

/// mimalloc's `mi_option_allow_thp` (its 44th option in v3's `mimalloc.h`).
const MI_OPTION_ALLOW_THP: std::ffi::c_int = 43;

/// The allocator's heap on ordinary 4 KiB pages; the lookup tables keep their 2 MiB pages
/// (`table_memory.rs` maps and advises them itself). mimalloc advises transparent huge pages
/// for every arena it maps; set before its first arena (the module's first call into Rust),
/// this stops that without turning them off for the process (set at mimalloc's start, the
/// option would, for every library in it). Why: a batch's texts, buffers and ids are read in
/// order, where huge pages buy nothing, and each fault in an advised region zeroes 2 MiB and may
/// first compact memory to find them (`defrag` advises it): `prepare --dedup doc` on one
/// thread 3.98 -> 3.65 CPU seconds (median of 5, 154 MB, Qwen), on two 4.81 -> 3.58; the
/// encoder alone the same within the noise.
pub(super) fn heap_on_small_pages() {
    // SAFETY: a plain call setting one of the allocator's options.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_ALLOW_THP, 0) };
}

/// In a process that prepares or encodes batches, freed memory goes back to the system after a
/// second, not 10 ms: each batch frees and allocates again buffers of megabytes, and pages the
/// system had taken back came again zeroed, 2 MiB at a time where huge pages are on
/// (`clear_page` was 8-19% of a prepare profile; measured 47-49 -> 52-55 MB/s on one thread,
/// with MIMALLOC_PURGE_DELAY=2000 set in the environment; `encode_batch` of 4096 texts at two
/// threads, 1000 against 10 ms: 288-293 against 265-271 MB/s). A process that stops encoding
/// holds what it freed a second longer; what it keeps while encoding is the same.
pub(super) fn keep_freed_memory_a_while() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: a plain call setting one of the allocator's options.
    ONCE.call_once(|| unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 1000) });
}
