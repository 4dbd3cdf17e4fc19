"""``TextEncoder`` inputs besides ``list[str]`` and Arrow: ``list[bytes]``, NumPy string arrays
and one buffer of separated documents (``encode_buffer``), each giving the ids and offsets of the
``list[str]`` path; bad bytes are errors naming the text and the byte."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from data_io.errors import ConfigError, InputError
from data_io.tokenizer.encoder import TextEncoder
from tests.tokenizer.test_encoder_arrow import _same, _texts


@pytest.fixture(scope="module")
def encoder(small_tokenizer) -> TextEncoder:
    return TextEncoder(small_tokenizer)


def test_bytes_encode_as_their_strings(encoder: TextEncoder) -> None:
    texts = _texts(400, seed=3)
    as_bytes = [text.encode() for text in texts]
    _same(encoder.encode_batch(as_bytes), encoder.encode_batch(texts))
    _same(encoder.encode_batch(as_bytes, eos_id=0), encoder.encode_batch(texts, eos_id=0))


def test_a_str_with_a_lone_surrogate_names_the_text_and_character(encoder: TextEncoder) -> None:
    with pytest.raises(
        InputError, match=r"text 1 of the batch holds a lone surrogate '\\ud800' at character 1"
    ):
        encoder.encode_batch(["fine", "a\ud800b"])


def test_bytes_that_are_not_utf8_name_the_text_and_byte(encoder: TextEncoder) -> None:
    texts = [b"fine", "caf\u00e9".encode(), b"ab\xffcd"]
    with pytest.raises(InputError, match=r"text 2 of the batch is not UTF-8 \(byte 2 of its 5\)"):
        encoder.encode_batch(texts)
    with pytest.raises(TypeError):
        encoder.encode_batch([b"bytes", "then a str"])


def test_a_text_of_another_type_is_named_with_its_place(encoder: TextEncoder) -> None:
    """Lists are walked by hand (the objects ahead fetched from memory); other sequences are
    taken whole. Either way a text of the wrong type is named by its place and type."""
    texts = [f"text {i}" for i in range(60)]
    with pytest.raises(TypeError, match=r"text 40 of the batch has type int, not str"):
        encoder.encode_batch([*texts[:40], 7, *texts[40:]])
    with pytest.raises(TypeError, match=r"text 0 of the batch has type NoneType, not str"):
        encoder._encoder.encode_batch((None, "a"))
    with pytest.raises(TypeError, match=r"text 17 of the batch has type str, not bytes"):
        encoder.encode_batch([t.encode() for t in texts[:17]] + texts[17:])


def test_str_subclasses_and_other_sequences_encode_as_a_list_of_str(
    encoder: TextEncoder,
) -> None:
    class Text(str):
        pass

    texts = _texts(300, seed=11)
    expected = encoder.encode_batch(texts, eos_id=0)
    _same(encoder.encode_batch([Text(t) for t in texts], eos_id=0), expected)
    ids, offsets = encoder._encoder.encode_batch(tuple(texts), 0)
    assert np.array_equal(ids, expected.ids) and np.array_equal(offsets, expected.offsets)
    ids, offsets = encoder._encoder.encode_bytes(tuple(t.encode() for t in texts), 0)
    assert np.array_equal(ids, expected.ids) and np.array_equal(offsets, expected.offsets)


@pytest.mark.parametrize("dtype", ["U", "S", "T", "O"])
def test_numpy_string_arrays_encode_as_their_strings(encoder: TextEncoder, dtype: str) -> None:
    texts = [t for t in _texts(300, seed=4) if not t.endswith("\0")]
    if dtype == "S":  # NumPy's bytes strip trailing NULs; these texts have none
        array = np.array([t.encode() for t in texts], dtype="S")
    elif dtype == "T":
        array = np.array(texts, dtype=np.dtypes.StringDType())
    else:
        array = np.array(texts, dtype=dtype)
    _same(encoder.encode_batch(array), encoder.encode_batch(texts))


def test_numpy_arrays_of_other_things_are_refused(encoder: TextEncoder) -> None:
    with pytest.raises(TypeError, match="one-dimensional NumPy array of strings"):
        encoder.encode_batch(np.arange(3))
    with pytest.raises(TypeError, match="one-dimensional"):
        encoder.encode_batch(np.array([["a", "b"]]))
    with pytest.raises(InputError, match=r"text 1 of the batch is not UTF-8 \(byte 0 of its 1\)"):
        encoder.encode_batch(np.array([b"ok", b"\xff"], dtype="S"))


@pytest.mark.parametrize("separator", ["\n", "\0"])
def test_a_buffer_of_documents_encodes_as_its_documents(
    encoder: TextEncoder, separator: str
) -> None:
    documents = [t.replace(separator, " ") for t in _texts(300, seed=5)]
    joined = separator.join(documents).encode()
    expected = encoder.encode_batch(documents, eos_id=0)
    for form in (joined, bytearray(joined), memoryview(joined), np.frombuffer(joined, np.uint8)):
        _same(encoder.encode_buffer(form, separator, eos_id=0), expected)
    # A separator at the very end ends the last document; two in a row make an empty one.
    _same(encoder.encode_buffer(joined + separator.encode(), separator, 0), expected)
    doubled = encoder.encode_buffer(f"a{separator}{separator}b".encode(), separator, 0)
    _same(doubled, encoder.encode_batch(["a", "", "b"], eos_id=0))


def test_empty_buffers(encoder: TextEncoder) -> None:
    empty = encoder.encode_buffer(b"")
    assert empty.ids.size == 0 and empty.offsets.tolist() == [0]
    _same(encoder.encode_buffer(b"\n", eos_id=0), encoder.encode_batch([""], eos_id=0))


def test_bad_buffers_say_where(encoder: TextEncoder) -> None:
    with pytest.raises(InputError, match=r"invalid UTF-8 at byte 8 \(document 1\)"):
        encoder.encode_buffer(b"first\nse\xffcond\nthird")
    with pytest.raises(ConfigError, match="use '\\\\n' or '\\\\0'"):
        encoder.encode_buffer(b"a,b", separator=",")
    with pytest.raises(TypeError, match="bytes-like"):
        encoder.encode_buffer(["not", "a", "buffer"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="encode_buffer takes one buffer"):
        encoder.encode_batch(b"one buffer")
    # An int64 array's 16 bytes are no UTF-8 text (they were encoded as 16 ids).
    with pytest.raises(TypeError, match=r"bytes-like buffer of UTF-8 .*items are 8 bytes each"):
        encoder.encode_buffer(np.array([1, 2], dtype=np.int64))


@pytest.mark.parametrize(
    ("texts", "named"), [({"a": 1}, "a dict"), ({"a", "b"}, "a set"), (None, "None")]
)
def test_a_mapping_a_set_or_none_is_no_batch(encoder: TextEncoder, texts, named: str) -> None:
    # A dict gave its keys' ids, a set an order of its own.
    with pytest.raises(TypeError, match=rf"takes a sequence of texts .*, not {named}$"):
        encoder.encode_batch(texts)


@pytest.mark.parametrize(
    "kind",
    [pa.binary(), pa.large_binary(), *([pa.binary_view()] if hasattr(pa, "binary_view") else [])],
)
def test_arrow_binary_arrays_encode_as_their_utf8_texts(encoder: TextEncoder, kind) -> None:
    texts = _texts(50, seed=9)
    _same(
        encoder.encode_batch(pa.array([t.encode() for t in texts], kind)),
        encoder.encode_batch(texts),
    )
    with pytest.raises(InputError, match="not UTF-8"):
        encoder.encode_batch(pa.array([b"ok", b"\xff"], kind))


@pytest.mark.parametrize("threads", ["1", "2"])
def test_large_str_batches_encode_as_each_text_alone(
    encoder: TextEncoder, monkeypatch: pytest.MonkeyPatch, threads: str
) -> None:
    """A batch of ``str`` over 64 KiB goes to the pool chunk by chunk while the calling thread
    makes the next chunk's UTF-8 (``encode_batch_pipelined``); one thread, or a small batch,
    is encoded by the calling thread. Either way: each text's ids, as encoded alone."""
    monkeypatch.setenv("RAYON_NUM_THREADS", threads)
    # New strings, not ASCII: their UTF-8 is made during the call, chunk by chunk.
    texts = [t + f" #{i} ünïcode" for i, t in enumerate(_texts(6000, seed=8))]
    assert sum(len(t.encode()) for t in texts) > 64 << 10
    batch = encoder.encode_batch(texts, eos_id=0)
    alone = [encoder.encode_batch([t], eos_id=0).ids for t in texts]
    assert np.array_equal(batch.offsets, np.cumsum([0] + [len(ids) for ids in alone]))
    assert np.array_equal(batch.ids, np.concatenate(alone))


def test_batches_from_several_python_threads_at_once_each_encode_as_alone(
    encoder: TextEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper threads serve one batch at a time: a batch that finds them busy (another
    Python thread's, the GIL released) is encoded by its own calling thread. Every batch still
    gets its own texts' ids, whichever way it went."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setenv("RAYON_NUM_THREADS", "2")
    batches = [
        [t + f" #{k}.{i} ünïcode" for i, t in enumerate(_texts(3000, seed=20 + k))]
        for k in range(6)
    ]
    assert all(sum(len(t.encode()) for t in b) > 64 << 10 for b in batches)
    expected = [encoder.encode_batch(b, eos_id=0).ids for b in batches]
    arrow = [pa.array(b, pa.large_string()) for b in batches]

    def encode(k: int) -> tuple[np.ndarray, np.ndarray]:
        # Alternate the list path and the Arrow path, each several times.
        return (
            encoder.encode_batch(batches[k], eos_id=0).ids,
            encoder.encode_batch(arrow[k], eos_id=0).ids,
        )

    with ThreadPoolExecutor(max_workers=3) as pool:
        for _ in range(3):
            for k, (from_list, from_arrow) in enumerate(pool.map(encode, range(len(batches)))):
                assert np.array_equal(from_list, expected[k])
                assert np.array_equal(from_arrow, expected[k])


def test_a_str_without_utf8_stops_a_large_batch_with_its_own_error(
    encoder: TextEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAYON_NUM_THREADS", "2")
    texts = [f"text number {i} " * 8 for i in range(4000)]
    texts[3500] = "a lone \ud800 surrogate"
    with pytest.raises(InputError, match="text 3500 of the batch holds a lone surrogate"):
        encoder.encode_batch(texts)
    # The encoder goes on working after it.
    assert len(encoder.encode_batch(texts[:10]).ids) > 0


def test_a_text_of_another_type_stops_a_large_batch_where_it_stands(
    encoder: TextEncoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The calling thread takes the texts in order while the helpers encode the chunks already
    cut; a text of the wrong type ends the batch with an error naming it, after those chunks."""
    monkeypatch.setenv("RAYON_NUM_THREADS", "2")
    texts: list = [f"text number {i} " * 8 for i in range(4000)]
    texts[3500] = 3.5
    with pytest.raises(TypeError, match="text 3500 of the batch has type float, not str"):
        encoder.encode_batch(texts)
    texts[3500] = "mended"
    assert len(encoder.encode_batch(texts).offsets) == 4001


def test_a_list_subclass_is_read_as_it_iterates(encoder: TextEncoder) -> None:
    """Only an exact list is walked by index; a subclass is taken through its own iteration."""

    class Reversed(list):
        def __iter__(self):
            return reversed(list(super().__iter__()))

    texts = [f"text {i}" for i in range(40)]
    ids, offsets = encoder._encoder.encode_batch(Reversed(texts))
    expected = encoder.encode_batch(texts[::-1])
    assert np.array_equal(ids, expected.ids) and np.array_equal(offsets, expected.offsets)


@pytest.mark.parametrize("dtype", ["U", "S"])
def test_numpy_texts_keep_what_follows_a_nul_inside_them(encoder: TextEncoder, dtype: str) -> None:
    """NumPy drops only a fixed-width text's trailing NULs; one inside is text (pyarrow's
    conversion cut each text at its first NUL, silently)."""
    texts = ["a\0b", "x\0\0y\0", "\0lead", "", "plain", "日\0本"]
    array = np.array([t.encode() for t in texts] if dtype == "S" else texts, dtype=dtype)
    as_numpy = [t.decode() if dtype == "S" else t for t in array.tolist()]
    assert as_numpy[0] == "a\0b" and as_numpy[1] == "x\0\0y"
    _same(encoder.encode_batch(array, eos_id=0), encoder.encode_batch(as_numpy, eos_id=0))
    # Strided and byte-swapped arrays read the same texts.
    _same(encoder.encode_batch(array[::2]), encoder.encode_batch(as_numpy[::2]))
    if dtype == "U":
        swapped = array.astype(array.dtype.newbyteorder(">"))
        _same(encoder.encode_batch(swapped), encoder.encode_batch(as_numpy))


@pytest.mark.parametrize("dtype", ["U", "S"])
def test_numpy_texts_without_an_inner_nul_go_through_arrow(dtype: str) -> None:
    """pyarrow's conversion (one C loop, the UTF-8 made once) where it reads what NumPy reads;
    NumPy's own reading (a list) only for an array with a NUL inside a text."""
    import pyarrow as pa

    from data_io.tokenizer.encoder import _numpy_texts

    plain = np.array(["a", "bé", "", "日本"], dtype=dtype if dtype == "U" else None)
    if dtype == "S":
        plain = np.array([t.encode() for t in ["a", "bé", "", "日本"]], dtype="S")
    converted = _numpy_texts(plain)
    assert isinstance(converted, pa.Array)
    assert converted.to_pylist() == ["a", "bé", "", "日本"]
    with_nul = np.array(["a\0b", "c"], dtype=dtype)
    assert _numpy_texts(with_nul) == (["a\0b", "c"] if dtype == "U" else [b"a\0b", b"c"])


def test_a_numpy_code_point_past_unicode_is_named(encoder: TextEncoder) -> None:
    """NumPy stores any 32-bit value in a U array; none past U+10FFFF has a UTF-8 form."""
    array = np.array([0x61, 0, 0x62, 0x110000], dtype=np.uint32).view("<U2")
    with pytest.raises(InputError, match=r"text 1 of the batch holds U\+110000 at character 1"):
        encoder.encode_batch(array)


def test_numpy_texts_that_are_no_utf8_are_named_by_index(encoder: TextEncoder) -> None:
    with pytest.raises(InputError, match=r"text 2 of the batch holds a lone surrogate '\\udc80'"):
        encoder.encode_batch(np.array(["ok", "fine", "ab\udc80"]))
    with pytest.raises(InputError, match=r"text 1 of the batch is not UTF-8 \(byte 2 of its 3\)"):
        encoder.encode_batch(np.array([b"ok", b"ab\xff"], dtype="S"))


@pytest.mark.parametrize("dtype", ["U", "S", "O"])
def test_a_masked_text_is_refused_not_encoded(encoder: TextEncoder, dtype: str) -> None:
    texts = np.ma.array(np.array(["a", "b", "c"], dtype=dtype), mask=[0, 1, 1])
    with pytest.raises(InputError, match=r"text 1 of the batch is masked \(2 masked in all\)"):
        encoder.encode_batch(texts)
    texts.mask = False
    _same(encoder.encode_batch(texts), encoder.encode_batch(["a", "b", "c"]))


def test_a_bad_item_of_an_object_array_is_named_as_in_a_list(encoder: TextEncoder) -> None:
    """An object array holds Python objects: each is taken as a list's item is, so a bad one
    is named by its place (pyarrow's conversion named none, and let a surrogate's
    UnicodeEncodeError through)."""
    with pytest.raises(TypeError, match=r"text 2 of the batch has type int, not str"):
        encoder.encode_batch(np.array(["a", "b", 3], dtype=object))
    with pytest.raises(InputError, match=r"text 1 of the batch holds a lone surrogate '\\ud800'"):
        encoder.encode_batch(np.array(["ok", "a\ud800"], dtype=object))
    with pytest.raises(InputError, match=r"text 1 of the batch is not UTF-8 \(byte 0 of its 1\)"):
        encoder.encode_batch(np.array([b"ok", b"\xff"], dtype=object))
    with pytest.raises(TypeError, match=r"text 1 of the batch has type NoneType, not str"):
        encoder.encode_batch(np.array(["a", None], dtype=np.dtypes.StringDType(na_object=None)))
    texts = _texts(200, seed=12)
    _same(
        encoder.encode_batch(np.array([t.encode() for t in texts], dtype=object)),
        encoder.encode_batch(texts),
    )


def test_a_strided_buffer_encodes_as_its_bytes(encoder: TextEncoder) -> None:
    """A memoryview or uint8 array with a step reads its own bytes (it was refused as 'not a
    uint8 array', a uint8 array)."""
    joined = "first doc\nsecond ünïcode\nthird".encode()
    padded = np.zeros((len(joined), 2), np.uint8)
    padded[:, 0] = np.frombuffer(joined, np.uint8)
    expected = encoder.encode_buffer(joined, eos_id=0)
    _same(encoder.encode_buffer(padded[:, 0], eos_id=0), expected)
    _same(encoder.encode_buffer(memoryview(padded.tobytes())[::2], eos_id=0), expected)
