//! JSONL rows: one JSON object per line. Lines are split here; JSON is parsed per row when
//! the batch is read (in parallel), borrowing the text where it has no escapes.

use std::borrow::Cow;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{RowText, FIELDS};
use crate::error::{Error, Location, Result};

/// Batches stop growing at this many bytes even if they hold fewer rows than asked: long
/// rows (books, code files) must not make a batch huge.
const BATCH_BYTES: usize = 8 << 20;

pub struct JsonlReader {
    path: Arc<PathBuf>,
    reader: BufReader<File>,
    batch_rows: usize,
    line_no: u64,
    bytes_done: u64,
    finished: bool,
}

impl JsonlReader {
    pub fn open(path: &Path, batch_rows: usize) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::read(path, e))?;
        Ok(JsonlReader {
            path: Arc::new(path.to_path_buf()),
            reader: BufReader::with_capacity(1 << 20, file),
            batch_rows: batch_rows.max(1),
            line_no: 0,
            bytes_done: 0,
            finished: false,
        })
    }

    pub fn bytes_done(&self) -> u64 {
        self.bytes_done
    }

    fn read_batch(&mut self) -> Result<Option<JsonlBatch>> {
        let mut batch = JsonlBatch {
            path: Arc::clone(&self.path),
            buf: Vec::new(),
            lines: Vec::new(),
        };
        while batch.lines.len() < self.batch_rows && batch.buf.len() < BATCH_BYTES {
            let start = batch.buf.len();
            let n = self
                .reader
                .read_until(b'\n', &mut batch.buf)
                .map_err(|e| Error::read(&self.path, e))?;
            if n == 0 {
                self.finished = true;
                break;
            }
            self.line_no += 1;
            self.bytes_done += n as u64;
            let mut end = batch.buf.len();
            while end > start && matches!(batch.buf[end - 1], b'\n' | b'\r') {
                end -= 1;
            }
            // Blank lines carry no row (a trailing newline, an editor's empty last line).
            if batch.buf[start..end].iter().all(u8::is_ascii_whitespace) {
                batch.buf.truncate(start);
                continue;
            }
            batch.lines.push((self.line_no, start..end));
        }
        Ok((!batch.lines.is_empty()).then_some(batch))
    }
}

impl Iterator for JsonlReader {
    type Item = Result<JsonlBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        match self.read_batch() {
            Ok(Some(batch)) => Some(Ok(batch)),
            Ok(None) => None,
            Err(e) => {
                self.finished = true;
                Some(Err(e))
            }
        }
    }
}

/// Raw lines of one batch, kept contiguous in one buffer.
pub struct JsonlBatch {
    path: Arc<PathBuf>,
    buf: Vec<u8>,
    /// (1-based line number, byte range in `buf`) of each non-blank line.
    lines: Vec<(u64, Range<usize>)>,
}

/// The three fields as raw JSON, so that missing, null and non-string can be told apart.
#[derive(Deserialize)]
struct RawRow<'a> {
    #[serde(borrow, default)]
    condition: Present<'a>,
    #[serde(borrow, default)]
    instruction: Present<'a>,
    #[serde(borrow, default)]
    response: Present<'a>,
}

/// A field's raw JSON if the key is present. Unlike `Option<&RawValue>`, a JSON `null` is
/// kept as present (`Some("null")`), so that "missing" and "null" get their own messages.
#[derive(Default)]
struct Present<'a>(Option<&'a RawValue>);

impl<'de: 'a, 'a> Deserialize<'de> for Present<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        <&'a RawValue>::deserialize(deserializer).map(|raw| Present(Some(raw)))
    }
}

impl JsonlBatch {
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    pub fn location(&self, i: usize) -> Location {
        Location::Line(self.lines[i].0)
    }

    pub fn row(&self, i: usize) -> Result<RowText<'_>> {
        let (_, range) = &self.lines[i];
        let bad = |message: String| Error::bad_row(&self.path, self.location(i), message);
        let text = std::str::from_utf8(&self.buf[range.clone()]).map_err(|e| {
            bad(format!(
                "invalid UTF-8 at byte {} of the line; files must be UTF-8 encoded",
                e.valid_up_to()
            ))
        })?;
        // serde would accept `[c, i, r]` for a struct; rows must be objects.
        if !text.trim_start().starts_with('{') {
            return Err(bad(format!(
                "expected a JSON object, found {}; each line must be one JSON object with \
                 string fields condition, instruction, response",
                json_type_name(text.trim_start())
            )));
        }
        let raw: RawRow<'_> = serde_json::from_str(text).map_err(|e| {
            bad(format!(
                "malformed JSON at column {}: {e}; each line must be one JSON object with \
                 string fields condition, instruction, response",
                e.column()
            ))
        })?;
        Ok(RowText {
            condition: string_field(raw.condition.0, FIELDS[0]).map_err(&bad)?,
            instruction: string_field(raw.instruction.0, FIELDS[1]).map_err(&bad)?,
            response: string_field(raw.response.0, FIELDS[2]).map_err(&bad)?,
        })
    }
}

fn string_field<'a>(raw: Option<&'a RawValue>, name: &str) -> Result<Cow<'a, str>, String> {
    let Some(raw) = raw else {
        return Err(format!("missing field \"{name}\""));
    };
    let json = raw.get();
    match json.as_bytes().first() {
        Some(b'"') => {
            // Borrow when the string has no escapes; otherwise unescape into a new String.
            if let Ok(s) = serde_json::from_str::<&str>(json) {
                Ok(Cow::Borrowed(s))
            } else {
                serde_json::from_str::<String>(json)
                    .map(Cow::Owned)
                    .map_err(|e| format!("field \"{name}\": {e}"))
            }
        }
        Some(b'n') => Err(format!("field \"{name}\" is null; expected a string")),
        _ => Err(format!(
            "field \"{name}\" is {}; expected a string",
            json_type_name(json)
        )),
    }
}

fn json_type_name(json: &str) -> &'static str {
    match json.as_bytes().first() {
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b't' | b'f') => "a boolean",
        Some(b'"') => "a string",
        Some(b'n') => "null",
        _ => "a number",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn reader_over(bytes: &[u8], batch_rows: usize) -> (tempfile::TempDir, JsonlReader) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.jsonl");
        File::create(&path).unwrap().write_all(bytes).unwrap();
        let reader = JsonlReader::open(&path, batch_rows).unwrap();
        (dir, reader)
    }

    fn all_rows(bytes: &[u8]) -> Vec<Result<(String, String, String)>> {
        let (_dir, reader) = reader_over(bytes, 2);
        let mut out = Vec::new();
        for batch in reader {
            let batch = batch.unwrap();
            for i in 0..batch.len() {
                out.push(batch.row(i).map(|r| {
                    (
                        r.condition.into_owned(),
                        r.instruction.into_owned(),
                        r.response.into_owned(),
                    )
                }));
            }
        }
        out
    }

    #[test]
    fn reads_rows_in_order_across_batches_with_escapes_and_crlf() {
        let data = "{\"condition\":\"cot\",\"instruction\":\"q1\",\"response\":\"a1\"}\r\n\
                    \n\
                    {\"response\":\"line\\nbreak \\u00e9\",\"instruction\":\"日本\",\"condition\":\"\",\"extra\":1}\n\
                    {\"condition\":\"direct\",\"instruction\":\"<|im_end|>\",\"response\":\"x\"}";
        let rows: Vec<_> = all_rows(data.as_bytes())
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0], ("cot".into(), "q1".into(), "a1".into()));
        assert_eq!(rows[1], ("".into(), "日本".into(), "line\nbreak é".into()));
        assert_eq!(rows[2].1, "<|im_end|>");
    }

    #[test]
    fn bad_rows_name_the_line_and_the_problem() {
        let mut data = Vec::new();
        data.extend_from_slice(
            b"{\"condition\":\"cot\",\"instruction\":\"q\",\"response\":\"a\"}\n",
        );
        data.extend_from_slice(b"{not json}\n");
        data.extend_from_slice(b"{\"condition\":\"cot\",\"instruction\":\"q\"}\n");
        data.extend_from_slice(
            b"{\"condition\":\"cot\",\"instruction\":null,\"response\":\"a\"}\n",
        );
        data.extend_from_slice(b"{\"condition\":\"cot\",\"instruction\":3,\"response\":\"a\"}\n");
        data.extend_from_slice(
            b"{\"condition\":\"cot\",\"instruction\":\"\xff\",\"response\":\"a\"}\n",
        );
        data.extend_from_slice(b"[1,2]\n");
        let rows = all_rows(&data);
        assert!(rows[0].is_ok());
        let messages: Vec<String> = rows[1..]
            .iter()
            .map(|r| r.as_ref().unwrap_err().to_string())
            .collect();
        assert!(
            messages[0].contains(":line 2: malformed JSON"),
            "{}",
            messages[0]
        );
        assert!(messages[1].contains(":line 3: missing field \"response\""));
        assert!(messages[2].contains(":line 4: field \"instruction\" is null"));
        assert!(messages[3].contains(":line 5: field \"instruction\" is a number"));
        assert!(messages[4].contains(":line 6: invalid UTF-8"));
        assert!(messages[5].contains(":line 7: expected a JSON object, found an array"));
    }

    #[test]
    fn empty_file_yields_no_batches() {
        let (_dir, mut reader) = reader_over(b"", 8);
        assert!(reader.next().is_none());
        let (_dir, mut reader) = reader_over(b"\n\n", 8);
        assert!(reader.next().is_none());
    }
}
