//! The heavy loops of the sampler (formats.md §4), for `data_io/sampling/`: numpy's Philox
//! shuffle reproduced bit for bit, the epoch gather, and the token pool copy. The algorithm
//! itself (which rows, in which order of calls) stays in Python; these are its primitives.
//!
//! - `mod.rs`: `prefetch`, the cache-line hint that `gather.rs` and `philox.rs` share.
//! - `philox.rs`: numpy's `Generator(Philox(seed))` `shuffle` and `permutation`, bit for bit.
//! - `gather.rs`: an epoch's four index arrays, gathered from the surviving rows in one pass.
//! - `pool.rs`: the token pool, every task's `tokens.npy` copied back to back.

pub mod gather;
pub mod philox;
pub mod pool;

/// Ask the CPU to start loading `item`'s cache line (a hint: it never faults).
#[inline(always)]
pub(crate) fn prefetch<T>(item: &T) {
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
