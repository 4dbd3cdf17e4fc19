//! The text of a run of parts, decompressed by several threads and read in order.
//!
//! The parts are grouped into runs of about `RUN_BYTES` of the file; lane `k` of `n` decodes
//! runs `k`, `k + n`, … in turn and hands their text over in pieces through a channel. The
//! reader takes run 0's pieces from lane 0 until its end, then run 1's from lane 1, and so on:
//! the text comes out in the file's order. While the reader takes one lane's run, the other
//! lanes decode theirs into their channels, so a channel holds a whole run's text: `PIECES`
//! pieces (a run of 1 MiB of zstd or gzip is 3-6 MiB of text), or, where the file says how long
//! its runs' text is (xz's index), the longest run's, up to `MOST_PIECES`. Memory stays at
//! `lanes × (pieces + 1) × PIECE` however well the text compresses; a run longer than its
//! channel is decoded partly ahead. Dropping the reader stops the lanes (their next hand-over
//! fails) and waits for them.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::Parts;

/// A run's compressed bytes: enough to keep a lane busy a while, small enough that a file of a
/// few runs still spreads over the lanes, and that a run's text fits its channel.
const RUN_BYTES: u64 = 1 << 20;
/// The text handed over at a time, and how many pieces a lane's channel holds: by default,
/// and at most (where the runs' text is known to be longer).
const PIECE: usize = 1 << 20;
const PIECES: usize = 8;
const MOST_PIECES: usize = 32;

enum Message {
    Text(Vec<u8>),
    /// The run's text is all handed over.
    End,
    Failed(std::io::Error),
}

/// The text of a run of parts, read in order while lanes decompress ahead.
pub struct ParallelText {
    lanes: Vec<(Receiver<Message>, Option<JoinHandle<()>>)>,
    runs: usize,
    /// The run being read, and its piece not yet read (from `at`).
    run: usize,
    piece: Vec<u8>,
    at: usize,
}

impl ParallelText {
    /// The text of `parts`' parts `range` of the file `path`, decoded by `lanes` threads;
    /// `read` counts the file's bytes as the lanes read them (progress).
    pub fn new(
        path: &Path,
        parts: Arc<Parts>,
        range: std::ops::Range<usize>,
        lanes: usize,
        read: Arc<AtomicU64>,
    ) -> Self {
        let runs = parts.runs(range, RUN_BYTES);
        let lanes = lanes.clamp(1, runs.len().max(1));
        let longest = runs
            .iter()
            .filter_map(|run| parts.text_len(run.clone()))
            .max();
        let pieces = longest.map_or(PIECES, |text| {
            let pieces = usize::try_from(text.div_ceil(PIECE as u64)).unwrap_or(usize::MAX);
            pieces.clamp(PIECES, MOST_PIECES)
        });
        let runs_shared = Arc::new(runs);
        let lanes: Vec<_> = (0..lanes)
            .map(|lane| {
                let (send, receive) = sync_channel(pieces);
                let work = Lane {
                    path: path.to_path_buf(),
                    parts: Arc::clone(&parts),
                    runs: Arc::clone(&runs_shared),
                    read: Arc::clone(&read),
                };
                let count = lanes;
                let handle = std::thread::Builder::new()
                    .name(format!("data_io-decode-{lane}"))
                    .spawn(move || work.decode_every(lane, count, &send));
                match handle {
                    Ok(handle) => (receive, Some(handle)),
                    Err(error) => {
                        // No thread: the lane's first message says why.
                        let (send, receive) = sync_channel(1);
                        let _ = send.send(Message::Failed(error));
                        (receive, None)
                    }
                }
            })
            .collect();
        Self {
            lanes,
            runs: runs_shared.len(),
            run: 0,
            piece: Vec::new(),
            at: 0,
        }
    }
}

impl Read for ParallelText {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.at == self.piece.len() {
            if self.run == self.runs {
                return Ok(0);
            }
            let lane = &self.lanes[self.run % self.lanes.len()].0;
            match lane.recv() {
                Ok(Message::Text(piece)) => (self.piece, self.at) = (piece, 0),
                Ok(Message::End) => self.run += 1,
                Ok(Message::Failed(error)) => {
                    self.run = self.runs; // nothing more after an error
                    return Err(error);
                }
                Err(_) => {
                    self.run = self.runs;
                    return Err(std::io::Error::other("a decompressing thread stopped"));
                }
            }
        }
        let n = buf.len().min(self.piece.len() - self.at);
        buf[..n].copy_from_slice(&self.piece[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

impl Drop for ParallelText {
    fn drop(&mut self) {
        // Closing the channels stops each lane at its next hand-over.
        let handles: Vec<_> = self.lanes.drain(..).filter_map(|(_, h)| h).collect();
        for handle in handles {
            let _ = handle.join();
        }
    }
}

/// What a lane needs: the file, its parts, and the runs of them.
struct Lane {
    path: PathBuf,
    parts: Arc<Parts>,
    runs: Arc<Vec<std::ops::Range<usize>>>,
    read: Arc<AtomicU64>,
}

impl Lane {
    /// Decode runs `lane`, `lane + lanes`, … in turn into `send`, until they are done, one
    /// fails, or the reader is gone.
    fn decode_every(&self, lane: usize, lanes: usize, send: &SyncSender<Message>) {
        for run in self.runs.iter().skip(lane).step_by(lanes) {
            // A file that will not open is no damaged place: its error as it is.
            let file = match File::open(&self.path) {
                Ok(file) => file,
                Err(error) => {
                    let _ = send.send(Message::Failed(error));
                    return;
                }
            };
            let outcome = self.decode(file, run.clone(), send);
            let message = match outcome {
                Ok(true) => Message::End,
                Ok(false) => return, // the reader is gone
                Err(error) => {
                    // Named by the part the decoder was in when it failed (the run's first
                    // part's start, for an error as decoding began: a bad header).
                    let at = self.parts.list[run.start].start;
                    let error = self.parts.name_part(super::damaged(error, at, at));
                    let _ = send.send(Message::Failed(error));
                    return;
                }
            };
            if send.send(message).is_err() {
                return;
            }
        }
    }

    /// Decode `run` into `send`; false when the reader is gone.
    fn decode(
        &self,
        file: File,
        run: std::ops::Range<usize>,
        send: &SyncSender<Message>,
    ) -> std::io::Result<bool> {
        let bytes = self.parts.span(run.clone());
        let mut text = self.parts.decoder(file, run)?;
        loop {
            let mut piece = Vec::with_capacity(PIECE);
            let n = (&mut text).take(PIECE as u64).read_to_end(&mut piece)?;
            if n == 0 {
                self.read.fetch_add(bytes, Ordering::Relaxed);
                return Ok(true);
            }
            if send.send(Message::Text(piece)).is_err() {
                return Ok(false);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::parts;
    use super::super::test_files::{bgzf, stored, text};
    use super::*;
    use crate::reader::Compression;

    #[test]
    fn the_text_comes_out_in_order_on_any_number_of_lanes() {
        let plain = text(200_000); // several runs of RUN_BYTES
        let bytes = bgzf(&plain, 60_000);
        let file = stored(&bytes);
        let parts = Arc::new(parts(file.path(), Compression::Gzip).expect("parts"));
        for lanes in [1, 2, 3, 8] {
            let read = Arc::new(AtomicU64::new(0));
            let range = 0..parts.list.len();
            let mut text = ParallelText::new(
                file.path(),
                Arc::clone(&parts),
                range,
                lanes,
                Arc::clone(&read),
            );
            let mut out = Vec::new();
            text.read_to_end(&mut out).expect("read");
            assert!(out == plain, "{lanes} lanes");
            assert_eq!(read.load(Ordering::Relaxed), bytes.len() as u64);
        }
        // A middle run of parts alone.
        let mut text = ParallelText::new(file.path(), Arc::clone(&parts), 2..5, 2, Arc::default());
        let mut out = Vec::new();
        text.read_to_end(&mut out).expect("read");
        assert!(out == plain[120_000..300_000]);
    }

    #[test]
    fn every_format_names_the_damaged_part_and_a_place_in_it_on_lanes_and_on_one_thread() {
        use std::io::Write;
        let plain = text(40_000);
        let zst = |piece: &[u8]| ::zstd::encode_all(piece, 1).expect("compressed");
        let xz = |piece: &[u8]| {
            let mut encoder = liblzma::write::XzEncoder::new(Vec::new(), 1);
            encoder.write_all(piece).expect("compressed");
            encoder.finish().expect("compressed")
        };
        let bz2 = |piece: &[u8]| {
            let level = ::bzip2::Compression::new(1);
            let mut encoder = ::bzip2::write::BzEncoder::new(Vec::new(), level);
            encoder.write_all(piece).expect("compressed");
            encoder.finish().expect("compressed")
        };
        type Make<'f> = &'f dyn Fn(&[u8]) -> Vec<u8>;
        let makers: [(Compression, Make<'_>); 4] = [
            (Compression::Zstd, &zst),
            (Compression::Gzip, &super::super::test_files::bgzf_member),
            (Compression::Xz, &xz),
            (Compression::Bzip2, &bz2),
        ];
        for (compression, make) in makers {
            let mut bytes: Vec<u8> = plain.chunks(60_000).flat_map(make).collect();
            let parts = Arc::new(parts(stored(&bytes).path(), compression).expect("parts"));
            assert!(parts.list.len() > 5, "{compression:?}");
            let damaged = parts.list[parts.list.len() / 2].clone();
            let middle = (damaged.start + damaged.len / 2) as usize;
            for byte in &mut bytes[middle..middle + 8] {
                *byte ^= 0x5a;
            }
            let file = stored(&bytes);
            for lanes in [1, 2] {
                let range = 0..parts.list.len();
                let mut text: Box<dyn Read> = match lanes {
                    1 => Box::new(super::super::SequentialText::new(
                        file.path().to_path_buf(),
                        Arc::clone(&parts),
                        range,
                        Arc::default(),
                    )),
                    _ => Box::new(ParallelText::new(
                        file.path(),
                        Arc::clone(&parts),
                        range,
                        lanes,
                        Arc::default(),
                    )),
                };
                let error = text.read_to_end(&mut Vec::new()).expect_err("damaged");
                let place = super::super::damaged_at(&error).expect("located");
                assert_eq!(place.part, Some(damaged.start), "{compression:?}: {error}");
                let inside = damaged.start..damaged.start + damaged.len;
                assert!(
                    inside.contains(&place.near),
                    "{compression:?}, {lanes} lanes: {} in {inside:?}",
                    place.near
                );
            }
        }
    }

    #[test]
    fn a_damaged_part_is_an_error_naming_it_and_a_reader_dropped_early_stops_the_lanes() {
        let plain = text(200_000);
        let mut bytes = bgzf(&plain, 60_000);
        let parts = Arc::new(parts(stored(&bytes).path(), Compression::Gzip).expect("parts"));
        let damaged = &parts.list[parts.list.len() / 2];
        bytes[(damaged.start + 30) as usize] ^= 0xff;
        let file = stored(&bytes);
        let mut text = ParallelText::new(
            file.path(),
            Arc::clone(&parts),
            0..parts.list.len(),
            2,
            Arc::default(),
        );
        let error = text.read_to_end(&mut Vec::new()).expect_err("damaged");
        // The part that failed is named, not the first of its lane's run, and the place is the
        // file's, inside that part.
        let named = format!("in the part from byte {}", damaged.start);
        assert!(error.to_string().contains(&named), "{error}");
        let place = super::super::damaged_at(&error).expect("located");
        let inside = damaged.start + 30..damaged.start + damaged.len;
        assert!(inside.contains(&place.near), "{} in {inside:?}", place.near);
        // Read a little, then drop: the lanes stop.
        let mut text = ParallelText::new(
            file.path(),
            Arc::clone(&parts),
            0..parts.list.len(),
            3,
            Arc::default(),
        );
        let mut some = [0u8; 100];
        text.read_exact(&mut some).expect("read");
        assert_eq!(&some[..], &plain[..100]);
        drop(text);
    }
}
