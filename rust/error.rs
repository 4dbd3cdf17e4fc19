//! The one error type of the Rust core.
//!
//! Every variant carries what a user needs to act on it: the file, the line or row, and
//! what to do. The Python bindings map each kind once onto the classes of
//! `data_io/errors.py` (see `bindings/call.rs`).

use std::fmt;
use std::path::{Path, PathBuf};

/// Where in an input file a problem sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// 1-based line of a JSONL file.
    Line(u64),
    /// 0-based row of a Parquet file.
    Row(u64),
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Line(n) => write!(f, "line {n}"),
            Location::Row(n) => write!(f, "row {n} (counted from 0)"),
        }
    }
}

/// Which family of problem this is; decides the Python exception class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Bad input data (a row or a whole file).
    Input,
    /// Bad options or configuration.
    Config,
    /// A tokenizer that cannot be loaded, trained or used.
    Tokenizer,
    /// Output that cannot be written, or a folder in the way.
    Output,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// One bad row; under `--on-error skip` it is counted and skipped.
    #[error("{}:{location}: {message}", path.display())]
    BadRow {
        path: PathBuf,
        location: Location,
        message: String,
    },
    /// A whole input file that cannot be read as rows (truncated Parquet, missing column...).
    #[error("{}: {message}", path.display())]
    BadFile { path: PathBuf, message: String },
    #[error("{context} {}: {source}{}", path.display(), os_advice(source))]
    Io {
        context: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// Bad input that is not one file's fault (e.g. no rows at all across the inputs).
    #[error("{0}")]
    Input(String),
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Tokenizer(String),
    #[error("{0}")]
    Output(String),
    /// Several files failed; each message is kept.
    #[error("{} input file(s) failed:\n{}", .0.len(), join_lines(.0))]
    Many(Vec<Error>),
}

fn join_lines(errors: &[Error]) -> String {
    errors
        .iter()
        .map(|e| format!("  - {e}"))
        .collect::<Vec<_>>()
        .join("\n")
}

impl ErrorKind {
    /// The kind's name, as reports carry it and `data_io.errors.error_class` reads it.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Input => "input",
            ErrorKind::Config => "config",
            ErrorKind::Tokenizer => "tokenizer",
            ErrorKind::Output => "output",
        }
    }
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::BadRow { .. } | Error::BadFile { .. } | Error::Input(_) => ErrorKind::Input,
            Error::Io { .. } => ErrorKind::Output,
            Error::Config(_) => ErrorKind::Config,
            Error::Tokenizer(_) => ErrorKind::Tokenizer,
            Error::Output(_) => ErrorKind::Output,
            Error::Many(errors) => errors.first().map_or(ErrorKind::Input, Error::kind),
        }
    }

    pub fn bad_row(path: &Path, location: Location, message: impl Into<String>) -> Self {
        Error::BadRow {
            path: path.to_path_buf(),
            location,
            message: message.into(),
        }
    }

    pub fn bad_file(path: &Path, message: impl Into<String>) -> Self {
        Error::BadFile {
            path: path.to_path_buf(),
            message: message.into(),
        }
    }

    /// An I/O error while reading an input; reported as bad input, not as an output problem.
    pub fn read(path: &Path, source: std::io::Error) -> Self {
        Error::bad_file(path, format!("cannot read: {source}"))
    }

    pub fn io(context: &'static str, path: &Path, source: std::io::Error) -> Self {
        Error::Io {
            context,
            path: path.to_path_buf(),
            source,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What to do about an operating-system error of the output side (the advice of
/// `data_io.errors.os_error_message`, for the errors the core itself reports).
fn os_advice(error: &std::io::Error) -> &'static str {
    match error.raw_os_error() {
        Some(libc::ENOSPC) => {
            " [ENOSPC]; free space on that file system, or write the output to another one"
        }
        Some(libc::EDQUOT) => {
            " [EDQUOT]; the disk quota is used up: free space or write the output elsewhere"
        }
        Some(libc::EROFS) => {
            " [EROFS]; that file system is read-only: write the output to a writable folder"
        }
        Some(libc::EACCES | libc::EPERM) => {
            "; check the permissions of that path, or use another folder"
        }
        Some(libc::EMFILE | libc::ENFILE) => {
            "; too many open files: raise the limit (ulimit -n) or use fewer workers"
        }
        _ => "",
    }
}

/// Attach a path to `std::io::Result`s (the output side).
pub trait IoContext<T> {
    fn ctx(self, context: &'static str, path: &Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, context: &'static str, path: &Path) -> Result<T> {
        self.map_err(|e| Error::io(context, path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_file_and_location() {
        let e = Error::bad_row(Path::new("a/b.jsonl"), Location::Line(7), "bad JSON");
        assert_eq!(e.to_string(), "a/b.jsonl:line 7: bad JSON");
        assert_eq!(e.kind(), ErrorKind::Input);
        let many = Error::Many(vec![
            e,
            Error::bad_file(Path::new("c.parquet"), "truncated"),
        ]);
        assert!(many.to_string().contains("2 input file(s) failed"));
        assert!(many.to_string().contains("c.parquet: truncated"));
    }
}
