//! Maps from pre-token bytes to ids: `ShortMap`, an open-addressing table for pieces of at most
//! 16 bytes whose key is two machine words (no allocation, no `memcmp`); `PieceCache`, one
//! thread's cache of the merged pieces the shared cache (`shared_cache`) has no room for, bounded
//! and cleared when full; and `Probe`, a short piece's key and hash, made once per piece.

use rustc_hash::FxHashMap;

use crate::table_memory::{ZeroValid, ZeroedTable};

/// Longest piece a `ShortMap` holds.
pub const SHORT_LEN: usize = 16;
/// Pre-tokens longer than this are merged every time, as `tokenizers` does past 256.
pub const MAX_CACHED_LEN: usize = 256;

/// A piece of at most 16 bytes as (bytes 0-7, bytes 8-15, length), little-endian and padded
/// with zeros: given the length, equal keys mean equal pieces.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
struct ShortKey {
    lo: u64,
    hi: u64,
    len: u16,
}

/// `KEEP[len]` keeps the first `len` bytes of the two words of a key and clears the rest.
const KEEP: [[u64; 2]; SHORT_LEN + 1] = {
    let mut masks = [[0u64; 2]; SHORT_LEN + 1];
    let mut len = 0;
    while len <= SHORT_LEN {
        let low = if len >= 8 { 8 } else { len };
        let high = len.saturating_sub(8);
        masks[len] = [
            if low == 8 {
                u64::MAX
            } else {
                (1u64 << (8 * low)) - 1
            },
            if high == 8 {
                u64::MAX
            } else {
                (1u64 << (8 * high)) - 1
            },
        ];
        len += 1;
    }
    masks
};

impl ShortKey {
    #[inline(always)]
    fn new(piece: &[u8]) -> Option<ShortKey> {
        let len = piece.len();
        if len == 0 || len > SHORT_LEN {
            return None;
        }
        let mut padded = [0u8; SHORT_LEN];
        padded[..len].copy_from_slice(piece);
        Some(ShortKey::from_padded(&padded, len))
    }

    /// The key of the `len` bytes at the start of `window`; the bytes after them are ignored.
    #[inline(always)]
    fn from_padded(window: &[u8; SHORT_LEN], len: usize) -> ShortKey {
        let [keep_lo, keep_hi] = KEEP[len];
        let word = |at: usize| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(&window[at..at + 8]);
            u64::from_le_bytes(bytes)
        };
        ShortKey {
            lo: word(0) & keep_lo,
            hi: word(8) & keep_hi,
            len: len as u16,
        }
    }

    #[inline(always)]
    fn hash(&self) -> u64 {
        (self.lo ^ self.hi.rotate_left(29) ^ u64::from(self.len))
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }
}

/// A short piece's key and hash, computed once per piece and used for every table it is
/// looked up in (the shared whole-token table, then the thread's cache).
#[derive(Clone, Copy, Default)]
pub struct Probe {
    key: ShortKey,
    hash: u64,
}

impl Probe {
    #[inline(always)]
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// The key as (first word, last word, length), for tables that store it themselves.
    #[inline(always)]
    pub fn words(&self) -> (u64, u64, u16) {
        (self.key.lo, self.key.hi, self.key.len)
    }

    /// `None` for an empty piece or one longer than `SHORT_LEN`.
    #[inline(always)]
    pub fn new(piece: &[u8]) -> Option<Probe> {
        Some(Probe::of_key(ShortKey::new(piece)?))
    }

    /// The probe of `text[start..start + len]` (`1 <= len <= SHORT_LEN`): with 16 bytes left
    /// in `text` it is two loads and two masks, with no branch on the length, which is the
    /// least predictable thing about a piece.
    #[inline(always)]
    pub fn at(text: &[u8], start: usize, len: usize) -> Probe {
        debug_assert!((1..=SHORT_LEN).contains(&len));
        match text.get(start..start + SHORT_LEN) {
            Some(window) => {
                let window: &[u8; SHORT_LEN] = window.try_into().unwrap_or(&[0; SHORT_LEN]);
                Probe::of_key(ShortKey::from_padded(window, len))
            }
            // Near the end of a text: the text's last 16 bytes, moved down to the piece (the
            // padded copy made the calls to `memset` and `memcpy` of 1% of a warm run: every
            // text ends so).
            None if text.len() >= SHORT_LEN => {
                let from = text.len() - SHORT_LEN;
                let last: [u8; SHORT_LEN] = text[from..].try_into().unwrap_or([0; SHORT_LEN]);
                let window = (u128::from_le_bytes(last) >> (8 * (start - from))).to_le_bytes();
                Probe::of_key(ShortKey::from_padded(&window, len))
            }
            None => Probe::new(&text[start..start + len]).unwrap_or_default(),
        }
    }

    #[inline(always)]
    fn of_key(key: ShortKey) -> Probe {
        Probe {
            key,
            hash: key.hash(),
        }
    }
}

/// Ids a slot holds itself; a piece of more tokens keeps them in the map's id arena.
const INLINE_IDS: usize = 3;

/// One slot (32 bytes, two to a cache line): the key, flattened so that the slot stays that
/// small, and the piece's `count` ids: inline when at most `INLINE_IDS` (no second memory access
/// for the one or two tokens of nearly every piece), else `ids[0]` is where they start in the
/// arena. `len == 0` marks an empty slot.
#[derive(Clone, Copy, Default)]
struct Slot {
    lo: u64,
    hi: u64,
    len: u16,
    count: u16,
    ids: [u32; INLINE_IDS],
}

impl Slot {
    #[inline(always)]
    fn holds(&self, key: &ShortKey) -> bool {
        self.lo == key.lo && self.hi == key.hi && self.len == key.len
    }

    fn key(&self) -> ShortKey {
        ShortKey {
            lo: self.lo,
            hi: self.hi,
            len: self.len,
        }
    }
}

// SAFETY: integers only; all zeros is the empty slot (`Slot::default()`).
unsafe impl ZeroValid for Slot {}

pub struct ShortMap {
    /// On huge pages where possible: see `table_memory`.
    slots: ZeroedTable<Slot>,
    mask: usize,
    shift: u32,
    used: usize,
    ids: Vec<u32>,
}

impl ShortMap {
    /// A table of `2^bits` slots; it holds at most half as many pieces.
    pub fn new(bits: u32) -> ShortMap {
        ShortMap {
            slots: ZeroedTable::new(1 << bits),
            mask: (1 << bits) - 1,
            shift: 64 - bits,
            used: 0,
            ids: Vec::new(),
        }
    }

    /// Room for `entries` pieces at most half full.
    #[cfg(test)]
    pub fn with_room_for(entries: usize) -> ShortMap {
        let bits = (entries.max(1) * 2)
            .next_power_of_two()
            .trailing_zeros()
            .max(4);
        ShortMap::new(bits)
    }

    pub fn is_full(&self) -> bool {
        self.used * 2 >= self.slots.len()
    }

    /// Slots (log2).
    pub fn bits(&self) -> u32 {
        self.slots.len().trailing_zeros()
    }

    /// Twice the slots, every entry kept (their ids stay where they are in the arena).
    pub fn grow(&mut self) {
        let bits = self.bits() + 1;
        let old = std::mem::replace(&mut self.slots, ZeroedTable::new(1 << bits));
        self.mask = (1 << bits) - 1;
        self.shift = 64 - bits;
        for &slot in old.iter().filter(|slot| slot.len != 0) {
            let mut at = (slot.key().hash() >> self.shift) as usize;
            while self.slots[at].len != 0 {
                at = (at + 1) & self.mask;
            }
            self.slots[at] = slot;
        }
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.used
    }

    pub fn clear(&mut self) {
        if self.used > 0 {
            self.slots.fill(Slot::default());
            self.used = 0;
            self.ids.clear();
        }
    }

    /// The ids of `piece`, if present (`piece` of any length; long ones are never present).
    #[inline(always)]
    pub fn get(&self, piece: &[u8]) -> Option<&[u32]> {
        self.get_probe(&Probe::new(piece)?)
    }

    /// The ids of the piece `probe` was made from, if present.
    #[inline(always)]
    pub fn get_probe(&self, probe: &Probe) -> Option<&[u32]> {
        let mut at = (probe.hash >> self.shift) as usize;
        loop {
            let slot = &self.slots[at];
            if slot.holds(&probe.key) {
                let count = usize::from(slot.count);
                return Some(if count <= INLINE_IDS {
                    &slot.ids[..count]
                } else {
                    let start = slot.ids[0] as usize;
                    &self.ids[start..start + count]
                });
            }
            if slot.len == 0 {
                return None;
            }
            at = (at + 1) & self.mask;
        }
    }

    /// Add `piece` → `ids` (at most 16 bytes, not yet present, table not full; `false` otherwise).
    pub fn insert(&mut self, piece: &[u8], ids: &[u32]) -> bool {
        let Some(Probe { key, hash }) = Probe::new(piece) else {
            return false;
        };
        if self.is_full() || ids.is_empty() {
            return false;
        }
        let mut at = (hash >> self.shift) as usize;
        while self.slots[at].len != 0 {
            if self.slots[at].holds(&key) {
                return false;
            }
            at = (at + 1) & self.mask;
        }
        let mut inline = [0; INLINE_IDS];
        if ids.len() <= INLINE_IDS {
            inline[..ids.len()].copy_from_slice(ids);
        } else {
            inline[0] = self.ids.len() as u32;
            self.ids.extend_from_slice(ids);
        }
        self.slots[at] = Slot {
            lo: key.lo,
            hi: key.hi,
            len: key.len,
            count: ids.len() as u16,
            ids: inline,
        };
        self.used += 1;
        true
    }
}

/// One thread's cache of merged pieces: short ones in a `ShortMap`, longer ones (up to
/// `MAX_CACHED_LEN`) in a hash map. It starts small and doubles when full, up to
/// `2^max_short_bits` slots and `long_capacity` long pieces; a full cache at its largest starts
/// over rather than track recency: the frequent words come back within a few documents, and
/// clearing costs nothing per hit. (The size matters: on 80 MB of Linux documentation with
/// Qwen's vocabulary, 2^17 slots left 2.4 M misses over two passes, 2^20 left 0.3 M, and the
/// second pass ran 1.5x as fast.)
pub struct PieceCache {
    short: ShortMap,
    max_short_bits: u32,
    long: FxHashMap<Box<[u8]>, Box<[u32]>>,
    long_capacity: usize,
}

impl PieceCache {
    pub fn new(start_bits: u32, max_short_bits: u32, long_capacity: usize) -> PieceCache {
        PieceCache {
            short: ShortMap::new(start_bits.min(max_short_bits)),
            max_short_bits,
            long: FxHashMap::default(),
            long_capacity,
        }
    }

    #[inline(always)]
    pub fn get(&self, piece: &[u8]) -> Option<&[u32]> {
        if piece.len() <= SHORT_LEN {
            self.short.get(piece)
        } else {
            self.long.get(piece).map(|ids| &ids[..])
        }
    }

    /// The ids of a short piece, by its probe.
    #[inline(always)]
    pub fn get_short(&self, probe: &Probe) -> Option<&[u32]> {
        self.short.get_probe(probe)
    }

    pub fn insert(&mut self, piece: &[u8], ids: &[u32]) {
        if piece.len() <= SHORT_LEN {
            if self.short.is_full() {
                if self.short.bits() < self.max_short_bits {
                    self.short.grow();
                } else {
                    self.short.clear();
                }
            }
            self.short.insert(piece, ids);
        } else if piece.len() <= MAX_CACHED_LEN {
            if self.long.len() >= self.long_capacity {
                self.long.clear();
            }
            self.long.insert(piece.into(), ids.into());
        }
    }

    pub fn clear(&mut self) {
        self.short.clear();
        self.long.clear();
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.short.len() + self.long.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_read_in_place_are_the_probes_of_the_piece() {
        // Every start and length, near the end of the text too (where fewer than 16 bytes are
        // left to read), with bytes of every value around the piece.
        // Texts shorter than 16 bytes too.
        let whole: Vec<u8> = (0..40u8).map(|b| b.wrapping_mul(97)).collect();
        for end in 1..=whole.len() {
            let text = &whole[..end];
            for start in 0..text.len() {
                for len in 1..=SHORT_LEN.min(text.len() - start) {
                    let piece = &text[start..start + len];
                    let (read, made) = (Probe::at(text, start, len), Probe::new(piece));
                    let made = made.expect("a short piece");
                    assert_eq!(read.words(), made.words(), "{end} {start} {len}");
                    assert_eq!(read.hash(), made.hash());
                }
            }
        }
    }

    #[test]
    fn short_keys_tell_every_length_and_byte_apart() {
        let pieces: Vec<Vec<u8>> = (0..=SHORT_LEN)
            .flat_map(|len| {
                (0..len).map(move |flip| {
                    let mut piece: Vec<u8> = (0..len as u8).map(|b| b'a' + b).collect();
                    piece[flip] = b'#';
                    piece
                })
            })
            .chain((0..=SHORT_LEN).map(|len| vec![0u8; len]))
            .collect();
        let mut map = ShortMap::with_room_for(pieces.len());
        for (i, piece) in pieces.iter().enumerate() {
            let fresh = map.insert(piece, &[i as u32]);
            assert_eq!(fresh, !piece.is_empty(), "{piece:?}");
        }
        for (i, piece) in pieces.iter().enumerate().filter(|(_, p)| !p.is_empty()) {
            assert_eq!(map.get(piece), Some(&[i as u32][..]), "{piece:?}");
        }
        assert_eq!(map.get(b""), None);
        assert_eq!(map.get(&[b'x'; SHORT_LEN + 1]), None);
        assert!(!map.insert(&[b'x'; SHORT_LEN + 1], &[1]));
    }

    #[test]
    fn several_ids_and_a_full_table() {
        let mut map = ShortMap::new(4);
        assert!(map.insert(b"cats", &[3, 4]));
        assert!(map.insert(b"dog", &[5]));
        assert_eq!(map.get(b"cats"), Some(&[3, 4][..]));
        assert_eq!(map.get(b"dog"), Some(&[5][..]));
        assert_eq!(map.get(b"cat"), None);
        for i in 0..10u8 {
            map.insert(&[b'k', i], &[u32::from(i)]);
        }
        assert!(map.is_full());
        assert_eq!(map.len(), 8);
        assert!(!map.insert(b"late", &[1]));
        map.clear();
        assert_eq!(map.get(b"cats"), None);
        assert!(map.insert(b"late", &[1, 2, 3]));
        assert_eq!(map.get(b"late"), Some(&[1, 2, 3][..]));
    }

    #[test]
    fn piece_cache_grows_to_its_largest_then_clears() {
        let mut cache = PieceCache::new(4, 6, 1 << 10);
        let piece = |i: u32| format!("p{i:04}").into_bytes();
        // 2^6 slots hold 32 pieces: the first 32 are all kept while the table grows.
        for i in 0..32 {
            cache.insert(&piece(i), &[i, i + 1]);
        }
        assert_eq!(cache.short.bits(), 6);
        for i in 0..32 {
            assert_eq!(cache.get(&piece(i)), Some(&[i, i + 1][..]), "piece {i}");
        }
        cache.insert(&piece(32), &[7]);
        assert_eq!(cache.len(), 1, "full at its largest: starts over");
        assert_eq!(cache.get(&piece(32)), Some(&[7][..]));
    }

    #[test]
    fn piece_cache_clears_when_full_and_skips_long_pieces() {
        let mut cache = PieceCache::new(4, 4, 2);
        cache.insert(b"the", &[1]);
        cache.insert(b" cat", &[2, 3]);
        assert_eq!(cache.get(b"the"), Some(&[1][..]));
        assert_eq!(cache.get(b" cat"), Some(&[2, 3][..]));
        let a = vec![b'a'; 20];
        let b = vec![b'b'; 30];
        let c = vec![b'c'; 40];
        cache.insert(&a, &[1]);
        cache.insert(&b, &[2]);
        cache.insert(&c, &[3]);
        assert_eq!(cache.get(&a), None);
        assert_eq!(cache.get(&c), Some(&[3][..]));
        let long = vec![b'x'; MAX_CACHED_LEN + 1];
        cache.insert(&long, &[1]);
        assert_eq!(cache.get(&long), None);
        for i in 0..20u8 {
            cache.insert(&[b'k', i], &[u32::from(i)]);
        }
        assert!(cache.len() <= 8 + 2);
        assert_eq!(cache.get(&[b'k', 19]), Some(&[19][..]));
    }
}
