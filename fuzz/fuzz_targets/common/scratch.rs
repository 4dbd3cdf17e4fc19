//! The scratch folder of the targets that read files: made once a process, removed with it.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub fn dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("temp dir"))
        .path()
}

/// `bytes` written to the file `name` of the scratch folder, replacing what it held.
pub fn write(name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir().join(name);
    std::fs::write(&path, bytes).expect("write the input file");
    path
}
