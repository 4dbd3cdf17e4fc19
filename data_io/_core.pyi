"""Type stubs of the private Rust extension. Use the typed facade instead:
``data_io.tokenize.tokenize``, ``data_io.tokenizer.train.train_tokenizer`` and
``data_io.sampling`` (whose ``rng``, ``algorithm`` and ``pool`` modules wrap the rest) and
``data_io.tokenizer.encoder.TextEncoder`` (``Encoder``)."""

from collections.abc import Callable, Sequence
from os import PathLike

import numpy as np
from numpy.typing import NDArray

DEFAULT_SPECIAL_TOKENS: list[str]
SPLIT_REGEX: str

def tokenize(options: str) -> str:
    """Tokenize every .jsonl (.jsonl.gz, .jsonl.zst; any case) and .parquet file under the
    inputs of ``options`` (JSON of ``data_io.tokenize.tokenize_options``); returns the run
    report as JSON."""

def tokenize_task_files(inputs: list[str]) -> list[tuple[str, str]]:
    """The tasks ``data_io tokenize`` makes of ``inputs``, as its walk finds them:
    ``(task, source path)``; raises when an input is missing or holds no row file."""

def tokenize_stale(options: str) -> str:
    """The files a run with ``options`` would (re-)tokenize, largest first, as a JSON list of
    ``{task, source, size, reason}``; writes nothing."""

def tokenize_unit(options: str, unit: str, window: bytes | None = None) -> str:
    """Encode one span of a file (``unit``: JSON ``{task, source, span, index, count,
    part_dir}``, ``span`` one of ``{"kind": "whole"}``, ``{"kind": "bytes", "start", "end"}``,
    ``{"kind": "parts", "start", "end"}``, ``{"kind": "text", "start", "end", "total",
    "point"?}`` (a gzip stream's text from an entry point's numbers, ``window`` its window),
    ``{"kind": "row_groups", "start", "end"}``) into its part folder; returns its report as
    JSON (``part``, ``reused``, ``seconds``)."""

def train_tokenizer(options: str, *, trainer: str = "rust") -> str:
    """Train a tokenizer with ``trainer`` (``"rust"`` or ``"hf"``) on the inputs of ``options``
    (JSON of ``data_io.tokenizer.train.core_options``) and write it (and config.json,
    tokenizer_config.json beside it); returns the report as JSON."""

def train_tasks(options: str) -> str:
    """The input files of a training run, as a JSON list of ``{task, source, size}``; reads
    nothing."""

def train_count_unit(options: str, task: str, source: str, part: str) -> str:
    """Count the texts of one input file into the folder ``part`` (a scale-out unit); returns
    the counts' record as JSON (``key``, ``report``, ``words``, ``pieces``, ``text_bytes``)."""

class Philox:
    """numpy's Philox state (the fields of ``Philox.state``), advanced by ``shuffle``.
    Use ``data_io.sampling.rng.PhiloxShuffler``."""

    def __init__(
        self,
        state: tuple[Sequence[int], Sequence[int], Sequence[int], int, bool, int],
    ) -> None: ...
    def state(
        self,
    ) -> tuple[list[int], list[int], list[int], int, bool, int]:
        """counter, key, buffer, buffer_pos, has_uint32, uinteger."""
    def shuffle(self, array: NDArray[np.int64]) -> None:
        """Shuffle a contiguous 1-D int64 array in place, as ``Generator.shuffle`` would."""

def gather_epoch(
    table: NDArray[np.int64],
    row_ids: NDArray[np.int64],
    inst_start: NDArray[np.int64],
    inst_len: NDArray[np.int64],
    resp_start: NDArray[np.int64],
    resp_len: NDArray[np.int64],
) -> None:
    """Fill the four columns with the rows ``row_ids`` of the ``(rows, 4)`` table."""

def copy_token_pool(
    path: str,
    header_len: int,
    token_dtype: str,
    sources: Sequence[tuple[str, str, str, int, int, int]],
    *,
    readers: int,
    progress: Callable[[int], bool],
    vocab_size: int | None = None,
) -> None:
    """Copy (task, path, dtype, data_offset, length, pool_offset) sources into the pool file;
    ``progress(tokens)`` returning False cancels; ids must be below ``vocab_size`` if given."""

def hash_texts(texts: Sequence[str]) -> NDArray[np.uint64]:
    """Each text's ``hashlib.blake2b(text.encode(), digest_size=16)`` as ``(n, 2)`` uint64, the
    digest's halves read big-endian; on the encoder's threads."""

class RawDocuments:
    """``prepare``'s documents read and not yet prepared (``rust/prepare/split.rs``): pieces of
    raw text go in, batches of finished documents come out (``take``)."""

    def __init__(self, reserve: int = 0) -> None:
        """``reserve``: bytes each batch's buffer starts with room for."""
    def begin_source(self, name: str, format: str, compressed: bool, first_line: int = 1) -> None:
        """Start a source; ``format``: "blocks", "lines", "jsonl" or "texts"; ``first_line``:
        the number of the first line fed (where a byte range of the file starts)."""
    def open_file(
        self,
        path: str,
        start: int = 0,
        end: int | None = None,
        compression: str | None = None,
        parts: bool = False,
        lanes: int | None = None,
        point: GzipPoint | None = None,
    ) -> None:
        """Read the source from the file ``path`` (bytes ``start..end`` of its text) with
        ``read_file``; ``compression``: None, "gz", "zst", "bz2" or "xz". In a compressed file
        ``start`` and ``end`` are targets: the range runs between the cuts for them
        (``rust/prepare/cuts.rs``), its first line numbered as found. ``parts``: ``start`` and
        ``end`` are file offsets from ``compressed_parts``, the range running between the
        first document boundaries in those parts' texts. A compressed file of several parts is
        decompressed by ``lanes`` threads (None: as many as the encoder's pool, when one decoding
        thread would hold them back: ``rust/reader/frames``'s ``lanes_for``). ``point``: a gzip
        entry point (``gzip_entry_points``) to start decompressing at, ``start`` and ``end``
        being targets past its text offset."""
    def read_file(self, limit: int) -> int:
        """Read about ``limit`` more bytes of the file's text and cut its whole lines into
        documents, without the GIL; the bytes of text read (0: the file is done)."""
    @property
    def file_bytes_read(self) -> int:
        """Bytes of the open (or last) file read so far, before decompression."""
    def feed_utf8(
        self, data: NDArray[np.uint8], offsets: NDArray[np.int64], first_row: int
    ) -> None:
        """Documents given whole as a string array's UTF-8 bytes and ``len + 1`` offsets (a
        "texts" source), read in place and checked; on an error nothing is fed."""
    def feed_texts(self, texts: Sequence[str], first_row: int) -> None:
        """Documents given whole (a "texts" source)."""
    def end_source(self) -> int:
        """End the source; its number of documents."""
    @property
    def ready_bytes(self) -> int:
        """Bytes of the finished documents, which ``take`` hands over."""
    def take(self) -> RawDocuments:
        """The finished documents, as a batch for ``prepare_batch``."""
    def __len__(self) -> int: ...

def compressed_parts(path: str, compression: str | None) -> list[int]:
    """The file offsets at which ``path`` can be entered: the starts of its parts that decode on
    their own (zstd frames, BGZF members, xz blocks, bzip2 blocks; ``rust/reader/frames``), the
    first 0; ``[0]`` for a file of one part. Reads headers and indexes (and searches a bzip2
    file for its blocks' magics), decompresses nothing."""

# bit, text offset, newlines before, its member's text start, that member's CRC-32 before it,
# the 32 KiB window (``rust/reader/frames/gzip_points``).
GzipPoint = tuple[int, int, int, int, int, bytes]

def gzip_entry_points(path: str, every: int) -> tuple[list[GzipPoint], int, int]:
    """The entry points of the gzip file ``path``, about ``every`` compressed bytes apart (where a
    deflate block starts: a reader can start there with the point's window), and the length
    and newlines of its whole text. Decompresses the whole file once, without the GIL; a
    file that does not decompress raises ``InputError`` naming the byte."""

def gzip_entry_points_of(
    requests: list[tuple[str | PathLike[str], int]],
) -> list[tuple[list[GzipPoint], int, int]]:
    """``gzip_entry_points`` of each ``(path, every)``, in order, the files' passes run together
    (one file a thread, as many threads as cores); the first failing file's error (in that
    order) is raised; Ctrl-C stops every pass."""

def text_length_estimate(path: str, compression: str | None, sample: int) -> int:
    """An estimate of the length of the text of ``path`` (stored with ``compression``) from its
    first ``sample`` bytes of text; the length itself when it is no longer."""

def prepare_batch(
    documents: RawDocuments,
    *,
    text_field: str,
    fail_invalid: bool,
    normalize: bool,
    filter: bool,
    min_line_chars: int,
    min_doc_chars: int,
    resolve: Callable[[str, int, int], str],
    encoder: Encoder | None = None,
    eos_id: int | None = None,
    near: tuple[int, int, int, int] | None = None,
    lines: bool = False,
    seen: SeenHashes | None = None,
    keep_empty: bool = False,
    split: tuple[int, float] | None = None,
) -> tuple[
    tuple[NDArray[np.uint32], NDArray[np.int64]] | None,
    list[str] | None,
    NDArray[np.uint64],
    dict[str, int],
    NDArray[np.uint64] | None,
    tuple[NDArray[np.uint8], NDArray[np.int64], NDArray[np.uint64], NDArray[np.int64]] | None,
]:
    """Read, clean and hash every document of the batch (taken: ``documents`` is left empty)
    on the encoder's threads, then encode the kept ones with ``encoder`` when given:
    ``(ids, offsets)`` or, without an encoder, the kept texts; their ``(n, 2)`` hashes; the
    counts (``documents``, ``text_chars``, ``invalid_utf8_lines``, and the cleaning's:
    ``unicode_normalized``, ``whitespace_cleaned``, ``short_lines_dropped``, ``too_short``,
    ``empty``).
    ``resolve(line, source, number)`` reads a JSONL row only Python reads, or raises.
    ``near``: (n-gram, bands, rows, seed) of ``--dedup near``; the kept documents' bands come
    fifth, as ``(n, bands, 2)`` (band hash, band number; None when ``seen`` decided them).
    ``lines`` (``--dedup line``): nothing is encoded; the kept documents come sixth as (UTF-8
    text back to back, byte offsets, ``(lines, 2)`` hashes of their lines that are not blank,
    lines per document). ``seen``:
    duplicates dropped before encoding (with ``near``, a document sharing a band with an
    earlier one), counted as ``duplicates``; ``dedup_overflow`` is 1, and nothing recorded or
    encoded, when the batch would not fit the set's budget. ``keep_empty``: a document that is
    empty or only whitespace is kept (the reading alone, with ``normalize`` and ``filter``
    off). ``split``: (seed as 64 bits, val fraction) of ``prepare/split.py``'s train/val split:
    with an encoder, the train documents are encoded first, then the val ones (each in order,
    the hashes still in read order), and ``val_documents`` counts the val ones."""

def keep_lines(
    text: NDArray[np.uint8],
    offsets: NDArray[np.int64],
    line_counts: NDArray[np.int64],
    keep: NDArray[np.bool_],
    *,
    encoder: Encoder | None = None,
    eos_id: int | None = None,
) -> tuple[
    NDArray[np.bool_],
    tuple[NDArray[np.uint32], NDArray[np.int64]] | None,
    list[str] | None,
]:
    """``--dedup line``'s second step (``rust/prepare/lines.rs``): the documents of
    ``prepare_batch(lines=True)``'s arrays rebuilt from the verdicts ``keep`` (one per line
    that is not blank, in order). Which documents are left (those with a kept line), and their
    ``(ids, offsets)`` encoded with ``encoder`` or, without one, their texts."""

class SeenHashes:
    """Exact de-duplication decided as documents arrive (``rust/prepare/seen.rs``): every
    128-bit hash seen, within ``budget`` bytes. With ``bands``: near-dedup's (band hash, band
    number) records of that many bands, each band's hashes held alone (half the memory)."""

    def __init__(self, budget: int, bands: int | None = None) -> None: ...
    def first_seen(self, hashes: NDArray[np.uint64]) -> NDArray[np.bool_] | None:
        """Record the ``(n, 2)`` hashes in order: True for each one not seen before; None, and
        nothing recorded, when they would not fit the budget (or, with ``bands``, one names a
        band number of ``bands`` or more)."""
    def expect(self, total: int) -> bool:
        """Make room at once for ``total`` hashes in all, when the budget allows (else
        nothing): one table instead of a dozen doublings on a large corpus. Whether ``total``
        fits the budget."""
    def sorted(self) -> NDArray[np.uint64]:
        """Every hash, sorted, as ``(n, 2)`` uint64 (the kept-hashes file's content)."""
    def write_sorted(self, path: str | PathLike[str]) -> None:
        """``sorted()`` written to ``path`` (as its ``tofile``), without the array."""
    @property
    def bytes(self) -> int:
        """Bytes the table holds."""
    def __len__(self) -> int: ...

def sort_records(records: NDArray[np.uint64]) -> None:
    """Sort a C-contiguous ``(n, 3)`` uint64 array of de-duplication records (hash high, hash
    low, document number) in place by all three columns, on the encoder's threads."""

def leave_node_tables() -> None:
    """Let go of this process's node piece-table files (``Encoder(..., tables="node")``),
    removing each one no other process holds; encoders keep working. For a process's exit."""

class Encoder:
    """A tokenizers JSON file; special-token strings in a text encode as plain text.
    Use ``data_io.tokenizer.encoder.TextEncoder``."""

    def __init__(self, tokenizer_path: str | PathLike[str], tables: str = "") -> None:
        """``tables``: where the fast encoder keeps its piece tables, ``"process"`` or
        ``"node"`` (one copy in ``/dev/shm`` for every process on the node); ``""`` reads
        ``DATA_IO_ENCODER_TABLES``."""
    @property
    def vocab_size(self) -> int:
        """Vocabulary size including added tokens."""
    @property
    def tables(self) -> str | None:
        """Where the piece tables are: ``"process"``, ``"node (<file>)"`` or
        ``"process (node tables unavailable: <why>)"``; None for the other engines."""
    @property
    def load_cache(self) -> str | None:
        """What the load cache did (``DATA_IO_ENCODER_CACHE``): ``"read <file>"``,
        ``"written <file>"``, ``"not kept (<file>: <why>)"`` or ``"off"``; None for the other
        engines."""
    @property
    def engine(self) -> str:
        """The engine that encodes: ``"fast-bpe"`` or ``"hf-tokenizers"`` (``"null"`` under
        ``DATA_IO_ENCODER=null``, which emits placeholder ids to measure the pipeline's floor)."""
    @property
    def fallback_reason(self) -> str | None:
        """Why the HF encoder runs instead of the fast one, or None when the fast one runs."""
    def token_id(self, token: str) -> int | None:
        """The id of ``token``, or None when the vocabulary lacks it."""
    def encode_utf8(
        self, data: NDArray[np.uint8], offsets: NDArray[np.int64], eos_id: int | None = None
    ) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
        """``encode_batch`` of texts laid out as an Arrow string array: text ``i`` is
        ``data[offsets[i]:offsets[i + 1]]``, read in place, checked once as UTF-8."""
    def encode_spans(
        self,
        data: NDArray[np.uint8],
        starts: NDArray[np.int64],
        ends: NDArray[np.int64],
        eos_id: int | None = None,
    ) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
        """``encode_batch`` of ``data[starts[i]:ends[i]]``, documents cut out of one UTF-8
        buffer, read in place, checked once."""
    def encode_bytes(
        self, texts: Sequence[bytes], eos_id: int | None = None
    ) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
        """``encode_batch`` of UTF-8 ``bytes`` objects, each read in place and checked."""
    def encode_batch(
        self, texts: Sequence[str], eos_id: int | None = None
    ) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
        """All texts' ids back to back (``eos_id`` after each when given) and the
        ``len(texts) + 1`` offsets where each text starts; encodes in parallel without the GIL."""
