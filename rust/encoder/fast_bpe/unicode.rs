//! The four character classes the known split regexes distinguish, looked up the way Oniguruma
//! (the regex engine of `tokenizers`) defines them, so that splits agree on every code point.

#[rustfmt::skip]
#[allow(clippy::all)]
mod table {
    include!("unicode_classes.rs");
}

/// What `\p{L}`, `\p{N}` and `\s` say about a character; everything else is `Other`
/// (the `[^\s\p{L}\p{N}]` of the patterns). The values are the generated table's, whose value 4
/// (`\p{M}`) reads as `Letter` for the patterns that write `[\p{L}\p{M}]+` (the const parameter
/// `MARKS` below) and as `Other` for the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Class {
    Other = 0,
    Letter = 1,
    Number = 2,
    Space = 3,
}

impl Class {
    #[inline(always)]
    fn from_table<const MARKS: bool>(value: u8) -> Class {
        match value {
            1 => Class::Letter,
            2 => Class::Number,
            3 => Class::Space,
            4 if MARKS => Class::Letter,
            _ => Class::Other,
        }
    }
}

/// The class of an ASCII byte (`b < 0x80`), for the splitters' fast loops.
#[inline(always)]
pub fn ascii_class(b: u8) -> Class {
    Class::from_table::<false>(table::BLOCKS[0][(b & 0x7f) as usize])
}

/// The class of code point `cp` (any u32; values past Unicode are `Other`).
#[inline(always)]
pub fn class_of_code_point<const MARKS: bool>(cp: u32) -> Class {
    let block = table::BLOCK_INDEX
        .get((cp >> 8) as usize)
        .map_or(0, |&b| b as usize);
    Class::from_table::<MARKS>(table::BLOCKS[block][(cp & 0xff) as usize])
}

/// The class and byte length of the character starting at `bytes[i]`.
///
/// `bytes` comes from a `str`, so `i` is on a character boundary and the sequence is valid
/// UTF-8; the decoding below relies on that and skips validation.
#[inline(always)]
pub fn class_at<const MARKS: bool>(bytes: &[u8], i: usize) -> (Class, usize) {
    let lead = bytes[i];
    if lead < 0x80 {
        return (ascii_class(lead), 1);
    }
    let (cp, len) = decode_multibyte(bytes, i, lead);
    (class_of_code_point::<MARKS>(cp), len)
}

/// Code point and length of the multi-byte UTF-8 sequence at `bytes[i]` (lead byte `lead`).
#[inline(always)]
fn decode_multibyte(bytes: &[u8], i: usize, lead: u8) -> (u32, usize) {
    let cont = |k: usize| u32::from(bytes[i + k] & 0x3f);
    if lead < 0xe0 {
        ((u32::from(lead & 0x1f) << 6) | cont(1), 2)
    } else if lead < 0xf0 {
        ((u32::from(lead & 0x0f) << 12) | (cont(1) << 6) | cont(2), 3)
    } else {
        (
            (u32::from(lead & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3),
            4,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenizers::utils::SysRegex;

    /// The generated table must be Oniguruma's view of every code point; when this fails after
    /// a `tokenizers` upgrade, regenerate it (see rust/examples/gen_unicode_classes.rs).
    #[test]
    fn unicode_classes_match_onig() {
        let all: String = (0..0x11_0000u32).filter_map(char::from_u32).collect();
        let mut expected = vec![Class::Other; 0x11_0000];
        let mut marks = vec![false; 0x11_0000];
        let regex = SysRegex::new(r"\p{M}").expect("valid regex");
        for (start, _) in regex.find_iter(&all) {
            marks[all[start..].chars().next().expect("a character") as usize] = true;
        }
        for (pattern, class) in [
            (r"\p{L}", Class::Letter),
            (r"\p{N}", Class::Number),
            (r"\s", Class::Space),
        ] {
            let regex = SysRegex::new(pattern).expect("valid regex");
            for (start, _) in regex.find_iter(&all) {
                let c = all[start..].chars().next().expect("a character");
                expected[c as usize] = class;
            }
        }
        let bytes = all.as_bytes();
        let mut i = 0;
        for c in all.chars() {
            let (class, len) = class_at::<false>(bytes, i);
            assert_eq!(len, c.len_utf8(), "length of U+{:04X}", c as u32);
            assert_eq!(class, expected[c as usize], "class of U+{:04X}", c as u32);
            let with_marks = if marks[c as usize] {
                Class::Letter
            } else {
                class
            };
            assert_eq!(
                class_at::<true>(bytes, i).0,
                with_marks,
                "U+{:04X}",
                c as u32
            );
            i += len;
        }
        assert_eq!(class_of_code_point::<true>(0x11_0000), Class::Other);
    }

    #[test]
    fn ascii_classes() {
        let class = |s: &str| class_at::<false>(s.as_bytes(), 0).0;
        assert_eq!(class("a"), Class::Letter);
        assert_eq!(class("7"), Class::Number);
        assert_eq!(class("\t"), Class::Space);
        assert_eq!(class("\u{b}"), Class::Space);
        assert_eq!(class("'"), Class::Other);
        assert_eq!(class("\u{3000}"), Class::Space);
        assert_eq!(class("\u{85}"), Class::Space);
        assert_eq!(class("\u{200b}"), Class::Other);
        assert_eq!(class("\u{0301}"), Class::Other);
        assert_eq!(class("\u{2167}"), Class::Number);
        assert_eq!(class_at::<true>("\u{301}".as_bytes(), 0).0, Class::Letter);
        assert_eq!(
            class_at::<true>("\u{903}x".as_bytes(), 0),
            (Class::Letter, 3)
        );
    }
}
