//! Each document's text from its span (`split.rs`), as `data_io/formats/raw_text.py` makes it:
//! UTF-8 checked (bad bytes replaced with U+FFFD and the line counted, or an error naming the
//! line and byte), a text file's carriage returns before newlines removed, a JSONL row's text
//! field taken out.
//!
//! A JSONL row is parsed by the fast path of `reader::json_row`, then by serde_json. A row
//! neither takes (not an object, no field or a duplicate one, a value that is not a string,
//! a lone surrogate escape, NaN, invalid JSON) is handed back `Deferred`: Python parses it
//! with the rules and messages it has always had (`raw_text._jsonl_text`), so every row reads
//! the same either way and only well-formed rows are read here.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

use super::split::{Documents, Entry, Format, SourceInfo};
use crate::error::{Error, Result};
use crate::reader::json_row::parse_fields;

/// What changes the text read (the `ReadOptions` of Python that reach this far).
#[derive(Clone, Debug)]
pub struct ReadOptions {
    pub text_field: String,
    /// `--invalid-utf8 fail`: bytes that are not UTF-8 are an error, not replaced.
    pub fail_invalid: bool,
}

/// One document's text, or the JSONL line Python must read.
#[derive(Debug, PartialEq, Eq)]
pub enum Row<'a> {
    Text(Cow<'a, str>),
    Deferred(Cow<'a, str>),
}

/// A document read, with the number of its lines that held bytes that are not UTF-8.
#[derive(Debug, PartialEq, Eq)]
pub struct Read<'a> {
    pub row: Row<'a>,
    pub invalid_lines: u64,
}

/// The document of `entry`.
pub fn read<'a>(docs: &'a Documents, entry: &Entry, options: &ReadOptions) -> Result<Read<'a>> {
    let source = docs.source(entry);
    // A text line's carriage return is left out of the span; a bad character cut short just
    // before it is still followed by a byte, as Python sees the line.
    let cut_cr = source.format != Format::Jsonl && docs.data.get(entry.end) == Some(&b'\r');
    let (text, invalid_lines) = decoded(docs.bytes(entry), entry, source, options, cut_cr)?;
    let row = match source.format {
        Format::Blocks if text.contains("\r\n") => {
            Row::Text(Cow::Owned(text.replace("\r\n", "\n")))
        }
        Format::Jsonl => match text {
            Cow::Borrowed(line) => match field_text(line, &options.text_field) {
                Some(found) => Row::Text(found),
                None => Row::Deferred(Cow::Borrowed(line)),
            },
            Cow::Owned(line) => match field_text(&line, &options.text_field).map(Cow::into_owned) {
                Some(found) => Row::Text(Cow::Owned(found)),
                None => Row::Deferred(Cow::Owned(line)),
            },
        },
        _ => Row::Text(text),
    };
    Ok(Read { row, invalid_lines })
}

/// `bytes` as text: itself when it is UTF-8; otherwise line by line, each bad line with its
/// bad bytes replaced (and counted) or the first one an error.
fn decoded<'a>(
    bytes: &'a [u8],
    entry: &Entry,
    source: &SourceInfo,
    options: &ReadOptions,
    cut_cr: bool,
) -> Result<(Cow<'a, str>, u64)> {
    if let Ok(text) = simdutf8::basic::from_utf8(bytes) {
        return Ok((Cow::Borrowed(text), 0));
    }
    let mut text = String::with_capacity(bytes.len() + 16);
    let mut invalid = 0;
    let mut offset = entry.offset;
    for (k, line) in bytes.split(|&b| b == b'\n').enumerate() {
        if k > 0 {
            text.push('\n');
        }
        match std::str::from_utf8(line) {
            Ok(valid) => text.push_str(valid),
            Err(error) if options.fail_invalid => {
                let last = line.as_ptr_range().end == bytes.as_ptr_range().end;
                return Err(invalid_utf8(
                    line,
                    &error,
                    entry.line + k as u64,
                    offset,
                    source,
                    last && cut_cr,
                ));
            }
            Err(_) => {
                invalid += 1;
                text.push_str(&String::from_utf8_lossy(line));
            }
        }
        offset += line.len() as u64 + 1;
    }
    Ok((Cow::Owned(text), invalid))
}

/// The error of `--invalid-utf8 fail`, worded as Python words it (`raw_text._decode`).
fn invalid_utf8(
    line: &[u8],
    error: &std::str::Utf8Error,
    number: u64,
    offset: u64,
    source: &SourceInfo,
    byte_follows: bool,
) -> Error {
    let at = error.valid_up_to();
    // Python's reasons: a byte that never starts a character, a character cut short by the
    // end of the line, or a character whose next byte does not continue it (a carriage return
    // left out of the line is such a byte).
    let reason = match (line[at], error.error_len()) {
        (0x80..=0xC1 | 0xF5..=0xFF, _) => "invalid start byte",
        (_, None) if !byte_follows => "unexpected end of data",
        _ => "invalid continuation byte",
    };
    let decompressed = if source.compressed {
        "decompressed "
    } else {
        ""
    };
    Error::Input(format!(
        "{}: line {number}: invalid UTF-8 at byte offset {} of the {decompressed}text \
         ({reason}); fix the file, or pass --invalid-utf8 replace to replace bad bytes with \
         U+FFFD and count them",
        source.name,
        offset + at as u64
    ))
}

/// The string `field` of the JSON object `line`, when the line is one whose field is a
/// string given once; `None` for anything else (Python reads it).
pub fn field_text<'l>(line: &'l str, field: &str) -> Option<Cow<'l, str>> {
    if let Some([text]) = parse_fields(line, &[field]) {
        return Some(text);
    }
    let mut parser = serde_json::Deserializer::from_str(line);
    let text = parser.deserialize_map(FieldOf(field)).ok()??;
    parser.end().ok()?;
    // serde skips any depth of nesting and any length of number; Python does not (its
    // parsers stop at about a thousand levels and at 4300 digits): such rows are Python's.
    if beyond_python(line.as_bytes()) {
        return None;
    }
    Some(text)
}

/// Nesting deeper than 512 levels, or a number of more than 4000 digits (well within what
/// Python reads, so that Python decides every row near its limits).
fn beyond_python(line: &[u8]) -> bool {
    const DEPTH: usize = 512;
    const DIGITS: usize = 4000;
    let (mut depth, mut digits, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in line {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        digits = if b.is_ascii_digit() { digits + 1 } else { 0 };
        if depth > DEPTH || digits > DIGITS {
            return true;
        }
    }
    false
}

/// Finds one field's string in an object, skipping the other values unread.
struct FieldOf<'f>(&'f str);

impl<'de> Visitor<'de> for FieldOf<'_> {
    type Value = Option<Cow<'de, str>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<Self::Value, A::Error> {
        let (mut found, mut times) = (None, 0);
        while let Some(is_field) = map.next_key_seed(KeyIs(self.0))? {
            if is_field {
                times += 1;
                found = Some(map.next_value::<Text<'de>>()?.0);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        // A field given twice goes to Python, which refuses the row naming the field.
        Ok(if times == 1 { found } else { None })
    }
}

/// Whether a key is the field's name.
struct KeyIs<'f>(&'f str);

impl<'de> DeserializeSeed<'de> for KeyIs<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<bool, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs<'_> {
    type Value = bool;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, key: &str) -> std::result::Result<bool, E> {
        Ok(key == self.0)
    }
}

/// A string value, borrowed from the line when it has no escapes; any other value is an error
/// (the row goes to Python).
struct Text<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Text<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_str(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, text: &'de str) -> std::result::Result<Text<'de>, E> {
        Ok(Text(Cow::Borrowed(text)))
    }

    fn visit_str<E>(self, text: &str) -> std::result::Result<Text<'de>, E> {
        Ok(Text(Cow::Owned(text.to_owned())))
    }

    fn visit_string<E>(self, text: String) -> std::result::Result<Text<'de>, E> {
        Ok(Text(Cow::Owned(text)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(format: Format, bytes: &[u8], fail_invalid: bool) -> Result<(Row<'static>, u64)> {
        let mut docs = Documents::new();
        docs.begin_source(SourceInfo {
            name: "in.txt".into(),
            format,
            compressed: true,
            first_line: 1,
            origin: None,
        });
        docs.feed(b"\n\n\n\n\n\n", 94);
        docs.feed(bytes, 100);
        docs.end_source();
        let options = ReadOptions {
            text_field: "text".into(),
            fail_invalid,
        };
        let read = read(&docs, &docs.entries[0], &options)?;
        let row = match read.row {
            Row::Text(text) => Row::Text(Cow::Owned(text.into_owned())),
            Row::Deferred(line) => Row::Deferred(Cow::Owned(line.into_owned())),
        };
        Ok((row, read.invalid_lines))
    }

    fn text(row: &str) -> Row<'static> {
        Row::Text(Cow::Owned(row.to_owned()))
    }

    #[test]
    fn text_lines_lose_one_carriage_return_and_bad_bytes_are_replaced_per_line() {
        let got = one(Format::Blocks, b"a\r\r\nb\xff\r\nc\xe2\x82\r\n", false).expect("read");
        assert_eq!(got, (text("a\r\nb\u{fffd}\nc\u{fffd}"), 2));
    }

    #[test]
    fn a_bad_byte_under_fail_names_the_line_the_offset_and_the_reason() {
        for (bytes, reason, at) in [
            (&b"ok\nx\xffy\n"[..], "invalid start byte", 104),
            (b"ok\nxy\xe2\x82", "unexpected end of data", 105),
            (b"ok\nx\xe2\x28\n", "invalid continuation byte", 104),
            (b"ok\nxy\xe2\x82\r\n", "invalid continuation byte", 105),
        ] {
            let error = one(Format::Blocks, bytes, true)
                .expect_err("fails")
                .to_string();
            assert_eq!(
                error,
                format!(
                    "in.txt: line 8: invalid UTF-8 at byte offset {at} of the decompressed text \
                     ({reason}); fix the file, or pass --invalid-utf8 replace to replace bad \
                     bytes with U+FFFD and count them"
                )
            );
        }
    }

    #[test]
    fn jsonl_rows_give_their_field_or_go_to_python() {
        let row = |line: &str| one(Format::Jsonl, line.as_bytes(), false).expect("read").0;
        assert_eq!(
            row(r#"{"id": 3, "text": "a\nb", "x": [1, {"y": null}]}"#),
            text("a\nb")
        );
        assert_eq!(row(r#" {"text":"plain"} "#), text("plain"));
        for line in [
            r#"{"text": 3}"#,
            r#"{"text": "a", "text": "b"}"#,
            r#"{"other": "a"}"#,
            r#"{"text": "\ud800"}"#,
            r#"{"text": "a", "v": NaN}"#,
            r#"["text"]"#,
            r#"{"text": "a"} x"#,
        ] {
            assert_eq!(
                row(line),
                Row::Deferred(Cow::Owned(line.to_owned())),
                "{line}"
            );
        }
    }

    #[test]
    fn rows_near_python_limits_go_to_python() {
        let deep = format!(
            r#"{{"text": "t", "m": {}{}}}"#,
            "[".repeat(600),
            "]".repeat(600)
        );
        assert_eq!(field_text(&deep, "text"), None);
        let shallow = format!(
            r#"{{"text": "t", "m": {}{}}}"#,
            "[".repeat(50),
            "]".repeat(50)
        );
        assert_eq!(field_text(&shallow, "text").as_deref(), Some("t"));
        let long = format!(r#"{{"text": "t", "n": {}}}"#, "9".repeat(4001));
        assert_eq!(field_text(&long, "text"), None);
        let in_text = format!(r#"{{"text": "{}", "n": 1}}"#, "9".repeat(5000));
        assert_eq!(field_text(&in_text, "text").map(|t| t.len()), Some(5000));
    }
}
