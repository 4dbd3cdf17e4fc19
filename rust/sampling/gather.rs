//! An epoch's four index arrays, gathered from the surviving rows in one pass.
//!
//! Each epoch visits every row once in random order. With the rows kept as one table of
//! `[inst_start, inst_len, resp_start, resp_len]` records, a row costs one cache line instead
//! of four (one per column), and the records of the next rows are prefetched while the
//! current ones are copied.

use super::prefetch::prefetch;
use crate::error::{Error, Result};

/// One surviving row: `[inst_start, inst_len, resp_start, resp_len]`.
pub type RowRecord = [i64; 4];

/// Rows fetched ahead of the one being copied.
const PREFETCH_DISTANCE: usize = 64;

/// The four output columns of one epoch, each as long as the epoch's row ids.
pub struct EpochColumns<'a> {
    pub inst_start: &'a mut [i64],
    pub inst_len: &'a mut [i64],
    pub resp_start: &'a mut [i64],
    pub resp_len: &'a mut [i64],
}

/// Fill `out` with the records of `row_ids` (in that order).
pub fn gather_epoch(table: &[RowRecord], row_ids: &[i64], out: EpochColumns<'_>) -> Result<()> {
    let len = row_ids.len();
    let lengths = [
        out.inst_start.len(),
        out.inst_len.len(),
        out.resp_start.len(),
        out.resp_len.len(),
    ];
    if lengths.iter().any(|&column| column != len) {
        return Err(Error::Config(format!(
            "gather_epoch: {len} row ids but output columns of {lengths:?} rows"
        )));
    }
    // Checked once up front, so that the copy loop has no failure path.
    if let Some(position) = row_ids
        .iter()
        .position(|&id| id < 0 || id as u64 >= table.len() as u64)
    {
        return Err(Error::Config(format!(
            "gather_epoch: row id {} at position {position} is outside the {} rows",
            row_ids[position],
            table.len()
        )));
    }
    for (position, &id) in row_ids.iter().enumerate() {
        if let Some(&ahead) = row_ids.get(position + PREFETCH_DISTANCE) {
            prefetch(&table[ahead as usize]);
        }
        let [inst_start, inst_len, resp_start, resp_len] = table[id as usize];
        out.inst_start[position] = inst_start;
        out.inst_len[position] = inst_len;
        out.resp_start[position] = resp_start;
        out.resp_len[position] = resp_len;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Output columns of `len` rows, and a run of `gather_epoch` into them.
    fn gather(table: &[RowRecord], ids: &[i64], len: usize) -> Result<[Vec<i64>; 4]> {
        let [mut a, mut b, mut c, mut d] = [vec![0; len], vec![0; len], vec![0; len], vec![0; len]];
        let out = EpochColumns {
            inst_start: &mut a,
            inst_len: &mut b,
            resp_start: &mut c,
            resp_len: &mut d,
        };
        gather_epoch(table, ids, out)?;
        Ok([a, b, c, d])
    }

    #[test]
    fn gathers_each_column_in_row_id_order() {
        let table: Vec<RowRecord> = (0..100).map(|i| [i, 10 * i, 100 * i, 1000 * i]).collect();
        let ids: Vec<i64> = (0..100).rev().step_by(3).collect();
        let [a, b, c, d] = gather(&table, &ids, ids.len()).expect("valid ids");
        for (position, &id) in ids.iter().enumerate() {
            assert_eq!(
                [a[position], b[position], c[position], d[position]],
                table[id as usize]
            );
        }
    }

    #[test]
    fn rejects_ids_outside_the_table_and_short_columns() {
        let table: Vec<RowRecord> = vec![[0; 4]; 3];
        for bad in [-1i64, 3] {
            let error = gather(&table, &[0, bad], 2).expect_err("out of range");
            assert!(error.to_string().contains("position 1"), "{error}");
        }
        assert!(gather(&table, &[0, 1], 1).is_err());
    }
}
