//! The train/val split of `data_io/prepare/split.py`, for a batch encoded here: a document
//! goes to val when a 64-bit mix of its 128-bit hash and the seed, read as a fraction of 2^64,
//! is below the val fraction. `split.py` stays the rule's statement; the pipeline checks that
//! both count the same documents in val for every batch split here.

/// The split of one run: its mixed seed and the threshold of val.
#[derive(Clone, Copy, Debug)]
pub struct ValSplit {
    key: u64,
    threshold: u64,
}

impl ValSplit {
    /// `seed` as Python masks it to 64 bits; `fraction` in [0, 1).
    pub fn new(seed: u64, fraction: f64) -> ValSplit {
        // Python's `min(int(fraction * 2.0**64), 2**64 - 1)`: the product is exact (a power of
        // two) and `as` truncates and saturates as `int` and `min` do; none at all at or below 0.
        let threshold = if fraction > 0.0 {
            (fraction * 2f64.powi(64)) as u64
        } else {
            0
        };
        ValSplit {
            key: mix(seed),
            threshold,
        }
    }

    /// Whether the document hashed `hash` (high, low words) belongs to val.
    pub fn is_val(&self, hash: [u64; 2]) -> bool {
        mix(hash[0] ^ mix(hash[1] ^ self.key)) < self.threshold
    }
}

/// SplitMix64's finaliser (wrapping), as `split.py`'s `_mix`.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_fall_as_split_py_puts_them() {
        // Computed with data_io/prepare/split.py's numpy `is_val`.
        let hashes = [
            [0, 0],
            [1, 2],
            [u64::MAX, u64::MAX],
            [0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210],
            [42, 4242],
            [1 << 63, 1],
        ];
        let falls = |seed, fraction| {
            let split = ValSplit::new(seed, fraction);
            hashes.iter().map(|&h| split.is_val(h)).collect::<Vec<_>>()
        };
        assert_eq!(falls(7, 0.25), [false, false, false, false, false, true]);
        assert_eq!(falls(7, 0.5), [false, true, false, false, false, true]);
        assert_eq!(falls(123, 0.5), [true, true, false, false, true, false]);
        assert_eq!(falls(0, 0.9), [true; 6]);
    }

    #[test]
    fn no_fraction_means_no_val_and_the_share_is_about_the_fraction() {
        let none = ValSplit::new(0, 0.0);
        assert!((0..1000u64).all(|i| !none.is_val([i, i * 7])));
        let tenth = ValSplit::new(3, 0.1);
        let val = (0..100_000u64).filter(|&i| tenth.is_val([i, !i])).count();
        assert!((9_000..11_000).contains(&val), "{val}");
    }
}
