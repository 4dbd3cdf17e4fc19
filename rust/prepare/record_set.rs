//! A set of records (the de-duplication's hashes) in one open-addressed table, taking a batch of
//! records at a time and asking memory for each record's slot a few records ahead. A record is
//! `W` words: two for a 128-bit document hash; one where the second word is implied by which
//! set holds it (near-dedup's band hashes, a set for each band: `seen.rs`), which halves the
//! memory the table takes and the kernel must clear.
//!
//! Why not hashbrown: on a corpus the table is hundreds of MB, so every insert misses every
//! cache and, one at a time, waits for memory (hashbrown's inserts were 10% of a near-dedup
//! run's samples). A batch's records are known before they
//! are looked up, so their slots can be prefetched and a dozen misses overlap; hashbrown
//! cannot be asked where a key's slot is. The table lives on 2 MiB pages where the kernel
//! gives them (`table_memory`), so the lookups do not also walk the page table.
//!
//! Layout: whole 64-byte lines of slots (four of two words, eight of one), all-zero words
//! marking an empty one (the all-zero record itself is held by a flag). A record's home is a
//! line chosen by the top bits of its first word; it goes to the first free slot from there on
//! (linear probing, wrapping at the end), so most records are found within the one line the
//! prefetch brought. The records are hashes, uniformly spread, so their bits are taken as they
//! are (records all alike in their first word would all probe from one line). For the same
//! reason `bucket_sorted` puts them in order by a bucket sort on those bits.

use crate::table_memory::ZeroedTable;

/// Bytes of a cache line, which holds `LINE_BYTES / (8 * W)` slots.
const LINE_BYTES: usize = 64;
/// How many records ahead of the one being inserted a slot is prefetched: enough misses in
/// flight to cover memory's latency, few enough that the lines are still cached when used.
pub const AHEAD: usize = 16;

/// Records a table of `slots` holds before it grows: 7/8 of its slots, as hashbrown's (all but
/// one in the smallest tables; a table always keeps a free slot, where a probe ends).
pub fn capacity_of(slots: usize) -> usize {
    if slots < 8 {
        slots.saturating_sub(1)
    } else {
        slots / 8 * 7 + slots % 8 * 7 / 8
    }
}

/// Slots of `W` words to a cache line; the smallest table is one line (the set is cut into
/// dozens of shards, mostly small in tests and small runs).
const fn per_line<const W: usize>() -> usize {
    LINE_BYTES / (8 * W)
}

/// The slots of the smallest table of a power of two that holds `wanted` records of `W` words:
/// the size a table grows to as records come (a doubling, so that growth is paid once a
/// record).
pub fn slots_for<const W: usize>(wanted: usize) -> usize {
    let slots = exact_slots_for::<W>(wanted);
    if slots == 0 {
        return 0;
    }
    let doubled = slots.next_power_of_two();
    if capacity_of(doubled) < wanted {
        doubled * 2
    } else {
        doubled
    }
}

/// The slots of the smallest table that holds `wanted` records of `W` words, whole lines: the
/// size a table is made at once for a projected total (`reserve_exact`), which a power of two
/// would overshoot by up to twice (all of it touched, so zeroed by the kernel, as records land).
pub fn exact_slots_for<const W: usize>(wanted: usize) -> usize {
    if wanted == 0 {
        return 0;
    }
    let line = per_line::<W>();
    let mut slots = wanted
        .saturating_mul(8)
        .div_ceil(7)
        .next_multiple_of(line)
        .max(line);
    while capacity_of(slots) < wanted {
        slots += line;
    }
    slots
}

/// How a table grows when it must.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Growth {
    /// To a power of two of slots (`slots_for`), as records come: growth paid once a record.
    Doubling,
    /// To just the whole lines a projected total needs (`exact_slots_for`).
    Exact,
    /// `Exact`, and at least a quarter beyond the table it replaces. A run's projection rises a
    /// few percent now and then as the records per byte move from file to file (under `--dedup
    /// near` on the race's 163 MB, every shard grew three times by 3-7%), and each new table is
    /// freshly zeroed pages with every record moved over: the kernel clearing pages took 18% of
    /// a one-thread run's samples, a third of it for the set.
    Spared,
}

/// A set of records of `W` words (1 or 2).
pub struct RecordSet<const W: usize> {
    slots: Option<ZeroedTable<[u64; W]>>,
    /// Records in `slots` (the zero record aside).
    filled: usize,
    holds_zero: bool,
    /// Top bits of the first word that every record shares (a shard's number, `seen.rs`):
    /// the home is chosen by the bits below them.
    shared_bits: u32,
}

impl<const W: usize> Default for RecordSet<W> {
    fn default() -> Self {
        Self::sharing_top_bits(0)
    }
}

/// The first slot of the home line of a record whose first word is `first`, in a table of
/// `slots` (whole lines of `line` slots): the bits of its first word below the `shared` top
/// bits, as a fraction of the table (a multiply-shift, so any number of lines; the line rises
/// with the hash).
#[inline(always)]
fn home(shared: u32, first: u64, slots: usize, line: usize) -> usize {
    let lines = (slots / line) as u128;
    let at = (u128::from(first << shared) * lines) >> 64;
    at as usize * line
}

impl<const W: usize> RecordSet<W> {
    /// Bytes a slot takes.
    pub const SLOT_BYTES: usize = 8 * W;
    /// The empty slot (and the record a flag holds).
    const EMPTY: [u64; W] = [0; W];

    /// A set of records whose first words all share their top `shared_bits` bits.
    pub fn sharing_top_bits(shared_bits: u32) -> Self {
        const { assert!(W == 1 || W == 2, "records of one or two words") };
        Self {
            slots: None,
            filled: 0,
            holds_zero: false,
            shared_bits: shared_bits.min(63),
        }
    }

    #[inline(always)]
    fn home(&self, record: &[u64; W], slots: usize) -> usize {
        home(self.shared_bits, record[0], slots, per_line::<W>())
    }

    pub fn len(&self) -> usize {
        self.filled + usize::from(self.holds_zero)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The table's slots (0 before the first record).
    pub fn slots(&self) -> usize {
        self.slots.as_ref().map_or(0, |slots| slots.len())
    }

    /// Records held without growing.
    pub fn capacity(&self) -> usize {
        capacity_of(self.slots())
    }

    /// The slots this table would grow to, by `growth`, to hold `wanted` records.
    pub fn grown_slots(&self, wanted: usize, growth: Growth) -> usize {
        match growth {
            Growth::Doubling => slots_for::<W>(wanted),
            Growth::Exact => exact_slots_for::<W>(wanted),
            Growth::Spared => {
                let now = self.capacity();
                exact_slots_for::<W>(wanted.max(now.saturating_add(now / 4)))
            }
        }
    }

    /// Room for `more` records beyond those held, grown at once (one new table, not a chain of
    /// doublings) by `growth`.
    pub fn reserve(&mut self, more: usize, growth: Growth) {
        let wanted = self.filled.saturating_add(more);
        if wanted > self.capacity() {
            self.grow_to(self.grown_slots(wanted, growth));
        }
    }

    /// Ask memory for `record`'s home line (no effect on the set).
    #[inline(always)]
    pub fn prefetch(&self, record: &[u64; W]) {
        #[cfg(target_arch = "x86_64")]
        if let Some(slots) = &self.slots {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let at = self.home(record, slots.len());
            // SAFETY: a prefetch reads nothing and cannot fault; `at` is within the table.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(slots.as_ptr().add(at).cast()) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = record;
    }

    /// Add `record`; whether it was new.
    #[inline]
    pub fn insert(&mut self, record: [u64; W]) -> bool {
        if record == Self::EMPTY {
            return !std::mem::replace(&mut self.holds_zero, true);
        }
        if self.filled >= self.capacity() {
            self.grow_to(slots_for::<W>(self.filled + 1));
        }
        let end = self.slots();
        let mut at = self.home(&record, end);
        let Some(slots) = self.slots.as_mut() else {
            unreachable!("grown above");
        };
        loop {
            let slot = &mut slots[at];
            if *slot == record {
                return false;
            }
            if *slot == Self::EMPTY {
                *slot = record;
                self.filled += 1;
                return true;
            }
            at += 1;
            if at == end {
                at = 0;
            }
        }
    }

    /// Add each record of `records` in order, prefetching ahead; calls `seen_before` with the
    /// place of each one held already (an earlier equal one in `records` included).
    pub fn insert_all(&mut self, records: &[[u64; W]], mut seen_before: impl FnMut(usize)) {
        self.reserve(records.len(), Growth::Doubling);
        for (at, record) in records.iter().enumerate() {
            if let Some(ahead) = records.get(at + AHEAD) {
                self.prefetch(ahead);
            }
            if !self.insert(*record) {
                seen_before(at);
            }
        }
    }

    /// Every record held (the zero record first, when held), in the table's order.
    pub fn records(&self) -> impl Iterator<Item = [u64; W]> + Clone + '_ {
        let zero = self.holds_zero.then_some(Self::EMPTY);
        let held = self.slots.iter().flat_map(|slots| slots.iter());
        zero.into_iter()
            .chain(held.filter(|r| **r != Self::EMPTY).copied())
    }

    /// Every record held, in ascending order (first word, then second), into `out` (of
    /// `len()` records; any more are left as they are): `bucket_sorted`. The tests' view of the
    /// order; `seen` sorts every band's shard of a part together from `records`.
    #[cfg(test)]
    fn sorted_into(&self, out: &mut [[u64; W]]) {
        let count = self.len().min(out.len());
        bucket_sorted(self.records(), self.shared_bits, &mut out[..count]);
    }

    /// A new table of `slots` with every record moved over (their slots prefetched ahead).
    fn grow_to(&mut self, slots: usize) {
        let (shared, line) = (self.shared_bits, per_line::<W>());
        let old = self.slots.replace(ZeroedTable::new(slots));
        let Some(table) = self.slots.as_mut() else {
            unreachable!("just set");
        };
        let records = old
            .iter()
            .flat_map(|old| old.iter())
            .filter(|r| **r != Self::EMPTY);
        let mut ahead = records.clone().skip(AHEAD);
        for record in records {
            #[cfg(target_arch = "x86_64")]
            if let Some(next) = ahead.next() {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                let at = home(shared, next[0], slots, line);
                // SAFETY: a prefetch reads nothing and cannot fault; `at` is within the table.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(table.as_ptr().add(at).cast()) };
            }
            #[cfg(not(target_arch = "x86_64"))]
            let _ = ahead.next();
            // The old table held each record once: the first free slot is its place.
            let mut at = home(shared, record[0], slots, line);
            while table[at] != Self::EMPTY {
                at = if at + 1 == slots { 0 } else { at + 1 };
            }
            table[at] = *record;
        }
    }
}

/// `records` (as many as `out` holds) in ascending order (first word, then second) into `out`,
/// their first words sharing their top `shared` bits.
///
/// A bucket sort: the records are hashes, spread evenly, so the bits of their first word below
/// the shared ones put them in buckets of about four in order (a pass to count, a pass to
/// place), and each bucket is sorted on its own. The slots as they lay were sorted by insertion
/// before: a record's home is a line, and at 7/8 full the runs of probing made that 19-22 ns a
/// record against 13-15 (a one-word table of 18,700 records, 224 of them); near-dedup's bands
/// were then merged band by band, where here they are sorted together. Records not spread (all
/// in one bucket) cost one sort of them all, not more.
pub fn bucket_sorted<const V: usize>(
    records: impl Iterator<Item = [u64; V]> + Clone,
    shared: u32,
    out: &mut [[u64; V]],
) {
    let count = out.len();
    let bits = (count / 4).max(1).ilog2();
    let bucket = |record: &[u64; V]| {
        // The bits below the shared ones, from the top: the order of the first words.
        if bits == 0 {
            0
        } else {
            ((record[0] << shared.min(63)) >> (64 - bits)) as usize
        }
    };
    let mut sizes = vec![0usize; 1 << bits];
    for record in records.clone().take(count) {
        sizes[bucket(&record)] += 1;
    }
    // Where each bucket begins; placing a record moves it on.
    let mut starts = Vec::with_capacity(sizes.len());
    let mut next = 0;
    for size in &sizes {
        starts.push(next);
        next += size;
    }
    let mut ends = starts.clone();
    for record in records.take(count) {
        let at = &mut ends[bucket(&record)];
        out[*at] = record;
        *at += 1;
    }
    for (start, end) in starts.iter().zip(&ends) {
        out[*start..*end].sort_unstable();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// A first word spread as a hash's (splitmix64 of `i`).
    fn spread(i: u64) -> u64 {
        let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Hashes with repeats, records that differ only in their second word, small first words
    /// (one home for all), the zero record, and first words at the top of the range (homes in
    /// the last line, whose probing wraps to the start).
    fn records() -> Vec<[u64; 2]> {
        (0..30_000u64)
            .map(|i| [spread(i % 12_000), i % 3])
            .chain((0..40).map(|i| [i % 7, i]))
            .chain([[0, 0], [0, 0], [0, 1], [1, 0]])
            .chain((0..40).map(|i| [u64::MAX - i % 9, i % 2]))
            .collect()
    }

    /// `records()` as records of `W` words (their first `W`), sharing their top `shared` bits
    /// as a shard's do, against a `HashSet`.
    fn answers_as_a_hash_set<const W: usize>(shared: u32) {
        let mut set = RecordSet::<W>::sharing_top_bits(shared);
        let mut oracle = HashSet::new();
        let records: Vec<[u64; W]> = records()
            .into_iter()
            .map(|[high, low]| std::array::from_fn(|i| [high >> shared, low][i]))
            .collect();
        for part in records.chunks(777) {
            let mut seen = Vec::new();
            set.insert_all(part, |at| seen.push(at));
            let expected: Vec<usize> = (0..part.len())
                .filter(|&at| !oracle.insert(part[at]))
                .collect();
            assert_eq!(seen, expected);
            assert_eq!(set.len(), oracle.len());
            assert!(set.len() <= set.capacity() + 1);
        }
        let mut expected: Vec<[u64; W]> = oracle.into_iter().collect();
        expected.sort_unstable();
        let mut sorted = vec![[7; W]; set.len()];
        set.sorted_into(&mut sorted);
        assert_eq!(sorted, expected, "{W} words, {shared} shared bits");
    }

    #[test]
    fn it_answers_as_a_hash_set_through_growth_collisions_and_the_zero_record() {
        for shared in [0, 5] {
            answers_as_a_hash_set::<2>(shared);
            answers_as_a_hash_set::<1>(shared);
        }
    }

    #[test]
    fn the_bucket_sort_orders_any_records_by_both_words() {
        // Spread first words sharing 5 top bits, with ties in the first word; then records all
        // in one bucket (small first words); then a count of one and of none.
        let spread_records: Vec<[u64; 2]> = (0..5_000u64)
            .map(|i| [spread(i / 3) >> 5, (i * 7) % 5])
            .collect();
        let alike: Vec<[u64; 2]> = (0..3_000u64).rev().map(|i| [i % 4, i]).collect();
        for (records, shared) in [(spread_records, 5), (alike, 0)] {
            let mut out = vec![[9, 9]; records.len()];
            bucket_sorted(records.iter().copied(), shared, &mut out);
            let mut expected = records.clone();
            expected.sort_unstable();
            assert_eq!(out, expected);
        }
        let mut one = [[0u64; 1]];
        bucket_sorted([[7u64], [3]].into_iter(), 0, &mut one);
        assert_eq!(one, [[7]], "as many as `out` holds, in the order given");
        bucket_sorted(std::iter::empty(), 0, &mut [[0u64; 1]; 0]);
    }

    #[test]
    fn records_not_spread_as_hashes_are_still_sorted() {
        // All in one home: the slots lie in the order of arrival, descending here.
        let mut set = RecordSet::default();
        for i in (0..5_000u64).rev() {
            assert!(set.insert([i % 50, i]));
        }
        let mut sorted = vec![[0, 0]; set.len()];
        set.sorted_into(&mut sorted);
        let mut expected: Vec<[u64; 2]> = (0..5_000u64).map(|i| [i % 50, i]).collect();
        expected.sort_unstable();
        assert_eq!(sorted, expected);
    }

    /// The table sizes for `wanted` records of `W` words: the least that hold them.
    fn check_sizes<const W: usize>(wanted: usize) {
        let line = per_line::<W>();
        let slots = slots_for::<W>(wanted);
        assert!(capacity_of(slots) >= wanted);
        assert!(slots <= line || capacity_of(slots / 2) < wanted, "{wanted}");
        let exact = exact_slots_for::<W>(wanted);
        assert!(capacity_of(exact) >= wanted && exact.is_multiple_of(line));
        assert!(
            exact <= line || capacity_of(exact - line) < wanted,
            "{wanted}"
        );
    }

    #[test]
    fn reserving_makes_one_table_for_the_total() {
        let mut set = RecordSet::default();
        assert_eq!(set.slots(), 0);
        set.reserve(1000, Growth::Doubling);
        let slots = set.slots();
        assert!(set.capacity() >= 1000);
        let capacity = set.capacity() as u64;
        for i in 1..=capacity {
            assert!(set.insert([spread(i), i]));
        }
        assert_eq!(set.slots(), slots, "no growth within the reserve");
        assert!(set.insert([spread(0), 0]));
        assert_eq!(set.slots(), 2 * slots);
        for wanted in (0..20_000).step_by(7) {
            check_sizes::<2>(wanted);
            check_sizes::<1>(wanted);
        }
        // A table made exactly for a total takes it without growing, and answers as any.
        let mut set = RecordSet::sharing_top_bits(5);
        set.reserve(10_001, Growth::Exact);
        let slots = set.slots();
        assert!(!slots.is_power_of_two());
        for i in 0..10_001u64 {
            assert!(set.insert([spread(i) >> 5, i]));
        }
        assert_eq!(set.slots(), slots);
        let mut sorted = vec![[0, 0]; set.len()];
        set.sorted_into(&mut sorted);
        let mut expected: Vec<[u64; 2]> = (0..10_001u64).map(|i| [spread(i) >> 5, i]).collect();
        expected.sort_unstable();
        assert_eq!(sorted, expected);
    }
}
