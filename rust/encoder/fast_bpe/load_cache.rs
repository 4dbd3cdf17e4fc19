//! What loading a tokenizer derives from its file, kept on disk so that the next process skips
//! the work: the merges by id (three vocabulary lookups each) and the whole-token pieces (every
//! short token merged once to see whether its bytes merge back to it). For Qwen's 151k merges
//! that is about 150 ms of a 300 ms load on one core; read back, it is a 2.5 MB file and a
//! checksum.
//!
//! - The file is named by the BLAKE3 of `DERIVATION` and the tokenizer file's own BLAKE3 (the
//!   one its loader made already): another file, or a build that derives differently (bump
//!   `DERIVATION`), never reads it.
//! - It holds a BLAKE3 of its own body; a file that is short, long or does not match it is
//!   ignored and written again. Ids are checked against the vocabulary before use.
//! - It is written under a temporary name and renamed: a reader sees a whole file or none.
//! - It is a cache: a folder that cannot be made or written only costs the next load its time.
//!
//! The folder: `DATA_IO_ENCODER_CACHE` (`off` turns the cache off), else
//! `$XDG_CACHE_HOME/data_io/encoders`, else `~/.cache/data_io/encoders`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::cache::SHORT_LEN;

pub const DIR_VARIABLE: &str = "DATA_IO_ENCODER_CACHE";
/// What the file holds and how it was derived; part of its name.
const DERIVATION: &[u8] = b"data_io fast_bpe load cache 1: merges (left, right, merged) by id in \
rank order; whole-token pieces of 1..=16 bytes whose bytes merge back to them";
const MAGIC: &[u8; 8] = b"dataioL1";
/// Magic, body checksum, merge count, piece count.
const HEADER: usize = 8 + 32 + 4 + 4;

/// Where one tokenizer's derived tables are kept.
pub struct LoadCache {
    path: PathBuf,
}

/// A merge: (left id, right id, merged id).
pub type Merge = (u32, u32, u32);

/// The tables read back from a cache file.
pub struct Derived {
    body: Vec<u8>,
    merges: usize,
    pieces: usize,
}

impl LoadCache {
    /// The cache of the tokenizer file whose BLAKE3 is `file`, in the folder the environment
    /// names; `None` when it is turned off or no folder can be named.
    pub fn from_env(file: &blake3::Hash) -> Option<LoadCache> {
        let dir = match std::env::var_os(DIR_VARIABLE) {
            Some(dir) if dir == "off" => return None,
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => default_dir()?,
        };
        Some(LoadCache::in_dir(&dir, file))
    }

    /// The cache of the tokenizer file whose BLAKE3 is `file`, in `dir`.
    pub fn in_dir(dir: &Path, file: &blake3::Hash) -> LoadCache {
        let mut hasher = blake3::Hasher::new();
        hasher.update(DERIVATION);
        hasher.update(file.as_bytes());
        let name = format!("{}.tables", hasher.finalize().to_hex());
        LoadCache {
            path: dir.join(name),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The tables kept for this tokenizer, if a whole file holds them and every id is below
    /// `id_bound`.
    pub fn load(&self, id_bound: u32) -> Option<Derived> {
        let file = std::fs::read(&self.path).ok()?;
        let derived = Derived::parse(file)?;
        let ids_fit = derived.merges().all(|(a, b, m)| a.max(b).max(m) < id_bound)
            && derived.pieces().all(|(_, id)| id < id_bound);
        ids_fit.then_some(derived)
    }

    /// Keep `merges` and `pieces` for the next load. A failure is only a slower next load:
    /// the caller says it and goes on.
    pub fn store(&self, merges: &[Merge], pieces: &[(&[u8], u32)]) -> std::io::Result<()> {
        let lengths: Option<Vec<u8>> = pieces
            .iter()
            .map(|(bytes, _)| u8::try_from(bytes.len()).ok())
            .collect();
        let (Some(lengths), Ok(merge_count), Ok(piece_count)) = (
            lengths,
            u32::try_from(merges.len()),
            u32::try_from(pieces.len()),
        ) else {
            return Err(std::io::Error::other("tables too large to keep"));
        };
        let mut body = Vec::with_capacity(merges.len() * 12 + pieces.len() * 13);
        for &(a, b, m) in merges {
            for id in [a, b, m] {
                body.extend_from_slice(&id.to_le_bytes());
            }
        }
        for (_, id) in pieces {
            body.extend_from_slice(&id.to_le_bytes());
        }
        body.extend_from_slice(&lengths);
        for (bytes, _) in pieces {
            body.extend_from_slice(bytes);
        }
        let mut file = Vec::with_capacity(HEADER + body.len());
        file.extend_from_slice(MAGIC);
        file.extend_from_slice(blake3::hash(&body).as_bytes());
        file.extend_from_slice(&merge_count.to_le_bytes());
        file.extend_from_slice(&piece_count.to_le_bytes());
        file.extend_from_slice(&body);
        let dir = self.path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        // A name of this writer's own: processes loading the same tokenizer at once each
        // write theirs, and the last rename wins with the same bytes.
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let part = self.path.with_extension(format!(
            "tables.{}.{}.part",
            std::process::id(),
            WRITES.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&part, &file)?;
        std::fs::rename(&part, &self.path).inspect_err(|_| {
            let _ = std::fs::remove_file(&part);
        })
    }
}

impl Derived {
    /// The tables of a cache file's bytes, if they are whole.
    fn parse(mut file: Vec<u8>) -> Option<Derived> {
        if file.len() < HEADER || &file[..8] != MAGIC {
            return None;
        }
        let word =
            |at: usize| u32::from_le_bytes([file[at], file[at + 1], file[at + 2], file[at + 3]]);
        let (merges, pieces) = (word(40) as usize, word(44) as usize);
        let body = &file[HEADER..];
        let lengths_at = merges * 12 + pieces * 4;
        let lengths = body.get(lengths_at..lengths_at + pieces)?;
        let piece_bytes: usize = lengths.iter().map(|&n| n as usize).sum();
        let whole = body.len() == lengths_at + pieces + piece_bytes
            && lengths
                .iter()
                .all(|&n| (1..=SHORT_LEN).contains(&(n as usize)))
            && blake3::hash(body).as_bytes()[..] == file[8..40];
        if !whole {
            return None;
        }
        file.drain(..HEADER);
        Some(Derived {
            body: file,
            merges,
            pieces,
        })
    }

    fn id(&self, at: usize) -> u32 {
        let bytes = &self.body[at..at + 4];
        u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
    }

    /// The merges in rank order.
    pub fn merges(&self) -> impl ExactSizeIterator<Item = Merge> + '_ {
        (0..self.merges).map(|k| (self.id(k * 12), self.id(k * 12 + 4), self.id(k * 12 + 8)))
    }

    /// The whole-token pieces: each one's bytes and id.
    pub fn pieces(&self) -> impl Iterator<Item = (&[u8], u32)> + '_ {
        let ids_at = self.merges * 12;
        let lengths_at = ids_at + self.pieces * 4;
        let mut next = lengths_at + self.pieces;
        (0..self.pieces).map(move |k| {
            let len = self.body[lengths_at + k] as usize;
            let bytes = &self.body[next..next + len];
            next += len;
            (bytes, self.id(ids_at + k * 4))
        })
    }
}

/// `$XDG_CACHE_HOME/data_io/encoders` or `~/.cache/data_io/encoders`. The crate's own tests
/// name their folders, and never write the user's.
fn default_dir() -> Option<PathBuf> {
    if cfg!(test) {
        return None;
    }
    let base = match std::env::var_os("XDG_CACHE_HOME") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(std::env::var_os("HOME")?).join(".cache"),
    };
    Some(base.join("data_io").join("encoders"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Vec<Merge>, Vec<(Vec<u8>, u32)>) {
        let merges = (0..1000).map(|k| (k, k + 1, 300 + k)).collect();
        let pieces = (1..=SHORT_LEN)
            .map(|n| (vec![b'a' + n as u8; n], n as u32 * 7))
            .collect();
        (merges, pieces)
    }

    fn borrowed(pieces: &[(Vec<u8>, u32)]) -> Vec<(&[u8], u32)> {
        pieces.iter().map(|(b, id)| (b.as_slice(), *id)).collect()
    }

    #[test]
    fn tables_come_back_as_stored_for_the_same_text_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = LoadCache::in_dir(dir.path(), &blake3::hash(b"{\"a\": 1}"));
        assert!(cache.load(u32::MAX).is_none(), "nothing kept yet");
        let (merges, pieces) = sample();
        cache.store(&merges, &borrowed(&pieces)).expect("kept");
        let derived = cache.load(u32::MAX).expect("kept");
        assert_eq!(derived.merges().collect::<Vec<_>>(), merges);
        assert_eq!(derived.pieces().collect::<Vec<_>>(), borrowed(&pieces));
        // Another file's text is another name; nothing but the file is left in the folder.
        assert!(LoadCache::in_dir(dir.path(), &blake3::hash(b"{\"a\": 2}"))
            .load(u32::MAX)
            .is_none());
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 1);
        // An id at or past the vocabulary's bound: not used.
        assert!(cache.load(1299).is_none());
        assert!(cache.load(1300).is_some());
    }

    #[test]
    fn a_damaged_file_is_ignored_and_written_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = LoadCache::in_dir(dir.path(), &blake3::hash(b"tokenizer"));
        let (merges, pieces) = sample();
        cache.store(&merges, &borrowed(&pieces)).expect("kept");
        let good = std::fs::read(cache.path()).expect("kept");
        let mut damaged = Vec::new();
        for at in [0, 9, 41, 45, HEADER + 5, good.len() - 1] {
            let mut flipped = good.clone();
            flipped[at] ^= 1;
            damaged.push(flipped);
        }
        damaged.push(good[..good.len() - 1].to_vec());
        damaged.push([good.as_slice(), b"x"].concat());
        damaged.push(good[..HEADER - 1].to_vec());
        damaged.push(Vec::new());
        for bytes in damaged {
            std::fs::write(cache.path(), &bytes).expect("written");
            assert!(cache.load(u32::MAX).is_none(), "{} bytes", bytes.len());
            cache.store(&merges, &borrowed(&pieces)).expect("kept");
            assert_eq!(std::fs::read(cache.path()).expect("kept"), good);
        }
    }

    #[test]
    fn a_folder_that_cannot_be_written_only_loses_the_cache() {
        let dir = tempfile::tempdir().expect("tempdir");
        let blocked = dir.path().join("file");
        std::fs::write(&blocked, b"not a folder").expect("written");
        let cache = LoadCache::in_dir(&blocked.join("encoders"), &blake3::hash(b"tokenizer"));
        let (merges, pieces) = sample();
        let error = cache
            .store(&merges, &borrowed(&pieces))
            .expect_err("not a folder");
        assert_eq!(error.kind(), std::io::ErrorKind::NotADirectory, "{error}");
        assert!(cache.load(u32::MAX).is_none());
    }
}
