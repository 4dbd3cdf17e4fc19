//! Encoding rows into a folder of arrays, shared by a run (`mod.rs`, a whole file) and the
//! scale-out units (`parts.rs`, a span of one): the run's `Context`, `encode_span` and its
//! three-stage pipeline (read, encode in parallel, write in order).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

use super::options::{DtypeChoice, TokenizeOptions};
use crate::encoder::{Encoder, TextEncoder};
use crate::error::{Error, ErrorKind, Result};
use crate::layout::cache::{self, Fingerprint};
use crate::layout::task_writer::{TaskWriter, TokenDtype};
use crate::layout::{encode_row, EncodedRow, Specials};
use crate::reader::{Batch, OnError, RowReader};

/// Everything the per-file work shares.
pub(super) struct Context<'a> {
    pub(super) options: &'a TokenizeOptions,
    pub(super) encoder: Arc<Encoder>,
    pub(super) specials: Specials,
    pub(super) dtype: TokenDtype,
    pub(super) fingerprint: Fingerprint,
    pub(super) options_json: serde_json::Value,
}

impl<'a> Context<'a> {
    /// The encoder, the layout's ids, the dtype and the fingerprint for `options` (whose paths
    /// are already absolute).
    pub(super) fn new(options: &'a TokenizeOptions) -> Result<Self> {
        // The tokenizer file is read once: for the encoder and for the fingerprint.
        let (encoder, tokenizer_blake3) = Encoder::shared_hashed(&options.tokenizer_path)?;
        let specials = Specials::resolve(&*encoder, &options.layout)?;
        let dtype = match options.token_dtype {
            DtypeChoice::Uint32 => TokenDtype::Uint32,
            DtypeChoice::Auto => TokenDtype::smallest_for(encoder.vocab_size()),
        };
        let options_json = serde_json::json!({
            "format_version": cache::FORMAT_VERSION,
            "layout": options.layout,
            "token_dtype": dtype,
        });
        Ok(Context {
            options,
            specials,
            dtype,
            fingerprint: Fingerprint {
                tokenizer_blake3,
                options_blake3: cache::bytes_blake3(options_json.to_string().as_bytes()),
                fail_on_bad_rows: options.on_error == OnError::Fail,
            },
            options_json,
            encoder,
        })
    }
}

/// The tokenizer file's absolute path, links resolved (what records and fingerprints name).
pub(super) fn canonical_tokenizer(path: &Path) -> Result<PathBuf> {
    fs::canonicalize(path)
        .map_err(|e| Error::Tokenizer(format!("cannot open tokenizer {}: {e}", path.display())))
}

/// What encoding a file, or a span of it, into a folder of arrays gave.
pub(super) struct Encoded {
    pub rows: u64,
    pub tokens: u64,
    /// Lines (JSONL, blank ones included) or rows (Parquet) read.
    pub lines: u64,
    pub bad_rows: u64,
    /// The first bad rows skipped (at most `BAD_ROW_EXAMPLES`), in file order.
    pub bad_row_examples: Vec<Error>,
    /// The source's BLAKE3, when the reader took it as it read the whole file.
    pub source_blake3: Option<String>,
}

/// Bad rows a task's record keeps as examples.
pub(super) const BAD_ROW_EXAMPLES: usize = 10;

/// Encode the rows `reader` yields into the arrays of the (existing, empty) folder `dir`.
pub(super) fn encode_span(
    ctx: &Context<'_>,
    source: &Path,
    mut reader: RowReader,
    dir: &Path,
) -> Result<Encoded> {
    let mut sink = RowSink {
        writer: TaskWriter::create(dir, ctx.dtype)?,
        on_error: ctx.options.on_error,
        bad_rows: 0,
        bad_row_examples: Vec::new(),
    };
    // A three-stage pipeline: while the rows of batch k are encoded in parallel, this thread
    // writes batch k-1 (in source order) and reads batch k+1. Reading and writing are serial
    // work; run between the batches they would leave cores idle (Amdahl's law).
    let mut next = reader.next();
    let mut pending: Option<Vec<Result<EncodedRow>>> = None;
    loop {
        let batch = match next.take() {
            None => break,
            Some(Ok(batch)) => batch,
            Some(Err(error)) => {
                // Bad rows of the batch before come first in the file: report them first.
                if let Some(rows) = pending.take() {
                    sink.write(rows)?;
                }
                return Err(error);
            }
        };
        let mut encoded = Vec::new();
        // The encoding is spawned into the pool (other threads pick it up at once); this
        // thread writes and reads meanwhile (the writer is not `Send`), then joins the
        // encoding until the scope ends.
        let (written, following) = rayon::in_place_scope(|scope| {
            scope.spawn(|_| encoded = encode_batch(ctx, source, &batch));
            let written = pending.take().map_or(Ok(()), |rows| sink.write(rows));
            (written, reader.next())
        });
        written?;
        pending = Some(encoded);
        next = following;
    }
    if let Some(rows) = pending.take() {
        sink.write(rows)?;
    }
    let RowSink {
        writer,
        bad_rows,
        bad_row_examples,
        ..
    } = sink;
    let (rows, tokens) = (writer.rows(), writer.tokens());
    writer.finish()?;
    Ok(Encoded {
        rows,
        tokens,
        lines: reader.lines_read(),
        bad_rows,
        bad_row_examples,
        source_blake3: reader.source_blake3(),
    })
}

/// Encode the rows of one batch in parallel (results in source order).
fn encode_batch(ctx: &Context<'_>, source: &Path, batch: &Batch) -> Vec<Result<EncodedRow>> {
    (0..batch.len())
        .into_par_iter()
        .map(|i| {
            let row = batch.row(i)?;
            encode_row(
                &*ctx.encoder,
                &ctx.specials,
                &row.condition,
                &row.instruction,
                &row.response,
            )
            .map_err(|message| Error::bad_row(source, batch.location(i), message))
        })
        .collect()
}

/// Where encoded rows go: the task's writer, or (under `--on-error skip`) the bad-row count.
struct RowSink {
    writer: TaskWriter,
    on_error: OnError,
    bad_rows: u64,
    bad_row_examples: Vec<Error>,
}

impl RowSink {
    fn write(&mut self, rows: Vec<Result<EncodedRow>>) -> Result<()> {
        for row in rows {
            match row {
                Ok(row) => self.writer.push(&row)?,
                Err(e) if self.on_error == OnError::Skip && e.kind() == ErrorKind::Input => {
                    self.bad_rows += 1;
                    if self.bad_row_examples.len() < BAD_ROW_EXAMPLES {
                        self.bad_row_examples.push(e);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}
