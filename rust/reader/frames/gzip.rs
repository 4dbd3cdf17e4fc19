//! BGZF gzip members (the SAM/BAM specification, section 4.1): each member's extra field holds
//! a `BC` subfield with the member's length less one. A member without it ends the walk: its
//! length is only known by inflating it, so the file stays one part.

use super::file_bytes::Bytes;

/// The starts of the BGZF members between bytes `from` and `until` (each a member's start, or
/// the file's ends), or None when they are not a clean run of members.
pub(super) fn members(file: &Bytes<'_>, from: u64, until: u64) -> Option<Vec<u64>> {
    let mut starts = Vec::new();
    let most = super::file_bytes::most_parts(file.size);
    let mut at = from;
    while at < until {
        if starts.len() >= most {
            return None;
        }
        starts.push(at);
        at = at.checked_add(member_len(file, at)?)?;
    }
    (at == until).then_some(starts)
}

/// The length of the BGZF member at `at`, from its `BC` subfield.
fn member_len(file: &Bytes<'_>, at: u64) -> Option<u64> {
    let header: [u8; 12] = file.array(at)?;
    // Magic, deflate, and the FEXTRA flag.
    if header[..3] != [0x1f, 0x8b, 8] || header[3] & 0x04 == 0 {
        return None;
    }
    let extra_len = u16::from_le_bytes([header[10], header[11]]);
    let extra = file.vec(at + 12, u64::from(extra_len))?;
    let mut fields = &extra[..];
    while let [a, b, len_lo, len_hi, rest @ ..] = fields {
        let len = usize::from(u16::from_le_bytes([*len_lo, *len_hi]));
        let data = rest.get(..len)?;
        if (*a, *b, len) == (b'B', b'C', 2) {
            let size = u64::from(u16::from_le_bytes([data[0], data[1]])) + 1;
            // Header, extra field, and at least the trailer's eight bytes.
            return (size >= 12 + u64::from(extra_len) + 8).then_some(size);
        }
        fields = &rest[len..];
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::parts;
    use super::super::test_files::{bgzf, read_runs, stored, text};
    use crate::reader::Compression;
    use std::io::Write;

    #[test]
    fn members_are_found_and_each_run_decodes_on_its_own() {
        let plain = text(20_000);
        let bytes = bgzf(&plain, 30_000);
        let file = stored(&bytes);
        let parts = parts(file.path(), Compression::Gzip).expect("parts");
        assert_eq!(parts.list.len(), plain.len().div_ceil(30_000) + 1);
        for bytes_a_run in [1, 20_000, 1 << 40] {
            assert_eq!(read_runs(file.path(), &parts, bytes_a_run), plain);
        }
    }

    #[test]
    fn plain_gzip_and_a_cut_file_are_one_part() {
        let plain = text(2_000);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), Default::default());
        gz.write_all(&plain).expect("compressed");
        let gz = gz.finish().expect("compressed");
        let bgzf = bgzf(&plain, 10_000);
        // A plain member after BGZF ones: its length is unknown.
        let mixed = [&bgzf[..], &gz[..]].concat();
        for bad in [&gz[..], &bgzf[..bgzf.len() - 3], &mixed[..]] {
            let file = stored(bad);
            let parts = parts(file.path(), Compression::Gzip).expect("parts");
            assert_eq!(parts.starts(), vec![0]);
        }
    }
}
