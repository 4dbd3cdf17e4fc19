//! Parquet rows: the three columns are projected and read in record batches; strings are
//! borrowed straight from the Arrow buffers (no copy).

use std::borrow::Cow;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use parquet::arrow::arrow_reader::{ParquetRecordBatchReader, ParquetRecordBatchReaderBuilder};
use parquet::arrow::ProjectionMask;

use super::{RowText, FIELDS};
use crate::error::{Error, Location, Result};

pub struct ParquetReader {
    path: Arc<PathBuf>,
    inner: ParquetRecordBatchReader,
    /// Index of each of FIELDS among the projected columns.
    columns: [usize; 3],
    total_rows: u64,
    rows_done: u64,
    file_size: u64,
    finished: bool,
}

impl ParquetReader {
    pub fn open(path: &Path, batch_rows: usize) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::read(path, e))?;
        let file_size = file.metadata().map_err(|e| Error::read(path, e))?.len();
        let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| {
            Error::bad_file(
                path,
                format!("not a readable Parquet file (empty, truncated or corrupt?): {e}"),
            )
        })?;
        let schema = Arc::clone(builder.schema());
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
        let total_rows = builder.metadata().file_metadata().num_rows().max(0) as u64;
        let mask = ProjectionMask::roots(builder.parquet_schema(), roots.iter().copied());
        let inner = builder
            .with_projection(mask)
            .with_batch_size(batch_rows.max(1))
            .build()
            .map_err(|e| Error::bad_file(path, format!("cannot read Parquet file: {e}")))?;
        // The projection keeps the file's column order; find each field in it.
        let mut sorted = roots.clone();
        sorted.sort_unstable();
        let position = |root: usize| sorted.iter().position(|&r| r == root).unwrap_or(0);
        Ok(ParquetReader {
            path: Arc::new(path.to_path_buf()),
            inner,
            columns: [position(roots[0]), position(roots[1]), position(roots[2])],
            total_rows,
            rows_done: 0,
            file_size,
            finished: false,
        })
    }

    pub fn total_rows(&self) -> u64 {
        self.total_rows
    }

    pub fn bytes_done(&self) -> u64 {
        if self.total_rows == 0 {
            return 0;
        }
        (self.file_size as f64 * self.rows_done as f64 / self.total_rows as f64) as u64
    }
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

impl Iterator for ParquetReader {
    type Item = Result<ParquetBatch>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let result = match self.inner.next()? {
            Ok(batch) => {
                ParquetBatch::new(Arc::clone(&self.path), self.rows_done, &batch, self.columns)
            }
            Err(e) => Err(Error::bad_file(
                &self.path,
                format!(
                    "cannot decode rows after row {} (truncated or corrupt file?): {e}",
                    self.rows_done
                ),
            )),
        };
        match &result {
            Ok(batch) => self.rows_done += batch.len() as u64,
            Err(_) => self.finished = true,
        }
        Some(result)
    }
}

/// The three string columns of one record batch.
pub struct ParquetBatch {
    path: Arc<PathBuf>,
    first_row: u64,
    columns: [ArrayRef; 3],
}

impl ParquetBatch {
    fn new(
        path: Arc<PathBuf>,
        first_row: u64,
        batch: &RecordBatch,
        positions: [usize; 3],
    ) -> Result<Self> {
        let column = |k: usize| -> Result<ArrayRef> {
            let array = batch.column(positions[k]);
            match array.data_type() {
                // Dictionary-encoded strings are decoded once per batch into plain strings.
                DataType::Dictionary(_, _) => arrow_cast::cast(array, &DataType::LargeUtf8)
                    .map_err(|e| Error::bad_file(&path, format!("column \"{}\": {e}", FIELDS[k]))),
                _ => Ok(Arc::clone(array)),
            }
        };
        let columns = [column(0)?, column(1)?, column(2)?];
        Ok(ParquetBatch {
            path,
            first_row,
            columns,
        })
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
            string_at(&self.columns[k], i)
                .map(Cow::Borrowed)
                .ok_or_else(|| {
                    Error::bad_row(
                        &self.path,
                        self.location(i),
                        format!("field \"{}\" is null; expected a string", FIELDS[k]),
                    )
                })
        };
        Ok(RowText {
            condition: field(0)?,
            instruction: field(1)?,
            response: field(2)?,
        })
    }
}

/// The string at `i`, or None for null. The column types were checked when the file was opened.
fn string_at(array: &ArrayRef, i: usize) -> Option<&str> {
    if array.is_null(i) {
        return None;
    }
    match array.data_type() {
        DataType::Utf8 => Some(array.as_string::<i32>().value(i)),
        DataType::LargeUtf8 => Some(array.as_string::<i64>().value(i)),
        DataType::Utf8View => Some(array.as_string_view().value(i)),
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
        for batch in ParquetReader::open(path, batch_rows).unwrap() {
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
            message.ends_with(":row 1: field \"response\" is null; expected a string"),
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
        let err = ParquetReader::open(&missing, 8).err().unwrap().to_string();
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
        let err = ParquetReader::open(&typed, 8).err().unwrap().to_string();
        assert!(
            err.contains("column \"instruction\" has type Int64"),
            "{err}"
        );

        let truncated = dir.path().join("truncated.parquet");
        let bytes = std::fs::read(&typed).unwrap();
        std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
        let err = ParquetReader::open(&truncated, 8)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("not a readable Parquet file"), "{err}");

        let empty = dir.path().join("empty.parquet");
        std::fs::write(&empty, b"").unwrap();
        assert!(ParquetReader::open(&empty, 8).is_err());
    }
}
