//! The JSONL row fast path (`reader::json_row::parse`) against serde_json.
//!
//! The contract (rust/reader/json_row.rs, its proptest): whatever the fast path takes, serde
//! takes with the same three fields, both as the proptest's oracle reads it (a `Value` object
//! whose three fields are strings) and as the reader's own fallback does (a struct of the three
//! fields, which also rejects a duplicate field); `None` only sends the line to serde. And a
//! plain line (no backslash at all, an object whose values are all strings, each key once, the
//! three fields among them) is taken. Never a panic.
#![no_main]

use std::borrow::Cow;
use std::fmt;

use data_io_core::reader::json_row::parse;
use data_io_core::reader::FIELDS;
use libfuzzer_sys::fuzz_target;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

/// The reader's fallback (`jsonl::Row`): three string fields, other keys ignored.
#[derive(Deserialize)]
struct Row {
    condition: String,
    instruction: String,
    response: String,
}

/// The proptest's oracle: an object whose three fields are strings (a duplicate key: the last
/// one, as `Value` keeps it).
fn value_fields(line: &str) -> Option<[String; 3]> {
    let value: Value = serde_json::from_str(line).ok()?;
    let object = value.as_object()?;
    let field = |name: &str| object.get(name)?.as_str().map(str::to_owned);
    Some([field(FIELDS[0])?, field(FIELDS[1])?, field(FIELDS[2])?])
}

/// An object's entries in order, duplicates kept.
struct Entries(Vec<(String, Value)>);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor;
        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = Entries;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry::<String, Value>()? {
                    entries.push(entry);
                }
                Ok(Entries(entries))
            }
        }
        deserializer.deserialize_map(EntriesVisitor)
    }
}

/// Whether the fast path must take `line`: no escape anywhere, an object of string values with
/// distinct keys, the three fields among them.
fn plain(line: &str) -> bool {
    if line.contains('\\') || !line.trim_start().starts_with('{') {
        return false;
    }
    let Ok(Entries(entries)) = serde_json::from_str::<Entries>(line) else {
        return false;
    };
    let mut keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
    let all_strings = entries.iter().all(|(_, v)| v.is_string());
    keys.sort_unstable();
    let distinct = keys.windows(2).all(|w| w[0] != w[1]);
    all_strings && distinct && FIELDS.iter().all(|f| keys.binary_search(f).is_ok())
}

fn check(line: &str) {
    let Some(fast) = parse(line) else {
        assert!(
            !plain(line),
            "a plain row not taken by the fast path: {line:?}"
        );
        return;
    };
    let fast: [String; 3] = fast.map(Cow::into_owned);
    assert_eq!(
        Some(&fast),
        value_fields(line).as_ref(),
        "fast path and serde_json::Value differ on {line:?}"
    );
    let row: Row = match serde_json::from_str(line) {
        Ok(row) => row,
        Err(e) => panic!("the fast path took {line:?}, serde rejects it: {e}"),
    };
    assert_eq!(
        fast,
        [row.condition, row.instruction, row.response],
        "fast path and the serde fallback differ on {line:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    // `parse` takes text; the reader validates UTF-8 first. Invalid bytes still give a line
    // (with U+FFFD), so every input is a test.
    check(&String::from_utf8_lossy(data));
});
