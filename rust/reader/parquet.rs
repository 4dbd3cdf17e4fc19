//! Parquet rows: the three columns are projected and read in record batches; strings are
//! borrowed straight from the Arrow buffers (no copy).
//!
//! Arrow validates UTF-8 a page (or a whole dictionary) at a time, so one invalid value would
//! fail every row around it without naming one. When a batch fails to decode, the file is
//! re-read from that row with Parquet's plain column readers (`RawRows`), which return the
//! bytes unvalidated; each value is then checked on its own and a bad one is a bad row.

use std::borrow::Cow;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, LargeBinaryArray, RecordBatch};
use arrow_schema::DataType;
use arrow_schema::{Field, Schema};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader, RowGroups,
};
use parquet::arrow::{parquet_to_arrow_field_levels, ProjectionMask};
use parquet::column::page::{Page, PageIterator, PageMetadata, PageReader};
use parquet::column::reader::ColumnReaderImpl;
use parquet::data_type::{ByteArray, ByteArrayType};
use parquet::file::metadata::{ParquetMetaData, RowGroupMetaData};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::serialized_reader::SerializedPageReader;

use super::{RowText, FIELDS};
use crate::error::{Error, Location, Result};
use crate::progress::ByteProgress;

pub struct ParquetReader {
    path: Arc<PathBuf>,
    inner: ParquetRecordBatchReader,
    /// Index of each of FIELDS among the projected columns.
    columns: [usize; 3],
    /// One past the last row to read (the file's row count, or a span's end).
    total_rows: u64,
    /// Where reading starts (0, or a span's first row).
    first_row: u64,
    rows_done: u64,
    file_size: u64,
    progress: ByteProgress,
    batch_rows: usize,
    /// Set once Arrow failed to decode a batch: the rest is read unvalidated.
    raw: Option<Box<RawRows>>,
    finished: bool,
}

impl ParquetReader {
    pub fn open(path: &Path, batch_rows: usize, progress: ByteProgress) -> Result<Self> {
        Self::open_groups(path, None, batch_rows, progress)
    }

    /// The rows of row groups `groups` only; rows keep their index in the file.
    pub fn open_row_groups(
        path: &Path,
        groups: std::ops::Range<usize>,
        batch_rows: usize,
        progress: ByteProgress,
    ) -> Result<Self> {
        Self::open_groups(path, Some(groups), batch_rows, progress)
    }

    fn open_groups(
        path: &Path,
        groups: Option<std::ops::Range<usize>>,
        batch_rows: usize,
        progress: ByteProgress,
    ) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::read(path, e))?;
        let file_size = file.metadata().map_err(|e| Error::read(path, e))?.len();
        let unreadable = |e: parquet::errors::ParquetError| {
            Error::bad_file(
                path,
                format!("not a readable Parquet file (empty, truncated or corrupt?): {e}"),
            )
        };
        let loaded =
            ArrowReaderMetadata::load(&file, ArrowReaderOptions::new()).map_err(unreadable)?;
        let loaded = plain_strings(loaded).map_err(unreadable)?;
        let schema = Arc::clone(loaded.schema());
        let mut roots = Vec::with_capacity(3);
        for name in FIELDS {
            let (index, field) = schema.column_with_name(name).ok_or_else(|| {
                let present: Vec<_> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                Error::bad_file(
                    path,
                    format!(
                        "missing column \"{name}\" (columns: {}); rows need string columns \
                         condition, instruction, response",
                        present.join(", ")
                    ),
                )
            })?;
            if !is_string_type(field.data_type()) {
                return Err(Error::bad_file(
                    path,
                    format!(
                        "column \"{name}\" has type {}; expected string, large_string or string_view",
                        field.data_type()
                    ),
                ));
            }
            roots.push(index);
        }
        let metadata = Arc::clone(loaded.metadata());
        let group_rows = |g: usize| metadata.row_group(g).num_rows().max(0) as u64;
        let selected = groups.clone().unwrap_or(0..metadata.num_row_groups());
        if selected.start > selected.end || selected.end > metadata.num_row_groups() {
            return Err(Error::Config(format!(
                "{}: row groups {}..{} are not among its {}; the file changed since the plan was \
                 made, plan again",
                path.display(),
                selected.start,
                selected.end,
                metadata.num_row_groups()
            )));
        }
        let (first_row, total_rows) = match groups {
            None => (0, metadata.file_metadata().num_rows().max(0) as u64),
            Some(_) => {
                let first: u64 = (0..selected.start).map(group_rows).sum();
                (first, first + selected.clone().map(group_rows).sum::<u64>())
            }
        };
        let parquet_schema = loaded.parquet_schema();
        check_footer(path, &metadata, selected.clone(), &roots, parquet_schema)?;
        let cannot_read = |e: parquet::errors::ParquetError| {
            Error::bad_file(path, format!("cannot read Parquet file: {e}"))
        };
        let mask = ProjectionMask::roots(parquet_schema, roots.iter().copied());
        let levels = parquet_to_arrow_field_levels(parquet_schema, mask, Some(schema.fields()))
            .map_err(cannot_read)?;
        let row_groups = CheckedRowGroups {
            file: Arc::new(file),
            metadata: Arc::clone(&metadata),
            groups: selected.collect(),
        };
        let inner = ParquetRecordBatchReader::try_new_with_row_groups(
            &levels,
            &row_groups,
            batch_rows.max(1),
            None,
        )
        .map_err(cannot_read)?;
        // The projection keeps the file's column order; find each field in it.
        let mut sorted = roots.clone();
        sorted.sort_unstable();
        let position = |root: usize| sorted.iter().position(|&r| r == root).unwrap_or(0);
        Ok(ParquetReader {
            path: Arc::new(path.to_path_buf()),
            inner,
            columns: [position(roots[0]), position(roots[1]), position(roots[2])],
            total_rows,
            first_row,
            rows_done: first_row,
            file_size,
            progress,
            batch_rows: batch_rows.max(1),
            raw: None,
            finished: false,
        })
    }

    pub fn total_rows(&self) -> u64 {
        self.total_rows
    }

    /// Rows read so far (of a span: since its start).
    pub fn rows_read(&self) -> u64 {
        self.rows_done - self.first_row
    }

    /// Estimated from the rows read: Parquet decodes a row group's columns at once.
    fn bytes_done(&self) -> u64 {
        let span = self.total_rows - self.first_row;
        if span == 0 {
            return 0;
        }
        (self.file_size as f64 * self.rows_read() as f64 / span as f64) as u64
    }
}

/// An error for corrupt footer values that Parquet's readers do not check themselves, in the
/// row groups `selected`: a negative row count (summed as `usize` by Arrow's reader: an overflow
/// panic with overflow checks, a wrapped count without), or a negative offset or size of a
/// column chunk to be read, the three columns' (`ColumnChunkMetaData::byte_range` asserts on
/// those, a panic). Both found by fuzz/fuzz_targets/parquet_reader.rs.
fn check_footer(
    path: &Path,
    metadata: &parquet::file::metadata::ParquetMetaData,
    selected: std::ops::Range<usize>,
    roots: &[usize],
    schema: &parquet::schema::types::SchemaDescriptor,
) -> Result<()> {
    for (g, group) in metadata.row_groups().iter().enumerate() {
        if selected.contains(&g) && group.num_rows() < 0 {
            return Err(Error::bad_file(
                path,
                format!(
                    "corrupt Parquet metadata: row group {g} has {} rows",
                    group.num_rows()
                ),
            ));
        }
        for (leaf, chunk) in group.columns().iter().enumerate() {
            let read = selected.contains(&g)
                && leaf < schema.num_columns()
                && roots.contains(&schema.get_column_root_idx(leaf));
            let start = chunk
                .dictionary_page_offset()
                .unwrap_or(chunk.data_page_offset());
            if read && (start < 0 || chunk.compressed_size() < 0) {
                return Err(Error::bad_file(
                    path,
                    format!(
                        "corrupt Parquet metadata: column {} of row group {g} has offset {start} \
                         and size {}",
                        chunk.column_path(),
                        chunk.compressed_size()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// The file's Arrow schema with `string_view` and dictionary-of-string columns read as
/// `large_string`, the one string type the rows are then taken from.
///
/// Views: Arrow's view decoder reserves one 16-byte view per value a dictionary page announces
/// before it reads any (`ViewBuffer::with_capacity(num_values)`, parquet 60.1): a corrupt page
/// header asked for 9.5 GB in one allocation on the fuzzer's 16-core run. The offsets decoder
/// grows with the values actually read. Dictionaries: decoded to strings by the Parquet
/// reader itself, instead of a cast of every batch (which needed the arrow-cast crate, a
/// minute of the build on 2 cores). The rows are the same strings either way.
fn plain_strings(loaded: ArrowReaderMetadata) -> parquet::errors::Result<ArrowReaderMetadata> {
    let schema = loaded.schema();
    let plain = |dt: &DataType| match dt {
        DataType::Utf8View => true,
        DataType::Dictionary(_, value) => is_string_type(value),
        _ => false,
    };
    if !schema.fields().iter().any(|f| plain(f.data_type())) {
        return Ok(loaded);
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match plain(f.data_type()) {
            true => f.as_ref().clone().with_data_type(DataType::LargeUtf8),
            false => f.as_ref().clone(),
        })
        .collect();
    let coerced = Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()));
    ArrowReaderMetadata::try_new(
        Arc::clone(loaded.metadata()),
        ArrowReaderOptions::new().with_schema(coerced),
    )
}

fn is_string_type(dt: &DataType) -> bool {
    match dt {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, value) => {
            matches!(**value, DataType::Utf8 | DataType::LargeUtf8)
        }
        _ => false,
    }
}

impl ParquetReader {
    fn next_batch(&mut self) -> Option<Result<ParquetBatch>> {
        if let Some(raw) = &mut self.raw {
            let left = self.total_rows.saturating_sub(self.rows_done);
            if left == 0 {
                return None;
            }
            let rows = self.batch_rows.min(left as usize);
            return match contained(|| raw.next_batch(rows)) {
                Ok(Some(columns)) => Some(Ok(ParquetBatch {
                    path: Arc::clone(&self.path),
                    first_row: self.rows_done,
                    columns,
                })),
                Ok(None) => None,
                Err(e) => Some(Err(self.decode_error(e))),
            };
        }
        let next = caught(|| self.inner.next())
            .unwrap_or_else(|message| Some(Err(arrow_schema::ArrowError::ParquetError(message))));
        match next? {
            Ok(batch) => Some(Ok(ParquetBatch::new(
                Arc::clone(&self.path),
                self.rows_done,
                &batch,
                self.columns,
            ))),
            Err(arrow_error) => match contained(|| RawRows::open(&self.path, self.rows_done)) {
                Ok(raw) => {
                    self.raw = Some(Box::new(raw));
                    self.next_batch()
                }
                Err(_) => Some(Err(self.decode_error(arrow_error))),
            },
        }
    }

    fn decode_error(&self, error: impl std::fmt::Display) -> Error {
        Error::bad_file(
            &self.path,
            format!(
                "cannot decode rows after row {} (truncated or corrupt file?): {error}",
                self.rows_done
            ),
        )
    }
}

impl Iterator for ParquetReader {
    type Item = Result<ParquetBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let result = self.next_batch()?;
        match &result {
            Ok(batch) => {
                self.rows_done += batch.len() as u64;
                self.progress.advance_to(self.bytes_done());
            }
            Err(_) => self.finished = true,
        }
        Some(result)
    }
}

/// The three columns read with Parquet's plain column readers: byte strings, not validated
/// as UTF-8, one row group at a time.
struct RawRows {
    file: SerializedFileReader<File>,
    /// Leaf column index of each of FIELDS.
    leaves: [usize; 3],
    /// The definition level of a present value, per column (0: the column is required).
    max_levels: [i16; 3],
    /// The next row group to open.
    next_group: usize,
    readers: Vec<ColumnReaderImpl<ByteArrayType>>,
    left_in_group: u64,
}

type ParquetResult<T> = parquet::errors::Result<T>;

/// `f()`, or the message of its panic. Parquet's and Arrow's decoders panic on some corrupt
/// pages where they mostly return an error (found by fuzz/fuzz_targets/parquet_reader.rs,
/// parquet/arrow 60.1): Arrow's record reader on definition levels that overrun their buffer
/// (arrow-buffer's `bit_chunk_iterator`: "offset + len out of bounds"), the plain column
/// readers of `RawRows` on a dictionary page cut short (`bit_util::read_num_bytes`'s
/// assertion) or a dictionary-encoded page without a dictionary ("Decoder for dict should have
/// been set"). Such a panic is that corrupt file's error; the reader that panicked is not used
/// again (Arrow's gives way to `RawRows`, and an error of `RawRows` ends the reading).
fn caught<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|panic| {
        let message = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        format!("the Parquet decoder failed on a corrupt page ({message})")
    })
}

/// `caught` for the `RawRows` calls.
fn contained<T>(f: impl FnOnce() -> ParquetResult<T>) -> ParquetResult<T> {
    caught(f).unwrap_or_else(|message| Err(parquet::errors::ParquetError::General(message)))
}

impl RawRows {
    /// Positioned at row `start` of the file.
    fn open(path: &Path, start: u64) -> ParquetResult<Self> {
        let file = SerializedFileReader::new(File::open(path)?)?;
        let schema = file.metadata().file_metadata().schema_descr_ptr();
        let leaf = |name: &str| {
            schema
                .columns()
                .iter()
                .position(|c| c.path().parts() == [name])
                .ok_or_else(|| parquet::errors::ParquetError::General(format!("no column {name}")))
        };
        let leaves = [leaf(FIELDS[0])?, leaf(FIELDS[1])?, leaf(FIELDS[2])?];
        let max_levels = leaves.map(|leaf| schema.column(leaf).max_def_level());
        let mut raw = RawRows {
            file,
            leaves,
            max_levels,
            next_group: 0,
            readers: Vec::new(),
            left_in_group: 0,
        };
        raw.skip(start)?;
        Ok(raw)
    }

    fn skip(&mut self, mut rows: u64) -> ParquetResult<()> {
        // Whole row groups are skipped without reading them.
        let metadata = self.file.metadata();
        while self.next_group < metadata.num_row_groups() {
            let group_rows = metadata.row_group(self.next_group).num_rows().max(0) as u64;
            if rows < group_rows {
                break;
            }
            rows -= group_rows;
            self.next_group += 1;
        }
        if rows > 0 && self.open_group()? {
            for reader in &mut self.readers {
                reader.skip_records(rows as usize)?;
            }
            self.left_in_group -= rows.min(self.left_in_group);
        }
        Ok(())
    }

    /// Open the next row group; false at the end of the file.
    fn open_group(&mut self) -> ParquetResult<bool> {
        if self.next_group >= self.file.num_row_groups() {
            return Ok(false);
        }
        let group = self.file.get_row_group(self.next_group)?;
        self.left_in_group = group.metadata().num_rows().max(0) as u64;
        self.readers = self
            .leaves
            .iter()
            .map(|&leaf| {
                let descr = group.metadata().schema_descr().column(leaf);
                if descr.physical_type() != parquet::basic::Type::BYTE_ARRAY {
                    return Err(parquet::errors::ParquetError::General(format!(
                        "column {} is stored as {}, not as strings (BYTE_ARRAY)",
                        descr.name(),
                        descr.physical_type()
                    )));
                }
                let pages = CheckedPages(group.get_column_page_reader(leaf)?);
                Ok(ColumnReaderImpl::new(descr, Box::new(pages)))
            })
            .collect::<ParquetResult<_>>()?;
        self.next_group += 1;
        Ok(true)
    }

    fn next_batch(&mut self, batch_rows: usize) -> ParquetResult<Option<[ArrayRef; 3]>> {
        while self.left_in_group == 0 {
            if !self.open_group()? {
                return Ok(None);
            }
        }
        let rows = (batch_rows as u64).min(self.left_in_group) as usize;
        let mut columns = Vec::with_capacity(3);
        for (k, reader) in self.readers.iter_mut().enumerate() {
            columns.push(read_column(reader, rows, self.max_levels[k], FIELDS[k])?);
        }
        self.left_in_group -= rows as u64;
        let [a, b, c]: [ArrayRef; 3] = columns
            .try_into()
            .map_err(|_| parquet::errors::ParquetError::General("expected three columns".into()))?;
        Ok(Some([a, b, c]))
    }
}

/// A column's pages, each dictionary page checked before Parquet's plain readers decode it:
/// `DictDecoder::set_dict` sizes the dictionary by the count the page header announces (a
/// 32-byte `ByteArray` per value, parquet 60.1), so a corrupt count asked for 30 GB in one
/// allocation on the fuzzer's 16-core run. A plain byte-array value takes at least its 4-byte
/// length, so a page of `n` bytes holds at most `n / 4` values; more is a corrupt page.
struct CheckedPages(Box<dyn PageReader>);

fn checked(page: Page) -> ParquetResult<Page> {
    if let Page::DictionaryPage {
        buf, num_values, ..
    } = &page
    {
        if *num_values as usize > buf.len() / 4 {
            return Err(parquet::errors::ParquetError::General(format!(
                "corrupt dictionary page: it announces {num_values} values in {} bytes \
                 (a value takes at least 4)",
                buf.len()
            )));
        }
    }
    Ok(page)
}

impl PageReader for CheckedPages {
    fn get_next_page(&mut self) -> ParquetResult<Option<Page>> {
        self.0.get_next_page()?.map(checked).transpose()
    }

    fn peek_next_page(&mut self) -> ParquetResult<Option<PageMetadata>> {
        self.0.peek_next_page()
    }

    fn skip_next_page(&mut self) -> ParquetResult<()> {
        self.0.skip_next_page()
    }

    fn supports_deferred_dictionary(&self) -> bool {
        self.0.supports_deferred_dictionary()
    }

    fn take_deferred_dictionary(&mut self) -> ParquetResult<Option<Page>> {
        self.0.take_deferred_dictionary()?.map(checked).transpose()
    }

    fn at_record_boundary(&mut self) -> ParquetResult<bool> {
        self.0.at_record_boundary()
    }
}

impl Iterator for CheckedPages {
    type Item = ParquetResult<Page>;

    fn next(&mut self) -> Option<Self::Item> {
        self.get_next_page().transpose()
    }
}

/// The row groups Arrow's reader reads, each column chunk's pages through `CheckedPages`:
/// Arrow's plain byte-array decoder also reserves one offset per value a dictionary page
/// announces before it reads any (`ByteArrayDecoderPlain::read`, parquet 60.1; 9 GB for the
/// fuzzer's inputs). The rest is what Arrow's own file reader does.
struct CheckedRowGroups {
    file: Arc<File>,
    /// The footer read at open (once: the page readers are made from it).
    metadata: Arc<ParquetMetaData>,
    groups: Vec<usize>,
}

impl RowGroups for CheckedRowGroups {
    fn num_rows(&self) -> usize {
        let group = |g: usize| self.metadata.row_group(g).num_rows().max(0) as usize;
        self.groups.iter().map(|&g| group(g)).sum()
    }

    fn column_chunks(&self, column: usize) -> ParquetResult<Box<dyn PageIterator>> {
        Ok(Box::new(CheckedChunks {
            file: Arc::clone(&self.file),
            metadata: Arc::clone(&self.metadata),
            column,
            groups: self.groups.clone().into_iter(),
        }))
    }

    fn row_groups(&self) -> Box<dyn Iterator<Item = &RowGroupMetaData> + '_> {
        Box::new(self.groups.iter().map(|&g| self.metadata.row_group(g)))
    }

    fn metadata(&self) -> &ParquetMetaData {
        &self.metadata
    }
}

/// One column's chunks, row group after row group, as checked page readers.
struct CheckedChunks {
    file: Arc<File>,
    metadata: Arc<ParquetMetaData>,
    column: usize,
    groups: std::vec::IntoIter<usize>,
}

impl Iterator for CheckedChunks {
    type Item = ParquetResult<Box<dyn PageReader>>;

    fn next(&mut self) -> Option<Self::Item> {
        let group = self.metadata.row_group(self.groups.next()?);
        let rows = group.num_rows().max(0) as usize;
        let pages = SerializedPageReader::new(
            Arc::clone(&self.file),
            group.column(self.column),
            rows,
            None,
        );
        Some(pages.map(|p| Box::new(CheckedPages(Box::new(p))) as Box<dyn PageReader>))
    }
}

impl PageIterator for CheckedChunks {}

/// `rows` values of one column as a binary array (nulls where the definition level says so).
fn read_column(
    reader: &mut ColumnReaderImpl<ByteArrayType>,
    rows: usize,
    max_level: i16,
    name: &str,
) -> ParquetResult<ArrayRef> {
    let mut levels = Vec::new();
    let mut values: Vec<ByteArray> = Vec::new();
    let (records, _, _) = reader.read_records(rows, Some(&mut levels), None, &mut values)?;
    if records != rows {
        return Err(parquet::errors::ParquetError::General(format!(
            "column {name} holds {records} of the {rows} rows its row group announces"
        )));
    }
    let mut next_value = values.iter();
    // A required column has no levels: every row holds a value.
    let array: LargeBinaryArray = if max_level == 0 {
        values.iter().map(|v| Some(v.data())).collect()
    } else {
        levels
            .iter()
            .map(|&level| {
                (level == max_level)
                    .then(|| next_value.next().map(|v| v.data()))
                    .flatten()
            })
            .collect()
    };
    Ok(Arc::new(array))
}

/// The three string columns of one record batch.
pub struct ParquetBatch {
    path: Arc<PathBuf>,
    first_row: u64,
    columns: [ArrayRef; 3],
}

impl ParquetBatch {
    /// Dictionary and view columns were read as `large_string` (`plain_strings`).
    fn new(path: Arc<PathBuf>, first_row: u64, batch: &RecordBatch, positions: [usize; 3]) -> Self {
        let columns = positions.map(|p| Arc::clone(batch.column(p)));
        ParquetBatch {
            path,
            first_row,
            columns,
        }
    }

    pub fn len(&self) -> usize {
        self.columns[0].len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn location(&self, i: usize) -> Location {
        Location::Row(self.first_row + i as u64)
    }

    pub fn row(&self, i: usize) -> Result<RowText<'_>> {
        let field = |k: usize| -> Result<Cow<'_, str>> {
            let bad = |message: String| Error::bad_row(&self.path, self.location(i), message);
            match string_at(&self.columns[k], i) {
                Some(Ok(text)) => Ok(Cow::Borrowed(text)),
                Some(Err(e)) => Err(bad(format!(
                    "field \"{}\" is not valid UTF-8 (at byte {} of the value); files must be \
                     UTF-8 encoded",
                    FIELDS[k],
                    e.valid_up_to()
                ))),
                None => Err(bad(format!(
                    "field \"{}\" is null; expected a string",
                    FIELDS[k]
                ))),
            }
        };
        Ok(RowText {
            condition: field(0)?,
            instruction: field(1)?,
            response: field(2)?,
        })
    }
}

/// The string at `i`, or None for null. The column types were checked when the file was
/// opened; binary columns come from `RawRows` and are validated here, value by value.
fn string_at(array: &ArrayRef, i: usize) -> Option<Result<&str, std::str::Utf8Error>> {
    if array.is_null(i) {
        return None;
    }
    match array.data_type() {
        DataType::Utf8 => Some(Ok(array.as_string::<i32>().value(i))),
        DataType::LargeUtf8 => Some(Ok(array.as_string::<i64>().value(i))),
        DataType::Utf8View => Some(Ok(array.as_string_view().value(i))),
        DataType::LargeBinary => Some(std::str::from_utf8(array.as_binary::<i64>().value(i))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{LargeStringArray, StringArray, StringViewArray};
    use arrow_schema::{Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    fn write(path: &Path, columns: Vec<(&str, ArrayRef)>, row_group: usize) {
        let fields: Vec<Field> = columns
            .iter()
            .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
            .collect();
        let schema = Arc::new(Schema::new(fields));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            columns.into_iter().map(|(_, a)| a).collect(),
        )
        .unwrap();
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(row_group))
            .build();
        let mut writer =
            ArrowWriter::try_new(File::create(path).unwrap(), schema, Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
    }

    fn read_all(path: &Path, batch_rows: usize) -> Vec<Result<(String, String, String)>> {
        let mut out = Vec::new();
        for batch in ParquetReader::open(path, batch_rows, ByteProgress::none()).unwrap() {
            let batch = batch.unwrap();
            for i in 0..batch.len() {
                out.push(
                    batch
                        .row(i)
                        .map(|r| (r.condition.into(), r.instruction.into(), r.response.into())),
                );
            }
        }
        out
    }

    #[test]
    fn reads_all_string_types_in_any_column_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.parquet");
        let n = 10;
        let resp: Vec<String> = (0..n).map(|i| format!("answer {i}")).collect();
        let inst: Vec<String> = (0..n).map(|i| format!("question {i} ü")).collect();
        write(
            &path,
            vec![
                (
                    "response",
                    Arc::new(StringViewArray::from_iter_values(&resp)) as ArrayRef,
                ),
                (
                    "extra",
                    Arc::new(StringArray::from_iter_values(&resp)) as ArrayRef,
                ),
                (
                    "instruction",
                    Arc::new(LargeStringArray::from_iter_values(&inst)) as ArrayRef,
                ),
                (
                    "condition",
                    Arc::new(StringArray::from_iter_values(vec!["cot"; n])) as ArrayRef,
                ),
            ],
            3,
        );
        let rows = read_all(&path, 4);
        assert_eq!(rows.len(), n);
        for (i, row) in rows.into_iter().enumerate() {
            assert_eq!(
                row.unwrap(),
                ("cot".into(), inst[i].clone(), resp[i].clone())
            );
        }
    }

    #[test]
    fn nulls_are_bad_rows_with_their_row_number() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.parquet");
        write(
            &path,
            vec![
                (
                    "condition",
                    Arc::new(StringArray::from(vec![Some("cot"), Some("cot"), Some("")]))
                        as ArrayRef,
                ),
                (
                    "instruction",
                    Arc::new(StringArray::from(vec![Some("a"), Some("b"), Some("c")])) as ArrayRef,
                ),
                (
                    "response",
                    Arc::new(StringArray::from(vec![Some("x"), None, Some("z")])) as ArrayRef,
                ),
            ],
            2,
        );
        let rows = read_all(&path, 2);
        assert!(rows[0].is_ok() && rows[2].is_ok());
        let message = rows[1].as_ref().unwrap_err().to_string();
        assert!(
            message.ends_with(
                ":row 1 (counted from 0): field \"response\" is null; expected a string"
            ),
            "{message}"
        );
    }

    #[test]
    fn wrong_schema_and_corrupt_files_are_file_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.parquet");
        write(
            &missing,
            vec![(
                "condition",
                Arc::new(StringArray::from(vec!["cot"])) as ArrayRef,
            )],
            8,
        );
        let err = ParquetReader::open(&missing, 8, ByteProgress::none())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("missing column \"instruction\""), "{err}");

        let typed = dir.path().join("typed.parquet");
        write(
            &typed,
            vec![
                (
                    "condition",
                    Arc::new(StringArray::from(vec!["cot"])) as ArrayRef,
                ),
                (
                    "instruction",
                    Arc::new(arrow_array::Int64Array::from(vec![1])) as ArrayRef,
                ),
                (
                    "response",
                    Arc::new(StringArray::from(vec!["a"])) as ArrayRef,
                ),
            ],
            8,
        );
        let err = ParquetReader::open(&typed, 8, ByteProgress::none())
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("column \"instruction\" has type Int64"),
            "{err}"
        );

        let truncated = dir.path().join("truncated.parquet");
        let bytes = std::fs::read(&typed).unwrap();
        std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
        let err = ParquetReader::open(&truncated, 8, ByteProgress::none())
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("not a readable Parquet file"), "{err}");

        let empty = dir.path().join("empty.parquet");
        std::fs::write(&empty, b"").unwrap();
        assert!(ParquetReader::open(&empty, 8, ByteProgress::none()).is_err());
    }

    /// `path` with the value count of column `leaf`'s dictionary page header (row group 0)
    /// replaced by `count`. Thrift's compact encoding: the header starts with field 1 (page
    /// type 2, `15 04`), fields 2-4 are varints, then the `DictionaryPageHeader` struct (field
    /// 7: `3c` or `4c`) opens with `num_values` (`15`, a zigzag varint). The longer varint
    /// shifts the rest of the file: the pages after it no longer line up, as in a corrupt file.
    fn with_dictionary_count(path: &Path, leaf: usize, count: i32) {
        let file = SerializedFileReader::new(File::open(path).unwrap()).unwrap();
        let chunk = file.metadata().row_group(0).column(leaf).clone();
        let start = chunk.dictionary_page_offset().expect("a dictionary page") as usize;
        let mut bytes = std::fs::read(path).unwrap();
        assert_eq!(
            &bytes[start..start + 2],
            &[0x15, 0x04],
            "a dictionary page header"
        );
        let varint_end = |mut at: usize| {
            while bytes[at] & 0x80 != 0 {
                at += 1;
            }
            at + 1
        };
        let mut at = start + 2;
        while bytes[at] == 0x15 {
            at = varint_end(at + 1);
        }
        assert!(bytes[at] == 0x3c || bytes[at] == 0x4c, "field 7 at {at}");
        assert_eq!(bytes[at + 1], 0x15, "num_values");
        let (from, to) = (at + 2, varint_end(at + 2));
        let mut zigzag = ((count << 1) ^ (count >> 31)) as u32;
        let mut encoded = Vec::new();
        loop {
            let byte = (zigzag & 0x7f) as u8;
            zigzag >>= 7;
            if zigzag == 0 {
                encoded.push(byte);
                break;
            }
            encoded.push(byte | 0x80);
        }
        bytes.splice(from..to, encoded);
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn a_dictionary_page_announcing_more_values_than_its_bytes_is_refused_before_allocating() {
        // The fuzzer's 16-core run found inputs asking for 9.5 and 30 GB at once: a dictionary
        // page header's value count, believed by Arrow's view decoder (16 bytes a value) and by
        // Parquet's plain dictionary decoder (32 bytes a value). 2^31 - 1 values would be 34
        // and 68 GB: without the checks this test aborts on the failed allocation.
        let dir = tempfile::tempdir().unwrap();
        for view in [false, true] {
            let path = dir.path().join(format!("dict_{view}.parquet"));
            let n = 40;
            let words: Vec<String> = (0..n).map(|i| format!("word {}", i % 3)).collect();
            let response: ArrayRef = if view {
                Arc::new(StringViewArray::from_iter_values(&words))
            } else {
                Arc::new(StringArray::from_iter_values(&words))
            };
            write(
                &path,
                vec![
                    (
                        "condition",
                        Arc::new(StringArray::from_iter_values(vec!["cot"; n])) as ArrayRef,
                    ),
                    (
                        "instruction",
                        Arc::new(StringArray::from_iter_values(&words)) as ArrayRef,
                    ),
                    ("response", response),
                ],
                n,
            );
            assert_eq!(read_all(&path, 8).len(), n, "the sound file reads");
            with_dictionary_count(&path, 2, i32::MAX);
            let reader = ParquetReader::open(&path, 8, ByteProgress::none()).unwrap();
            let results: Vec<_> = reader.collect();
            let err = results
                .last()
                .unwrap()
                .as_ref()
                .err()
                .expect("an error ends it");
            assert!(
                err.to_string().contains("cannot decode rows after row 0")
                    && err
                        .to_string()
                        .contains("corrupt dictionary page: it announces"),
                "view {view}: {err}"
            );
            assert!(
                results.iter().all(|r| r.is_err()),
                "no row of the damaged group"
            );
        }
    }

    #[test]
    fn every_crash_the_fuzzer_found_on_many_cores_is_read_or_refused_without_a_panic() {
        // fuzz/regressions/parquet_reader/device_crash_*: panics of Arrow's and Parquet's
        // decoders (a sum overflowing in an iterator, `bit_chunk_iterator` bounds,
        // `byte_array.rs` offsets) found by 16 cores in 7.5 minutes (docs/fuzzing.md).
        let found = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/regressions/parquet_reader");
        let dir = tempfile::tempdir().unwrap();
        let mut seen = 0;
        for entry in std::fs::read_dir(&found).unwrap() {
            let source = entry.unwrap().path();
            let name = source.file_name().unwrap().to_string_lossy().into_owned();
            // oom_*: a local run's input that asked for 36 GB at once (a dictionary page's
            // value count, before `CheckedPages`).
            if !(name.starts_with("device_crash_") || name.starts_with("oom_")) {
                continue;
            }
            let path = dir.path().join(&name);
            std::fs::copy(&source, &path).unwrap();
            for batch_rows in [1, 3, 64] {
                if let Ok(reader) = ParquetReader::open(&path, batch_rows, ByteProgress::none()) {
                    for result in reader {
                        if result.is_err() {
                            break;
                        }
                    }
                }
            }
            seen += 1;
        }
        assert!(seen >= 7, "{seen} regression files");
    }

    #[test]
    fn corrupt_pages_the_raw_reader_panics_on_are_file_errors() {
        // Inputs found by fuzz/fuzz_targets/parquet_reader.rs: Arrow's reader fails on a page
        // (an error; on the last one it panicked), then the fallback `RawRows` re-reads it with
        // Parquet's plain column readers, which panicked on the first two; now the reading
        // ends with the file's error.
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "dictionary_page_cut_short",
            "dictionary_data_without_dictionary",
            "definition_levels_overrun",
        ] {
            let found = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fuzz/regressions/parquet_reader")
                .join(format!("{name}.parquet"));
            let path = dir.path().join(format!("{name}.parquet"));
            std::fs::copy(&found, &path).unwrap();
            for batch_rows in [2, 4] {
                let reader = ParquetReader::open(&path, batch_rows, ByteProgress::none()).unwrap();
                let results: Vec<_> = reader.collect();
                let err = results
                    .iter()
                    .find_map(|r| r.as_ref().err())
                    .unwrap_or_else(|| panic!("{name}: no error"))
                    .to_string();
                assert!(
                    err.contains("cannot decode rows after row"),
                    "{name}: {err}"
                );
                assert!(
                    results.last().unwrap().is_err(),
                    "{name}: the error ends it"
                );
            }
        }
    }

    #[test]
    fn a_negative_column_chunk_offset_is_a_file_error() {
        // fuzz/regressions/parquet_reader: row group 0's "instruction" chunk has data page
        // offset -23 in the footer; Parquet's reader asserted on it (a panic) when it read the
        // group. Row groups 1 and 2 are sound and still read as a span.
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/regressions/parquet_reader/negative_column_chunk_size.parquet");
        let err = ParquetReader::open(&path, 4, ByteProgress::none())
            .err()
            .expect("a file error")
            .to_string();
        assert!(
            err.contains("corrupt Parquet metadata: column \"instruction\" of row group 0"),
            "{err}"
        );
        let span = ParquetReader::open_row_groups(&path, 1..3, 4, ByteProgress::none()).unwrap();
        assert!(span.count() > 0);
    }

    #[test]
    fn a_negative_row_count_is_a_file_error() {
        // fuzz/regressions/parquet_reader: row group 2 says it holds -2 rows; Arrow's reader
        // sums the counts as usize (an overflow panic with overflow checks, a wrapped count
        // without). Groups 0 and 1 are sound and still read as a span.
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/regressions/parquet_reader/negative_row_group_rows.parquet");
        let err = ParquetReader::open(&path, 4, ByteProgress::none())
            .err()
            .expect("a file error")
            .to_string();
        assert!(
            err.contains("corrupt Parquet metadata: row group 2 has -2 rows"),
            "{err}"
        );
        let span = ParquetReader::open_row_groups(&path, 0..2, 4, ByteProgress::none()).unwrap();
        assert!(span.count() > 0);
    }

    /// A string column holding invalid UTF-8 at row `bad`, as a careless writer produces it.
    fn invalid_utf8_column(n: usize, bad: usize) -> ArrayRef {
        let values: Vec<Vec<u8>> = (0..n)
            .map(|i| match i == bad {
                true => b"caf\xe9".to_vec(),
                false => format!("text {i}").into_bytes(),
            })
            .collect();
        let binary = arrow_array::BinaryArray::from_iter_values(values);
        // SAFETY: deliberately invalid UTF-8 for the test; it is only written to a file, the
        // reader under test never trusts it.
        let data = unsafe {
            binary
                .into_data()
                .into_builder()
                .data_type(DataType::Utf8)
                .build_unchecked()
        };
        Arc::new(StringArray::from(data))
    }

    #[test]
    fn invalid_utf8_is_a_bad_row_with_its_number_and_the_rest_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows.parquet");
        let n = 10;
        write(
            &path,
            vec![
                (
                    "condition",
                    Arc::new(StringArray::from(vec![Some("cot"); n])) as ArrayRef,
                ),
                ("instruction", invalid_utf8_column(n, 6)),
                (
                    "response",
                    Arc::new(StringArray::from(
                        (0..n)
                            .map(|i| (i != 8).then(|| format!("answer {i}")))
                            .collect::<Vec<_>>(),
                    )) as ArrayRef,
                ),
            ],
            4,
        );
        let rows = read_all(&path, 3);
        assert_eq!(rows.len(), n);
        for (i, row) in rows.iter().enumerate() {
            match i {
                6 => {
                    let message = row.as_ref().unwrap_err().to_string();
                    assert!(
                        message.ends_with(
                            ":row 6 (counted from 0): field \"instruction\" is not valid UTF-8 (at byte 3 of \
                             the value); files must be UTF-8 encoded"
                        ),
                        "{message}"
                    );
                }
                8 => {
                    let message = row.as_ref().unwrap_err().to_string();
                    assert!(
                        message.contains(":row 8 (counted from 0): field \"response\" is null"),
                        "{message}"
                    );
                }
                _ => {
                    let (condition, instruction, response) = row.as_ref().unwrap();
                    assert_eq!(condition, "cot");
                    assert_eq!(instruction, &format!("text {i}"));
                    assert_eq!(response, &format!("answer {i}"));
                }
            }
        }
    }
}
