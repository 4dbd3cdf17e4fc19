//! A cache of merged pieces shared by all threads of one encoder, without locks.
//!
//! Why: with one cache per thread, every thread merges every piece once, and which rows a
//! thread encodes changes from run to run (rayon's work stealing), so at 2 threads a second run
//! over CJK text still missed half its pieces (tokenize 70 MB/s on the second run, 100 on the
//! third). A table behind mutexes was tried and was 15-30% slower than per-thread caches.
//!
//! How: slots are written once and never changed or removed, so a reader needs no lock. A
//! writer claims an empty slot with a compare-and-swap on its state word, writes the other words,
//! then publishes the state with release ordering; a reader that loads a published state with
//! acquire ordering sees the whole entry. A slot being written reads as "not this piece" (the
//! piece is then merged again, which gives the same ids). When a table is half full it takes no
//! more pieces; the thread's own cache (`cache::PieceCache`) holds the rest.
//!
//! Short pieces (at most `SHORT_LEN` bytes, at most three ids) live in their slot; longer ones
//! (up to `MAX_CACHED_LEN` bytes) keep their bytes and ids in an append-only arena that each
//! thread reserves from in chunks.

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use super::cache::{Probe, MAX_CACHED_LEN};
use crate::table_memory::ZeroedTable;

/// Ids a short piece's slot holds itself; a piece with more keeps them in the arena.
const INLINE_IDS: usize = 3;
/// State word of a slot whose writer has not published it yet.
const CLAIMED: u64 = u64::MAX;
/// Slots a lookup or an insert looks at before it gives up (the tables stay at most half full,
/// where linear probing needs a few).
const MAX_PROBES: usize = 64;
/// Arena words a thread reserves at a time.
const ARENA_CHUNK: usize = 1 << 12;
/// Inserts a thread counts on its own before it adds them to a table's shared count.
const COUNT_BATCH: usize = 256;
/// Whole tokens a prefilling job inserts.
const PREFILL_CHUNK: usize = 1 << 13;
/// How many pieces ahead the prefill fetches the slots it will write (`SharedPieces::prefill`).
const PREFILL_AHEAD: usize = 16;

/// One short piece: `[lo, hi, state, ids 1-2]`, where state is `len | count << 16 | id0 << 32`
/// (never 0 once published: `len >= 1`).
pub type ShortSlot = [AtomicU64; 4];
/// One long piece: `[hash, state]`, where state is `offset << 32 | len << 16 | count`.
pub type LongSlot = [AtomicU64; 2];

pub struct SharedPieces {
    /// `HEADER_WORDS` words: what the tables are (for a file that other processes map, see
    /// `node_tables`) and the counters every writer updates.
    header: ZeroedTable<AtomicU64>,
    short: ZeroedTable<ShortSlot>,
    short_shift: u32,
    long: ZeroedTable<LongSlot>,
    long_shift: u32,
    /// Piece bytes (eight to a word) then ids (two to a word) of each long piece.
    arena: ZeroedTable<AtomicU64>,
}

/// The header's words (one page of them, so the tables after it start on a page).
pub const HEADER_WORDS: usize = 512;
/// `MAGIC`, once the tables are filled and may be read.
pub const READY: usize = 0;
/// The tables' layout: `LAYOUT`, the bits of the short and long tables, the arena's words.
pub const LAYOUT_AT: usize = 1;
pub const SHORT_BITS_AT: usize = 2;
pub const LONG_BITS_AT: usize = 3;
pub const ARENA_WORDS_AT: usize = 4;
/// Short and long pieces taken, and the next free arena word.
const SHORT_USED: usize = 5;
const LONG_USED: usize = 6;
const ARENA_NEXT: usize = 7;
/// Where the four words of the key the tables were made for start (`node_tables`).
pub const KEY_AT: usize = 8;
pub const MAGIC: u64 = u64::from_le_bytes(*b"dataio\x01P");
/// Changes whenever the slots, the hashes or the header change: tables of another layout are
/// never mapped.
pub const LAYOUT: u64 = 1;

/// The byte sizes of a header and tables of these bits and arena words, in file order.
pub fn table_bytes(short_bits: u32, long_bits: u32, arena_words: usize) -> [usize; 4] {
    [
        HEADER_WORDS * 8,
        (1usize << short_bits) * std::mem::size_of::<ShortSlot>(),
        (1usize << long_bits) * std::mem::size_of::<LongSlot>(),
        arena_words * 8,
    ]
}

/// What one thread keeps between inserts: its reserved arena words and its uncounted inserts.
#[derive(Default)]
pub struct Writer {
    arena: std::ops::Range<usize>,
    short_pending: usize,
    long_pending: usize,
}

impl SharedPieces {
    /// Tables of `2^short_bits` and `2^long_bits` slots and an arena of `arena_words` words
    /// (their memory is only touched as it fills).
    pub fn new(short_bits: u32, long_bits: u32, arena_words: usize) -> SharedPieces {
        let pieces = Self::from_tables(
            ZeroedTable::new(HEADER_WORDS),
            ZeroedTable::new(1 << short_bits),
            ZeroedTable::new(1 << long_bits),
            ZeroedTable::new(arena_words),
        );
        pieces.stamp_layout();
        pieces
    }

    /// Tables over memory made elsewhere (a file's shared mapping), the header as it is found
    /// (`stamp_layout` writes a new one's): power-of-two slots, zeroed or filled by such tables.
    pub fn from_tables(
        header: ZeroedTable<AtomicU64>,
        short: ZeroedTable<ShortSlot>,
        long: ZeroedTable<LongSlot>,
        arena: ZeroedTable<AtomicU64>,
    ) -> SharedPieces {
        assert!(header.len() == HEADER_WORDS);
        assert!(short.len().is_power_of_two() && long.len().is_power_of_two());
        let (short_bits, long_bits) = (short.len().trailing_zeros(), long.len().trailing_zeros());
        SharedPieces {
            header,
            short,
            short_shift: 64 - short_bits,
            long,
            long_shift: 64 - long_bits,
            arena,
        }
    }

    /// Write the layout into the header (new tables; found ones are checked against it).
    pub fn stamp_layout(&self) {
        let header = &self.header;
        header[LAYOUT_AT].store(LAYOUT, Ordering::Relaxed);
        header[SHORT_BITS_AT].store(u64::from(64 - self.short_shift), Ordering::Relaxed);
        header[LONG_BITS_AT].store(u64::from(64 - self.long_shift), Ordering::Relaxed);
        header[ARENA_WORDS_AT].store(self.arena.len() as u64, Ordering::Relaxed);
    }

    /// The header's word `at` (the constants above).
    pub fn header(&self, at: usize) -> &AtomicU64 {
        &self.header[at]
    }

    /// Put single-token pieces in first (before any thread reads); `false` if one found no
    /// slot. The encoder then declines the tokenizer: with `ignore_merges` a whole token must be
    /// found, since merging its bytes may give other ids.
    pub fn prefill(&self, pieces: &[(&[u8], u32)]) -> bool {
        // On the current pool's threads: the inserts touch the whole short table, and its
        // pages' first touches (zeroed by the kernel, slow on a VM) then happen side by side.
        pieces.par_chunks(PREFILL_CHUNK).all(|chunk| {
            let mut writer = Writer::default();
            // Each insert claims its slot with a locked instruction, which waits for the line
            // (a random one of a table far larger than the caches) before the next insert
            // starts: the lines of the pieces a few places ahead are fetched first, so that
            // their misses overlap (Qwen's whole load, one thread, fresh processes, medians of
            // 9 in three alternations: 74-81 ms against 82-94 ms without).
            let probes: Vec<Option<Probe>> = chunk.iter().map(|(p, _)| Probe::new(p)).collect();
            let placed = chunk
                .iter()
                .zip(&probes)
                .enumerate()
                .all(|(at, (&(_, id), probe))| {
                    if let Some(Some(ahead)) = probes.get(at + PREFILL_AHEAD) {
                        self.prefetch(ahead);
                    }
                    probe
                        .as_ref()
                        .is_some_and(|probe| self.insert_short(probe, &[id], &mut writer))
                });
            self.header[SHORT_USED].fetch_add(writer.short_pending as u64, Ordering::Relaxed);
            placed
        })
    }

    #[inline(always)]
    pub fn prefetch(&self, probe: &Probe) {
        #[cfg(target_arch = "x86_64")]
        {
            let at = self.home(probe);
            // SAFETY: `at` is below the table's length; a prefetch has no effect on state.
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>(self.short.as_ptr().add(at).cast());
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = probe;
    }

    /// Where a short piece's search starts: the first slot of the pair of slots (one cache
    /// line: the table is page aligned) that its hash picks, so that `get_home` finds nearly
    /// every piece in the one line that was prefetched.
    #[inline(always)]
    fn home(&self, probe: &Probe) -> usize {
        (probe.hash() >> self.short_shift) as usize & !1
    }

    /// The ids of the short piece of `probe` if it is in its home pair of slots, as
    /// `(ids, count)`; `count` is 0 when it is not there (absent, or further along; `get_short`
    /// tells). Both slots are read and compared whatever they hold, so a lookup takes no
    /// branch that depends on the piece (a state of 0 or `CLAIMED` never has the length of a
    /// piece).
    #[inline(always)]
    pub fn get_home(&self, probe: &Probe) -> ([u32; 3], usize) {
        let (lo, hi, len) = probe.words();
        let at = self.home(probe);
        let (first, second) = (&self.short[at], &self.short[at + 1]);
        // States first (acquire), then the words they publish.
        let (state0, state1) = (
            first[2].load(Ordering::Acquire),
            second[2].load(Ordering::Acquire),
        );
        let holds = |slot: &ShortSlot, state: u64| {
            (state & 0xffff == u64::from(len))
                & (slot[0].load(Ordering::Relaxed) == lo)
                & (slot[1].load(Ordering::Relaxed) == hi)
        };
        let (in_first, in_second) = (holds(first, state0), holds(second, state1));
        let (more0, more1) = (
            first[3].load(Ordering::Relaxed),
            second[3].load(Ordering::Relaxed),
        );
        let state = if in_first { state0 } else { state1 };
        let more = if in_first { more0 } else { more1 };
        let count = ((state >> 16) & 0xffff) as usize;
        // A piece of more than three ids keeps them in the arena: `get_short` reads it.
        let found = (in_first | in_second) & (count <= INLINE_IDS);
        (
            [(state >> 32) as u32, more as u32, (more >> 32) as u32],
            count * usize::from(found),
        )
    }

    /// Append the ids of the short piece of `probe` to `out` if the table has it.
    #[inline(always)]
    pub fn get_short(&self, probe: &Probe, out: &mut Vec<u32>) -> bool {
        let (lo, hi, len) = probe.words();
        let mask = self.short.len() - 1;
        let mut at = self.home(probe);
        for _ in 0..MAX_PROBES {
            let slot = &self.short[at];
            let state = slot[2].load(Ordering::Acquire);
            if state == 0 {
                return false;
            }
            if state != CLAIMED
                && state & 0xffff == u64::from(len)
                && slot[0].load(Ordering::Relaxed) == lo
                && slot[1].load(Ordering::Relaxed) == hi
            {
                let count = ((state >> 16) & 0xffff) as usize;
                let more = slot[3].load(Ordering::Relaxed);
                if count > INLINE_IDS {
                    out.extend_from_slice(self.arena_ids(more as usize, count));
                    return true;
                }
                out.push((state >> 32) as u32);
                if count > 1 {
                    out.push(more as u32);
                    if count > 2 {
                        out.push((more >> 32) as u32);
                    }
                }
                return true;
            }
            at = (at + 1) & mask;
        }
        false
    }

    /// Add a short piece (its probe) and its ids; `false` if it was not taken. Up to three
    /// ids live in the slot, more in the arena (1% of the pieces of documentation text have
    /// more: rare words, groff escapes; kept out of this table they cost a longer search and a
    /// miss in the thread's cache on every lookup, 4% of a warm run).
    pub fn insert_short(&self, probe: &Probe, ids: &[u32], writer: &mut Writer) -> bool {
        if ids.is_empty() || ids.len() > 0xffff || self.is_full(SHORT_USED, self.short.len()) {
            return false;
        }
        let (lo, hi, len) = probe.words();
        let state = u64::from(len) | (ids.len() as u64) << 16 | u64::from(ids[0]) << 32;
        let more = if ids.len() > INLINE_IDS {
            let Some(offset) = self.reserve(ids.len().div_ceil(2), writer) else {
                return false;
            };
            self.write_ids(offset, ids);
            offset as u64
        } else {
            u64::from(ids.get(1).copied().unwrap_or(0))
                | u64::from(ids.get(2).copied().unwrap_or(0)) << 32
        };
        let taken = publish(&self.short, self.home(probe), 2, state, |slot| {
            slot[0].store(lo, Ordering::Relaxed);
            slot[1].store(hi, Ordering::Relaxed);
            slot[3].store(more, Ordering::Relaxed);
        });
        if taken {
            count_insert(&self.header[SHORT_USED], &mut writer.short_pending);
        }
        taken
    }

    /// Fetch the first slot a long piece of hash `hash` (`long_hash`) is searched at.
    #[inline(always)]
    pub fn prefetch_long(&self, hash: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            let at = (hash >> self.long_shift) as usize;
            // SAFETY: `at` is below the table's length; a prefetch has no effect on state.
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>(self.long.as_ptr().add(at).cast());
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = hash;
    }

    /// Append the ids of a long piece (its `long_hash` is `hash`) to `out` if the table has it.
    #[inline]
    pub fn get_long(&self, piece: &[u8], hash: u64, out: &mut Vec<u32>) -> bool {
        if piece.len() > MAX_CACHED_LEN {
            return false;
        }
        debug_assert_eq!(hash, long_hash(piece));
        let mask = self.long.len() - 1;
        let mut at = (hash >> self.long_shift) as usize;
        for _ in 0..MAX_PROBES {
            let slot = &self.long[at];
            let state = slot[1].load(Ordering::Acquire);
            if state == 0 {
                return false;
            }
            if state != CLAIMED
                && (state >> 16) & 0xffff == piece.len() as u64
                && slot[0].load(Ordering::Relaxed) == hash
            {
                let offset = (state >> 32) as usize;
                let words = piece.len().div_ceil(8);
                let count = (state & 0xffff) as usize;
                // The entry's words were written before `state` was published and are never
                // written again, so after the acquire load above they can be read as plain
                // memory: the piece's bytes in order (`pack_bytes`), then its ids
                // (`arena_ids`). One `memcmp` and one copy instead of a load, shift and push per
                // word (CJK pieces run to 30-120 bytes and 10-40 ids).
                let stored = &self.arena[offset..offset + words];
                // SAFETY: `stored` is `words` words in bounds (sliced above), holding at least
                // `piece.len()` bytes; no thread writes them any more.
                let bytes = unsafe {
                    std::slice::from_raw_parts(stored.as_ptr().cast::<u8>(), piece.len())
                };
                if same_long_bytes(bytes, piece) {
                    out.extend_from_slice(self.arena_ids(offset + words, count));
                    return true;
                }
            }
            at = (at + 1) & mask;
        }
        false
    }

    /// Add a long piece (more than `SHORT_LEN`, at most `MAX_CACHED_LEN` bytes) whose
    /// `long_hash` is `hash`; `false` if it was not taken.
    pub fn insert_long(&self, piece: &[u8], hash: u64, ids: &[u32], writer: &mut Writer) -> bool {
        if piece.len() > MAX_CACHED_LEN
            || ids.is_empty()
            || ids.len() > 0xffff
            || self.is_full(LONG_USED, self.long.len())
        {
            return false;
        }
        let words = piece.len().div_ceil(8) + ids.len().div_ceil(2);
        let Some(offset) = self.reserve(words, writer) else {
            return false;
        };
        let bytes_words = piece.len().div_ceil(8);
        for (word, bytes) in self.arena[offset..offset + bytes_words]
            .iter()
            .zip(piece.chunks(8))
        {
            word.store(pack_bytes(bytes), Ordering::Relaxed);
        }
        self.write_ids(offset + bytes_words, ids);
        debug_assert_eq!(hash, long_hash(piece));
        let state = (offset as u64) << 32 | (piece.len() as u64) << 16 | ids.len() as u64;
        let start = (hash >> self.long_shift) as usize;
        let taken = publish(&self.long, start, 1, state, |slot| {
            slot[0].store(hash, Ordering::Relaxed);
        });
        if taken {
            count_insert(&self.header[LONG_USED], &mut writer.long_pending);
        }
        taken
    }

    /// `words` arena words from the thread's reserved chunk (reserving another when it runs
    /// out), or `None` when the arena is spent.
    fn reserve(&self, words: usize, writer: &mut Writer) -> Option<usize> {
        if writer.arena.len() < words {
            // Once the arena is spent, say so without touching the contended counter again.
            if self.header[ARENA_NEXT].load(Ordering::Relaxed) >= self.arena.len() as u64 {
                return None;
            }
            let chunk = words.max(ARENA_CHUNK);
            let start = self.header[ARENA_NEXT].fetch_add(chunk as u64, Ordering::Relaxed);
            // Offsets are stored in 32 bits.
            let Ok(start) = usize::try_from(start) else {
                return None;
            };
            if start + chunk > self.arena.len() || start + chunk > u32::MAX as usize {
                return None;
            }
            writer.arena = start..start + chunk;
        }
        let offset = writer.arena.start;
        writer.arena.start += words;
        Some(offset)
    }

    /// Write `ids` (two to a word, `pack_ids`) at arena word `offset`, reserved by this thread.
    fn write_ids(&self, offset: usize, ids: &[u32]) {
        let words = &self.arena[offset..offset + ids.len().div_ceil(2)];
        for (word, pair) in words.iter().zip(ids.chunks(2)) {
            word.store(pack_ids(pair), Ordering::Relaxed);
        }
    }

    /// The `count` ids written by `write_ids` at arena word `offset`, read as plain memory:
    /// the caller loaded (with acquire ordering) the published state of the entry that names
    /// them, and they are never written again.
    fn arena_ids(&self, offset: usize, count: usize) -> &[u32] {
        let words = &self.arena[offset..offset + count.div_ceil(2)];
        // SAFETY: `words` holds `count` ids in memory order (`pack_ids`), in bounds; no thread
        // writes them any more (see above).
        unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u32>(), count) }
    }

    fn is_full(&self, used_at: usize, slots: usize) -> bool {
        self.header[used_at].load(Ordering::Relaxed) >= slots as u64 / 2
    }
}

/// Claim the first empty slot of `table` from `start` on (its state word `state_at` goes from 0
/// to `CLAIMED`, so no other writer takes it), let `fill` write its other words, then publish
/// `state` with release ordering: a reader that sees `state` sees the whole entry. `false` when
/// `MAX_PROBES` slots were taken.
fn publish<const N: usize>(
    table: &[[AtomicU64; N]],
    start: usize,
    state_at: usize,
    state: u64,
    fill: impl FnOnce(&[AtomicU64; N]),
) -> bool {
    let mask = table.len() - 1;
    let mut at = start;
    for _ in 0..MAX_PROBES {
        let slot = &table[at];
        if slot[state_at]
            .compare_exchange(0, CLAIMED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            fill(slot);
            slot[state_at].store(state, Ordering::Release);
            return true;
        }
        at = (at + 1) & mask;
    }
    false
}

/// Add an insert to the table's count, a batch at a time (one contended atomic per batch).
fn count_insert(used: &AtomicU64, pending: &mut usize) {
    *pending += 1;
    if *pending == COUNT_BATCH {
        used.fetch_add(COUNT_BATCH as u64, Ordering::Relaxed);
        *pending = 0;
    }
}

/// Up to eight bytes as a word whose memory holds them in order, zero-padded (`get_long`
/// reads the words back as bytes).
#[inline(always)]
fn pack_bytes(bytes: &[u8]) -> u64 {
    let mut word = [0u8; 8];
    word[..bytes.len()].copy_from_slice(bytes);
    u64::from_ne_bytes(word)
}

/// One or two ids as a word whose memory holds them in order (`get_long` reads the words back
/// as ids).
#[inline(always)]
fn pack_ids(pair: &[u32]) -> u64 {
    let mut word = [0u8; 8];
    for (bytes, id) in word.chunks_exact_mut(4).zip(pair) {
        bytes.copy_from_slice(&id.to_ne_bytes());
    }
    u64::from_ne_bytes(word)
}

/// The hash a long piece is kept under.
#[inline]
pub fn long_hash(piece: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut hasher = rustc_hash::FxHasher::default();
    hasher.write(piece);
    // Fx leaves the low bits weakest; the table index takes the high ones, mixed once more.
    hasher.finish().wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1
}

/// `a == b` for two pieces of the same length, longer than 16 bytes: 16 bytes a compare, the
/// last one overlapping the one before. The call to `memcmp` this replaces cost more than
/// the compare for the 17-30 byte pieces of most text (1.5% of a warm tokenize run).
#[inline(always)]
fn same_long_bytes(a: &[u8], b: &[u8]) -> bool {
    debug_assert!(a.len() == b.len() && a.len() >= 16);
    let load = |bytes: &[u8], at: usize| {
        bytes
            .get(at..at + 16)
            .and_then(|chunk| <[u8; 16]>::try_from(chunk).ok())
            .map(u128::from_ne_bytes)
    };
    let n = a.len();
    let mut at = 0;
    while at + 16 < n {
        if load(a, at) != load(b, at) {
            return false;
        }
        at += 16;
    }
    n >= 16 && load(a, n - 16) == load(b, n - 16)
}

#[cfg(test)]
mod tests {
    use super::super::cache::SHORT_LEN;
    use super::*;

    fn ids_of(shared: &SharedPieces, piece: &[u8]) -> Option<Vec<u32>> {
        let mut out = Vec::new();
        let found = match Probe::new(piece).filter(|_| piece.len() <= SHORT_LEN) {
            Some(probe) => shared.get_short(&probe, &mut out),
            None => shared.get_long(piece, long_hash(piece), &mut out),
        };
        found.then_some(out)
    }

    fn insert(shared: &SharedPieces, piece: &[u8], ids: &[u32], writer: &mut Writer) -> bool {
        match Probe::new(piece).filter(|_| piece.len() <= SHORT_LEN) {
            Some(probe) => shared.insert_short(&probe, ids, writer),
            None => shared.insert_long(piece, long_hash(piece), ids, writer),
        }
    }

    #[test]
    fn long_bytes_compare_as_slices_do_wherever_they_differ() {
        for len in 16..80 {
            let a: Vec<u8> = (0..len).map(|k| (k * 7 + 3) as u8).collect();
            assert!(same_long_bytes(&a, &a.clone()));
            for at in 0..len {
                let mut b = a.clone();
                b[at] ^= 1 << (at % 8);
                assert!(!same_long_bytes(&a, &b), "len {len}, byte {at}");
            }
        }
    }

    #[test]
    fn short_and_long_pieces_round_trip_and_stay_apart() {
        let shared = SharedPieces::new(8, 6, 1 << 12);
        let mut writer = Writer::default();
        let long_a = vec![b'a'; 40];
        let mut long_b = long_a.clone();
        long_b[39] = b'b';
        let entries: Vec<(Vec<u8>, Vec<u32>)> = vec![
            (b"ab".to_vec(), vec![7]),
            (b" the".to_vec(), vec![1, 2]),
            (b"0123456789abcdef".to_vec(), vec![3, 4, 5]),
            (long_a.clone(), vec![9; 11]),
            (long_b.clone(), vec![8]),
            (vec![0u8; MAX_CACHED_LEN], vec![1, 2, 3, 4, 5]),
        ];
        for (piece, ids) in &entries {
            assert!(insert(&shared, piece, ids, &mut writer), "{piece:?}");
        }
        for (piece, ids) in &entries {
            assert_eq!(ids_of(&shared, piece).as_ref(), Some(ids), "{piece:?}");
        }
        assert_eq!(ids_of(&shared, b"ba"), None);
        assert_eq!(ids_of(&shared, &long_a[..39]), None);
        // Four ids or more go to the arena: found by the full search, not by `get_home`.
        let many: Vec<u32> = (1..=40).collect();
        for (piece, ids) in [(&b"abcd"[..], &many[..4]), (b"0123456789abcdeX", &many[..])] {
            assert!(insert(&shared, piece, ids, &mut writer));
            assert_eq!(ids_of(&shared, piece).as_deref(), Some(ids));
            let probe = Probe::new(piece).unwrap();
            assert_eq!(shared.get_home(&probe).1, 0, "{piece:?}");
        }
        assert_eq!(shared.get_home(&Probe::new(b"ab").unwrap()), ([7, 0, 0], 1));
        // Pieces past MAX_CACHED_LEN are never kept.
        assert!(!insert(
            &shared,
            &[1u8; MAX_CACHED_LEN + 1],
            &[1],
            &mut writer
        ));
    }

    #[test]
    fn prefill_says_whether_every_piece_found_a_slot() {
        let names: Vec<String> = (0..40).map(|i| format!("t{i:02}")).collect();
        let pieces: Vec<(&[u8], u32)> = names
            .iter()
            .enumerate()
            .map(|(i, name)| (name.as_bytes(), i as u32))
            .collect();
        let roomy = SharedPieces::new(8, 4, 1 << 12);
        assert!(roomy.prefill(&pieces));
        for &(piece, id) in &pieces {
            assert_eq!(ids_of(&roomy, piece), Some(vec![id]));
        }
        assert!(!SharedPieces::new(4, 4, 1 << 12).prefill(&pieces));
    }

    #[test]
    fn full_tables_and_arena_refuse_further_pieces() {
        let shared = SharedPieces::new(4, 4, ARENA_CHUNK);
        let mut writer = Writer::default();
        let mut taken = 0;
        for i in 0..64u32 {
            if insert(&shared, format!("p{i:03}").as_bytes(), &[i], &mut writer) {
                taken += 1;
            }
        }
        // Counts reach the table a batch at a time, so it may overfill by less than a batch,
        // never past its slots.
        assert!((8..=16).contains(&taken), "{taken}");
        let long = |i: u32| format!("{i:0>100}").into_bytes();
        let mut long_taken = 0;
        for i in 0..200u32 {
            if insert(&shared, &long(i), &[i; 20], &mut writer) {
                long_taken += 1;
                assert_eq!(ids_of(&shared, &long(i)), Some(vec![i; 20]));
            }
        }
        assert!(long_taken < 200);
    }

    #[test]
    fn threads_inserting_and_reading_at_once_see_only_whole_entries() {
        let shared = SharedPieces::new(16, 12, 1 << 20);
        let piece = |i: u32| -> Vec<u8> {
            let text = format!("w{i}");
            if i.is_multiple_of(3) {
                text.repeat(10).into_bytes()
            } else {
                text.into_bytes()
            }
        };
        let ids = |i: u32| vec![i, i + 1];
        // An insert may decline (all MAX_PROBES slots from its home taken, which depends on
        // the order the threads happened to insert in): the contract is that a reader sees a
        // whole, right entry or none, and that an insert reported taken is found afterwards.
        let taken: Vec<Vec<u32>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4u32)
                .map(|t| {
                    let shared = &shared;
                    scope.spawn(move || {
                        let mut writer = Writer::default();
                        let mut taken = Vec::new();
                        for round in 0..3 {
                            for i in (0..5000u32).map(|i| (i * 7 + t * 13 + round) % 5000) {
                                match ids_of(shared, &piece(i)) {
                                    Some(found) => assert_eq!(found, ids(i)),
                                    None => {
                                        if insert(shared, &piece(i), &ids(i), &mut writer) {
                                            taken.push(i);
                                        }
                                    }
                                }
                            }
                        }
                        taken
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("a worker panicked"))
                .collect()
        });
        let taken: std::collections::HashSet<u32> = taken.into_iter().flatten().collect();
        for i in 0..5000u32 {
            let found = ids_of(&shared, &piece(i));
            if taken.contains(&i) {
                assert_eq!(found, Some(ids(i)), "{i} was inserted");
            } else {
                assert!(found.is_none() || found == Some(ids(i)), "{i}");
            }
        }
        // The table is 40% full: nearly every piece gets a slot.
        assert!(
            taken.len() > 4500,
            "only {} of 5000 pieces taken",
            taken.len()
        );
    }
}
