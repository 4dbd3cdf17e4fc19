//! numpy's `Generator(Philox(seed))`, bit for bit, for the two calls the sampler makes:
//! `shuffle` of a 1-D array and `permutation(n)` (= `shuffle(arange(n))`).
//!
//! The sampler must reproduce the original's epoch arrays exactly, and those come from one
//! serial chain of numpy shuffles (formats.md §4). numpy spends ~33 ns per element there;
//! most of it is waiting for the cache line of the random swap partner. Here the partners of
//! the next few positions are drawn ahead (they depend only on the generator and the
//! position, never on the data) and prefetched, so the misses overlap.
//!
//! The state is numpy's `Philox.state` field for field (counter, key, the buffer of four
//! outputs, its position, and the spare half-word of `next_uint32`), so a run can hand the
//! generator back and forth between numpy and this code.

/// Philox4x64-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"), with
/// numpy's buffering of outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumpyPhilox {
    pub counter: [u64; 4],
    pub key: [u64; 2],
    pub buffer: [u64; 4],
    /// Next unread entry of `buffer`; 4 means a new block must be generated.
    pub buffer_pos: usize,
    /// `next_uint32` uses both halves of a 64-bit output: the high half waits here.
    pub has_uint32: bool,
    pub uinteger: u32,
}

use super::prefetch::prefetch;

const ROUNDS: usize = 10;
const MULTIPLIERS: [u64; 2] = [0xD2E7_470E_E14C_6C93, 0xCA5A_8263_9512_1157];
const KEY_BUMPS: [u64; 2] = [0x9E37_79B9_7F4A_7C15, 0xBB67_AE85_84CA_A73B];
/// Positions whose swap partners are drawn (and prefetched) before the swaps are made.
const LOOKAHEAD: usize = 64;

fn mul_hi_lo(a: u64, b: u64) -> (u64, u64) {
    let product = u128::from(a) * u128::from(b);
    ((product >> 64) as u64, product as u64)
}

/// The 10-round bijection of one counter block under `key`.
fn philox4x64(mut block: [u64; 4], mut key: [u64; 2]) -> [u64; 4] {
    for round in 0..ROUNDS {
        if round > 0 {
            key[0] = key[0].wrapping_add(KEY_BUMPS[0]);
            key[1] = key[1].wrapping_add(KEY_BUMPS[1]);
        }
        let (hi0, lo0) = mul_hi_lo(MULTIPLIERS[0], block[0]);
        let (hi1, lo1) = mul_hi_lo(MULTIPLIERS[1], block[2]);
        block = [hi1 ^ block[1] ^ key[0], lo1, hi0 ^ block[3] ^ key[1], lo0];
    }
    block
}

impl NumpyPhilox {
    /// The next 64-bit output (numpy's `next_uint64`).
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        if self.buffer_pos < self.buffer.len() {
            let out = self.buffer[self.buffer_pos];
            self.buffer_pos += 1;
            return out;
        }
        // The counter is incremented before use, as a 256-bit integer.
        for word in &mut self.counter {
            *word = word.wrapping_add(1);
            if *word != 0 {
                break;
            }
        }
        self.buffer = philox4x64(self.counter, self.key);
        self.buffer_pos = 1;
        self.buffer[0]
    }

    /// The next 32-bit output (numpy's `next_uint32`: low half first, then the high half).
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        if self.has_uint32 {
            self.has_uint32 = false;
            return self.uinteger;
        }
        let next = self.next_u64();
        self.has_uint32 = true;
        self.uinteger = (next >> 32) as u32;
        next as u32
    }

    /// A uniform integer in `0..=max` by masked rejection (numpy's `random_interval`).
    #[inline]
    pub fn interval(&mut self, max: u64) -> u64 {
        if max == 0 {
            return 0;
        }
        let mask = u64::MAX >> max.leading_zeros();
        if max <= u64::from(u32::MAX) {
            loop {
                let value = u64::from(self.next_u32()) & mask;
                if value <= max {
                    return value;
                }
            }
        }
        loop {
            let value = self.next_u64() & mask;
            if value <= max {
                return value;
            }
        }
    }

    /// `Generator.shuffle` of a 1-D array: Fisher–Yates from the last position down, the
    /// same draws and the same swaps as numpy.
    pub fn shuffle<T>(&mut self, data: &mut [T]) {
        let mut partners = [0usize; LOOKAHEAD];
        let mut top = data.len().saturating_sub(1); // next position to swap; 0 is never
        while top > 0 {
            let batch = LOOKAHEAD.min(top);
            for (step, partner) in partners[..batch].iter_mut().enumerate() {
                // interval(top - step) <= top - step < len: always in bounds.
                *partner = self.interval((top - step) as u64) as usize;
                prefetch(&data[*partner]);
            }
            for (step, &partner) in partners[..batch].iter().enumerate() {
                data.swap(top - step, partner);
            }
            top -= batch;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(key: [u64; 2]) -> NumpyPhilox {
        NumpyPhilox {
            counter: [0; 4],
            key,
            buffer: [0; 4],
            buffer_pos: 4,
            has_uint32: false,
            uinteger: 0,
        }
    }

    #[test]
    fn matches_the_random123_known_answers() {
        // Known-answer vectors of Philox4x64-10 published with Random123 (kat_vectors).
        assert_eq!(
            philox4x64([0; 4], [0; 2]),
            [
                0x16554d9eca36314c,
                0xdb20fe9d672d0fdc,
                0xd7e772cee186176b,
                0x7e68b68aec7ba23b
            ]
        );
        assert_eq!(
            philox4x64([u64::MAX; 4], [u64::MAX; 2]),
            [
                0x87b092c3013fe90b,
                0x438c3c67be8d0224,
                0x9cc7d7c69cd777b6,
                0xa09caebf594f0ba0
            ]
        );
    }

    #[test]
    fn counter_carries_across_words() {
        let mut rng = fresh([1, 2]);
        rng.counter = [u64::MAX, u64::MAX, 0, 0];
        rng.next_u64();
        assert_eq!(rng.counter, [0, 0, 1, 0]);
        assert_eq!(rng.buffer_pos, 1);
    }

    #[test]
    fn u32_outputs_split_u64_outputs_low_half_first() {
        let mut wide = fresh([7, 9]);
        let mut narrow = wide.clone();
        for _ in 0..10 {
            let value = wide.next_u64();
            assert_eq!(narrow.next_u32(), value as u32);
            assert_eq!(narrow.next_u32(), (value >> 32) as u32);
        }
    }

    #[test]
    fn interval_stays_in_range_on_both_paths() {
        let mut rng = fresh([3, 4]);
        for max in [0u64, 1, 2, 3, 1000, u64::from(u32::MAX), 1 << 40, u64::MAX] {
            for _ in 0..200 {
                assert!(rng.interval(max) <= max);
            }
        }
    }

    #[test]
    fn shuffle_is_a_permutation_and_matches_a_plain_fisher_yates() {
        for len in [0usize, 1, 2, 31, 32, 33, 1000] {
            let mut rng = fresh([5, 6]);
            let mut plain_rng = rng.clone();
            let mut data: Vec<u32> = (0..len as u32).collect();
            rng.shuffle(&mut data);
            // The same algorithm without look-ahead: one draw, one swap.
            let mut plain: Vec<u32> = (0..len as u32).collect();
            for top in (1..len).rev() {
                let partner = plain_rng.interval(top as u64) as usize;
                plain.swap(top, partner);
            }
            assert_eq!(data, plain);
            assert_eq!(rng, plain_rng);
            data.sort_unstable();
            assert_eq!(data, (0..len as u32).collect::<Vec<_>>());
        }
    }
}
