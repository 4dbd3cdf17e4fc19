//! The heavy loops of the sampler (formats.md §4), for `data_io/sampling/`: numpy's Philox
//! shuffle reproduced bit for bit, the epoch gather, and the token pool copy. The algorithm
//! itself (which rows, in which order of calls) stays in Python; these are its primitives.
//!
//! - `prefetch.rs`: the cache-line hint that `gather.rs` and `philox.rs` share.
//! - `philox.rs`: numpy's `Generator(Philox(seed))` `shuffle` and `permutation`, bit for bit.
//! - `gather.rs`: an epoch's four index arrays, gathered from the surviving rows in one pass.
//! - `pool.rs`: the token pool, every task's `tokens.npy` copied back to back.

pub mod gather;
pub mod philox;
pub mod pool;
mod prefetch;
