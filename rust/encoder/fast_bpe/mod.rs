//! A fast, exact byte-level BPE encoder for the tokenizer shapes `spec` recognises: NFC (only
//! when the text needs it), a hand-written pre-tokenizer, and merge-rank BPE per pre-token behind
//! a cache shared by the threads (`shared_cache`, with a per-thread cache for what it cannot hold). The HF `tokenizers` encoder stays the oracle and the fallback
//! (`crate::encoder`).
//!
//! - `mod.rs`: `FastBpe`: the encoder over these parts (added tokens, NFC, split, cached merges).
//! - `spec.rs`: which `tokenizer.json` shapes it serves exactly, read from the file.
//! - `pretokenize.rs`: the hand-written splitters of the known split regexes (`Pattern`).
//! - `ascii_blocks.rs`: the Qwen-family split of ASCII text, 64 bytes at a time.
//! - `unicode.rs`, `unicode_classes.rs` (generated): Oniguruma's character classes.
//! - `nfc.rs`: the NFC quick check ("is this text already in NFC?").
//! - `bpe.rs`: byte-level BPE on one pre-token, in the merge order of `tokenizers`.
//! - `whole_chars.rs`: the characters a new pre-token may start from as one token each (exact
//!   for a well-formed merge list; a third of the symbols of CJK text).
//! - `cache.rs`: a thread's piece cache and the short-piece map; `shared_cache.rs`: the piece
//!   cache all threads share, without locks.
//! - the big tables' zeroed memory, on 2 MiB pages where possible, is `crate::table_memory`.
//! - `load_cache.rs`: the merges by id and the whole-token pieces, kept on disk for the next load.

mod ascii_blocks;
mod bpe;
mod cache;
pub mod load_cache;
mod nfc;
pub mod node_tables;
pub mod pretokenize;
mod shared_cache;
pub mod spec;
mod unicode;
pub mod vocab;
mod whole_chars;

use std::borrow::Cow;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use rayon::prelude::*;
use rustc_hash::FxHashMap;
use unicode_normalization_alignments::UnicodeNormalization;

pub use bpe::byte_to_char;
pub use nfc::is_nfc;
pub use pretokenize::Pattern;
pub use spec::Spec;
pub use vocab::Vocab;

use bpe::{merge, merge_bytes, CharToByte, Merges, Scratch};
use cache::{PieceCache, Probe, MAX_CACHED_LEN, SHORT_LEN};
use load_cache::LoadCache;
use shared_cache::SharedPieces;

/// Slots (log2) each thread's cache of short pieces starts with (512 KiB), and the most it grows
/// to (32 MiB, half a million pieces) before it starts over; see `cache::PieceCache`.
const CACHE_START_BITS: u32 = 14;
const CACHE_MAX_BITS: u32 = 20;
/// Longer pieces each thread's cache holds before it starts over.
const CACHE_LONG_ENTRIES: usize = 1 << 18;
const NO_ID: u32 = u32::MAX;
/// The cache of merged pieces all threads share (`shared_cache`): slots (log2) for short and
/// for long pieces, and arena words for the long ones. Virtual memory: pages are touched as the
/// tables fill (at most 64 + 16 + 64 MiB). The tables take pieces until they are half full, and
/// a piece they do not hold costs a longer search and a second table on every lookup. The race's
/// 150 MB main slice has 523k distinct pieces of at most 16 bytes (with Qwen's 140k single-token
/// pieces prefilled, more than the 524k that 2^20 slots take: tokenize warm +3% at 2^21) and
/// 240k longer ones; its 20 MB CJK slice has 167k longer ones. At 2^18 long slots (131k pieces)
/// the rest fell to the per-thread caches, so at 2 threads each thread merged again what the
/// other had merged (CJK warm at 2 threads +14% at 2^20).
const SHARED_SHORT_BITS: u32 = 21;
const SHARED_LONG_BITS: u32 = 20;
const SHARED_ARENA_WORDS: usize = 1 << 23;
/// Pieces whose table slots are prefetched together (see `split_into`).
const PREFETCH_GROUP: usize = 16;

pub struct FastBpe {
    /// Tells this encoder's per-thread cache from another encoder's.
    instance: u64,
    pattern: Pattern,
    nfc: bool,
    byte_ids: [u32; 256],
    merges: Merges,
    /// With `ignore_merges`: the longer pieces that are whole vocabulary entries.
    long_tokens: LongTokens,
    /// Non-special added tokens, cut out of the raw text first (see `spec::Spec::added`).
    added: Option<AddedTokens>,
    /// Merged pieces, shared by the threads (and with `Tables::Node`, by the node's
    /// processes); each thread's own cache takes what it cannot.
    shared: SharedPieces,
    /// The node's file under `shared`, when it is one; after `shared`, so dropped after it.
    node: Option<node_tables::NodeFile>,
    /// Where the tables are, in words for the user (`tables`).
    tables: String,
    /// What the load cache did, in words for the user (`load_cache`).
    load_cache: String,
}

/// Where an encoder keeps its piece tables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tables {
    /// In this process, on 2 MiB pages where the kernel gives them (the fastest lookups).
    Process,
    /// In a file in `dir` that every process on the node using the tokenizer whose BLAKE3 is
    /// `key` maps (`node_tables`): one copy per node, on the pages `/dev/shm` gives.
    Node { dir: PathBuf, key: blake3::Hash },
}

/// The raw-text matcher of `tokenizers`' added vocabulary: leftmost-longest over the same
/// strings with the same crate; a match of a special token stays text (`None`).
struct AddedTokens {
    matcher: AhoCorasick,
    ids: Vec<Option<u32>>,
}

/// One thread's cache and scratch buffers, for the encoder that used them last.
struct ThreadState {
    instance: u64,
    /// On the heap: 2 KiB more of thread-local storage is more than a module loaded into a
    /// running Python gets ("cannot allocate memory in static TLS block").
    groups: Box<Groups>,
    work: PieceWork,
}

/// What merging a piece the tables lack needs: the thread's own cache, its share of the
/// shared tables' arena, and scratch space.
struct PieceWork {
    cache: PieceCache,
    writer: shared_cache::Writer,
    symbols: Vec<u32>,
    scratch: Scratch,
}

thread_local! {
    static STATE: RefCell<ThreadState> = RefCell::new(ThreadState {
        instance: 0,
        groups: Box::default(),
        work: PieceWork {
            cache: PieceCache::new(CACHE_START_BITS, CACHE_MAX_BITS, CACHE_LONG_ENTRIES),
            writer: shared_cache::Writer::default(),
            symbols: Vec::new(),
            scratch: Scratch::default(),
        },
    });
}

impl FastBpe {
    /// Build the encoder for a recognised `spec` over the model's `vocab` (from `tokenizers`,
    /// so that both encoders see the same entries); `Err` is why it would not be exact.
    /// `added_id` gives the id `tokenizers` assigns an added token. What the build derives
    /// from the merges is read from `cache` when it holds it, and kept there when it does not.
    pub fn new(
        spec: &Spec,
        vocab: &Vocab,
        added_id: impl Fn(&str) -> Option<u32>,
        tables: &Tables,
        cache: Option<&LoadCache>,
    ) -> Result<FastBpe, String> {
        static INSTANCES: AtomicU64 = AtomicU64::new(1);
        let chars = byte_to_char();
        let mut byte_ids = [NO_ID; 256];
        let mut buffer = [0u8; 4];
        for (slot, c) in byte_ids.iter_mut().zip(chars) {
            if let Some(id) = vocab.get(c.encode_utf8(&mut buffer)) {
                *slot = id;
            }
        }
        if spec.needs_full_alphabet && byte_ids.contains(&NO_ID) {
            return Err("unk_token or byte_fallback with bytes missing from the vocabulary".into());
        }
        let id_bound = vocab.id_bound();
        let cached = cache.and_then(|cache| cache.load(id_bound));
        // Every token's bytes: for the whole-token check, and the long tokens of
        // `ignore_merges`.
        let tokens: Vec<(Vec<u8>, u32)> = if cached.is_none() || spec.ignore_merges {
            let reverse = CharToByte::new(&chars);
            vocab
                .iter()
                .filter_map(|(token, id)| Some((reverse.token_bytes(token)?, id)))
                .collect()
        } else {
            Vec::new()
        };
        let (merges, known, load_cache) = match (&cached, cache) {
            (Some(derived), Some(cache)) => (
                Merges::new(derived.merges(), &byte_ids)?,
                derived.pieces().collect(),
                format!("read {}", cache.path().display()),
            ),
            _ => {
                let list = merge_list(spec, vocab)?;
                let merges = Merges::new(list.iter().copied(), &byte_ids)?;
                let known = whole_tokens(&tokens, &merges, &byte_ids, spec);
                let kept = match cache.map(|cache| (cache.store(&list, &known), cache.path())) {
                    None => "off".to_string(),
                    Some((Ok(()), path)) => format!("written {}", path.display()),
                    Some((Err(error), path)) => format!("not kept ({}: {error})", path.display()),
                };
                (merges, known, kept)
            }
        };
        let long_tokens = long_tokens(&tokens, spec);
        // Short pieces that are one vocabulary token start out in the shared cache: every token
        // whose own bytes merge back to it (or every token, with `ignore_merges`). A word seen
        // for the first time is then still one lookup, and every short piece is looked up in
        // one table.
        let sizes = node_tables::Sizes {
            short_bits: (known.len() * 4)
                .next_power_of_two()
                .trailing_zeros()
                .max(SHARED_SHORT_BITS),
            long_bits: SHARED_LONG_BITS,
            arena_words: SHARED_ARENA_WORDS,
        };
        let (shared, node, tables) = piece_tables(tables, sizes, &known)?;
        let added = added_tokens(spec, added_id)?;
        Ok(FastBpe {
            instance: INSTANCES.fetch_add(1, Ordering::Relaxed),
            pattern: spec.pattern,
            nfc: spec.nfc,
            byte_ids,
            merges,
            long_tokens,
            added,
            shared,
            node,
            tables,
            load_cache,
        })
    }

    /// What the load cache did for this encoder: "read PATH", "written PATH", "not kept
    /// (PATH: why)" or "off".
    pub fn load_cache(&self) -> &str {
        &self.load_cache
    }

    /// Where the piece tables are: "process", the node's file, or why not the node's.
    pub fn tables(&self) -> &str {
        &self.tables
    }

    /// The node's file under the tables, when they are in one.
    pub fn node_file(&self) -> Option<&Path> {
        self.node.as_ref().map(|node| node.path())
    }

    pub fn pattern(&self) -> Pattern {
        self.pattern
    }

    /// Append the ids of `text` to `out`.
    pub fn encode_into(&self, text: &str, out: &mut Vec<u32>) {
        let Some(added) = &self.added else {
            return self.encode_segment(text, out);
        };
        // As `tokenizers`: the text between two extracted tokens is normalized and split on its
        // own; a special token's match is skipped, so its text stays in the segment.
        let mut start = 0;
        for found in added.matcher.find_iter(text) {
            if let Some(id) = added.ids[found.pattern().as_usize()] {
                self.encode_segment(&text[start..found.start()], out);
                out.push(id);
                start = found.end();
            }
        }
        self.encode_segment(&text[start..], out);
    }

    /// The ids of a text with no added token in it, looked up before this returns.
    fn encode_segment(&self, text: &str, out: &mut Vec<u32>) {
        if text.is_empty() {
            return;
        }
        let text = self.normalize(text);
        STATE.with_borrow_mut(|state| {
            let (groups, work) = self.thread_state(state);
            groups.clear();
            self.split_into(&text, groups, work, out, &mut |_| {});
            self.drain(groups, work, out, &mut |_| {});
        });
    }

    /// The ids of each of `texts` appended to `out` in turn, `close(out)` called after each
    /// text's (its EOS and where it ends).
    ///
    /// Why not `encode_into` for each: a text's last group of pieces was looked up right after
    /// its slots were prefetched, before the lines could arrive, once per text; here that group
    /// waits while the next text's first group is split. (Joining the race's texts sixteen at a
    /// time ran a warm pass 1.26x as fast: what a text costs once, these waits the largest
    /// part; this gained 2-3%.) The ids come out in the same order: a text's close waits with
    /// its last group.
    ///
    /// `texts` and `close` run inside this thread's encoder state: they must not encode on this
    /// thread themselves (that would panic, "already borrowed").
    pub fn encode_texts<'t>(
        &self,
        texts: impl Iterator<Item = &'t str>,
        out: &mut Vec<u32>,
        mut close: impl FnMut(&mut Vec<u32>),
    ) {
        STATE.with_borrow_mut(|state| {
            let (groups, work) = self.thread_state(state);
            groups.clear();
            for text in texts {
                match &self.added {
                    None => self.segment_of_texts(text, true, groups, work, out, &mut close),
                    Some(added) => {
                        // As `encode_into`; every segment but the last is looked up before its
                        // added token's id.
                        let mut start = 0;
                        for found in added.matcher.find_iter(text) {
                            if let Some(id) = added.ids[found.pattern().as_usize()] {
                                let segment = &text[start..found.start()];
                                self.segment_of_texts(
                                    segment, false, groups, work, out, &mut close,
                                );
                                out.push(id);
                                start = found.end();
                            }
                        }
                        let rest = &text[start..];
                        self.segment_of_texts(rest, true, groups, work, out, &mut close);
                    }
                }
            }
            self.drain(groups, work, out, &mut close);
        });
    }

    /// One segment of `encode_texts`: split and prefetched; when it ends its text (`last`) and
    /// is the caller's own text (not a copy normalised here), `defer` leaves its last group and
    /// its close waiting for the next text; otherwise everything is looked up, and then closed.
    fn segment_of_texts(
        &self,
        segment: &str,
        last: bool,
        groups: &mut Groups,
        work: &mut PieceWork,
        out: &mut Vec<u32>,
        close: &mut dyn FnMut(&mut Vec<u32>),
    ) {
        let text = if segment.is_empty() {
            Cow::Borrowed(segment)
        } else {
            self.normalize(segment)
        };
        if !text.is_empty() {
            self.split_into(&text, groups, work, out, close);
        }
        if last && matches!(text, Cow::Borrowed(_)) {
            self.defer(groups, work, out, close);
        } else {
            self.drain(groups, work, out, close);
            if last {
                close(out);
            }
        }
    }

    /// This thread's groups and piece work, reset when another encoder used them last.
    fn thread_state<'s>(&self, state: &'s mut ThreadState) -> (&'s mut Groups, &'s mut PieceWork) {
        if state.instance != self.instance {
            state.work.cache.clear();
            state.work.writer = shared_cache::Writer::default();
            state.instance = self.instance;
        }
        // The thread's groups, emptied by the caller: made afresh, their 2 KiB were zeroed for
        // every text (1% of a warm run in `memset`).
        (&mut state.groups, &mut state.work)
    }

    /// Split `text` into the groups, each full group prefetched and the one before it looked
    /// up; the last, partial group is prefetched and left filling. Pieces are looked up a
    /// group at a time, one group behind the splitter, so that the lines have had that long to
    /// arrive (the lookups had stalled on the slots they had just prefetched).
    fn split_into(
        &self,
        text: &str,
        groups: &mut Groups,
        work: &mut PieceWork,
        out: &mut Vec<u32>,
        close: &mut dyn FnMut(&mut Vec<u32>),
    ) {
        let bytes = text.as_bytes();
        let base = bytes.as_ptr() as usize;
        groups.texts[groups.filling] = (bytes.as_ptr(), bytes.len());
        pretokenize::split(self.pattern, text, |piece| {
            if groups.push(piece.as_ptr() as usize - base, piece.len()) {
                self.advance(groups, bytes, work, out, close);
            }
        });
        self.prepare(groups, groups.filling, bytes);
    }

    /// Look up the group waiting (then close the texts it ended) and the one filling.
    fn drain(
        &self,
        groups: &mut Groups,
        work: &mut PieceWork,
        out: &mut Vec<u32>,
        close: &mut dyn FnMut(&mut Vec<u32>),
    ) {
        self.look_up_waiting(groups, work, out, close);
        self.look_up(groups, groups.filling, work, out);
        groups.len[groups.filling] = 0;
    }

    /// At the end of a text: its partial group becomes the one waiting (the one waiting before
    /// it is looked up first) and its close waits with it; a text that left no group to wait
    /// closes after the group waiting, or now when none is.
    fn defer(
        &self,
        groups: &mut Groups,
        work: &mut PieceWork,
        out: &mut Vec<u32>,
        close: &mut dyn FnMut(&mut Vec<u32>),
    ) {
        if groups.len[groups.filling] > 0 {
            self.look_up_waiting(groups, work, out, close);
            groups.waiting = Some(groups.filling);
            groups.filling ^= 1;
            groups.len[groups.filling] = 0;
            groups.closes = 1;
        } else if groups.waiting.is_some() {
            groups.closes += 1;
        } else {
            close(out);
        }
    }

    /// Look up the group waiting, if one is, and close the texts it ends.
    fn look_up_waiting(
        &self,
        groups: &mut Groups,
        work: &mut PieceWork,
        out: &mut Vec<u32>,
        close: &mut dyn FnMut(&mut Vec<u32>),
    ) {
        if let Some(ready) = groups.waiting.take() {
            self.look_up(groups, ready, work, out);
            groups.len[ready] = 0;
            for _ in 0..std::mem::take(&mut groups.closes) {
                close(out);
            }
        }
    }

    /// A full group: its slots prefetched, then the group before it looked up. Not inlined,
    /// so that the splitter's per-piece callback stays small enough to be inlined itself.
    #[inline(never)]
    fn advance(
        &self,
        groups: &mut Groups,
        bytes: &[u8],
        work: &mut PieceWork,
        out: &mut Vec<u32>,
        close: &mut dyn FnMut(&mut Vec<u32>),
    ) {
        let full = groups.filling;
        self.prepare(groups, full, bytes);
        self.look_up_waiting(groups, work, out, close);
        groups.waiting = Some(full);
        groups.filling ^= 1;
        groups.len[groups.filling] = 0;
        groups.texts[groups.filling] = groups.texts[full];
    }

    /// Each piece's key and hash, made once for every table, and its first slot prefetched.
    #[inline(always)]
    fn prepare(&self, groups: &mut Groups, which: usize, bytes: &[u8]) {
        let len = groups.len[which];
        let pieces = &groups.pieces[which][..len];
        let probes = &mut groups.probes[which];
        let long_hashes = &mut groups.long_hashes[which];
        for ((probe, long_hash), &(start, len)) in
            probes.iter_mut().zip(long_hashes.iter_mut()).zip(pieces)
        {
            if len <= SHORT_LEN {
                *probe = Probe::at(bytes, start, len);
                self.shared.prefetch(probe);
            } else if len <= MAX_CACHED_LEN {
                // Long pieces are few (2% of documentation text's) but each missed its slot's
                // line: 6% of a warm run.
                *long_hash = shared_cache::long_hash(&bytes[start..start + len]);
                self.shared.prefetch_long(*long_hash);
            }
        }
    }

    /// The ids of a prepared group's pieces, in order.
    #[inline(always)]
    fn look_up(&self, groups: &Groups, which: usize, work: &mut PieceWork, out: &mut Vec<u32>) {
        if groups.len[which] == 0 {
            return; // (an empty group's text may be gone)
        }
        let (base, len) = groups.texts[which];
        // SAFETY: a group with pieces had its text set by `split_into` (before its split
        // began) or by `advance` (the same text, going on), in this call: both entry points
        // clear the groups first, so nothing from an earlier call or an unwound panic is read.
        // The text is the caller's, alive for the whole call (`encode_texts`' `'t`), or a copy
        // normalised here, which `segment_of_texts` and `encode_segment` look up before it goes.
        let bytes = unsafe { std::slice::from_raw_parts(base, len) };
        let pieces = &groups.pieces[which][..groups.len[which]];
        let probes = &groups.probes[which];
        let long_hashes = &groups.long_hashes[which];
        for ((probe, &long_hash), &(start, len)) in probes.iter().zip(long_hashes).zip(pieces) {
            let key = if len <= SHORT_LEN {
                // Nearly every piece is in the line prefetched: its ids are written whatever
                // their count, and the count kept.
                let (ids, count) = self.shared.get_home(probe);
                if count > 0 {
                    push_ids(out, ids, count);
                    continue;
                }
                PieceKey::Short(probe)
            } else {
                PieceKey::Long(long_hash)
            };
            self.encode_piece(&bytes[start..start + len], key, work, out);
        }
    }

    /// NFC as `tokenizers` computes it (same crate, same tables), skipped when the quick check
    /// proves the text is already in NFC, which is nearly always (`nfc::is_nfc`).
    fn normalize<'t>(&self, text: &'t str) -> Cow<'t, str> {
        if !self.nfc || nfc::is_nfc(text) {
            return Cow::Borrowed(text);
        }
        Cow::Owned(text.nfc().map(|(c, _)| c).collect())
    }

    /// Append the ids of one pre-token, looked up by `key`.
    #[inline(always)]
    fn encode_piece(
        &self,
        piece: &[u8],
        key: PieceKey<'_>,
        work: &mut PieceWork,
        out: &mut Vec<u32>,
    ) {
        if let [byte] = piece {
            // A byte the vocabulary lacks is dropped, as `tokenizers` does without an unk token.
            let id = self.byte_ids[*byte as usize];
            if id != NO_ID {
                out.push(id);
            }
            return;
        }
        let cached = match key {
            PieceKey::Short(probe) => {
                if self.shared.get_short(probe, out) {
                    return;
                }
                work.cache.get_short(probe)
            }
            PieceKey::Long(hash) => {
                if let Some(&id) = self.long_tokens.get(piece) {
                    out.push(id);
                    return;
                }
                if self.shared.get_long(piece, hash, out) {
                    return;
                }
                work.cache.get(piece)
            }
        };
        if let Some(ids) = cached {
            append(out, ids);
            return;
        }
        let symbols = &mut work.symbols;
        merge_bytes(&self.merges, piece, symbols, &mut work.scratch);
        out.extend_from_slice(symbols);
        let shared = match key {
            PieceKey::Short(probe) => self.shared.insert_short(probe, symbols, &mut work.writer),
            PieceKey::Long(hash) => self
                .shared
                .insert_long(piece, hash, symbols, &mut work.writer),
        };
        if !shared {
            work.cache.insert(piece, symbols);
        }
    }
}

/// Two groups of pieces (start, length) with their probes: one being filled by the splitter,
/// the other prefetched and waiting to be looked up.
struct Groups {
    pieces: [[(usize, usize); PREFETCH_GROUP]; 2],
    probes: [[Probe; PREFETCH_GROUP]; 2],
    long_hashes: [[u64; PREFETCH_GROUP]; 2],
    len: [usize; 2],
    /// Each group's text, as (start, length): a group waiting may be the text before's.
    texts: [(*const u8, usize); 2],
    filling: usize,
    waiting: Option<usize>,
    /// Texts that end with the group waiting, closed once it is looked up.
    closes: usize,
}

impl Default for Groups {
    fn default() -> Groups {
        Groups {
            pieces: [[(0, 0); PREFETCH_GROUP]; 2],
            probes: [[Probe::default(); PREFETCH_GROUP]; 2],
            long_hashes: [[0; PREFETCH_GROUP]; 2],
            len: [0; 2],
            texts: [(std::ptr::null(), 0); 2],
            filling: 0,
            waiting: None,
            closes: 0,
        }
    }
}

impl Groups {
    fn clear(&mut self) {
        self.len = [0; 2];
        self.filling = 0;
        self.waiting = None;
        self.closes = 0;
    }

    /// Add a piece to the group being filled; `true` when that group is now full.
    #[inline(always)]
    fn push(&mut self, start: usize, len: usize) -> bool {
        let at = self.len[self.filling];
        self.pieces[self.filling][at] = (start, len);
        self.len[self.filling] = at + 1;
        at + 1 == PREFETCH_GROUP
    }
}

/// How a piece is looked up: a short piece by its probe, a longer one by its `long_hash`
/// (pieces past `MAX_CACHED_LEN` are never cached; their hash is not made).
#[derive(Clone, Copy)]
enum PieceKey<'p> {
    Short(&'p Probe),
    Long(u64),
}

/// Append the first `count` (1 to 3) of `ids`: all three are written, with no branch on the
/// count, and the length moved past the ones that count.
#[inline(always)]
fn push_ids(out: &mut Vec<u32>, ids: [u32; 3], count: usize) {
    debug_assert!((1..=3).contains(&count));
    out.reserve(3);
    let len = out.len();
    // SAFETY: `reserve` made room for three more ids past `len`; `count <= 3` of them are
    // kept, and all three are initialised.
    unsafe {
        let end = out.as_mut_ptr().add(len);
        end.cast::<[u32; 3]>().write_unaligned(ids);
        out.set_len(len + count.min(3));
    }
}

/// `out.extend_from_slice(ids)` without its call to `memcpy`, which for the one or two ids of
/// nearly every piece cost more than the copy (5% of a warm tokenize run in `memmove`).
#[inline(always)]
fn append(out: &mut Vec<u32>, ids: &[u32]) {
    match ids {
        [id] => out.push(*id),
        [a, b] => {
            out.push(*a);
            out.push(*b);
        }
        _ => out.extend_from_slice(ids),
    }
}

/// The matcher of `spec.added`, or `None` when there is nothing to cut out.
fn added_tokens(
    spec: &Spec,
    added_id: impl Fn(&str) -> Option<u32>,
) -> Result<Option<AddedTokens>, String> {
    if spec.added.is_empty() {
        return Ok(None);
    }
    let ids = spec
        .added
        .iter()
        .map(|token| match token.special {
            true => Ok(None),
            false => added_id(&token.content)
                .map(Some)
                .ok_or_else(|| format!("added token {:?} has no id", token.content)),
        })
        .collect::<Result<Vec<_>, String>>()?;
    let matcher = AhoCorasickBuilder::new()
        .match_kind(MatchKind::LeftmostLongest)
        .build(spec.added.iter().map(|token| &token.content))
        .map_err(|e| format!("added tokens: {e}"))?;
    Ok(Some(AddedTokens { matcher, ids }))
}

/// Pieces longer than `SHORT_LEN` that are one token, with `ignore_merges`.
type LongTokens = FxHashMap<Box<[u8]>, u32>;

/// The piece tables `tables` asks for, filled with the single-token pieces `known`: the node's
/// file when it can be had (made, or found holding exactly these pieces), else this process's
/// own, with the reason in the description.
type PieceTables = (SharedPieces, Option<node_tables::NodeFile>, String);
fn piece_tables(
    tables: &Tables,
    sizes: node_tables::Sizes,
    known: &[(&[u8], u32)],
) -> Result<PieceTables, String> {
    let too_many = || {
        format!(
            "{} single-token pieces do not fit the piece cache",
            known.len()
        )
    };
    let prefill = |pieces: &SharedPieces| pieces.prefill(known);
    let holds_all = |pieces: &SharedPieces| {
        let mut out = Vec::with_capacity(3);
        known.iter().all(|&(piece, id)| {
            out.clear();
            Probe::new(piece).is_some_and(|probe| pieces.get_short(&probe, &mut out)) && out == [id]
        })
    };
    let fallback = match tables {
        Tables::Process => "process".to_string(),
        Tables::Node { dir, key } => {
            match node_tables::attach(dir, key, sizes, prefill, holds_all) {
                Ok((shared, node)) => {
                    let described = format!("node ({})", node.path().display());
                    return Ok((shared, Some(node), described));
                }
                Err(reason) => format!("process (node tables unavailable: {reason})"),
            }
        }
    };
    let shared = SharedPieces::new(sizes.short_bits, sizes.long_bits, sizes.arena_words);
    if !shared.prefill(known) {
        return Err(too_many());
    }
    Ok((shared, None, fallback))
}

/// The merges in rank order as (left, right, merged) ids, on the pool's threads; `Err` names
/// a merge whose tokens the vocabulary lacks, or merges that cannot be read.
fn merge_list(spec: &Spec, vocab: &Vocab) -> Result<Vec<load_cache::Merge>, String> {
    let id_of = |token: &str| {
        vocab
            .get(token)
            .ok_or_else(|| format!("merge token {token:?} is not in the vocabulary"))
    };
    // Each thread with one buffer for the merged token's string.
    spec.merge_pairs()?
        .par_iter()
        .map_init(String::new, |joined, (a, b)| {
            joined.clear();
            joined.push_str(a);
            joined.push_str(b);
            Ok((id_of(a)?, id_of(b)?, id_of(joined)?))
        })
        .collect()
}

/// The short pieces (at most `SHORT_LEN` bytes) that are exactly one token. Without
/// `ignore_merges` a token is listed only when merging its own bytes gives it back, which is
/// what merging the piece would give; the check runs on all cores. What this and `merge_list`
/// return is kept on disk (`load_cache`): a change to either, or to how `bpe` merges, must
/// change `load_cache::DERIVATION` so that no file of the old rules is read.
fn whole_tokens<'t>(
    tokens: &'t [(Vec<u8>, u32)],
    merges: &Merges,
    byte_ids: &[u32; 256],
    spec: &Spec,
) -> Vec<(&'t [u8], u32)> {
    let short: Vec<(&'t [u8], u32)> = tokens
        .par_iter()
        .filter(|(bytes, _)| (2..=SHORT_LEN).contains(&bytes.len()))
        .map_init(
            || (Vec::new(), Scratch::default()),
            |(symbols, scratch), entry| {
                let whole = (entry.0.as_slice(), entry.1);
                if spec.ignore_merges {
                    return Some(whole);
                }
                symbols.clear();
                symbols.extend(entry.0.iter().map(|&b| byte_ids[b as usize]));
                if symbols.contains(&NO_ID) {
                    return None;
                }
                merge(merges, symbols, scratch);
                (symbols.as_slice() == [entry.1]).then_some(whole)
            },
        )
        .flatten()
        .collect();
    // Each byte is a piece too, and a token when the vocabulary has it.
    static BYTE_VALUES: [u8; 256] = {
        let mut values = [0u8; 256];
        let mut b = 0;
        while b < 256 {
            values[b] = b as u8;
            b += 1;
        }
        values
    };
    let bytes = BYTE_VALUES
        .chunks(1)
        .zip(byte_ids)
        .filter(|&(_, &id)| id != NO_ID)
        .map(|(byte, &id)| (byte, id));
    short.into_iter().chain(bytes).collect()
}

/// The longer pieces that are whole tokens, needed only with `ignore_merges` (where a whole
/// token wins over merging); empty otherwise.
fn long_tokens(tokens: &[(Vec<u8>, u32)], spec: &Spec) -> LongTokens {
    if !spec.ignore_merges {
        return FxHashMap::default();
    }
    tokens
        .iter()
        .filter(|(bytes, _)| bytes.len() > SHORT_LEN)
        .map(|(bytes, id)| (bytes.as_slice().into(), *id))
        .collect()
}
