//! Byte-level BPE on one pre-token, with the merge order of `tokenizers`: repeatedly merge the
//! adjacent pair of lowest rank, the leftmost one among equals, until no pair has a merge.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::OnceLock;

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;
use std::hash::BuildHasher;

use super::whole_chars::WholeChars;

/// GPT-2's reversible map from bytes to printable characters (the ByteLevel alphabet): the
/// printable Latin-1 bytes map to themselves, the other 68 to U+0100 onwards, in byte order.
pub fn byte_to_char() -> [char; 256] {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xa1..=0xac | 0xae..=0xff);
    let mut table = ['\0'; 256];
    let mut next_extra = 256u32;
    for b in 0..=255u8 {
        table[b as usize] = if printable(b) {
            char::from(b)
        } else {
            next_extra += 1;
            char::from_u32(next_extra - 1).unwrap_or('\0')
        };
    }
    table
}

/// The byte each ByteLevel character stands for, indexed by code point (all are below U+0144).
pub struct CharToByte([Option<u8>; 0x144]);

impl CharToByte {
    pub fn new(table: &[char; 256]) -> CharToByte {
        let mut reverse = [None; 0x144];
        for (byte, &c) in table.iter().enumerate() {
            reverse[c as usize] = Some(byte as u8);
        }
        CharToByte(reverse)
    }

    /// The bytes a vocabulary string stands for, when every character is in the alphabet.
    pub fn token_bytes(&self, token: &str) -> Option<Vec<u8>> {
        token
            .chars()
            .map(|c| self.0.get(c as usize).copied().flatten())
            .collect()
    }
}

const NO_RANK: u32 = u32::MAX;
/// Longer pre-tokens use the heap; shorter ones the quadratic scan, which is faster there.
const SCAN_LIMIT: usize = 48;
/// Bits of a token id and of a rank in a merge's word (`Merges::table`): ids below 2^21
/// (2,097,152 tokens) and fewer than 2^22 merges, far above any vocabulary in use.
const ID_BITS: u32 = 21;
const RANK_BITS: u32 = 22;

/// The merge table: pair of ids → rank, and rank → id of the merged token.
///
/// Each merge is one 64-bit word, `left | right | rank`, in a hashbrown table: most lookups
/// are of pairs that do not merge, which its control bytes (a sixteenth of the table) answer
/// from cache; a pair that merges costs one bucket of 8 bytes, where a map of pair → (rank,
/// merged id) took 16 (4.2 MB of buckets for Qwen's 151k merges, now 2.1 MB). The merged id
/// is read only when a merge is made (`merged`). A flat open-addressing table on huge pages,
/// one access per lookup, made the first pass over CJK text 0.76x as fast (`encode_speed`, 5
/// interleaved pairs): the control bytes are what keeps the misses cheap.
pub struct Merges {
    table: HashTable<u64>,
    /// The id of the token each rank's merge makes.
    merged: Vec<u32>,
    /// The id of each byte's token (`u32::MAX` for a byte the vocabulary lacks).
    byte_ids: [u32; 256],
    /// The rank of every pair of bytes (indexed by `first << 8 | second`; 256 KiB), when all
    /// 256 bytes are tokens: a new piece's first ranks are one pair per byte, and this table
    /// stays in cache where the map does not (`merge_bytes`).
    byte_pairs: Option<Box<[u32]>>,
    /// Characters a new piece starts from as tokens (`whole_chars`), when the list allows it;
    /// made when the first piece that is not ASCII is merged (10 ms for Qwen's list, a fifth of
    /// its load, which text in ASCII never needs).
    whole_chars: OnceLock<Option<WholeChars>>,
}

impl Merges {
    /// From `(left id, right id, merged id)` in rank order; a pair listed twice keeps its last
    /// rank, as `tokenizers` does when it collects the list into a map. `byte_ids` are the
    /// bytes' token ids (`u32::MAX` for a byte the vocabulary lacks). An id from 2^21 on, or
    /// 2^22 merges or more, do not fit the table's words.
    pub fn new(
        list: impl IntoIterator<Item = (u32, u32, u32)>,
        byte_ids: &[u32; 256],
    ) -> Result<Merges, String> {
        // A byte's token reaches the lookups without being in any merge: its id must fit too,
        // or its key would run into the left id's bits and could match another pair.
        if let Some(&id) = byte_ids
            .iter()
            .find(|&&id| id != u32::MAX && id >> ID_BITS != 0)
        {
            return Err(format!(
                "a byte's token id {id} is past the fast encoder's 2^{ID_BITS} token ids"
            ));
        }
        let list = list.into_iter();
        let mut table = HashTable::with_capacity(list.size_hint().0);
        let mut merged = Vec::with_capacity(list.size_hint().0);
        for (rank, (left, right, id)) in list.enumerate() {
            if left.max(right).max(id) >> ID_BITS != 0 || rank >> RANK_BITS != 0 {
                return Err(format!(
                    "merge {rank} ({left}, {right} -> {id}) is past the fast encoder's \
                     2^{ID_BITS} token ids or 2^{RANK_BITS} merges"
                ));
            }
            let key = key(left, right);
            let word = key << RANK_BITS | rank as u64;
            match table.find_mut(hash(key), |&w| w >> RANK_BITS == key) {
                Some(found) => *found = word,
                None => {
                    table.insert_unique(hash(key), word, |&w| hash(w >> RANK_BITS));
                }
            }
            merged.push(id);
        }
        let mut merges = Merges {
            table,
            merged,
            byte_ids: *byte_ids,
            byte_pairs: None,
            whole_chars: OnceLock::new(),
        };
        if !byte_ids.contains(&u32::MAX) {
            let pairs = (0..1usize << 16)
                .map(|pair| merges.rank(byte_ids[pair >> 8], byte_ids[pair & 0xff]))
                .collect();
            merges.byte_pairs = Some(pairs);
        }
        Ok(merges)
    }

    /// The rank of merging `left` and `right`, or `NO_RANK`.
    #[inline(always)]
    fn rank(&self, left: u32, right: u32) -> u32 {
        let key = key(left, right);
        self.table
            .find(hash(key), |&w| w >> RANK_BITS == key)
            .map_or(NO_RANK, |&w| (w & ((1 << RANK_BITS) - 1)) as u32)
    }

    /// The table of whole characters, made on first use; `None` without the byte-pair table or
    /// when the list does not allow it.
    pub fn whole_chars(&self) -> Option<&WholeChars> {
        let byte_pairs = self.byte_pairs.as_deref()?;
        self.whole_chars
            .get_or_init(|| {
                // The pairs by rank, from the table's words (a pair listed twice leaves its first
                // rank without one, and `build` declines the list).
                let mut pairs = vec![(u32::MAX, u32::MAX); self.merged.len()];
                for &word in self.table.iter() {
                    let key = word >> RANK_BITS;
                    let rank = (word & ((1 << RANK_BITS) - 1)) as usize;
                    if let Some(pair) = pairs.get_mut(rank) {
                        *pair = ((key >> ID_BITS) as u32, (key & ((1 << ID_BITS) - 1)) as u32);
                    }
                }
                let table =
                    WholeChars::build(&pairs, &self.merged, &self.byte_ids, byte_pairs, |l, r| {
                        self.rank(l, r)
                    });
                drop(pairs);
                // The build's scratch (about 4 MB for Qwen's list) goes back to the system: kept
                // by the allocator, it was 3.5 MiB more in every DataLoader worker.
                crate::table_memory::release_freed();
                table
            })
            .as_ref()
    }

    /// The token a merge of `rank` makes.
    #[inline(always)]
    fn merged(&self, rank: u32) -> u32 {
        self.merged[rank as usize]
    }
}

/// A pair's key: both ids in `2 * ID_BITS` bits (ids past them never reach a lookup: `new`
/// refuses them, and every symbol is a byte's or a merge's token).
#[inline(always)]
fn key(left: u32, right: u32) -> u64 {
    (u64::from(left) << ID_BITS) | u64::from(right)
}

#[inline(always)]
fn hash(key: u64) -> u64 {
    FxBuildHasher.hash_one(key)
}

/// Reusable buffers for `merge`, so a cache miss allocates nothing once warmed up.
#[derive(Default)]
pub struct Scratch {
    ranks: Vec<u32>,
    next: Vec<u32>,
    prev: Vec<u32>,
    alive: Vec<bool>,
    heap: BinaryHeap<Reverse<(u32, u32)>>,
}

/// Merge `symbols` (the ids of a pre-token's bytes) in place to their final tokens.
pub fn merge(merges: &Merges, symbols: &mut Vec<u32>, scratch: &mut Scratch) {
    scratch.ranks.clear();
    scratch
        .ranks
        .extend(symbols.windows(2).map(|w| merges.rank(w[0], w[1])));
    merge_ranked(merges, symbols, scratch);
}

/// The tokens of `piece` into `symbols`: its bytes' ids (bytes the vocabulary lacks are
/// dropped, as `tokenizers` does without an unk token), merged. The first ranks come from the
/// byte-pair table when there is one (first pass over CJK text, where a new piece is 20-60
/// bytes: +5%).
pub fn merge_bytes(merges: &Merges, piece: &[u8], symbols: &mut Vec<u32>, scratch: &mut Scratch) {
    symbols.clear();
    let byte_ids = &merges.byte_ids;
    let Some(pairs) = &merges.byte_pairs else {
        symbols.extend(
            piece
                .iter()
                .map(|&b| byte_ids[b as usize])
                .filter(|&id| id != u32::MAX),
        );
        return merge(merges, symbols, scratch);
    };
    if let Some(chars) = (!piece.is_ascii()).then(|| merges.whole_chars()).flatten() {
        chars.symbols(piece, byte_ids, symbols);
        scratch.ranks.clear();
        scratch
            .ranks
            .extend(symbols.windows(2).map(|w| merges.rank(w[0], w[1])));
        return merge_ranked(merges, symbols, scratch);
    }
    symbols.extend(piece.iter().map(|&b| byte_ids[b as usize]));
    scratch.ranks.clear();
    scratch.ranks.extend(
        piece
            .windows(2)
            .map(|w| pairs[usize::from(w[0]) << 8 | usize::from(w[1])]),
    );
    merge_ranked(merges, symbols, scratch);
}

/// `merge`, with `scratch.ranks` holding the rank of each adjacent pair.
fn merge_ranked(merges: &Merges, symbols: &mut Vec<u32>, scratch: &mut Scratch) {
    if symbols.len() <= SCAN_LIMIT {
        merge_by_scan(merges, symbols, &mut scratch.ranks);
    } else {
        merge_by_heap(merges, symbols, scratch);
    }
}

/// Find the lowest (rank, position) pair by scanning; quadratic, but tiny for words. `ranks`
/// starts with each adjacent pair's rank.
fn merge_by_scan(merges: &Merges, symbols: &mut Vec<u32>, ranks: &mut Vec<u32>) {
    loop {
        let mut best = NO_RANK;
        let mut at = 0;
        for (i, &rank) in ranks.iter().enumerate() {
            if rank < best {
                best = rank;
                at = i;
            }
        }
        if best == NO_RANK {
            return;
        }
        symbols[at] = merges.merged(best);
        symbols.remove(at + 1);
        ranks.remove(at);
        if at > 0 {
            ranks[at - 1] = merges.rank(symbols[at - 1], symbols[at]);
        }
        if at < ranks.len() {
            ranks[at] = merges.rank(symbols[at], symbols[at + 1]);
        }
    }
}

/// The same order with a min-heap of (rank, position) over a linked list, as `tokenizers`
/// does: entries whose pair has changed since they were pushed are skipped when popped.
fn merge_by_heap(merges: &Merges, symbols: &mut Vec<u32>, scratch: &mut Scratch) {
    const NONE: u32 = u32::MAX;
    let n = symbols.len();
    let Scratch {
        ranks,
        next,
        prev,
        alive,
        heap,
    } = scratch;
    next.clear();
    next.extend((1..=n as u32).map(|i| if i as usize == n { NONE } else { i }));
    prev.clear();
    prev.extend((0..n as u32).map(|i| i.checked_sub(1).unwrap_or(NONE)));
    heap.clear();
    alive.clear();
    alive.resize(n, true);
    for (i, &rank) in ranks.iter().enumerate() {
        if rank != NO_RANK {
            heap.push(Reverse((rank, i as u32)));
        }
    }
    while let Some(Reverse((rank, pos))) = heap.pop() {
        let pos = pos as usize;
        let right = next[pos];
        if !alive[pos] || right == NONE {
            continue;
        }
        let right = right as usize;
        if merges.rank(symbols[pos], symbols[right]) != rank {
            continue;
        }
        symbols[pos] = merges.merged(rank);
        alive[right] = false;
        next[pos] = next[right];
        if next[pos] != NONE {
            prev[next[pos] as usize] = pos as u32;
        }
        if prev[pos] != NONE {
            let left = prev[pos] as usize;
            let r = merges.rank(symbols[left], symbols[pos]);
            if r != NO_RANK {
                heap.push(Reverse((r, left as u32)));
            }
        }
        if next[pos] != NONE {
            let r = merges.rank(symbols[pos], symbols[next[pos] as usize]);
            if r != NO_RANK {
                heap.push(Reverse((r, pos as u32)));
            }
        }
    }
    let mut write = 0;
    for read in 0..n {
        if alive[read] {
            symbols[write] = symbols[read];
            write += 1;
        }
    }
    symbols.truncate(write);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ids: a=0 b=1 c=2, then merges create 3.. in order.
    fn toy() -> Merges {
        // ab=3 (rank 0), bc=4 (rank 1), "ab"+"c"=5 (rank 2), a+a=6 (rank 3)
        Merges::new(
            [(0, 1, 3), (1, 2, 4), (3, 2, 5), (0, 0, 6)],
            &[u32::MAX; 256],
        )
        .expect("fits")
    }

    fn ranks_of(merges: &Merges, symbols: &[u32]) -> Vec<u32> {
        symbols
            .windows(2)
            .map(|w| merges.rank(w[0], w[1]))
            .collect()
    }

    fn both(symbols: &[u32]) -> Vec<u32> {
        let merges = toy();
        let mut scan = symbols.to_vec();
        merge_by_scan(&merges, &mut scan, &mut ranks_of(&merges, symbols));
        let mut heap = symbols.to_vec();
        let mut scratch = Scratch {
            ranks: ranks_of(&merges, symbols),
            ..Scratch::default()
        };
        merge_by_heap(&merges, &mut heap, &mut scratch);
        assert_eq!(scan, heap, "scan and heap differ on {symbols:?}");
        scan
    }

    #[test]
    fn merging_bytes_through_the_pair_table_is_merging_their_ids() {
        // Byte b's token is 1000 + b; merges over bytes and over merged tokens, in an order
        // where a later merge depends on earlier ones.
        let mut byte_ids = [0u32; 256];
        for (b, id) in byte_ids.iter_mut().enumerate() {
            *id = 1000 + b as u32;
        }
        let id = |b: u8| 1000 + u32::from(b);
        let list = [
            (id(b'a'), id(b'b'), 1),
            (1, id(b'c'), 2),
            (id(b'c'), id(b'c'), 3),
            (2, 3, 4),
            (id(0xe4), id(0xb8), 5),
            (5, id(0xad), 6),
        ];
        let merges = Merges::new(list, &byte_ids).expect("fits");
        assert!(merges.byte_pairs.is_some());
        let mut missing = byte_ids;
        missing[0] = u32::MAX;
        let without_table = Merges::new(list, &missing).expect("fits");
        assert!(without_table.byte_pairs.is_none());
        for piece in [
            &b"abccc"[..],
            b"abcabccab",
            "中中a".as_bytes(),
            b"x",
            b"",
            &[0u8; 70],
        ] {
            let mut expected: Vec<u32> = piece.iter().map(|&b| id(b)).collect();
            merge(&merges, &mut expected, &mut Scratch::default());
            let mut symbols = Vec::new();
            merge_bytes(&merges, piece, &mut symbols, &mut Scratch::default());
            assert_eq!(symbols, expected, "{piece:?}");
            // Without the table (a byte missing), that byte is dropped and the rest merged.
            merge_bytes(&without_table, piece, &mut symbols, &mut Scratch::default());
            let mut kept: Vec<u32> = piece.iter().filter(|&&b| b != 0).map(|&b| id(b)).collect();
            merge(&without_table, &mut kept, &mut Scratch::default());
            assert_eq!(symbols, kept, "{piece:?}");
        }
    }

    #[test]
    fn lowest_rank_first_then_leftmost() {
        assert_eq!(both(&[0, 1, 2]), vec![5]);
        assert_eq!(both(&[1, 2]), vec![4]);
        // "aaa": the leftmost a+a merges first.
        assert_eq!(both(&[0, 0, 0]), vec![6, 0]);
        assert_eq!(both(&[0, 0, 0, 0]), vec![6, 6]);
        assert_eq!(both(&[2, 1, 0]), vec![2, 1, 0]);
        assert_eq!(both(&[0]), vec![0]);
    }

    #[test]
    fn ids_and_ranks_past_the_table_s_words_are_refused() {
        let bytes = [u32::MAX; 256];
        assert!(Merges::new([(0, 1, (1 << ID_BITS) - 1)], &bytes).is_ok());
        for merge in [
            (1 << ID_BITS, 1, 2),
            (0, 1 << ID_BITS, 2),
            (0, 1, 1 << ID_BITS),
        ] {
            let refused = Merges::new([merge], &bytes).err().unwrap_or_default();
            assert!(refused.contains("2^21 token ids"), "{refused}");
        }
        // A byte's token past them is refused too, merged or not.
        let mut high_byte = bytes;
        high_byte[7] = 1 << ID_BITS;
        let refused = Merges::new([(0, 1, 2)], &high_byte)
            .err()
            .unwrap_or_default();
        assert!(refused.contains("byte's token id 2097152"), "{refused}");
        // The largest ids and a pair that shares the low bits of another stay apart.
        let top = (1 << ID_BITS) - 1;
        let merges = Merges::new([(top, top, 5), (top, 0, 6), (0, top, 7)], &bytes).expect("fits");
        assert_eq!(merges.rank(top, top), 0);
        assert_eq!(merges.rank(top, 0), 1);
        assert_eq!(merges.rank(0, top), 2);
        assert_eq!(merges.rank(0, 0), NO_RANK);
        assert_eq!((merges.merged(0), merges.merged(2)), (5, 7));
    }

    #[test]
    fn duplicate_pair_keeps_the_last_rank() {
        let merges =
            Merges::new([(0, 1, 3), (1, 2, 4), (0, 1, 3)], &[u32::MAX; 256]).expect("fits");
        let mut symbols = vec![0, 1, 2];
        merge(&merges, &mut symbols, &mut Scratch::default());
        assert_eq!(symbols, vec![0, 4]);
    }

    #[test]
    fn heap_and_scan_agree_on_long_inputs() {
        let mut state = 12345u32;
        for len in [2usize, 3, 10, 47, 48, 49, 100, 1000] {
            let symbols: Vec<u32> = (0..len)
                .map(|_| {
                    state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    (state >> 16) % 3
                })
                .collect();
            both(&symbols);
        }
    }

    #[test]
    fn byte_table_is_gpt2s() {
        let table = byte_to_char();
        assert_eq!(table[b'a' as usize], 'a');
        assert_eq!(table[b' ' as usize], 'Ġ');
        assert_eq!(table[b'\n' as usize], 'Ċ');
        assert_eq!(table[0], 'Ā');
        assert_eq!(table[0xad], 'Ń');
        let mut sorted = table.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 256);
        let reverse = CharToByte::new(&table);
        assert_eq!(reverse.token_bytes("Ġthe"), Some(b" the".to_vec()));
        assert_eq!(reverse.token_bytes("<|x|>"), Some(b"<|x|>".to_vec()));
        assert_eq!(reverse.token_bytes("a b"), None);
        assert_eq!(reverse.token_bytes("é"), Some(vec![0xe9]));
        assert_eq!(reverse.token_bytes("中"), None);
    }
}

/// The whole characters' start (`whole_chars`) against merging the bytes, on a list made to
/// test its guards.
#[cfg(test)]
mod whole_chars_tests {
    use super::*;

    /// Byte `b`'s token is `b`; merges make tokens from 256 on, in rank order, each named by
    /// its two parts' bytes.
    struct List {
        tokens: Vec<Vec<u8>>,
        merges: Vec<(u32, u32, u32)>,
    }

    impl List {
        fn new() -> List {
            List {
                tokens: (0..=255u8).map(|b| vec![b]).collect(),
                merges: Vec::new(),
            }
        }

        fn id(&self, bytes: &[u8]) -> u32 {
            self.tokens
                .iter()
                .position(|t| t == bytes)
                .unwrap_or_else(|| panic!("no token {bytes:?}")) as u32
        }

        /// Merge the tokens of `left` and `right` (bytes); returns self for chaining.
        fn merge(mut self, left: &str, right: &str) -> List {
            self = self.merge_bytes(left.as_bytes(), right.as_bytes());
            self
        }

        fn merge_bytes(mut self, left: &[u8], right: &[u8]) -> List {
            let (l, r) = (self.id(left), self.id(right));
            let joined = [left, right].concat();
            self.tokens.push(joined);
            self.merges.push((l, r, self.tokens.len() as u32 - 1));
            self
        }

        fn build(&self) -> Merges {
            let byte_ids: [u32; 256] = std::array::from_fn(|b| b as u32);
            Merges::new(self.merges.iter().copied(), &byte_ids).expect("fits")
        }
    }

    /// Each character's own merges, then merges across characters and onto their partial
    /// tokens from both sides, some below and some above the ranks that complete them.
    fn tricky() -> List {
        let (zh, wen, e_acute) = ("中".as_bytes(), "文".as_bytes(), "é".as_bytes());
        let clef = "𝄞".as_bytes();
        List::new()
            // A space onto 中's lead byte before 中 is whole: 中 after a space stays bytes.
            .merge_bytes(b" ", &zh[..1])
            .merge_bytes(&zh[..1], &zh[1..2])
            .merge_bytes(&zh[..2], &zh[2..])
            // é's last byte onto 文's lead byte before é is whole (a guard after é).
            .merge_bytes(&e_acute[1..], &wen[..1])
            .merge_bytes(&e_acute[..1], &e_acute[1..])
            // "x" onto 文's lead byte (a guard before 文), then 文 from its last two bytes.
            .merge_bytes(b"x", &wen[..1])
            .merge_bytes(&wen[1..2], &wen[2..])
            .merge_bytes(&wen[..1], &wen[1..])
            // 𝄞 in three merges, the middle one looked up in the table.
            .merge_bytes(&clef[2..3], &clef[3..])
            .merge_bytes(&clef[1..2], &clef[2..])
            .merge_bytes(&clef[..1], &clef[1..])
            // Merges of whole characters, and one from the space onto 中 once whole.
            .merge("中", "文")
            .merge(" ", "中")
            .merge("中文", "é")
            .merge("x", "x")
            // Above 中's completion: never a guard.
            .merge_bytes(b"a", &zh[..1])
    }

    fn merged_as_bytes(merges: &Merges, text: &str) -> Vec<u32> {
        let mut symbols: Vec<u32> = text.bytes().map(u32::from).collect();
        merge(merges, &mut symbols, &mut Scratch::default());
        symbols
    }

    #[test]
    fn starting_from_whole_characters_gives_the_ids_of_merging_bytes() {
        let list = tricky();
        let merges = list.build();
        let atoms = ["中", "文", "é", "𝄞", " ", "x", "a", "b", "\u{9fff}", "ё"];
        let mut state = 7u64;
        let mut next = |n: usize| {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            (state >> 33) as usize % n
        };
        let (mut symbols, mut scratch) = (Vec::new(), Scratch::default());
        for round in 0..4000 {
            // Up to 70 characters: past the scan's limit into the heap's.
            let len = if round % 10 == 0 { 70 } else { next(24) };
            let text: String = (0..len).map(|_| atoms[next(atoms.len())]).collect();
            merge_bytes(&merges, text.as_bytes(), &mut symbols, &mut scratch);
            assert_eq!(symbols, merged_as_bytes(&merges, &text), "{text:?}");
        }
        for text in [
            "中", " 中", "x文", "é文", "中文é", " 中文", "a中", "𝄞𝄞", "xx文",
        ] {
            merge_bytes(&merges, text.as_bytes(), &mut symbols, &mut scratch);
            assert_eq!(symbols, merged_as_bytes(&merges, text), "{text:?}");
        }
    }

    #[test]
    fn guards_are_kept_where_a_neighbour_could_merge_first() {
        let list = tricky();
        let merges = list.build();
        let chars = merges.whole_chars().expect("a well-formed list");
        let byte_ids: [u32; 256] = std::array::from_fn(|b| b as u32);
        let mut symbols = Vec::new();
        let mut starts = |text: &str| {
            chars.symbols(text.as_bytes(), &byte_ids, &mut symbols);
            symbols.clone()
        };
        let (zh, wen, e) = (
            list.id("中".as_bytes()),
            list.id("文".as_bytes()),
            list.id("é".as_bytes()),
        );
        assert_eq!(starts("中文é"), [zh, wen, e]);
        // 中 after a space, 文 after "x": bytes.
        assert_eq!(
            starts(" 中")[1..],
            *"中"
                .as_bytes()
                .iter()
                .map(|&b| u32::from(b))
                .collect::<Vec<_>>()
        );
        assert_eq!(starts("x文").len(), 4);
        // é before 文 (é's last byte merges onto 文's lead first), and 文 after é's last byte.
        assert_eq!(starts("é文"), [0xc3, 0xa9, 0xe6, 0x96, 0x87]);
        assert_eq!(starts("é中"), [e, zh]);
        // 𝄞 is whole; "a" merges onto 中's lead only above its completion, so 中 after "a" is
        // whole too.
        assert_eq!(starts("𝄞"), [list.id("𝄞".as_bytes())]);
        assert_eq!(starts("a中"), [u32::from(b'a'), zh]);
    }

    #[test]
    fn lists_that_are_not_well_formed_get_no_table() {
        let zh = "中".as_bytes();
        let good = List::new()
            .merge_bytes(&zh[..1], &zh[1..2])
            .merge_bytes(&zh[..2], &zh[2..]);
        assert!(good.build().whole_chars().is_some());
        // An operand made by a later merge.
        let mut later = List::new()
            .merge_bytes(&zh[..1], &zh[1..2])
            .merge_bytes(&zh[..2], &zh[2..]);
        later.merges.swap(0, 1);
        assert!(later.build().whole_chars().is_none());
        // A pair listed twice (its first rank has no pair left in the table).
        let mut twice = good;
        twice.merges.push(twice.merges[0]);
        assert!(twice.build().whole_chars().is_none());
        // No character at all.
        assert!(List::new().merge("a", "b").build().whole_chars().is_none());
    }
}
