//! File-system helpers shared by the stages that write: `tokenize` (task records,
//! `tokenizer_info.json`, part records) and `train` (the tokenizer's files).

use std::fs;
use std::path::Path;

use serde::Serialize;

use crate::error::{Error, IoContext, Result};

/// Write `value` as JSON to `path` through a temporary file and a rename.
pub fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let tmp = path.with_extension(format!("json.tmp-{}", std::process::id()));
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::Output(format!("cannot serialise {}: {e}", path.display())))?;
    fs::write(&tmp, text + "\n").ctx("cannot write", &tmp)?;
    fs::rename(&tmp, path).ctx("cannot rename into place", path)
}
