//! The fast path for the common JSONL row: one object whose keys are plain strings and whose
//! values are strings, parsed without serde, finding the end of each string 16 bytes at a time.
//!
//! Why: serde_json's string scanning, escape handling and visitor calls were 8% of a warm
//! `tokenize` run on documentation rows. Anything this path does not take (a value that is not
//! a string, an escaped key, a duplicate or missing field, invalid JSON) returns `None`, and the
//! caller parses the line with serde_json, which gives the same fields or names the problem.

use std::borrow::Cow;

use super::FIELDS;

/// The three fields of `line` in the order of `FIELDS`, or `None` when the line is not a
/// plain row (see the module doc). Other keys with string values are skipped, as serde does.
pub fn parse(line: &str) -> Option<[Cow<'_, str>; 3]> {
    parse_fields(line, &FIELDS)
}

/// The fields `names` of `line`, in that order, or `None` when the line is not a plain row
/// (see the module doc): `tokenize`'s three fields, or `prepare`'s text field.
pub fn parse_fields<'l, const N: usize>(
    line: &'l str,
    names: &[&str; N],
) -> Option<[Cow<'l, str>; N]> {
    let bytes = line.as_bytes();
    let mut fields: [Option<Cow<'l, str>>; N] = std::array::from_fn(|_| None);
    let mut i = skip_space(bytes, 0);
    if bytes.get(i) != Some(&b'{') {
        return None;
    }
    i = skip_space(bytes, i + 1);
    loop {
        // A key: a string without escapes.
        if bytes.get(i) != Some(&b'"') {
            return None;
        }
        let end = string_end(bytes, i + 1);
        if bytes.get(end) != Some(&b'"') {
            return None;
        }
        let key = &line[i + 1..end];
        i = skip_space(bytes, end + 1);
        if bytes.get(i) != Some(&b':') {
            return None;
        }
        i = skip_space(bytes, i + 1);
        if bytes.get(i) != Some(&b'"') {
            return None;
        }
        let (value, after) = string_value(line, i + 1)?;
        if let Some(slot) = names.iter().position(|name| *name == key) {
            if fields[slot].is_some() {
                return None; // serde reports the duplicate
            }
            fields[slot] = Some(value);
        }
        i = skip_space(bytes, after);
        match bytes.get(i) {
            Some(b',') => i = skip_space(bytes, i + 1),
            Some(b'}') => break,
            _ => return None,
        }
    }
    if skip_space(bytes, i + 1) != bytes.len() {
        return None;
    }
    if fields.iter().any(Option::is_none) {
        return None;
    }
    Some(fields.map(|field| field.unwrap_or_default()))
}

/// The string whose text starts at `start` (just past its opening quote), unescaped, and the
/// index just past its closing quote; `None` for invalid JSON (serde names the problem).
fn string_value(line: &str, start: usize) -> Option<(Cow<'_, str>, usize)> {
    let bytes = line.as_bytes();
    let end = if has_avx2() {
        // SAFETY: the CPU has AVX2.
        unsafe { string_end_avx2(bytes, start) }
    } else {
        string_end(bytes, start)
    };
    match bytes.get(end) {
        Some(b'"') => Some((Cow::Borrowed(&line[start..end]), end + 1)),
        Some(b'\\') => unescaped(bytes, start, end).map(|(text, after)| (Cow::Owned(text), after)),
        _ => None, // a control character, or no closing quote
    }
}

/// An escaped string (text from `start`, first backslash at `escape`), copied once into its
/// own string, and the index past its closing quote. Text between escapes is copied 16 bytes
/// at a time while it is scanned (documentation rows have an escaped newline every line:
/// a copy call and a new scan per line cost more than the text itself).
fn unescaped(bytes: &[u8], start: usize, escape: usize) -> Option<(String, usize)> {
    if has_avx2() {
        // SAFETY: the CPU has AVX2.
        unsafe { unescaped_avx2(bytes, start, escape) }
    } else {
        unescape_loop(bytes, start, escape, copy_to_special)
    }
}

/// `unescaped` with the 32-byte copy inlined into its loop: called once per escape, the copy
/// and its feature check were a call per line of documentation text.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg_attr(target_arch = "x86_64", target_feature(enable = "avx2"))]
unsafe fn unescaped_avx2(bytes: &[u8], start: usize, escape: usize) -> Option<(String, usize)> {
    unescape_loop(bytes, start, escape, |bytes, i, out| {
        // SAFETY: the CPU has AVX2 (this function's promise); `unescape_loop` gives `out` the
        // room `copy_to_special_avx2` needs.
        unsafe { copy_to_special_avx2(bytes, i, out) }
    })
}

/// The loop of `unescaped`, with `copy` (a `copy_to_special`) between the escapes.
#[inline(always)]
fn unescape_loop(
    bytes: &[u8],
    start: usize,
    escape: usize,
    copy: impl Fn(&[u8], usize, &mut Vec<u8>) -> usize,
) -> Option<(String, usize)> {
    // Unescaping never lengthens the text, so the rest of the line plus one chunk of slack
    // bounds what is written, 16- or 32-byte stores past the end included.
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len() - start + 32);
    out.extend_from_slice(&bytes[start..escape]);
    let mut i = escape;
    loop {
        match bytes.get(i) {
            Some(b'"') => break,
            Some(b'\\') => {
                // The escapes of one byte (a newline in every line of documentation rows) are
                // pushed as they are; `\u` goes through `unescape`.
                if let Some(byte) = bytes.get(i + 1).and_then(|&b| simple_escape(b)) {
                    out.push(byte);
                    i += 2;
                } else {
                    let (c, len) = unescape(bytes, i + 1)?;
                    out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                    i += 1 + len;
                }
            }
            _ => return None,
        }
        i = copy(bytes, i, &mut out);
    }
    // SAFETY: `bytes` is UTF-8 (a `str`), runs between ASCII specials are whole characters,
    // and escapes were written as `char`s.
    Some((unsafe { String::from_utf8_unchecked(out) }, i + 1))
}

/// Append `bytes[i..]` up to the first quote, backslash or control character to `out` and
/// return that character's index (or the length). `out` has room for the rest of `bytes` and
/// 16 bytes more (see `unescaped`).
#[inline]
fn copy_to_special(bytes: &[u8], i: usize, out: &mut Vec<u8>) -> usize {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE2 is part of x86-64; `step` loads the 16 bytes of its chunk and stores them at
    // `to`, where the caller's room is (see `copy_steps`).
    let i = match unsafe {
        copy_steps::<16>(bytes, i, out, |chunk, to| {
            use std::arch::x86_64::*;
            let v = _mm_loadu_si128(chunk.as_ptr().cast());
            _mm_storeu_si128(to.cast(), v);
            special_mask(v)
        })
    } {
        Ok(stop) => return stop,
        Err(rest) => rest,
    };
    let end = string_end(bytes, i);
    out.extend_from_slice(&bytes[i..end]);
    end
}

/// `copy_to_special`'s loop, `W` bytes a step: `step` copies a chunk of `W` bytes to the
/// pointer it is given and returns the chunk's `special_mask`. `Ok` with the special byte's
/// index, or `Err` with where fewer than `W` bytes are left.
///
/// # Safety
/// `out` must have room for the rest of `bytes` and `W` bytes more; `step` must write at most
/// `W` bytes.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn copy_steps<const W: usize>(
    bytes: &[u8],
    mut i: usize,
    out: &mut Vec<u8>,
    step: impl Fn(&[u8], *mut u8) -> u32,
) -> Result<usize, usize> {
    while let Some(chunk) = bytes.get(i..i + W) {
        debug_assert!(out.capacity() - out.len() >= W);
        // SAFETY: `step` writes `W` bytes at `out`'s end, within its capacity (the caller's
        // promise); only the bytes before the special one are kept (`set_len`).
        unsafe {
            let found = step(chunk, out.as_mut_ptr().add(out.len()));
            let keep = if found == 0 {
                W
            } else {
                found.trailing_zeros() as usize
            };
            out.set_len(out.len() + keep);
            i += keep;
            if found != 0 {
                return Ok(i);
            }
        }
    }
    Err(i)
}

/// The character of the escape whose letter is at `bytes[i]` (just past the backslash) and
/// how many bytes it takes from there.
fn unescape(bytes: &[u8], i: usize) -> Option<(char, usize)> {
    let letter = *bytes.get(i)?;
    if let Some(byte) = simple_escape(letter) {
        return Some((char::from(byte), 1));
    }
    if letter != b'u' {
        return None;
    }
    let high = hex4(bytes, i + 1)?;
    if !(0xD800..0xE000).contains(&high) {
        return Some((char::from_u32(high)?, 5));
    }
    // A surrogate pair: `\uD83D\uDE00`; a lone half is an error (serde says so).
    if high >= 0xDC00 || bytes.get(i + 5..i + 7)? != b"\\u" {
        return None;
    }
    let low = hex4(bytes, i + 7)?;
    if !(0xDC00..0xE000).contains(&low) {
        return None;
    }
    let code = 0x1_0000 + ((high - 0xD800) << 10) + (low - 0xDC00);
    Some((char::from_u32(code)?, 11))
}

/// The four hex digits at `bytes[i..i + 4]` as a number.
fn hex4(bytes: &[u8], i: usize) -> Option<u32> {
    let digits = bytes.get(i..i + 4)?;
    digits.iter().try_fold(0u32, |value, &d| {
        let digit = (d as char).to_digit(16)?;
        Some(value << 4 | digit)
    })
}

fn skip_space(bytes: &[u8], mut i: usize) -> usize {
    while matches!(bytes.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The index of the first quote, backslash or control character (below 0x20) at or after
/// `i`, or the length of `bytes`.
#[inline]
fn string_end(bytes: &[u8], mut i: usize) -> usize {
    #[cfg(target_arch = "x86_64")]
    while let Some(chunk) = bytes.get(i..i + 16) {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of x86-64; the load reads the 16 bytes of `chunk`.
        let found = unsafe { special_mask(_mm_loadu_si128(chunk.as_ptr().cast())) };
        if found != 0 {
            return i + found.trailing_zeros() as usize;
        }
        i += 16;
    }
    while let Some(&b) = bytes.get(i) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            return i;
        }
        i += 1;
    }
    i
}

/// The byte a one-letter escape stands for (`\\u` is not one).
#[inline(always)]
fn simple_escape(letter: u8) -> Option<u8> {
    Some(match letter {
        b'"' | b'\\' | b'/' => letter,
        b'b' => 0x08,
        b'f' => 0x0c,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        _ => return None,
    })
}

/// Whether this CPU has AVX2 (the standard library's detection keeps its answer).
#[inline(always)]
fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `copy_to_special`, 32 bytes at a time (documentation rows' lines are 40-80 bytes between
/// escapes: one or two steps a line instead of three to five).
///
/// # Safety
/// The CPU must have AVX2; `out` must have room for the rest of `bytes` and 32 bytes more.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn copy_to_special_avx2(bytes: &[u8], i: usize, out: &mut Vec<u8>) -> usize {
    // SAFETY: the caller's room for 32 bytes more; `step` loads its chunk's 32 bytes and
    // stores them at `to`.
    let steps = unsafe {
        copy_steps::<32>(bytes, i, out, |chunk, to| {
            use std::arch::x86_64::*;
            let v = _mm256_loadu_si256(chunk.as_ptr().cast());
            _mm256_storeu_si256(to.cast(), v);
            special_mask_avx2(v)
        })
    };
    match steps {
        Ok(stop) => stop,
        Err(rest) => copy_to_special(bytes, rest, out),
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn copy_to_special_avx2(bytes: &[u8], i: usize, out: &mut Vec<u8>) -> usize {
    copy_to_special(bytes, i, out)
}

/// `string_end`, 32 bytes at a time.
///
/// # Safety
/// The CPU must have AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn string_end_avx2(bytes: &[u8], mut i: usize) -> usize {
    use std::arch::x86_64::*;
    while let Some(chunk) = bytes.get(i..i + 32) {
        // SAFETY: the load reads the 32 bytes of `chunk`.
        let found = unsafe { special_mask_avx2(_mm256_loadu_si256(chunk.as_ptr().cast())) };
        if found != 0 {
            return i + found.trailing_zeros() as usize;
        }
        i += 32;
    }
    string_end(bytes, i)
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn string_end_avx2(bytes: &[u8], i: usize) -> usize {
    string_end(bytes, i)
}

/// `special_mask` of 32 bytes.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn special_mask_avx2(v: std::arch::x86_64::__m256i) -> u32 {
    use std::arch::x86_64::*;
    let quote = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8));
    let backslash = _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8));
    let control = _mm256_cmpeq_epi8(_mm256_min_epu8(v, _mm256_set1_epi8(0x1F)), v);
    _mm256_movemask_epi8(_mm256_or_si256(_mm256_or_si256(quote, backslash), control)) as u32
}

/// One bit per byte of `v` that is a quote, a backslash or a control character (below 0x20).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn special_mask(v: std::arch::x86_64::__m128i) -> u32 {
    use std::arch::x86_64::*;
    let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
    let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
    // Bytes below 0x20: unchanged by an unsigned minimum with 0x1F.
    let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1F)), v);
    _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The oracle: serde_json's view of the line, as the three fields when it is an object
    /// whose three fields are strings.
    fn serde_fields(line: &str) -> Option<[String; 3]> {
        let value: serde_json::Value = serde_json::from_str(line).ok()?;
        let object = value.as_object()?;
        let field = |name: &str| object.get(name)?.as_str().map(str::to_owned);
        Some([field(FIELDS[0])?, field(FIELDS[1])?, field(FIELDS[2])?])
    }

    fn owned(fields: [Cow<'_, str>; 3]) -> [String; 3] {
        fields.map(Cow::into_owned)
    }

    #[test]
    fn plain_rows_take_the_fast_path_and_borrow_unescaped_text() {
        let line = r#"{"condition":"cot","instruction":"What is 2+2?","response":"4"}"#;
        let fields = parse(line).expect("a plain row");
        assert!(fields.iter().all(|f| matches!(f, Cow::Borrowed(_))));
        assert_eq!(owned(fields), ["cot", "What is 2+2?", "4"]);
        // Any key order, white space around everything, another string field skipped.
        let line = " {\t\"response\" : \"b\",\r\n \"id\": \"x7\", \"condition\":\"\", \
                    \"instruction\":\"a\"} \n";
        assert_eq!(
            parse(line).map(owned),
            Some(["".into(), "a".into(), "b".into()])
        );
    }

    #[test]
    fn escapes_are_unescaped_as_serde_does() {
        let line = r#"{"condition":"cot","instruction":"a\"b\\c\/d\n\t\r\b\f","response":"\u00e9\u4e2d\ud83d\ude00 end\u0000"}"#;
        let fields = parse(line).expect("escapes are taken");
        assert_eq!(Some(owned(fields)), serde_fields(line));
        // A long text with escapes past the first 16 bytes and between SIMD chunks.
        let text = "0123456789abcdef\\n".repeat(40) + "\\\"tail";
        let line = format!(r#"{{"condition":"c","instruction":"{text}","response":"{text}"}}"#);
        assert_eq!(parse(&line).map(owned), serde_fields(&line));
    }

    #[test]
    fn anything_else_goes_to_serde() {
        for line in [
            r#"{"condition":"c","instruction":"a","response":1}"#,
            r#"{"condition":"c","instruction":"a","response":null}"#,
            r#"{"condition":"c","instruction":"a"}"#,
            r#"{"condition":"c","instruction":"a","response":"b","response":"b"}"#,
            r#"{"condition":"c","instruction":"a","response":"b","n":[1]}"#,
            r#"{"condition":"c","instr\u0075ction":"a","response":"b"}"#,
            r#"{"condition":"c","instruction":"a","response":"b"} x"#,
            r#"{"condition":"c","instruction":"a","response":"b",}"#,
            r#"{"condition":"c","instruction":"a","response":"b""#,
            r#"{"condition":"c","instruction":"a	tab","response":"b"}"#,
            r#"{"condition":"c","instruction":"\x","response":"b"}"#,
            r#"{"condition":"c","instruction":"\ud83d","response":"b"}"#,
            r#"{"condition":"c","instruction":"\ude00\ud83d","response":"b"}"#,
            r#"{"condition":"c","instruction":"\u12g4","response":"b"}"#,
            r#"["c","a","b"]"#,
            "",
            "{",
        ] {
            assert!(parse(line).is_none(), "{line}");
        }
    }

    /// Pieces that lines are made of: plain text, every escape, control characters, quotes,
    /// non-ASCII text, and JSON syntax, so that both valid and invalid lines come out.
    fn fragment() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z ]{0,20}",
            // Runs longer than a 32-byte step, with and without wide characters.
            "[a-zé中 ]{30,70}",
            "[é中😀]{1,3}",
            Just("\\b\\f\\r\\t".to_string()),
            Just("\\n".to_string()),
            Just("\\\"".to_string()),
            Just("\\\\".to_string()),
            Just("\\/".to_string()),
            Just("\\u00e9".to_string()),
            Just("\\ud83d\\ude00".to_string()),
            Just("\\ud83d".to_string()),
            Just("\\q".to_string()),
            Just("\t".to_string()),
            Just("\"".to_string()),
            Just(", \"x\": ".to_string()),
            Just("\\u00".to_string()),
        ]
    }

    fn row_line() -> impl Strategy<Value = String> {
        let text = || proptest::collection::vec(fragment(), 0..6).prop_map(|v| v.concat());
        (text(), text(), text(), any::<bool>(), 0..3usize).prop_map(
            |(condition, instruction, response, spaced, order)| {
                let sep = if spaced { " , " } else { "," };
                let mut fields = [
                    format!("\"condition\":\"{condition}\""),
                    format!("\"instruction\":\"{instruction}\""),
                    format!("\"response\" : \"{response}\""),
                ];
                fields.rotate_left(order);
                format!("{{{}}}", fields.join(sep))
            },
        )
    }

    proptest! {
        /// The AVX2 scans stop where the SSE2 ones do and copy the same bytes (the parser
        /// takes the AVX2 ones wherever the CPU has it, so the SSE2 ones are tested here).
        #[test]
        fn wide_and_narrow_scans_agree(text in "[a-z\"\\\\\t é中]{0,120}", from in 0usize..8) {
            if !has_avx2() {
                return Ok(());
            }
            let bytes = text.as_bytes();
            let from = from.min(bytes.len());
            // SAFETY: the CPU has AVX2 (checked above); both outputs have the room needed.
            let wide_end = unsafe { string_end_avx2(bytes, from) };
            prop_assert_eq!(wide_end, string_end(bytes, from));
            let (mut narrow, mut wide) = (
                Vec::with_capacity(bytes.len() + 32),
                Vec::with_capacity(bytes.len() + 32),
            );
            let stop = copy_to_special(bytes, from, &mut narrow);
            // SAFETY: as above.
            prop_assert_eq!(unsafe { copy_to_special_avx2(bytes, from, &mut wide) }, stop);
            prop_assert_eq!(&narrow, &wide);
            prop_assert_eq!(&narrow[..], &bytes[from..stop]);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        /// Whatever the fast path accepts, serde accepts with the same fields; and every line
        /// serde reads as three string fields (with no other keys) the fast path takes too.
        #[test]
        fn agrees_with_serde_json(line in row_line()) {
            let fast = parse(&line).map(owned);
            let oracle = serde_fields(&line);
            if fast.is_some() {
                prop_assert_eq!(&fast, &oracle, "{}", line);
            }
            let plain_keys = serde_json::from_str::<serde_json::Value>(&line)
                .ok()
                .and_then(|v| v.as_object().map(|o| o.len() == 3))
                .unwrap_or(false);
            if oracle.is_some() && plain_keys {
                prop_assert!(fast.is_some(), "not taken: {}", line);
            }
        }
    }
}
