//! Encoding rows into a folder of arrays, shared by a run (`mod.rs`, a whole file) and the
//! scale-out units (`parts.rs`, a span of one): the run's `Context`, `encode_span` and its
//! three-stage pipeline (read, encode in parallel, write in order).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use super::options::{DtypeChoice, TokenizeOptions};
use crate::encoder::{Encoder, TextEncoder};
use crate::error::{Error, ErrorKind, Result};
use crate::layout::cache::{self, Fingerprint};
use crate::layout::task_writer::{TaskWriter, TokenDtype};
use crate::layout::{encode_rows, RowFields, RowLens, Specials};
use crate::reader::{Batch, OnError, RowReader, RowText};

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
                token_dtype: dtype.name(),
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
        good: Vec::new(),
    };
    // A three-stage pipeline: while the rows of batch k are encoded in parallel, this thread
    // writes batch k-1 (in source order) and reads batch k+1. Reading and writing are serial
    // work; run between the batches they would leave cores idle (Amdahl's law).
    let mut next = reader.next();
    let mut pending: Option<Vec<EncodedRun>> = None;
    // The runs' token buffers, handed back once written: a fresh buffer grew by copying.
    let spares = Spares::default();
    loop {
        crate::interrupt::check()?; // between batches: Ctrl-C stops a file of any size
        let batch = match next.take() {
            None => break,
            Some(Ok(batch)) => batch,
            Some(Err(error)) => {
                // Bad rows of the batch before come first in the file: report them first.
                if let Some(rows) = pending.take() {
                    sink.write(rows, &spares)?;
                }
                return Err(error);
            }
        };
        let mut encoded = Vec::new();
        // The encoding is spawned into the pool (other threads pick it up at once); this
        // thread writes and reads meanwhile (the writer is not `Send`), then joins the
        // encoding until the scope ends.
        let (written, following) = rayon::in_place_scope(|scope| {
            scope.spawn(|_| encoded = encode_batch(ctx, source, &batch, &spares));
            let written = pending
                .take()
                .map_or(Ok(()), |rows| sink.write(rows, &spares));
            (written, reader.next())
        });
        written?;
        pending = Some(encoded);
        next = following;
    }
    if let Some(rows) = pending.take() {
        sink.write(rows, &spares)?;
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

/// A run of consecutive rows of a batch, encoded: their tokens back to back in one buffer,
/// and each row's lengths or why it is bad (whose tokens are not in the buffer).
struct EncodedRun {
    tokens: Vec<u32>,
    rows: Vec<Result<RowLens>>,
}

/// Runs a batch is encoded in, per thread: enough for the threads to balance uneven rows.
const RUNS_PER_THREAD: usize = 4;
/// Rows a run holds at least.
const MIN_RUN_ROWS: usize = 64;

/// Encode the rows of one batch in parallel, a run of rows per task into the run's one
/// buffer (results in source order). A buffer per row cost an allocation and a copy of
/// every token on the way to the file.
fn encode_batch(
    ctx: &Context<'_>,
    source: &Path,
    batch: &Batch,
    spares: &Spares,
) -> Vec<EncodedRun> {
    let rows = batch.len();
    let runs = rows
        .div_ceil(MIN_RUN_ROWS)
        .min(rayon::current_num_threads() * RUNS_PER_THREAD);
    let per_run = rows.div_ceil(runs.max(1)).max(1);
    (0..rows.div_ceil(per_run))
        .into_par_iter()
        .map(|k| {
            let range = k * per_run..rows.min((k + 1) * per_run);
            let mut run = EncodedRun {
                tokens: spares.take(),
                rows: Vec::with_capacity(range.len()),
            };
            // The run's rows read first, then encoded as one stream of texts (`encode_rows`).
            let read: Vec<Result<RowText<'_>>> = range.clone().map(|i| batch.row(i)).collect();
            let fields: Vec<RowFields<'_>> = read
                .iter()
                .flatten()
                .map(|row| RowFields {
                    condition: &row.condition,
                    instruction: &row.instruction,
                    response: &row.response,
                })
                .collect();
            let mut encoded =
                encode_rows(&*ctx.encoder, &ctx.specials, &fields, &mut run.tokens).into_iter();
            for (i, row) in range.zip(read) {
                let lens = row.and_then(|_| {
                    let lens = encoded.next().expect("one result per row read");
                    lens.map_err(|message| Error::bad_row(source, batch.location(i), message))
                });
                run.rows.push(lens);
            }
            run
        })
        .collect()
}

/// Where encoded rows go: the task's writer, or (under `--on-error skip`) the bad-row count.
struct RowSink {
    writer: TaskWriter,
    on_error: OnError,
    bad_rows: u64,
    bad_row_examples: Vec<Error>,
    /// The lengths of a run's good rows, handed to the writer together.
    good: Vec<RowLens>,
}

impl RowSink {
    fn write(&mut self, runs: Vec<EncodedRun>, spares: &Spares) -> Result<()> {
        for run in runs {
            self.good.clear();
            for row in run.rows {
                match row {
                    Ok(lens) => self.good.push(lens),
                    Err(e) if self.on_error == OnError::Skip && e.kind() == ErrorKind::Input => {
                        self.bad_rows += 1;
                        if self.bad_row_examples.len() < BAD_ROW_EXAMPLES {
                            self.bad_row_examples.push(e);
                        }
                    }
                    // The task fails: what its folder holds is thrown away.
                    Err(e) => return Err(e),
                }
            }
            self.writer.push_rows(&run.tokens, &self.good)?;
            spares.give(run.tokens);
        }
        Ok(())
    }
}

/// Token buffers of runs already written, for the runs to come.
#[derive(Default)]
struct Spares(Mutex<Vec<Vec<u32>>>);

impl Spares {
    /// An empty buffer: a spare one (with the room a run took before), or a new one.
    fn take(&self) -> Vec<u32> {
        let spare = self.0.lock().ok().and_then(|mut spares| spares.pop());
        spare.unwrap_or_default()
    }

    fn give(&self, mut tokens: Vec<u32>) {
        tokens.clear();
        if let Ok(mut spares) = self.0.lock() {
            // Two batches' runs are in flight at once (one encoded, one written).
            if spares.len() < 2 * RUNS_PER_THREAD * rayon::current_num_threads() {
                spares.push(tokens);
            }
        }
    }
}
