//! Exact de-duplication decided as documents arrive: the set of every 128-bit document hash
//! seen (the earlier runs' and this run's), while it fits the memory budget. A document is
//! kept when its hash is new, which is the decision the sorted runs of
//! `data_io/prepare/dedup.py` reach after the whole run (the first occurrence is kept), without
//! writing every token to a spool and copying it again. When the set would outgrow the budget
//! the caller goes back to the sorted runs.
//!
//! The set is cut into shards by the hashes' top bits. Whether a hash was seen before depends
//! on that hash alone, so each shard takes its share of a batch's hashes in order, all shards at
//! once on the encoder's threads, and the answers are those of one set: near-dedup records a
//! dozen bands a document, and one thread inserting them into one table (a random read of a
//! table of hundreds of MB each) held every other thread up. Each shard is a `RecordSet`,
//! which prefetches the slots of the records a batch brings, so that the misses overlap.
//!
//! Near-dedup's records are (band hash, band number): the set made for them (`banded`) has the
//! shards of each band apart and holds the hash alone, in half the memory (on a VM the kernel
//! clearing the table's pages was most of the set's time). It also keeps the 128-bit hashes of
//! this run's documents, so that a document whose exact twin came earlier is decided without
//! its MinHash (`first_seen_near`).

use rayon::prelude::*;

use super::near::MinHasher;
use super::record_set::{self, Growth, RecordSet};

/// Shards (log2) of each band (of the one group of 128-bit records): enough for the encoder's
/// threads on a large machine.
const SHARD_BITS: u32 = 5;
const SHARDS: usize = 1 << SHARD_BITS;
/// A batch of fewer hashes goes through the shards on the calling thread (as every batch does
/// on a pool of one thread).
const PARALLEL_FROM: usize = 1 << 13;

#[inline(always)]
fn shard_of(high: u64) -> usize {
    (high >> (64 - SHARD_BITS)) as usize
}

/// Every hash seen, within `budget` bytes (none by default).
pub struct SeenHashes {
    tables: Tables,
    budget: usize,
    /// A batch was refused after part of it was recorded (`first_seen_near`): every later one
    /// is refused too, so that no decision rests on a refused batch.
    refused: bool,
}

/// The shards: of 128-bit records, or of band hashes a band apart (with the hashes of the
/// documents they came from, `twins`).
enum Tables {
    Wide(Shards<2>),
    Banded { bands: Shards<1>, twins: Shards<2> },
}

/// `$body` with `$shards` the tables' `Shards` of records (the bands, in a banded set),
/// whichever width they hold.
macro_rules! on_shards {
    ($tables:expr, $shards:ident => $body:expr) => {
        match $tables {
            Tables::Wide($shards) => $body,
            Tables::Banded { bands: $shards, .. } => $body,
        }
    };
}

impl Default for SeenHashes {
    fn default() -> Self {
        Self::new(0)
    }
}

impl SeenHashes {
    /// A set of 128-bit records (document or line hashes).
    pub fn new(budget: usize) -> Self {
        Self {
            tables: Tables::Wide(Shards::new(1)),
            budget,
            refused: false,
        }
    }

    /// A set of near-dedup's (band hash, band number) records, of `bands` bands: a record
    /// whose band number is `bands` or more is refused, as one beyond the budget is.
    pub fn banded(budget: usize, bands: usize) -> Self {
        Self {
            tables: Tables::Banded {
                bands: Shards::new(bands.max(1)),
                twins: Shards::new(1),
            },
            budget,
            refused: false,
        }
    }

    /// Bytes the tables hold now.
    pub fn bytes(&self) -> usize {
        match &self.tables {
            Tables::Wide(shards) => shards.bytes(),
            Tables::Banded { bands, twins } => bands.bytes() + twins.bytes(),
        }
    }

    pub fn len(&self) -> usize {
        on_shards!(&self.tables, shards => shards.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Make room at once for `total` hashes in all, when the budget allows it (else nothing);
    /// whether `total` fits. A table grown batch by batch doubles a dozen times on a large
    /// corpus, each time re-inserting every hash into freshly zeroed pages, where one
    /// projected size is one table. Too small a guess costs a doubling later, as without it.
    /// The hashes spread evenly over the shards; each is given a sixteenth more than its share
    /// (and more for small shares), against the chance of an uneven spread.
    /// In a banded set the documents' hashes are given room too (`total` over the bands).
    pub fn expect(&mut self, total: usize) -> bool {
        let budget = self.budget;
        match &mut self.tables {
            Tables::Wide(shards) => shards.expect(total, budget),
            Tables::Banded { bands, twins } => {
                let documents = total / bands.groups;
                let twins_fit = twins.expect(documents, budget.saturating_sub(bands.bytes()));
                twins_fit && bands.expect(total, budget.saturating_sub(twins.bytes()))
            }
        }
    }

    /// Record `hashes` (high, low) in order; true for each one not seen before (the first of
    /// several equal ones in `hashes` too). `None`, and nothing recorded, when they do not fit
    /// (or, in a `banded` set, one has a band number beyond its bands).
    /// A large batch is taken by all the shards at once, on the caller's rayon pool.
    pub fn first_seen(&mut self, hashes: &[[u64; 2]]) -> Option<Vec<bool>> {
        if self.refused {
            return None;
        }
        let budget = self.budget.saturating_sub(self.twins_bytes());
        on_shards!(&mut self.tables, shards => shards.first_seen(hashes, budget))
    }

    /// Bytes of a banded set's document hashes.
    fn twins_bytes(&self) -> usize {
        match &self.tables {
            Tables::Banded { twins, .. } => twins.bytes(),
            Tables::Wide(_) => 0,
        }
    }

    /// Near-dedup's decision for a batch of documents, `texts` with their 128-bit `hashes`: true
    /// for a document none of whose bands (`hasher`'s, as `first_seen_groups` takes them) was
    /// seen in an earlier document.
    ///
    /// A document whose exact twin (the same hash) came earlier in this run is not new, and is
    /// not banded: its bands are its twin's, every one recorded already, so it is the answer
    /// the bands give, without the MinHash (a third of the race's documents). `None` when the
    /// records do not fit; in a banded set the document hashes may then be recorded, and every
    /// later batch is refused too.
    pub fn first_seen_near<S: AsRef<str> + Sync>(
        &mut self,
        texts: &[S],
        hashes: &[[u64; 2]],
        hasher: &MinHasher,
    ) -> Option<Vec<bool>> {
        let band = |text: &S| hasher.band_hashes(text.as_ref());
        let per_document = hasher.bands();
        let Tables::Banded { twins, bands } = &mut self.tables else {
            // A set of 128-bit records keeps no document hashes: every document banded.
            let records: Vec<[u64; 2]> = texts.par_iter().flat_map_iter(band).collect();
            return self.first_seen_groups(&records, per_document);
        };
        if self.refused {
            return None;
        }
        let budget = self.budget;
        let untwinned = twins.first_seen(hashes, budget.saturating_sub(bands.bytes()))?;
        // A text without a hash (not reached: one each) is banded.
        let banded: Vec<usize> = (0..texts.len())
            .filter(|&at| untwinned.get(at) != Some(&false))
            .collect();
        let records: Vec<[u64; 2]> = banded
            .par_iter()
            .flat_map_iter(|&at| band(&texts[at]))
            .collect();
        let Some(fresh) = bands.first_seen(&records, budget.saturating_sub(twins.bytes())) else {
            self.refused = true;
            return None;
        };
        let mut new = vec![false; texts.len()];
        for (at, bands) in banded.iter().zip(fresh.chunks(per_document.max(1))) {
            new[*at] = bands.iter().all(|&fresh| fresh);
        }
        Some(new)
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
    /// nothing else is left to use the threads. The shards hold the hashes by their top bits,
    /// so each part of the order is sorted on its own and they follow each other in order.
    pub fn sorted(&self) -> Vec<[u64; 2]> {
        on_shards!(&self.tables, shards => {
            let parts: Vec<Vec<[u64; 2]>> = (0..SHARDS)
                .into_par_iter()
                .map(|top| {
                    let mut part = Vec::new();
                    shards.sorted_part(top, &mut part);
                    part
                })
                .collect();
            parts.concat()
        })
    }

    /// `sorted`, written to `out` as the kept-hashes file's bytes (native-endian `u64` pairs),
    /// a group of parts at a time, each part sorted on the caller's pool into buffers used
    /// again for the next: no array of every record is made (hundreds of MB under near-dedup,
    /// whose first touch of fresh pages is a large share of the time).
    pub fn write_sorted(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        on_shards!(&self.tables, shards => shards.write_sorted(out))
    }
}

/// The shards of records of `W` words: `groups` bands of `SHARDS` each (one group of 128-bit
/// records), band by band; a record's shard is its band's, by its first word's top bits.
struct Shards<const W: usize> {
    shards: Vec<RecordSet<W>>,
    /// Bands (1 for 128-bit records).
    groups: usize,
}

impl<const W: usize> Shards<W> {
    fn new(groups: usize) -> Self {
        Self {
            shards: (0..groups * SHARDS)
                .map(|_| RecordSet::sharing_top_bits(SHARD_BITS))
                .collect(),
            groups,
        }
    }

    /// The shard of `record` among `groups` bands' and what it holds of it; `None` for a band
    /// number beyond the groups.
    #[inline(always)]
    fn place(groups: usize, record: &[u64; 2]) -> Option<(usize, [u64; W])> {
        let group = if W == 2 { 0 } else { record[1] };
        let group = usize::try_from(group).ok().filter(|&g| g < groups)?;
        Some((
            group * SHARDS + shard_of(record[0]),
            std::array::from_fn(|i| record[i]),
        ))
    }

    /// The record a shard of `group` holds as `held`.
    #[inline(always)]
    fn record(held: [u64; W], group: usize) -> [u64; 2] {
        [held[0], if W == 2 { held[W - 1] } else { group as u64 }]
    }

    fn bytes(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.slots() * RecordSet::<W>::SLOT_BYTES)
            .sum()
    }

    fn len(&self) -> usize {
        self.shards.iter().map(RecordSet::len).sum()
    }

    /// Whether each shard could take `more[shard]` hashes without the tables outgrowing
    /// `budget` (the shards grow at once, and a growing table briefly holds its old and its
    /// new slots), growing by `growth`.
    fn has_room_for(&self, more: &[usize], growth: Growth, budget: usize) -> bool {
        let peak: usize = self
            .shards
            .iter()
            .zip(more)
            .map(|(shard, &more)| {
                let now = shard.slots();
                let wanted = shard.len() + more;
                if wanted <= shard.capacity() {
                    now
                } else {
                    shard.grown_slots(wanted, growth) + now
                }
            })
            .sum();
        peak * RecordSet::<W>::SLOT_BYTES <= budget
    }

    /// `SeenHashes::expect`.
    fn expect(&mut self, total: usize, budget: usize) -> bool {
        if total <= self.len() {
            return true;
        }
        let share = total.div_ceil(self.shards.len());
        // A sixteenth, and four standard deviations of a share of random hashes for the
        // small ones (hundreds of shards under near-dedup, each a band's).
        let share = share + share / 16 + 4 * share.isqrt() + 16;
        let more: Vec<usize> = self
            .shards
            .iter()
            .map(|shard| share.saturating_sub(shard.len()))
            .collect();
        // A table made for an earlier guess is replaced with a quarter to spare where the
        // budget allows (`Growth::Spared`), else with just the share.
        let growth = if self.has_room_for(&more, Growth::Spared, budget) {
            Growth::Spared
        } else {
            Growth::Exact
        };
        let fits = growth == Growth::Spared || self.has_room_for(&more, Growth::Exact, budget);
        if fits {
            // Each shard grown on its own thread of the caller's pool.
            self.shards
                .par_iter_mut()
                .zip(&more)
                .for_each(|(shard, &more)| shard.reserve(more, growth));
        }
        fits
    }

    /// `SeenHashes::first_seen`.
    fn first_seen(&mut self, hashes: &[[u64; 2]], budget: usize) -> Option<Vec<bool>> {
        let groups = self.groups;
        let mut more = vec![0usize; self.shards.len()];
        for record in hashes {
            more[Self::place(groups, record)?.0] += 1;
        }
        if !self.has_room_for(&more, Growth::Doubling, budget) {
            return None;
        }
        if hashes.len() < PARALLEL_FROM || rayon::current_num_threads() == 1 {
            for (shard, &more) in self.shards.iter_mut().zip(&more) {
                shard.reserve(more, Growth::Doubling);
            }
            // Every record was placed above.
            let place = |record| Self::place(groups, record).unwrap_or((0, [0; W]));
            let shards = &mut self.shards;
            return Some(
                hashes
                    .iter()
                    .enumerate()
                    .map(|(at, record)| {
                        if let Some(ahead) = hashes.get(at + record_set::AHEAD) {
                            let (shard, held) = place(ahead);
                            shards[shard].prefetch(&held);
                        }
                        let (shard, held) = place(record);
                        shards[shard].insert(held)
                    })
                    .collect(),
            );
        }
        // Each shard's records, by their place in `hashes` (in order), and the places of those
        // seen before (few: duplicates are the exception).
        let mut places: Vec<Vec<u32>> = more.iter().map(|&n| Vec::with_capacity(n)).collect();
        for (at, record) in hashes.iter().enumerate() {
            places[Self::place(groups, record).unwrap_or((0, [0; W])).0].push(at as u32);
        }
        let seen_before: Vec<Vec<u32>> = self
            .shards
            .par_iter_mut()
            .zip(places)
            .map(|(shard, places)| {
                // Grown here, each shard on its own thread (a rehash copies the whole table).
                let records: Vec<[u64; W]> = places
                    .iter()
                    .map(|&at| {
                        Self::place(groups, &hashes[at as usize])
                            .unwrap_or((0, [0; W]))
                            .1
                    })
                    .collect();
                let mut seen_before = Vec::new();
                shard.insert_all(&records, |i| seen_before.push(places[i]));
                seen_before
            })
            .collect();
        let mut new = vec![true; hashes.len()];
        for at in seen_before.into_iter().flatten() {
            new[at as usize] = false;
        }
        Some(new)
    }

    /// The records whose first word's top bits are `top`, sorted, into `out`: every band's
    /// shard of them, bucket-sorted together (`record_set::bucket_sorted`).
    fn sorted_part(&self, top: usize, out: &mut Vec<[u64; 2]>) {
        let shards = (0..self.groups).map(|group| (group, &self.shards[group * SHARDS + top]));
        let count = shards.clone().map(|(_, shard)| shard.len()).sum();
        let records = shards
            .flat_map(|(group, shard)| shard.records().map(move |held| Self::record(held, group)));
        out.clear();
        out.resize(count, [0, 0]);
        record_set::bucket_sorted(records, SHARD_BITS, out);
    }

    /// `SeenHashes::write_sorted`.
    fn write_sorted(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        let group = rayon::current_num_threads().clamp(1, SHARDS);
        // A part's records.
        let mut buffers: Vec<Vec<[u64; 2]>> = vec![Vec::new(); group];
        for tops in (0..SHARDS).collect::<Vec<_>>().chunks(group) {
            buffers
                .par_iter_mut()
                .zip(tops)
                .for_each(|(buffer, &top)| self.sorted_part(top, buffer));
            for buffer in buffers.iter().take(tops.len()) {
                out.write_all(bytemuck::cast_slice(buffer))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Hashes spread over the shards as real ones are (splitmix64 of `i`).
    fn spread(i: u64) -> [u64; 2] {
        let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        [z ^ (z >> 31), i]
    }

    fn capacities(seen: &SeenHashes) -> Vec<usize> {
        on_shards!(&seen.tables, shards => shards.shards.iter().map(RecordSet::capacity).collect())
    }

    #[test]
    fn expecting_a_total_makes_room_once_within_the_budget() {
        let mut seen = SeenHashes::new(4 << 20);
        assert!(seen.expect(100_000));
        let room = capacities(&seen);
        assert!(room.iter().sum::<usize>() >= 100_000);
        let hashes: Vec<[u64; 2]> = (0..100_000).map(spread).collect();
        assert_eq!(
            seen.first_seen(&hashes).map(|new| new.iter().all(|&n| n)),
            Some(true)
        );
        assert_eq!(capacities(&seen), room, "no growth after the room was made");
        // Beyond the budget the guess is ignored, and the table grows as it fills.
        assert!(!seen.expect(1 << 30));
        assert_eq!(capacities(&seen), room);
        assert!(seen.bytes() <= 4 << 20);
        // A total already held asks for nothing.
        assert!(seen.expect(5));
        assert_eq!(capacities(&seen), room);
    }

    #[test]
    fn a_rising_guess_grows_the_tables_once_with_a_quarter_to_spare() {
        let mut seen = SeenHashes::new(64 << 20);
        assert!(seen.expect(100_000));
        let first = capacities(&seen);
        // A guess 3% higher: each table is replaced by one a quarter larger...
        assert!(seen.expect(103_000));
        let spared = capacities(&seen);
        for (now, before) in spared.iter().zip(&first) {
            assert!(*now >= before + before / 4, "{now} from {before}");
        }
        // ...which the next rises fit without another table.
        assert!(seen.expect(106_000));
        assert!(seen.expect(115_000));
        assert_eq!(capacities(&seen), spared);
        // Where the budget has no room for the quarter, the tables grow to just the guess.
        let mut tight = SeenHashes::new(0);
        tight.budget = 40 << 20;
        assert!(tight.expect(1_000_000));
        let exact = capacities(&tight);
        let bytes = tight.bytes();
        tight.budget = bytes * 2 + bytes / 8; // the old and new tables, but not a quarter more
        assert!(tight.expect(1_030_000));
        for (now, before) in capacities(&tight).iter().zip(&exact) {
            assert!(
                *now > *before && *now < before + before / 4,
                "{now} from {before}"
            );
        }
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

    /// Batches large enough for the parallel path (or, on a pool of one, the serial one), with
    /// repeats within a batch and across batches, against one `HashSet` taking the same
    /// records in order; `bands`: a `banded` set, the records' second word their band.
    fn answers_as_one_set(threads: usize, bands: Option<u64>) {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        let mut seen = match bands {
            None => SeenHashes::new(1 << 30),
            Some(bands) => SeenHashes::banded(1 << 30, bands as usize),
        };
        let record = |i: u64| match bands {
            None => spread(i),
            // Equal hashes in other bands: ties the sorted order breaks by band.
            Some(bands) => [spread(i / 3)[0], i % bands],
        };
        let mut oracle = HashSet::new();
        let mut all = Vec::new();
        for batch in 0..4u64 {
            let hashes: Vec<[u64; 2]> = (0..3 * PARALLEL_FROM as u64)
                .map(|i| record((i * 7 + batch * 5_000) % 20_000))
                .collect();
            let expected: Vec<bool> = hashes.iter().map(|&pair| oracle.insert(pair)).collect();
            let new = pool.install(|| seen.first_seen(&hashes));
            assert_eq!(new, Some(expected), "batch {batch}, {bands:?} bands");
            all.extend(hashes);
        }
        assert_eq!(seen.len(), oracle.len());
        let mut expected: Vec<[u64; 2]> = oracle.into_iter().collect();
        expected.sort_unstable();
        assert_eq!(pool.install(|| seen.sorted()), expected);
        let mut written = Vec::new();
        pool.install(|| seen.write_sorted(&mut written)).unwrap();
        assert_eq!(written, bytemuck::cast_slice::<[u64; 2], u8>(&expected));
        // The hashes reached every part of the order, the last shard's too.
        assert!(all.iter().any(|&[high, _]| shard_of(high) == SHARDS - 1));
    }

    #[test]
    fn the_shards_at_once_answer_as_one_set() {
        for threads in [1, 4] {
            answers_as_one_set(threads, None);
            answers_as_one_set(threads, Some(14));
            answers_as_one_set(threads, Some(1));
        }
    }

    #[test]
    fn a_banded_set_holds_the_hash_alone_and_refuses_a_band_beyond_its_own() {
        let records: Vec<[u64; 2]> = (0..1_000_000u64).map(|i| [spread(i)[0], i % 14]).collect();
        let (mut wide, mut banded) = (SeenHashes::new(1 << 30), SeenHashes::banded(1 << 30, 14));
        assert!(wide.expect(records.len()) && banded.expect(records.len()));
        assert_eq!(wide.first_seen(&records), banded.first_seen(&records));
        // Half the bytes, but for the small shares' larger spare room; and room for the
        // documents' hashes, a fourteenth as many records.
        let twins = banded.twins_bytes();
        let (half, wide_bytes) = ((banded.bytes() - twins) * 2, wide.bytes());
        assert!(half <= wide_bytes + wide_bytes / 10, "{half} {wide_bytes}");
        assert!(twins > 0 && twins <= wide_bytes / 12, "{twins}");
        // A band number the set was not made for: refused whole, nothing recorded.
        let before = banded.len();
        assert_eq!(banded.first_seen(&[[1, 3], [2, 14]]), None);
        assert_eq!(banded.first_seen(&[[1, u64::MAX]]), None);
        assert_eq!(banded.len(), before);
        assert_eq!(
            banded.first_seen(&[[1, 3], [1, 4], [1, 3]]),
            Some(vec![true, true, false])
        );
        // The zero hash of each band is a record of its own.
        assert_eq!(
            banded.first_seen(&[[0, 0], [0, 1], [0, 0]]),
            Some(vec![true, true, false])
        );
        assert_eq!(banded.sorted()[..2], [[0, 0], [0, 1]]);
    }

    #[test]
    fn near_decisions_skip_the_bands_of_exact_twins_and_answer_as_banding_every_document() {
        use crate::prepare::hash::hash;
        use crate::prepare::near::NearOptions;
        let hasher = MinHasher::new(NearOptions::default());
        // Documents with exact twins (in the batch and in later ones), near twins (a word
        // changed) and others; batches large and small (the parallel and the serial paths).
        let base: Vec<String> = (0..900)
            .map(|i| {
                let words: Vec<String> =
                    (0..40).map(|w| format!("w{}", (i * 7 + w) % 97)).collect();
                words.join(" ")
            })
            .collect();
        let texts: Vec<String> = (0..3000)
            .map(|i| match i % 5 {
                0 | 1 => base[i % 900].clone(),
                2 => base[(i * 13) % 900].replacen("w", "x", 1),
                _ => format!("{} {}", base[(i * 31) % 900], i),
            })
            .collect();
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap();
        let mut near = SeenHashes::banded(1 << 30, hasher.bands());
        let mut every = SeenHashes::new(1 << 30);
        let mut at = 0;
        for size in [5, 2000, 995] {
            let batch = &texts[at..at + size];
            at += size;
            let hashes: Vec<[u64; 2]> = batch.iter().map(|t| hash(t)).collect();
            let bands: Vec<[u64; 2]> = batch.iter().flat_map(|t| hasher.band_hashes(t)).collect();
            let expected = every.first_seen_groups(&bands, hasher.bands());
            let decided = pool.install(|| near.first_seen_near(batch, &hashes, &hasher));
            assert_eq!(decided, expected, "batch of {size}");
            assert!(decided.unwrap().iter().any(|&new| !new));
        }
        // The same bands recorded, in the same order.
        assert_eq!(near.len(), every.len());
        assert_eq!(near.sorted(), every.sorted());
        // A batch that does not fit is refused, and so is every later one.
        near.budget = near.bytes();
        let more: Vec<String> = (0..100)
            .map(|i| format!("new text {i} of its own words"))
            .collect();
        let hashes: Vec<[u64; 2]> = more.iter().map(|t| hash(t)).collect();
        assert_eq!(near.first_seen_near(&more, &hashes, &hasher), None);
        near.budget = 1 << 30;
        assert_eq!(
            near.first_seen_near(&more[..1], &hashes[..1], &hasher),
            None
        );
        assert_eq!(near.first_seen(&[[1, 1]]), None);
    }

    #[test]
    fn hashes_past_the_budget_are_refused_whole() {
        let mut seen = SeenHashes::new(4096);
        let many: Vec<[u64; 2]> = (0..1000).map(spread).collect();
        assert_eq!(seen.first_seen(&many), None);
        assert!(seen.is_empty());
        let few: Vec<[u64; 2]> = (0..50).map(spread).collect();
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
