"""``TextEncoder``: the Rust encoder (``data_io._core.Encoder``) behind a typed facade.

Encodes batches of texts in parallel, without the GIL, into one flat uint32 array with offsets:
what the HF text datasets of the load stage need to turn rows into a token stream. As in the
tokenize stage, special-token strings inside a text are encoded as plain text, so data can
never inject a control token; the only EOS in the stream is the one appended after each text.

The encoder pickles as its tokenizer path and reloads the file on first use in the receiving
process (a DataLoader worker), so datasets holding one stay cheap to send to workers. A forked
worker loads it again too, so that its piece tables are where that process wants them: in a
DataLoader worker, by default, one copy in ``/dev/shm`` for all the node's workers
(``tables="node"``) instead of one per worker.
"""

from __future__ import annotations

import json
import multiprocessing.util
import os
import sys
from collections.abc import Mapping, Sequence, Set
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from data_io import _core
from data_io.errors import ConfigError, InputError
from data_io.tokenizer.files import resolve_tokenizer
from data_io.util.arrow_strings import is_text_type, string_layout

__all__ = ["EncodedBatch", "TextEncoder"]

# Tried when the tokenizer declares no eos_token (tokenizer_config.json beside it).
_FALLBACK_EOS = "<|endoftext|>"


_TABLE_CHOICES = ("auto", "process", "node")


def _resolve_tables(choice: str) -> str:
    """``"auto"``: ``"node"`` in a DataLoader worker (several processes encode with the same
    tokenizer), else what ``DATA_IO_ENCODER_TABLES`` says (``""``)."""
    if choice != "auto":
        return choice
    torch_data = sys.modules.get("torch.utils.data")
    in_worker = torch_data is not None and torch_data.get_worker_info() is not None
    return "node" if in_worker else ""


_leaving_registered_in = 0


def _leave_node_tables_at_exit() -> None:
    """Once per process: let go of the node's table files at its end, so that the last process
    removes them from ``/dev/shm``. multiprocessing's exit hooks run in its children (DataLoader
    workers end with ``os._exit``, past ``atexit``) and, through ``atexit``, in a main process."""
    global _leaving_registered_in
    if _leaving_registered_in != os.getpid():
        _leaving_registered_in = os.getpid()
        multiprocessing.util.Finalize(None, _core.leave_node_tables, exitpriority=0)


class EncodedBatch(NamedTuple):
    """Ids of a batch of texts back to back; text ``i`` is ``ids[offsets[i]:offsets[i + 1]]``."""

    ids: NDArray[np.uint32]
    offsets: NDArray[np.int64]


class TextEncoder:
    """A tokenizers JSON file, ready to encode batches of text."""

    def __init__(self, tokenizer_path: str | Path, tables: str = "auto") -> None:
        """``tables``: where the fast encoder keeps its piece tables (about 150 MiB for a
        150k vocabulary): ``"process"`` (each process its own, on huge pages where the kernel
        gives them: the fastest), ``"node"`` (one copy in ``/dev/shm`` that every process on
        the node using this tokenizer maps, and the pieces any of them merged), or ``"auto"``:
        ``"node"`` in a DataLoader worker, else ``DATA_IO_ENCODER_TABLES`` or ``"process"``."""
        if tables not in _TABLE_CHOICES:
            raise ConfigError(
                f"tables={tables!r} is not a place for the encoder's tables; use one of "
                + ", ".join(repr(choice) for choice in _TABLE_CHOICES)
            )
        # A file, a folder holding tokenizer.json, or a Hub id (see resolve_tokenizer).
        self.path = resolve_tokenizer(tokenizer_path)
        self._tables = tables
        self._core: _core.Encoder | None = None
        self._loaded_in = 0
        self._encoder  # noqa: B018 - load now: a bad file fails here, not at the first batch

    @classmethod
    def from_file(cls, tokenizer_path: str | Path) -> TextEncoder:
        return cls(tokenizer_path)

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "tables": self._tables}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.path = state["path"]
        self._tables = state.get("tables", "auto")
        self._core = None  # loaded on first use in this process
        self._loaded_in = 0

    @property
    def _encoder(self) -> _core.Encoder:
        # Loaded again in a forked child: its tables go where a worker's should.
        if self._core is None or self._loaded_in != os.getpid():
            self._core = _core.Encoder(str(self.path), _resolve_tables(self._tables))
            self._loaded_in = os.getpid()
            if (self._core.tables or "").startswith("node"):
                _leave_node_tables_at_exit()
        return self._core

    @property
    def core(self) -> _core.Encoder:
        """The Rust encoder itself (loaded in this process), for other Rust calls that encode:
        ``prepare``'s batches (``_core.prepare_batch``)."""
        return self._encoder

    @property
    def tables(self) -> str | None:
        """Where the piece tables are: ``"process"``, ``"node (<file>)"``, or ``"process
        (node tables unavailable: <why>)"``; None when the HF encoder runs."""
        return self._encoder.tables

    @property
    def load_cache(self) -> str | None:
        """What the load cache did for this process's encoder (``DATA_IO_ENCODER_CACHE``):
        ``"read <file>"``, ``"written <file>"``, ``"not kept (<file>: <why>)"`` or ``"off"``;
        None when the HF encoder runs."""
        return self._encoder.load_cache

    @property
    def vocab_size(self) -> int:
        """Vocabulary size including added tokens; every id is below it."""
        return self._encoder.vocab_size

    def token_id(self, token: str) -> int | None:
        """The id of ``token`` (e.g. ``"<|endoftext|>"``), or None when the vocabulary lacks it."""
        return self._encoder.token_id(token)

    def eos_id_for(self, name_or_id: str | int | None) -> int:
        """The EOS id named by a token string or an id; None picks the tokenizer's own EOS.

        The tokenizer's own EOS is the ``eos_token`` of ``tokenizer_config.json`` beside the
        tokenizer file (what ``transformers`` calls ``eos_token_id``), else ``<|endoftext|>``.
        """
        if name_or_id is None:
            return self._default_eos_id()
        if isinstance(name_or_id, str):
            found = self.token_id(name_or_id)
            if found is None:
                raise ConfigError(
                    f"eos token {name_or_id!r} is not in the vocabulary of {self.path}; pass a "
                    "token the tokenizer has (e.g. '<|endoftext|>') or its integer id"
                )
            return found
        if isinstance(name_or_id, bool) or not isinstance(name_or_id, (int, np.integer)):
            raise ConfigError(
                f"eos token must be a token string or an integer id, got {name_or_id!r}"
            )
        if not 0 <= name_or_id < self.vocab_size:
            raise ConfigError(
                f"eos token id {name_or_id} is outside the vocabulary of {self.path} "
                f"(ids 0..{self.vocab_size - 1}); pass the id of its end-of-text token"
            )
        return int(name_or_id)

    def _default_eos_id(self) -> int:
        declared = _declared_eos_token(self.path.parent / "tokenizer_config.json")
        for candidate in (declared, _FALLBACK_EOS):
            if candidate is not None and (found := self.token_id(candidate)) is not None:
                return found
        raise ConfigError(
            f"{self.path}: cannot tell which token ends a document (no eos_token in a "
            f"tokenizer_config.json beside it, no {_FALLBACK_EOS!r} in the vocabulary); "
            "pass eos_token_id"
        )

    def encode_batch(self, texts: Sequence[str] | Any, eos_id: int | None = None) -> EncodedBatch:
        """Encode ``texts`` in parallel; ``eos_id`` (when given) follows each text's ids.

        ``texts``, each form read where it is unless said:
        - a list (or any sequence) of ``str``: each its own UTF-8, no copy;
        - a list of ``bytes`` (UTF-8): each checked, no copy;
        - a pyarrow string array (``string``, ``large_string``, ``string_view``, or a chunked
          array of them): its buffers; a null is an error; a binary one is checked as UTF-8
          and a dictionary-encoded one decoded (one copy);
        - a NumPy array of strings: ``U`` or ``S`` converted to Arrow first (one copy: NumPy
          keeps fixed-width UTF-32 or padded bytes, not UTF-8); object or ``T`` taken as a
          list of its items.
        One buffer of separated documents goes to ``encode_buffer``."""
        if isinstance(texts, (str, bytes, bytearray, memoryview)):
            raise TypeError(
                f"encode_batch takes a sequence of texts, not one {type(texts).__name__}; "
                "encode_buffer takes one buffer of newline- or NUL-separated documents"
            )
        if texts is None or isinstance(texts, (Mapping, Set)):
            # A dict would give its keys, a set an order of its own: neither is a batch.
            raise TypeError(
                f"encode_batch takes a sequence of texts (a list, a tuple, an array), not "
                f"{'None' if texts is None else 'a ' + type(texts).__name__}"
            )
        if eos_id is not None:
            eos_id = self.eos_id_for(eos_id)
        if isinstance(texts, np.ndarray):
            texts = _numpy_texts(texts)
        if type(texts).__module__.startswith("pyarrow"):
            data, offsets = _arrow_layout(texts)
            ids, starts = self._encoder.encode_utf8(data, offsets, eos_id)
            return EncodedBatch(ids, starts)
        if not isinstance(texts, list):
            texts = list(texts)
        if texts and isinstance(texts[0], bytes):
            ids, offsets = self._encoder.encode_bytes(texts, eos_id)
        else:
            try:
                ids, offsets = self._encoder.encode_batch(texts, eos_id)
            except UnicodeEncodeError as err:  # a str holding a lone surrogate has no UTF-8
                raise _lone_surrogate(texts, err) from None
        return EncodedBatch(ids, offsets)

    def encode_buffer(
        self,
        data: bytes | bytearray | memoryview | Any,
        separator: str = "\n",
        eos_id: int | None = None,
    ) -> EncodedBatch:
        """Encode the documents of one UTF-8 buffer, cut at ``separator`` (``"\\n"``, a line
        each, or ``"\\0"``), read where it is: ``bytes``, ``bytearray``, a ``memoryview``, a
        uint8 NumPy array or anything with the buffer protocol (a strided one is copied; a
        writable one must not be changed by another thread during the call, which reads it
        without the GIL). A separator at the very end ends the last document rather than
        starting an empty one; two in a row make an empty document (its EOS only)."""
        if separator not in ("\n", "\0"):
            raise ConfigError(
                f"separator {separator!r} is not one encode_buffer cuts at; use '\\n' or '\\0'"
            )
        if eos_id is not None:
            eos_id = self.eos_id_for(eos_id)
        try:
            view = memoryview(data)
            if view.itemsize != 1:  # an int64 array's bytes are no text
                raise TypeError(
                    f"its items are {view.itemsize} bytes each (format {view.format!r})"
                )
            if not view.c_contiguous:  # a strided view (every other byte): no cast reads it
                view = memoryview(view.tobytes())
            view = view.cast("B")
        except TypeError as err:
            raise TypeError(
                f"encode_buffer takes a bytes-like buffer of UTF-8 (bytes, a uint8 array), not "
                f"{type(data).__name__} ({err})"
            ) from None
        buffer = np.frombuffer(view, dtype=np.uint8)
        cuts = np.flatnonzero(buffer == ord(separator))
        # A final separator ends the last document; otherwise the buffer's end does.
        final = len(cuts) and cuts[-1] == len(buffer) - 1
        ends = (cuts if final or not len(buffer) else np.append(cuts, len(buffer))).astype(np.int64)
        # Each document starts after the separator before it.
        starts = np.concatenate(([0], ends[:-1] + 1)) if len(ends) else ends
        ids, id_offsets = self._encoder.encode_spans(buffer, starts, ends, eos_id)
        return EncodedBatch(ids, id_offsets)


def _numpy_texts(texts: np.ndarray) -> Any:
    """A NumPy array of strings as a batch, each text what NumPy reads of it (a fixed-width
    one's trailing NULs dropped, any other NUL kept): a ``U`` (UTF-32) or ``S`` (padded bytes)
    array as a pyarrow string array (one copy) where pyarrow reads the texts so, else (and an
    object or StringDType array) as a list of its items, each read where it is and a bad one
    named by its place."""
    if texts.ndim != 1 or texts.dtype.kind not in "USTO":
        raise TypeError(
            "encode_batch takes a one-dimensional NumPy array of strings (dtype U, S, T or "
            f"object), not one of shape {texts.shape} and dtype {texts.dtype}"
        )
    if np.ma.isMaskedArray(texts):
        texts = _unmasked(texts)
    if texts.dtype.kind in "US":
        converted = _fixed_width_by_arrow(texts)
        if converted is not None:
            return converted
        if texts.dtype.kind == "U":
            # No UTF-8 encodes these; a list of str would only say "cannot be encoded".
            _refuse_code_points_past_unicode(texts)
    return (texts.astype(object) if texts.dtype.kind == "T" else texts).tolist()


def _fixed_width_by_arrow(texts: np.ndarray) -> Any:
    """A ``U`` or ``S`` array as a pyarrow string array (its C loop: as fast as NumPy's
    ``tolist``, and the texts' UTF-8 made once), or None where pyarrow would read other texts
    than NumPy (it ends a text at its first NUL: a NUL inside one) or fails (bytes that are not
    UTF-8, a lone surrogate): the list path then reads them and names a bad one."""
    import pyarrow as pa  # noqa: PLC0415  only these inputs need it
    import pyarrow.compute as pc  # noqa: PLC0415  only these inputs need it

    try:
        if texts.dtype.kind == "U":
            converted = pa.array(texts, pa.large_string())
            lengths = pc.utf8_length(converted)
        else:
            raw = pa.array(texts, pa.large_binary())
            lengths = pc.binary_length(raw)
            converted = raw.cast(pa.large_string())  # checks the UTF-8
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeError):
        return None
    # Lengths as NumPy counts them (trailing NULs dropped): equal only if no NUL was inside.
    if not np.array_equal(lengths.to_numpy(zero_copy_only=False), np.char.str_len(texts)):
        return None
    return converted


def _unmasked(texts: np.ma.MaskedArray) -> np.ndarray:
    """A masked array's texts, none of them masked (a masked text is a missing one, as a
    null is in Arrow: refused, not encoded as whatever lies under the mask)."""
    masked = np.ma.getmaskarray(texts)
    if masked.any():
        raise InputError(
            f"text {int(np.argmax(masked))} of the batch is masked ({int(masked.sum())} masked "
            "in all): drop or fill them first (e.g. texts.filled(''))"
        )
    return np.ma.getdata(texts)


def _fixed_width_units(texts: np.ndarray, unit: type[np.unsignedinteger]) -> np.ndarray:
    """Each text's code units (bytes of ``S``, code points of ``U``) as a row of a C-ordered
    ``(len, width)`` array in this machine's byte order (a strided or byte-swapped array is
    copied)."""
    native = texts.dtype.newbyteorder("=")
    width = texts.dtype.itemsize // np.dtype(unit).itemsize
    return np.ascontiguousarray(texts, dtype=native).view(unit).reshape(len(texts), width)


def _trimmed(units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The code units of every row back to back without its trailing zeros, and the rows'
    ``len + 1`` offsets into them (int64): NumPy's own reading (``tolist``) of fixed-width
    strings, which pad with NULs, so a NUL inside a text is kept."""
    rows, width = units.shape
    filled = units != 0
    # A row's length: the width less its run of trailing zeros (an all-zero row: 0).
    lengths = np.where(filled.any(axis=1), width - np.argmax(filled[:, ::-1], axis=1), 0)
    offsets = np.zeros(rows + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return units[np.arange(width) < lengths[:, None]], offsets


def _refuse_code_points_past_unicode(texts: np.ndarray) -> None:
    """Name the text of a ``U`` array holding a value past U+10FFFF, which NumPy stores but no
    UTF-8 encodes (a list of ``str`` names a lone surrogate itself). Scans the padded array:
    only on the path of texts pyarrow could not read."""
    points, offsets = _trimmed(_fixed_width_units(texts, np.uint32))
    bad = points > 0x10FFFF
    if not bad.any():
        return
    at = int(np.argmax(bad))
    text = int(np.searchsorted(offsets, at, side="right")) - 1
    raise InputError(
        f"text {text} of the batch holds U+{int(points[at]):X} at character "
        f"{at - int(offsets[text])}, past the last Unicode code point (U+10FFFF): the array "
        "was not made of strings; drop or mend the text"
    )


def _joined(texts: Any) -> Any:
    """A pyarrow ChunkedArray as one array: its only chunk, or its chunks joined (one copy).
    ``string``/``binary`` chunks are widened to 64-bit offsets first: theirs end at 2 GiB, and
    the chunks of a bigger column (an HF dataset's text column is one) joined as they are fail
    in pyarrow with an offset overflow."""
    import pyarrow as pa  # noqa: PLC0415  only Arrow input needs it

    if texts.num_chunks == 1:
        return texts.chunk(0)
    wider = {pa.string(): pa.large_string(), pa.binary(): pa.large_binary()}
    if texts.type in wider:
        texts = texts.cast(wider[texts.type])
    return texts.combine_chunks()


def _arrow_layout(texts: Any) -> tuple[np.ndarray, np.ndarray]:
    """A pyarrow string array's UTF-8 bytes and its ``len + 1`` offsets (int64) into them, read
    from its buffers in place; a string view array, a dictionary-encoded one or a chunked
    array of several chunks is made contiguous first (one copy)."""
    import pyarrow as pa  # noqa: PLC0415  only Arrow input needs it (and it brought pyarrow itself)

    if isinstance(texts, (pa.Array, pa.ChunkedArray)) and pa.types.is_dictionary(texts.type):
        # A dictionary-encoded column (Parquet's, a pandas category): its texts (one copy).
        texts = texts.cast(texts.type.value_type)
    if isinstance(texts, pa.ChunkedArray):
        texts = _joined(texts)
    # binary_view exists from pyarrow 16 on (the project allows 15).
    view = getattr(pa, "binary_view", None)
    binary = (pa.binary(), pa.large_binary(), *([view()] if view is not None else []))
    if isinstance(texts, pa.Array) and texts.type in binary:
        # Bytes, as a list of bytes is taken: checked as UTF-8 in the cast (one copy).
        try:
            texts = texts.cast(pa.large_string())
        except pa.ArrowInvalid as err:
            raise InputError(f"a text of the batch is not UTF-8: {err}") from None
    if not isinstance(texts, pa.Array) or not is_text_type(texts.type):
        raise TypeError(
            f"encode_batch takes a list of str or a pyarrow string array, not {type(texts).__name__}"
            f"{' of ' + str(texts.type) if isinstance(texts, pa.Array) else ''}"
        )
    if texts.null_count:
        first = texts.is_null().index(True).as_py()
        raise InputError(
            f"text {first} of the batch is null ({texts.null_count} nulls in all): drop or fill "
            "the nulls first (e.g. pyarrow.compute.fill_null(texts, ''))"
        )
    return string_layout(texts)


def _declared_eos_token(config_path: Path) -> str | None:
    """The ``eos_token`` of a transformers ``tokenizer_config.json``, if readable."""
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # optional file: its absence or damage just means "not declared"
    token = config.get("eos_token") if isinstance(config, dict) else None
    if isinstance(token, dict):  # the AddedToken form: {"content": "</s>", ...}
        token = token.get("content")
    return token if isinstance(token, str) else None


def _lone_surrogate(texts: list[Any], err: UnicodeEncodeError) -> InputError:
    """The text of the batch that holds a lone surrogate (which no UTF-8 encodes), by index
    and character, as the other bad items of a batch are named."""
    for index, text in enumerate(texts):
        if isinstance(text, str):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as bad:
                return _surrogate_error(index, text[bad.start], bad.start)
    return InputError(f"a text of the batch cannot be encoded as UTF-8: {err}")


def _surrogate_error(index: int, surrogate: str, at: int) -> InputError:
    return InputError(
        f"text {index} of the batch holds a lone surrogate {surrogate!r} at character {at} "
        "(no UTF-8 encodes it; a JSON '\\ud800' escape read as it is gives one): drop it or "
        "replace it, e.g. text.encode('utf-8', 'replace').decode()"
    )
