"""``TextEncoder.encode_batch`` on pyarrow string arrays: read from the array's buffers in place,
the same ids and offsets as the ``list[str]`` path for every layout (string, large_string,
string_view, sliced, chunked), and bad input (nulls, other types) refused with what to do."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from data_io.errors import InputError
from data_io.tokenizer.encoder import TextEncoder


def _texts(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    pieces = ["hello", " world", "日本語", "  ", "\n", "é", "🙂", "x" * 40, "123", "<|im_end|>", ""]
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(n)]


@pytest.fixture(scope="module")
def encoder(small_tokenizer) -> TextEncoder:
    return TextEncoder(small_tokenizer)


def _same(a, b) -> None:
    assert np.array_equal(a.ids, b.ids) and np.array_equal(a.offsets, b.offsets)


@pytest.mark.parametrize("kind", ["string", "large_string", "string_view"])
def test_arrow_arrays_encode_as_their_python_strings(encoder: TextEncoder, kind: str):
    texts = _texts(500, seed=1)
    array = pa.array(texts, type=getattr(pa, kind)())
    _same(encoder.encode_batch(array), encoder.encode_batch(texts))
    _same(encoder.encode_batch(array, eos_id=0), encoder.encode_batch(texts, eos_id=0))


def test_slices_and_chunked_arrays_read_the_right_texts(encoder: TextEncoder):
    texts = _texts(300, seed=2)
    array = pa.array(texts)
    _same(encoder.encode_batch(array.slice(17, 200)), encoder.encode_batch(texts[17:217]))
    chunked = pa.chunked_array([pa.array(texts[:100]), pa.array(texts[100:])])
    _same(encoder.encode_batch(chunked), encoder.encode_batch(texts))
    _same(encoder.encode_batch(pa.chunked_array([array])), encoder.encode_batch(texts))
    _same(encoder.encode_batch(pa.array([], pa.string())), encoder.encode_batch([]))


def test_nulls_and_other_arrays_are_refused(encoder: TextEncoder):
    with pytest.raises(InputError, match=r"text 2 of the batch is null .*fill_null"):
        encoder.encode_batch(pa.array(["a", "b", None, None]))
    with pytest.raises(TypeError, match="pyarrow string array"):
        encoder.encode_batch(pa.array([1, 2, 3]))


def test_a_damaged_layout_is_an_error_not_a_crash(encoder: TextEncoder):
    core = encoder._encoder
    data = np.frombuffer("héllo".encode(), dtype=np.uint8)
    with pytest.raises(InputError, match="inside a character"):
        core.encode_utf8(data, np.array([0, 2, 6], dtype=np.int64))
    with pytest.raises(InputError, match="outside the 6 bytes"):
        core.encode_utf8(data, np.array([0, 7], dtype=np.int64))
    with pytest.raises(InputError, match="go backwards"):
        core.encode_utf8(data, np.array([0, 4, 3, 6], dtype=np.int64))
    with pytest.raises(InputError, match=r"invalid UTF-8 at byte 1 \(text 0, its byte 1\)"):
        core.encode_utf8(np.frombuffer(b"a\xffb", dtype=np.uint8), np.array([0, 3]))
    # Text 2 is empty (4..4): the bad byte 4 is text 3's first.
    with pytest.raises(InputError, match=r"invalid UTF-8 at byte 4 \(text 3, its byte 0\)"):
        core.encode_utf8(np.frombuffer(b"abcd\xffb", dtype=np.uint8), np.array([0, 2, 4, 4, 6]))
    with pytest.raises(InputError, match="no offsets"):
        core.encode_utf8(data, np.array([], dtype=np.int64))


def test_dictionary_encoded_arrays_encode_as_their_texts(encoder: TextEncoder):
    """Parquet's dictionary columns and pandas categories arrive so (they were refused as
    'not a pyarrow string array')."""
    texts = _texts(200, seed=6) * 2
    expected = encoder.encode_batch(texts, eos_id=0)
    for kind in (pa.string(), pa.large_string(), pa.binary()):
        encoded = pa.array(texts, kind).dictionary_encode()
        _same(encoder.encode_batch(encoded, eos_id=0), expected)
        chunked = pa.chunked_array([encoded.slice(0, 150), encoded.slice(150)])
        _same(encoder.encode_batch(chunked, eos_id=0), expected)
    with pytest.raises(InputError, match=r"text 1 of the batch is null"):
        encoder.encode_batch(pa.array(["a", None]).dictionary_encode())
    with pytest.raises(TypeError, match="pyarrow string array, not Int64Array"):
        encoder.encode_batch(pa.array([1, 2]).dictionary_encode())


def test_chunks_of_a_string_column_are_joined_with_wide_offsets(encoder: TextEncoder):
    """`string` chunks hold 32-bit offsets: joined as they are past 2 GiB, pyarrow fails with an
    offset overflow (an HF dataset's text column is such a ChunkedArray), so they are widened
    before the join (2 GiB of text is too much for a test: the rule is checked here)."""
    from data_io.tokenizer.encoder import _joined

    texts = ["a b", "c", "", "é d"]
    for kind, wide in ((pa.string(), pa.large_string()), (pa.binary(), pa.large_binary())):
        items = texts if kind == pa.string() else [t.encode() for t in texts]
        chunked = pa.chunked_array([pa.array(items[:2], kind), pa.array(items[2:], kind)])
        assert _joined(chunked).type == wide
        assert np.array_equal(encoder.encode_batch(chunked).ids, encoder.encode_batch(texts).ids)
    one = pa.chunked_array([pa.array(texts, pa.string())])
    assert _joined(one).type == pa.string()  # a single chunk is read as it is
