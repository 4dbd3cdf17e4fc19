//! A count per distinct byte string, compact: the strings one after another in one buffer, an
//! entry of two `u64` per string, and an open-addressing index of `u64` slots. A `HashMap` of
//! boxed strings would spend an allocation and ~50 bytes of overhead per distinct pre-token,
//! and the distinct pre-tokens are what the counting pass's memory is made of.

use std::hash::Hasher;

use rustc_hash::FxHasher;

/// Slots start at 2^12 and double when more than half are used.
const START_BITS: u32 = 12;

#[derive(Default)]
pub struct PieceTable {
    /// The distinct strings, in the order first seen.
    bytes: Vec<u8>,
    /// Per string: where it starts in `bytes` (it ends where the next one starts) and its count.
    starts: Vec<u64>,
    counts: Vec<u64>,
    /// 0: empty; else the string's index + 1 (low 32 bits) and 32 more bits of its hash, so that
    /// most probes that miss are told apart without reading the string.
    slots: Vec<u64>,
    bits: u32,
}

impl PieceTable {
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// The `index`-th distinct string and its count.
    pub fn get(&self, index: usize) -> (&[u8], u64) {
        let start = self.starts[index] as usize;
        let end = self
            .starts
            .get(index + 1)
            .map_or(self.bytes.len(), |&s| s as usize);
        (&self.bytes[start..end], self.counts[index])
    }

    /// Bytes held: strings, entries and index (what the table costs, for reports).
    pub fn memory_bytes(&self) -> usize {
        self.bytes.capacity()
            + 8 * (self.starts.capacity() + self.counts.capacity() + self.slots.capacity())
    }

    /// Add `count` to the count of `piece`.
    #[inline]
    pub fn add(&mut self, piece: &[u8], count: u64) {
        if 2 * (self.counts.len() + 1) > self.slots.len() {
            self.grow();
        }
        let hash = hash_of(piece);
        let tag = hash & !u64::from(u32::MAX);
        let mask = self.slots.len() - 1;
        let mut at = (hash >> (64 - self.bits)) as usize;
        loop {
            let slot = self.slots[at];
            if slot == 0 {
                self.slots[at] = tag | (self.counts.len() as u64 + 1);
                self.starts.push(self.bytes.len() as u64);
                self.bytes.extend_from_slice(piece);
                self.counts.push(count);
                return;
            }
            if slot & !u64::from(u32::MAX) == tag {
                let index = (slot as u32 - 1) as usize;
                if self.get(index).0 == piece {
                    self.counts[index] += count;
                    return;
                }
            }
            at = (at + 1) & mask;
        }
    }

    fn grow(&mut self) {
        self.bits = if self.slots.is_empty() {
            START_BITS
        } else {
            self.bits + 1
        };
        self.slots = vec![0; 1 << self.bits];
        let mask = self.slots.len() - 1;
        for index in 0..self.counts.len() {
            let hash = hash_of(self.get(index).0);
            let mut at = (hash >> (64 - self.bits)) as usize;
            while self.slots[at] != 0 {
                at = (at + 1) & mask;
            }
            self.slots[at] = (hash & !u64::from(u32::MAX)) | (index as u64 + 1);
        }
    }
}

/// FxHash of the bytes, then a multiply-xorshift: the index is taken from the high bits, and Fx
/// alone leaves short strings that differ in one byte close together there.
#[inline]
fn hash_of(piece: &[u8]) -> u64 {
    let mut hasher = FxHasher::default();
    hasher.write(piece);
    let mut h = hasher.finish();
    h ^= h >> 31;
    h = h.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (h >> 29)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn counts_like_a_hash_map_through_growth() {
        let mut table = PieceTable::default();
        let mut expected: HashMap<Vec<u8>, u64> = HashMap::new();
        for i in 0..50_000u64 {
            let piece = format!("p{}", (i * 7919) % 12_345).into_bytes();
            table.add(&piece, i % 3 + 1);
            *expected.entry(piece).or_default() += i % 3 + 1;
        }
        table.add(b"", 2);
        *expected.entry(Vec::new()).or_default() += 2;
        assert_eq!(table.len(), expected.len());
        for index in 0..table.len() {
            let (piece, count) = table.get(index);
            assert_eq!(expected[piece], count);
        }
    }
}
