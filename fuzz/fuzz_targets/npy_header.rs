//! The `.npy` header reader of the Rust core, `layout::cache::npy_shape` (rust/layout/cache.rs):
//! it reads the header of each array of a task folder (`arrays_mismatch`, and the totals of
//! `tokenize::output::output_totals`) to tell a complete folder from a damaged one. On arbitrary
//! bytes written to a file it must return `Ok` or `Err`, never panic. (layout/npy.rs only writes.)
//!
//! When it says `complete`, the file must hold exactly the bytes the header announces: checked
//! against the header's own length (the magic, the version's length field, the text).
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use data_io_core::layout::cache::npy_shape;
use libfuzzer_sys::fuzz_target;

fn path() -> &'static Path {
    static PATH: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, path) = PATH.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("tokens.npy");
        (dir, path)
    });
    path
}

/// The length of the header (magic, version, length field, text) as its length field says.
fn header_len(data: &[u8]) -> Option<u64> {
    match data.get(6)? {
        1 => Some(10 + u64::from(u16::from_le_bytes(data.get(8..10)?.try_into().ok()?))),
        2 | 3 => Some(12 + u64::from(u32::from_le_bytes(data.get(8..12)?.try_into().ok()?))),
        _ => None,
    }
}

fuzz_target!(|data: &[u8]| {
    let path = path();
    std::fs::write(path, data).expect("write the input file");
    let Ok(found) = npy_shape(path) else {
        return;
    };
    if found.complete {
        let start = header_len(data).expect("a header was read, with a length");
        let body = data.len() as u64 - start;
        let count = found
            .shape
            .iter()
            .try_fold(1u64, |n, &d| n.checked_mul(d))
            .expect("complete, yet the element count overflows");
        // (A multiple of 0 is 0 only.)
        assert!(
            body.is_multiple_of(count),
            "complete, yet {body} data bytes are not {count} elements of {}",
            found.dtype
        );
    }
});
