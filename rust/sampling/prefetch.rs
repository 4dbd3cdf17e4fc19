//! The cache-line hint the gather and the shuffle share (a sibling of both, below them).

/// Ask the CPU to start loading `item`'s cache line (a hint: it never faults).
#[inline(always)]
pub(super) fn prefetch<T>(item: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: _mm_prefetch only hints the cache; any address is allowed.
    unsafe {
        core::arch::x86_64::_mm_prefetch(
            (item as *const T).cast::<i8>(),
            core::arch::x86_64::_MM_HINT_T0,
        );
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = item;
}
