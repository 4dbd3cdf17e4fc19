//! Exact de-duplication decided as documents arrive: the set of every 128-bit document hash
//! seen (the earlier runs' and this run's), while it fits the memory budget. A document is
//! kept when its hash is new, which is the decision the sorted runs of
//! `data_io/prepare/dedup.py` reach after the whole run (the first occurrence is kept), without
//! writing every token to a spool and copying it again. When the set would outgrow the budget
//! the caller goes back to the sorted runs.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

use rayon::slice::ParallelSliceMut;

/// The hashes are uniformly random already: the table takes their low bits as they are.
#[derive(Default)]
pub struct TakeLowBits(u64);

impl Hasher for TakeLowBits {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u128` is used; any other input is folded in, for completeness.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u128(&mut self, value: u128) {
        self.0 = value as u64 ^ (value >> 64) as u64;
    }
}

/// Bytes per slot of the table: the hash and hashbrown's control byte.
const SLOT_BYTES: usize = 17;

/// The buckets of a hashbrown table of `capacity` (its capacity is 7/8 of its buckets from 8 on).
fn buckets(capacity: usize) -> usize {
    match capacity {
        0 => 0,
        1..=7 => (capacity + 1).next_power_of_two(),
        _ => capacity * 8 / 7,
    }
}

/// Every hash seen, within `budget` bytes (none by default).
#[derive(Default)]
pub struct SeenHashes {
    set: HashSet<u128, BuildHasherDefault<TakeLowBits>>,
    budget: usize,
}

impl SeenHashes {
    pub fn new(budget: usize) -> Self {
        Self {
            set: HashSet::default(),
            budget,
        }
    }

    /// Bytes the table holds now.
    pub fn bytes(&self) -> usize {
        buckets(self.set.capacity()) * SLOT_BYTES
    }

    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Whether `more` hashes could be added without the table outgrowing the budget (a
    /// growing table briefly holds its old and its new slots).
    pub fn has_room_for(&self, more: usize) -> bool {
        let wanted = self.set.len() + more;
        if wanted <= self.set.capacity() {
            return true;
        }
        // hashbrown keeps 7/8 of a power-of-two number of buckets usable.
        let grown = (wanted * 8 / 7 + 1).next_power_of_two();
        (grown + buckets(self.set.capacity())) * SLOT_BYTES <= self.budget
    }

    /// Make room at once for `total` hashes in all, when the budget allows it (else nothing);
    /// whether `total` fits. A table grown batch by batch doubles a dozen times on a large
    /// corpus, each time re-inserting every hash into freshly zeroed pages, where one
    /// projected size is one table. Too small a guess costs a doubling later, as without it.
    pub fn expect(&mut self, total: usize) -> bool {
        if total <= self.set.capacity() {
            return true;
        }
        let more = total - self.set.len();
        let fits = self.has_room_for(more);
        if fits {
            self.set.reserve(more);
        }
        fits
    }

    /// Record `hashes` (high, low) in order; true for each one not seen before (the first of
    /// several equal ones in `hashes` too). `None`, and nothing recorded, when they do not fit.
    pub fn first_seen(&mut self, hashes: &[[u64; 2]]) -> Option<Vec<bool>> {
        if !self.has_room_for(hashes.len()) {
            return None;
        }
        self.set.reserve(hashes.len());
        Some(
            hashes
                .iter()
                .map(|&[high, low]| self.set.insert(u128::from(high) << 64 | u128::from(low)))
                .collect(),
        )
    }

    /// Record the records of each item in order (`per_item` consecutive records an item, such
    /// as a document's near-dedup bands); true for an item none of whose records was seen
    /// before (in an earlier item: a later item sharing one with an earlier is not new). `None`,
    /// and nothing recorded, when they do not fit.
    pub fn first_seen_groups(
        &mut self,
        records: &[[u64; 2]],
        per_item: usize,
    ) -> Option<Vec<bool>> {
        let new = self.first_seen(records)?;
        Some(
            new.chunks(per_item.max(1))
                .map(|item| item.iter().all(|&fresh| fresh))
                .collect(),
        )
    }

    /// Every hash, sorted as (high, low) pairs: the format of the kept-hashes file. Sorted on
    /// the caller's rayon pool: near-dedup's bands run to millions, and at the end of a run
    /// nothing else is left to use the threads.
    pub fn sorted(&self) -> Vec<[u64; 2]> {
        // Pairs compare as (high, low), the order of the u128 values: one vector, sorted where
        // it was made (a large corpus holds hundreds of MB of bands; every fresh page costs).
        let mut all: Vec<[u64; 2]> = self
            .set
            .iter()
            .map(|&value| [(value >> 64) as u64, value as u64])
            .collect();
        all.par_sort_unstable();
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expecting_a_total_makes_room_once_within_the_budget() {
        let mut seen = SeenHashes::new(1 << 20);
        assert!(seen.expect(10_000));
        let capacity = seen.set.capacity();
        assert!(capacity >= 10_000);
        let hashes: Vec<[u64; 2]> = (0..10_000).map(|i| [i, i * 7]).collect();
        assert_eq!(
            seen.first_seen(&hashes).map(|new| new.iter().all(|&n| n)),
            Some(true)
        );
        assert_eq!(
            seen.set.capacity(),
            capacity,
            "no growth after the room was made"
        );
        // Beyond the budget the guess is ignored, and the table grows as it fills.
        assert!(!seen.expect(1 << 30));
        assert_eq!(seen.set.capacity(), capacity);
        assert!(seen.bytes() <= 1 << 20);
        // A total already held asks for nothing.
        assert!(seen.expect(5));
        assert_eq!(seen.set.capacity(), capacity);
    }

    #[test]
    fn the_first_of_each_hash_is_new_and_the_rest_are_not() {
        let mut seen = SeenHashes::new(1 << 20);
        assert_eq!(
            seen.first_seen(&[[1, 2], [1, 3], [1, 2]]),
            Some(vec![true, true, false])
        );
        assert_eq!(seen.first_seen(&[[1, 3], [0, 9]]), Some(vec![false, true]));
        assert_eq!(seen.sorted(), vec![[0, 9], [1, 2], [1, 3]]);
        assert!(seen.bytes() <= 1 << 20);
    }

    #[test]
    fn hashes_past_the_budget_are_refused_whole() {
        let mut seen = SeenHashes::new(4096);
        let many: Vec<[u64; 2]> = (0..1000).map(|i| [i, i]).collect();
        assert_eq!(seen.first_seen(&many), None);
        assert!(seen.is_empty());
        let few: Vec<[u64; 2]> = (0..50).map(|i| [i, i]).collect();
        assert!(seen.first_seen(&few).is_some());
        assert!(seen.bytes() <= 4096, "{}", seen.bytes());
    }

    #[test]
    fn an_item_is_new_only_when_none_of_its_records_was_seen() {
        let mut seen = SeenHashes::new(1 << 20);
        let bands = [[1, 0], [2, 1], [3, 0], [2, 1], [4, 0], [5, 1]];
        assert_eq!(
            seen.first_seen_groups(&bands, 2),
            Some(vec![true, false, true])
        );
        assert_eq!(
            seen.first_seen_groups(&[[9, 0], [1, 0]], 2),
            Some(vec![false])
        );
        assert_eq!(seen.len(), 6);
    }
}
