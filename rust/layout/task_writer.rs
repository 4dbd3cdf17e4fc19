//! Writes one task folder's arrays (formats.md §3) as streams: tokens and offsets go to disk
//! batch by batch, and each `.npy` header gets its final length when the writer finishes. The
//! files are byte-identical to the original tool's for the same input (`npy`).

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::npy::{header, NpyElement, NpyStream, HEADER_LEN};
use crate::error::{Error, IoContext, Result};
use crate::layout::RowLens;

/// Element type of `tokens.npy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenDtype {
    Uint16,
    Uint32,
}

impl TokenDtype {
    pub fn name(self) -> &'static str {
        match self {
            TokenDtype::Uint16 => "uint16",
            TokenDtype::Uint32 => "uint32",
        }
    }

    /// The smallest dtype that holds every id below `vocab_size`.
    pub fn smallest_for(vocab_size: usize) -> TokenDtype {
        if vocab_size <= 1 << 16 {
            TokenDtype::Uint16
        } else {
            TokenDtype::Uint32
        }
    }
}

pub const ARRAY_FILES: [&str; 5] = [
    "tokens.npy",
    "inst_start.npy",
    "inst_len.npy",
    "resp_start.npy",
    "resp_len.npy",
];

type Npy<T> = NpyStream<T>;

enum TokenSink {
    /// With a scratch buffer for the narrowing from the encoder's u32 ids.
    U16(Npy<u16>, Vec<u16>),
    U32(Npy<u32>),
}

pub struct TaskWriter {
    dir: PathBuf,
    tokens: TokenSink,
    inst_start: Npy<u64>,
    inst_len: Npy<u64>,
    resp_start: Npy<u64>,
    resp_len: Npy<u64>,
    offset: u64,
    rows: u64,
}

fn open_npy<T: NpyElement>(dir: &Path, name: &str) -> Result<Npy<T>> {
    let path = dir.join(name);
    NpyStream::create(&path).ctx("cannot create", &path)
}

impl TaskWriter {
    /// Start writing the arrays into `dir` (an existing, empty folder).
    pub fn create(dir: &Path, dtype: TokenDtype) -> Result<Self> {
        let tokens = match dtype {
            TokenDtype::Uint16 => TokenSink::U16(open_npy(dir, ARRAY_FILES[0])?, Vec::new()),
            TokenDtype::Uint32 => TokenSink::U32(open_npy(dir, ARRAY_FILES[0])?),
        };
        Ok(TaskWriter {
            dir: dir.to_path_buf(),
            tokens,
            inst_start: open_npy(dir, ARRAY_FILES[1])?,
            inst_len: open_npy(dir, ARRAY_FILES[2])?,
            resp_start: open_npy(dir, ARRAY_FILES[3])?,
            resp_len: open_npy(dir, ARRAY_FILES[4])?,
            offset: 0,
            rows: 0,
        })
    }

    /// Append a run of encoded rows: `tokens` holds each row of `rows` in turn, back to back
    /// (what `layout::encode_rows` leaves in its buffer), written in one piece.
    pub fn push_rows(&mut self, tokens: &[u32], rows: &[RowLens]) -> Result<()> {
        debug_assert_eq!(
            rows.iter().map(|r| r.inst_len + r.resp_len).sum::<usize>(),
            tokens.len()
        );
        // Paths for error messages are built only on error.
        let dir = &self.dir;
        let failed = |name: &str| {
            let path = dir.join(name);
            move |e| Error::io("cannot write", &path, e)
        };
        match &mut self.tokens {
            TokenSink::U32(w) => w.extend(tokens),
            TokenSink::U16(w, narrow) => {
                narrow.clear();
                for &token in tokens {
                    let Ok(small) = u16::try_from(token) else {
                        return Err(Error::Output(format!(
                            "token id {token} does not fit uint16; use --token-dtype uint32"
                        )));
                    };
                    narrow.push(small);
                }
                w.extend(narrow)
            }
        }
        .map_err(|e| failed(ARRAY_FILES[0])(e))?;
        for row in rows {
            let inst_len = row.inst_len as u64;
            let resp_len = row.resp_len as u64;
            let values = [self.offset, inst_len, self.offset + inst_len, resp_len];
            let writers = [
                &mut self.inst_start,
                &mut self.inst_len,
                &mut self.resp_start,
                &mut self.resp_len,
            ];
            for ((writer, value), name) in writers.into_iter().zip(values).zip(&ARRAY_FILES[1..]) {
                writer.push(value).map_err(|e| failed(name)(e))?;
            }
            self.offset += inst_len + resp_len;
        }
        self.rows += rows.len() as u64;
        Ok(())
    }

    /// Append the rows of a folder this writer's kind wrote (a part of the same file, with
    /// the same dtype): its tokens as they are, its offsets moved past the rows already here.
    pub fn append_part(&mut self, part: &Path) -> Result<()> {
        let starts = read_array::<u64>(&part.join(ARRAY_FILES[1]))?;
        let inst_len = read_array::<u64>(&part.join(ARRAY_FILES[2]))?;
        let resp_start = read_array::<u64>(&part.join(ARRAY_FILES[3]))?;
        let resp_len = read_array::<u64>(&part.join(ARRAY_FILES[4]))?;
        let rows = starts.len();
        if [inst_len.len(), resp_start.len(), resp_len.len()] != [rows; 3] {
            return Err(Error::Output(format!(
                "{}: its offset arrays disagree on the number of rows; delete the part and run \
                 its unit again",
                part.display()
            )));
        }
        let tokens_path = part.join(ARRAY_FILES[0]);
        let part_tokens = match &mut self.tokens {
            TokenSink::U16(w, _) => append_array::<u16>(w, &tokens_path)?,
            TokenSink::U32(w) => append_array::<u32>(w, &tokens_path)?,
        };
        let failed = |name: &str| {
            let path = self.dir.join(name);
            move |e| Error::io("cannot write", &path, e)
        };
        let shift =
            |values: &[u64]| -> Vec<u64> { values.iter().map(|v| v + self.offset).collect() };
        let (shifted_starts, shifted_resp) = (shift(&starts), shift(&resp_start));
        self.inst_start
            .extend(&shifted_starts)
            .map_err(failed(ARRAY_FILES[1]))?;
        self.inst_len
            .extend(&inst_len)
            .map_err(failed(ARRAY_FILES[2]))?;
        self.resp_start
            .extend(&shifted_resp)
            .map_err(failed(ARRAY_FILES[3]))?;
        self.resp_len
            .extend(&resp_len)
            .map_err(failed(ARRAY_FILES[4]))?;
        self.offset += part_tokens;
        self.rows += rows as u64;
        Ok(())
    }

    pub fn rows(&self) -> u64 {
        self.rows
    }

    pub fn tokens(&self) -> u64 {
        self.offset
    }

    /// Patch every header with its final length and flush.
    pub fn finish(self) -> Result<()> {
        let dir = self.dir;
        let finish = |r: std::io::Result<()>, name: &str| r.ctx("cannot finish", &dir.join(name));
        match self.tokens {
            TokenSink::U16(w, _) => finish(w.finish(), ARRAY_FILES[0])?,
            TokenSink::U32(w) => finish(w.finish(), ARRAY_FILES[0])?,
        }
        finish(self.inst_start.finish(), ARRAY_FILES[1])?;
        finish(self.inst_len.finish(), ARRAY_FILES[2])?;
        finish(self.resp_start.finish(), ARRAY_FILES[3])?;
        finish(self.resp_len.finish(), ARRAY_FILES[4])
    }
}

/// The elements of a 1-D array this module wrote (its header checked against `T`).
fn read_array<T: NpyElement>(path: &Path) -> Result<Vec<T>> {
    let bytes = std::fs::read(path).ctx("cannot read", path)?;
    let (len, data) = array_body::<T>(path, &bytes)?;
    let mut values = vec![T::zeroed(); len];
    bytemuck::cast_slice_mut::<T, u8>(&mut values).copy_from_slice(data);
    Ok(values)
}

/// Copy the elements of the array at `path` into `sink` in blocks; returns how many.
fn append_array<T: NpyElement>(sink: &mut NpyStream<T>, path: &Path) -> Result<u64> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ctx("cannot read", path)?;
    let mut head = [0u8; HEADER_LEN];
    file.read_exact(&mut head).ctx("cannot read", path)?;
    let (len, _) = array_body::<T>(path, &head)?;
    let mut block = vec![T::zeroed(); (1 << 22) / std::mem::size_of::<T>()];
    let mut left = len;
    while left > 0 {
        let take = left.min(block.len());
        let bytes = bytemuck::cast_slice_mut::<T, u8>(&mut block[..take]);
        file.read_exact(bytes).ctx("cannot read", path)?;
        sink.extend(&block[..take]).ctx("cannot write", path)?;
        left -= take;
    }
    Ok(len as u64)
}

/// The length and the data bytes of an array file's `bytes` (only the header may be given):
/// the header must be exactly the one `NpyStream` writes for `T`.
fn array_body<'b, T: NpyElement>(path: &Path, bytes: &'b [u8]) -> Result<(usize, &'b [u8])> {
    let bad = || {
        Error::Output(format!(
            "{} is not an array data_io wrote ({} expected); delete its part and run the unit \
             again",
            path.display(),
            T::DESCR
        ))
    };
    let head = bytes.get(..HEADER_LEN).ok_or_else(bad)?;
    let text = std::str::from_utf8(&head[10..]).map_err(|_| bad())?;
    let len: usize = text
        .split("'shape': (")
        .nth(1)
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(bad)?;
    if head != header(T::DESCR, len as u64) {
        return Err(bad());
    }
    let data = &bytes[HEADER_LEN..];
    let size = len * std::mem::size_of::<T>();
    if bytes.len() == HEADER_LEN {
        return Ok((len, data)); // the header alone was given
    }
    Ok((
        len,
        data.get(..size)
            .filter(|d| d.len() == size)
            .ok_or_else(bad)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_u64(path: &Path) -> Vec<u64> {
        let bytes = std::fs::read(path).unwrap();
        npyz::NpyFile::new(&bytes[..]).unwrap().into_vec().unwrap()
    }

    #[test]
    fn writes_offsets_back_to_back_in_both_dtypes() {
        for dtype in [TokenDtype::Uint16, TokenDtype::Uint32] {
            let dir = tempfile::tempdir().unwrap();
            let mut writer = TaskWriter::create(dir.path(), dtype).unwrap();
            let lens = |inst_len, resp_len| RowLens { inst_len, resp_len };
            // One run of two rows, then an empty run.
            writer
                .push_rows(&[1, 2, 3, 4, 5, 6, 7], &[lens(3, 2), lens(1, 1)])
                .unwrap();
            writer.push_rows(&[], &[]).unwrap();
            writer.finish().unwrap();
            assert_eq!(read_u64(&dir.path().join("inst_start.npy")), vec![0, 5]);
            assert_eq!(read_u64(&dir.path().join("inst_len.npy")), vec![3, 1]);
            assert_eq!(read_u64(&dir.path().join("resp_start.npy")), vec![3, 6]);
            assert_eq!(read_u64(&dir.path().join("resp_len.npy")), vec![2, 1]);
            let bytes = std::fs::read(dir.path().join("tokens.npy")).unwrap();
            let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
            assert_eq!(npy.shape(), &[7]);
            let descr = format!("{:?}", npy.dtype());
            assert!(
                descr.contains(if dtype == TokenDtype::Uint16 {
                    "2"
                } else {
                    "4"
                }),
                "{descr}"
            );
        }
    }

    #[test]
    fn empty_task_has_empty_arrays() {
        let dir = tempfile::tempdir().unwrap();
        TaskWriter::create(dir.path(), TokenDtype::Uint32)
            .unwrap()
            .finish()
            .unwrap();
        assert!(read_u64(&dir.path().join("inst_len.npy")).is_empty());
    }

    #[test]
    fn uint16_overflow_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = TaskWriter::create(dir.path(), TokenDtype::Uint16).unwrap();
        let lens = RowLens {
            inst_len: 1,
            resp_len: 0,
        };
        let err = writer.push_rows(&[70_000], &[lens]).unwrap_err();
        assert!(err.to_string().contains("does not fit uint16"));
    }
}
