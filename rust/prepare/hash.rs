//! Each document's 128-bit BLAKE2b (BLAKE2b with a 16-byte digest, not a cut 64-byte one), as
//! `hashlib.blake2b(text.encode(), digest_size=16)` makes it: the de-duplication and the
//! train/val split read it, and the hashes of earlier runs stay in the output folder, so it
//! must never change. As two integers, the digest's first and last eight bytes read big-endian.

use blake2b_simd::many::{hash_many, HashManyJob};
use rayon::prelude::*;

/// The (high, low) halves of each text's digest, in order, on the caller's rayon pool; a few
/// texts at a time in the SIMD lanes of `blake2b_simd::many` (the same digests).
pub fn hash_all<S: AsRef<str> + Sync>(texts: &[S]) -> Vec<[u64; 2]> {
    texts
        .par_chunks(LANES_PER_CALL)
        .flat_map_iter(|chunk| hash_chunk(chunk.iter().map(AsRef::as_ref)))
        .collect()
}

/// `hash_all` of a few texts on this thread (a chunk of `LANES_PER_CALL` keeps the lanes full).
pub fn hash_chunk<'t>(texts: impl Iterator<Item = &'t str>) -> Vec<[u64; 2]> {
    let params = params();
    let mut jobs: Vec<HashManyJob> = texts
        .map(|text| HashManyJob::new(&params, text.as_bytes()))
        .collect();
    hash_many(jobs.iter_mut());
    jobs.into_iter()
        .map(|job| halves(job.to_hash().as_bytes()))
        .collect()
}

/// Texts given to one `hash_many` call: enough to keep its lanes full as texts end.
pub const LANES_PER_CALL: usize = 64;

fn params() -> blake2b_simd::Params {
    let mut params = blake2b_simd::Params::new();
    params.hash_length(16);
    params
}

fn halves(digest: &[u8]) -> [u64; 2] {
    let (high, low) = digest.split_at(8);
    [
        u64::from_be_bytes(high.try_into().expect("eight bytes")),
        u64::from_be_bytes(low.try_into().expect("eight bytes")),
    ]
}

pub fn hash(text: &str) -> [u64; 2] {
    halves(params().hash(text.as_bytes()).as_bytes())
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
        let many: Vec<String> = (0..300).map(|i| "x".repeat(i * 7 % 301)).collect();
        let singly: Vec<[u64; 2]> = many.iter().map(|t| hash(t)).collect();
        assert_eq!(hash_all(&many), singly);
    }
}
