//! A streaming writer for 1-D `.npy` files whose bytes equal the original data_io's.
//!
//! The original tool's arrays carry the header dict as a Python literal with no trailing
//! comma (`{'descr': '<u4', 'fortran_order': False, 'shape': (N,)}`), padded with spaces to a
//! 64-byte boundary and ended by a newline; numpy's own writer adds `, }`. Its users prove that
//! two runs agree by the SHA-256 of these files, so the header is written here byte for byte.
//! The length is unknown until the last row, so a header of the final size is reserved first
//! (any length fits: the dict is at most 85 bytes, the header always 128) and rewritten at the
//! end.

use std::fs::File;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::marker::PhantomData;
use std::path::Path;

#[cfg(not(target_endian = "little"))]
compile_error!("the .npy writer stores elements in native order, which must be little-endian");

/// Bytes before the first element: magic, version, length, dict, padding, newline.
pub const HEADER_LEN: usize = 128;
const MAGIC: &[u8] = b"\x93NUMPY\x01\x00";

/// An element type with its numpy type string.
pub trait NpyElement: bytemuck::Pod {
    const DESCR: &'static str;
}

impl NpyElement for u16 {
    const DESCR: &'static str = "<u2";
}
impl NpyElement for u32 {
    const DESCR: &'static str = "<u4";
}
impl NpyElement for u64 {
    const DESCR: &'static str = "<u8";
}

/// The header of a 1-D array of `len` elements of type `descr`.
pub fn header(descr: &str, len: u64) -> [u8; HEADER_LEN] {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({len},)}}");
    let mut out = [b' '; HEADER_LEN];
    out[..MAGIC.len()].copy_from_slice(MAGIC);
    let header_len = (HEADER_LEN - MAGIC.len() - 2) as u16; // what follows the length field
    out[MAGIC.len()..MAGIC.len() + 2].copy_from_slice(&header_len.to_le_bytes());
    let start = MAGIC.len() + 2;
    // At most 20 digits: the dict always fits before the padding and the final newline.
    out[start..start + dict.len()].copy_from_slice(dict.as_bytes());
    out[HEADER_LEN - 1] = b'\n';
    out
}

/// Writes of at least this many bytes bypass the stream's buffer.
const DIRECT_WRITE: usize = 64 << 10;

/// Appends elements to a `.npy` file; `finish` writes the header with the final length.
pub struct NpyStream<T: NpyElement> {
    file: BufWriter<File>,
    len: u64,
    element: PhantomData<T>,
}

impl<T: NpyElement> NpyStream<T> {
    pub fn create(path: &Path) -> io::Result<Self> {
        let mut file = BufWriter::with_capacity(1 << 20, File::create(path)?);
        file.write_all(&header(T::DESCR, 0))?;
        Ok(NpyStream {
            file,
            len: 0,
            element: PhantomData,
        })
    }

    pub fn extend(&mut self, values: &[T]) -> io::Result<()> {
        let bytes: &[u8] = bytemuck::cast_slice(values);
        if bytes.len() >= DIRECT_WRITE {
            // A run of rows' tokens goes to the file from where it is: through the buffer it
            // was one more copy of every token (2% of a warm tokenize run in `memmove`).
            self.file.flush()?;
            self.file.get_mut().write_all(bytes)?;
        } else {
            self.file.write_all(bytes)?;
        }
        self.len += values.len() as u64;
        Ok(())
    }

    pub fn push(&mut self, value: T) -> io::Result<()> {
        self.extend(std::slice::from_ref(&value))
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Flush the elements and write the header with the final length.
    pub fn finish(self) -> io::Result<()> {
        let mut file = self
            .file
            .into_inner()
            .map_err(io::IntoInnerError::into_error)?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&header(T::DESCR, self.len))?;
        file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_the_original_tools_bytes() {
        let bytes = header("<u4", 1028);
        let text = std::str::from_utf8(&bytes[10..]).expect("ascii");
        assert_eq!(&bytes[..10], b"\x93NUMPY\x01\x00\x76\x00");
        assert!(text.starts_with("{'descr': '<u4', 'fortran_order': False, 'shape': (1028,)} "));
        assert!(text.ends_with(" \n") && text.len() == 118);
        let widest = header("<u8", u64::MAX);
        let needle = b"'shape': (18446744073709551615,)} ";
        assert!(widest.windows(needle.len()).any(|w| w == needle));
        assert_eq!(widest[HEADER_LEN - 1], b'\n');
    }

    #[test]
    fn stream_round_trips_through_npyz() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("a.npy");
        let mut stream = NpyStream::<u16>::create(&path).expect("create");
        stream.extend(&[1, 2, 3]).expect("extend");
        stream.push(65535).expect("push");
        assert_eq!(stream.len(), 4);
        stream.finish().expect("finish");
        let bytes = std::fs::read(&path).expect("read");
        assert_eq!(bytes.len(), HEADER_LEN + 8);
        let npy = npyz::NpyFile::new(&bytes[..]).expect("npy");
        assert_eq!(npy.shape(), &[4]);
        assert_eq!(npy.into_vec::<u16>().expect("u16"), vec![1, 2, 3, 65535]);
    }

    #[test]
    fn empty_array_has_shape_zero() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("e.npy");
        NpyStream::<u64>::create(&path)
            .expect("create")
            .finish()
            .expect("finish");
        let bytes = std::fs::read(&path).expect("read");
        assert_eq!(bytes.len(), HEADER_LEN);
        let needle = b"'shape': (0,)} ";
        assert!(bytes.windows(needle.len()).any(|w| w == needle));
    }
}
