//! Each document's 128-bit BLAKE2b (BLAKE2b with a 16-byte digest, not a cut 64-byte one), as
//! `hashlib.blake2b(text.encode(), digest_size=16)` makes it: the de-duplication and the
//! train/val split read it, and the hashes of earlier runs stay in the output folder, so it
//! must never change. As two integers, the digest's first and last eight bytes read big-endian.

use rayon::prelude::*;

/// The (high, low) halves of each text's digest, in order, on the caller's rayon pool.
pub fn hash_all<S: AsRef<str> + Sync>(texts: &[S]) -> Vec<[u64; 2]> {
    texts.par_iter().map(|text| hash(text.as_ref())).collect()
}

pub fn hash(text: &str) -> [u64; 2] {
    let digest = blake2b_simd::Params::new()
        .hash_length(16)
        .hash(text.as_bytes());
    let (high, low) = digest.as_bytes().split_at(8);
    [
        u64::from_be_bytes(high.try_into().expect("eight bytes")),
        u64::from_be_bytes(low.try_into().expect("eight bytes")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_blake2b_with_a_16_byte_output() {
        // hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
        for (text, hex) in [
            ("", "cae66941d9efbd404e4d88758ea67670"),
            ("abc", "cf4ab791c62b8d2b2109c90275287816"),
            ("\u{e9}", "d4b1b0202b21bb84e60a3d272ecab0db"),
        ] {
            let [high, low] = hash(text);
            assert_eq!(format!("{high:016x}{low:016x}"), hex, "{text:?}");
        }
        assert_eq!(hash_all(&["abc", ""]), vec![hash("abc"), hash("")]);
    }
}
