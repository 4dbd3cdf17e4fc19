"""Write the seed corpora of the fuzz targets to fuzz/seeds/<target>/ (checked in; see
docs/fuzzing.md). Run from anywhere with a Python that has numpy, pyarrow and zstandard (the
project's .venv has them):

    .venv/bin/python fuzz/make_seeds.py

Deterministic: running it again rewrites the same files. Every seed is small (a few KB at most):
the fuzzer mutates it, so a small valid example reaches as much code as a big one, faster.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

FUZZ = Path(__file__).resolve().parent
ROOT = FUZZ.parent
SEEDS = FUZZ / "seeds"
SHIPPED = ROOT / "trained_tokenizers" / "bpe" / "tokenizer.json"

ROW = '{"condition":"cot","instruction":"What is 2+2?","response":"4"}'
ROWS = [
    ROW,
    ' {\t"response" : "b",\r\n "id": "x7", "condition":"", "instruction":"a"} ',
    r'{"condition":"cot","instruction":"a\"b\\c\/d\n\t\r\b\f","response":"\u00e9\u4e2d\ud83d\ude00 end\u0000"}',
    '{"condition":"direct","instruction":"日本語 é","response":"<|im_end|>"}',
    '{"condition":"c","instruction":"a","response":1}',
    '{"condition":"c","instruction":"a","response":null}',
    '{"condition":"c","instruction":"a"}',
    '{"condition":"c","instruction":"a","response":"b","response":"b"}',
    '{"condition":"c","instruction":"a","response":"b","n":[1,{"x":2}]}',
    r'{"condition":"c","instr\u0075ction":"a","response":"b"}',
    '{"condition":"c","instruction":"a","response":"b"} x',
    r'{"condition":"c","instruction":"\ud83d","response":"b"}',
    '["c","a","b"]',
]


def write(target: str, name: str, data: bytes | str) -> None:
    folder = SEEDS / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data.encode() if isinstance(data, str) else data)


def json_row() -> None:
    for i, row in enumerate(ROWS):
        write("json_row", f"row{i:02d}", row)
    long = "0123456789abcdef\\n" * 8 + '\\"tail'
    write(
        "json_row",
        "long_escapes",
        f'{{"condition":"c","instruction":"{long}","response":"{long}"}}',
    )


def jsonl_reader() -> None:
    text = ("\ufeff" + "\n".join(ROWS[:4]) + "\r\n\n" + "\n".join(ROWS[4:]) + "\n").encode()
    small = (ROW + "\n" + ROWS[3] + "\n\n" + ROWS[6]).encode()
    # Byte 0: mode in the low 3 bits (see fuzz_targets/jsonl_reader.rs), batch size above.
    write("jsonl_reader", "plain", b"\x00" + text)
    write("jsonl_reader", "plain_batch3", b"\x10" + small)
    write("jsonl_reader", "gzip", b"\x01" + small)
    write("jsonl_reader", "zstd", b"\x02" + small)
    write("jsonl_reader", "raw_gzip", b"\x03" + gzip.compress(small, mtime=0))
    write("jsonl_reader", "raw_gzip_two_members", b"\x0b" + gzip.compress(small, mtime=0) * 2)
    write("jsonl_reader", "raw_zstd", b"\x04" + zstandard.ZstdCompressor(level=3).compress(small))
    write("jsonl_reader", "two_members", b"\x05\x20" + small)
    write("jsonl_reader", "range", b"\x06\x01\x02" + text)
    write("jsonl_reader", "cut_zstd", b"\x07" + small)


def parquet_reader() -> None:
    def table(n: int, offset: int = 0) -> dict[str, list]:
        return {
            "condition": ["cot", "direct", ""][:n] * (n // 3 + 1),
            "instruction": [f"question {i} ü" for i in range(offset, offset + n)],
            "response": [f"answer {i}" for i in range(offset, offset + n)],
        }

    def save(name: str, tab: pa.Table, **options) -> None:
        sink = io.BytesIO()
        pq.write_table(tab, sink, **options)
        write("parquet_reader", name, sink.getvalue())

    def cut(columns: dict[str, list], n: int) -> dict[str, list]:
        return {k: v[:n] for k, v in columns.items()}

    save("snappy.parquet", pa.table(cut(table(3), 3)))
    save(
        "dictionary_groups.parquet",
        pa.table(cut(table(5), 5)),
        row_group_size=2,
        use_dictionary=True,
        compression="zstd",
    )
    schema = pa.schema(
        [
            ("response", pa.large_string()),
            ("extra", pa.int32()),
            ("instruction", pa.string()),
            ("condition", pa.string()),
        ]
    )
    save(
        "large_nulls_plain.parquet",
        pa.table(
            {
                "response": ["a", None, "c"],
                "extra": [1, 2, 3],
                "instruction": ["x", "y", None],
                "condition": ["", "cot", "direct"],
            },
            schema=schema,
        ),
        compression="none",
        use_dictionary=False,
        row_group_size=2,
    )
    required = pa.schema(
        [
            pa.field(name, pa.string(), nullable=False)
            for name in ("condition", "instruction", "response")
        ]
    )
    save(
        "required_v2_pages.parquet",
        pa.table(cut(table(4), 4), schema=required),
        data_page_version="2.0",
        compression="gzip",
        store_schema=False,
    )
    save(
        "string_view.parquet",
        pa.table({k: pa.array(v, pa.string_view()) for k, v in cut(table(3), 3).items()}),
        compression="lz4",
    )
    save(
        "dictionary_typed.parquet",
        pa.table({k: pa.array(v).dictionary_encode() for k, v in cut(table(4), 4).items()}),
        row_group_size=3,
    )
    # Invalid UTF-8 in a string column (the reader's value-by-value fallback, `RawRows`):
    # written as placeholder text, plain and uncompressed, then patched in the file's bytes.
    sink = io.BytesIO()
    columns = cut(table(4), 4)
    columns["instruction"][2] = "QQQQ"
    pq.write_table(
        pa.table(columns),
        sink,
        compression="none",
        use_dictionary=False,
        write_statistics=False,
        row_group_size=2,
    )
    data = sink.getvalue()
    assert data.count(b"QQQQ") == 1, data.count(b"QQQQ")
    write("parquet_reader", "invalid_utf8.parquet", data.replace(b"QQQQ", b"\xff\xfe\xc3\x28"))
    # Wrong column types: a file error, named.
    save(
        "wrong_type.parquet", pa.table({"condition": [1], "instruction": ["a"], "response": [b"b"]})
    )


def npy_header() -> None:
    def save(name: str, array: np.ndarray, version: tuple[int, int] | None = None) -> None:
        sink = io.BytesIO()
        np.lib.format.write_array(sink, array, version=version, allow_pickle=False)
        write("npy_header", name, sink.getvalue())

    save("u4.npy", np.arange(3, dtype="<u4"))
    save("u8_empty.npy", np.zeros(0, dtype="<u8"))
    save("u2_v2.npy", np.arange(2, dtype="<u2"), version=(2, 0))
    save("u4_v3.npy", np.arange(2, dtype="<u4"), version=(3, 0))
    save("be_2d.npy", np.arange(6, dtype=">u4").reshape(2, 3))
    save("fortran.npy", np.asfortranarray(np.arange(4, dtype="<i4").reshape(2, 2)))
    save("record.npy", np.zeros(2, dtype=[("a", "<u2"), ("b", "<f8")]))
    save("scalar.npy", np.array(7, dtype="<u8"))
    sink = io.BytesIO()
    np.lib.format.write_array(sink, np.arange(4, dtype="<u4"))
    write("npy_header", "truncated.npy", sink.getvalue()[:-3])


def tiny_tokenizer(merges_kept: int = 60, added_kept: int = 4) -> dict:
    """The shipped tokenizer cut down: its 256 byte tokens, its first merges, a few added
    tokens; ids renumbered from 0 in the order of the shipped ones."""
    shipped = json.loads(SHIPPED.read_text(encoding="utf-8"))
    vocab = shipped["model"]["vocab"]
    added = shipped["added_tokens"][:added_kept]
    by_id = sorted(vocab, key=vocab.get)
    keep = {t for t in by_id if len(t) == 1 and not (t.startswith("<|"))}
    keep |= {a["content"] for a in added}
    merges = []
    for a, b in shipped["model"]["merges"]:
        if len(merges) == merges_kept:
            break
        if a in keep and b in keep and a + b in vocab:
            merges.append([a, b])
            keep.add(a + b)
    ids = {t: i for i, t in enumerate(t for t in by_id if t in keep)}
    added = [dict(a, id=ids[a["content"]]) for a in added]
    model = dict(shipped["model"], vocab=ids, merges=merges)
    return dict(shipped, added_tokens=added, model=model)


def dump(value: dict) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def split_then_byte_level(regex: str) -> dict:
    return {
        "type": "Sequence",
        "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
            {
                "type": "ByteLevel",
                "add_prefix_space": False,
                "trim_offsets": True,
                "use_regex": False,
            },
        ],
    }


def tokenizer_json() -> None:
    base = tiny_tokenizer()
    write("tokenizer_json", "qwen_nfc.json", dump(base))
    gpt2 = json.loads(dump(base))
    gpt2["pre_tokenizer"] = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": True,
        "use_regex": True,
    }
    gpt2["normalizer"] = None
    gpt2["model"]["ignore_merges"] = True
    gpt2["model"]["merges"] = [f"{a} {b}" for a, b in gpt2["model"]["merges"]]
    write("tokenizer_json", "gpt2_ignore_merges_legacy.json", dump(gpt2))
    cl100k = json.loads(dump(base))
    cl100k["pre_tokenizer"] = split_then_byte_level(
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    )
    cl100k["model"]["unk_token"] = "<|PAD|>"
    write("tokenizer_json", "cl100k_unk.json", dump(cl100k))
    plain = json.loads(dump(base))
    plain["pre_tokenizer"] = split_then_byte_level(
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    )
    next_id = len(plain["model"]["vocab"])
    plain["added_tokens"][1]["special"] = False
    plain["added_tokens"] += [
        {
            "id": next_id,
            "content": "zqx",
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": False,
        },
        {
            "id": next_id + 1,
            "content": "<|cot|>>",
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        },
    ]
    write("tokenizer_json", "qwen35_plain_added.json", dump(plain))
    # Shapes the fast encoder declines (the HF encoder loads them).
    nfkc = json.loads(dump(base))
    nfkc["normalizer"] = {"type": "NFKC"}
    write("tokenizer_json", "declined_nfkc.json", dump(nfkc))
    fallback = json.loads(dump(base))
    fallback["model"]["byte_fallback"] = True
    fallback["model"]["vocab"] = {
        t: i for t, i in fallback["model"]["vocab"].items() if t not in "ĀāĂ"
    }
    write("tokenizer_json", "declined_byte_fallback_missing_bytes.json", dump(fallback))
    metaspace = json.loads(dump(base))
    metaspace["pre_tokenizer"] = {
        "type": "Metaspace",
        "replacement": "▁",
        "prepend_scheme": "always",
        "split": True,
    }
    write("tokenizer_json", "declined_metaspace.json", dump(metaspace))


def fast_encoder() -> None:
    texts = [
        "Hello, World! It's 2024: 12345 + 0.5 = ?",
        "don't I'LL we've 'S 'ſ 'K it's",
        " \n\t  x\r\n\n  \u3000\u00a0word  1 .",
        "e\u0301t\u00e9 \u212b \ufb01 \u1e0b\u0323 \u1100\u1161\u11a8",
        "中文文本，测试。日本語のテキスト、カタカナ 한국어",
        "👨‍👩‍👧‍👦 family 👍🏽 🇺🇸 ❤️‍🔥",
        "مَرْحَبًا ١٢٣ हिन्दी १२३४५ ٠١٢٣٤٥٦٧٨٩",
        "<|endoftext|><|im_start|>user x<tool_call>y<tool_call>>zqxjkv<think>\u0301",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 1111111111111111",
        "def f(x):\n    return x ** 2  # comment\n\n",
    ]
    for i, text in enumerate(texts):
        # Byte 0 picks the variant (fuzz_targets/fast_encoder.rs): one text per variant, round.
        write("fast_encoder", f"text{i:02d}", bytes([i % 7]) + text.encode())
    # Batches: the target cuts its text at U+0001 into texts encoded as one stream, a text's
    # last pieces waiting while the next is split. The edges where that stream turns: empty
    # texts, texts NFC rewrites (owned copies), added tokens at a text's ends, a text of many
    # pieces before one of a single piece.
    batches = [
        "Hello, World!\x01\x01 world\x01",
        "e\u0301t\u00e9\x01\u212b \ufb01\x01plain text after\x01\u1100\u1161",
        "<|endoftext|>\x01a<|im_start|>\x01b c d<|im_end|>\x01<think>",
        " ".join(f"w{k}" for k in range(40)) + "\x01x\x01" + "中文文本，测试。" * 4,
        "\x01".join(texts),
    ]
    for i, batch in enumerate(batches):
        write("fast_encoder", f"batch{i:02d}", bytes([(i * 3) % 7]) + batch.encode())


TARGETS = (
    "json_row",
    "jsonl_reader",
    "parquet_reader",
    "npy_header",
    "tokenizer_json",
    "fast_encoder",
    "compressed_parts",
    "gzip_points",
    "prepare_cuts",
    "prepare_clean",
    "unigram_em",
)


def gzip_points() -> None:
    """Byte 0: raw file (bit 0), two members (bit 1), a byte flipped (bit 2), built text as JSON
    rows (bit 3), about 1 in 2**bits 4-5 points cutting the text into ranges; built seeds then
    carry a chunk size, the flushes' bits and the flip's place before the text; raw ones a gzip
    file of many blocks. See fuzz_targets/gzip_points.rs."""
    import gzip
    import zlib

    text = "".join(f"line {i}: {'x' * (i % 7)} {i * 7919 % 1013}\n" for i in range(60)).encode()
    write("gzip_points", "built_partial_sync", b"\x00\x1f\x99\x00\x00" + text)
    write("gzip_points", "built_two_members_full", b"\x02\x3f\xff\x00\x00" + text)
    write("gzip_points", "built_flipped", b"\x04\x0f\x55\x01\x20" + text)
    write("gzip_points", "built_empty", b"\x00\x00\x00\x00\x00")
    # The lines as JSON rows, with a blank line and a bad row; ranges read in calls of 8 bytes.
    write("gzip_points", "built_rows", b"\x18\x1f\x99\x07\x00" + text + b"\n!not a row\n" + text)
    deflate = zlib.compressobj(6, zlib.DEFLATED, 31)
    blocks = b"".join(
        deflate.compress(text[k : k + 50]) + deflate.flush(zlib.Z_BLOCK)
        for k in range(0, len(text), 50)
    )
    write("gzip_points", "raw_blocks", b"\x01" + blocks + deflate.flush())
    write("gzip_points", "raw_gzip", b"\x01" + gzip.compress(text * 3))


def compressed_parts() -> None:
    """Byte 0: compression in bits 0-1 (zstd, gzip, xz, bzip2), raw file in bit 2, lanes above; see
    fuzz_targets/compressed_parts.rs. Built seeds carry a chunk size and text; raw ones a file
    of parts, as tests/formats/parted.py writes them."""
    sys.path.insert(0, str(ROOT))
    from tests.formats.parted import parted  # the tests' writer of parts (needs ROOT on the path)

    text = "".join(f"line {i}: {'x' * (i % 7)}\n" for i in range(40)).encode()
    write("compressed_parts", "built_zstd", b"\x00\x1f" + text)
    write("compressed_parts", "built_gzip_2_lanes", b"\x11\x07" + text)
    write("compressed_parts", "built_xz_3_lanes", b"\x1a\x3f" + text)
    write("compressed_parts", "built_empty", b"\x01\x00")
    write("compressed_parts", "built_bzip2", b"\x03\x3f" + text)
    # Byte 1 at 1 modulo 8: one bzip2 stream of the text repeated past 210 kB, blocks of 100 kB.
    fox = b"The quick brown fox jumps over the lazy dog 0123456789\n"
    write("compressed_parts", "built_bzip2_one_stream", b"\x13\x01" + fox)
    # A raw one-stream file of four blocks (bzip2 -1 of 304 kB), read on two lanes.
    write(
        "compressed_parts",
        "raw_blocks.bz2",
        b"\x17" + bz2.compress(b"abcdefghij klmnopq\n" * 16000, 1),
    )
    for bits, suffix in ((4, ".zst"), (5, ".gz"), (6, ".xz"), (7, ".bz2")):
        lanes = bits + 8 * (bits - 3)
        write("compressed_parts", f"raw{suffix}", bytes([lanes]) + parted(text, suffix, 100))


def prepare_cuts() -> None:
    """Byte 0: format (bits 0-1: blocks, lines, JSONL), storage (bits 2-3: plain, gzip, zstd
    frames), batch size (bits 5-6), two lanes (bits 4 and 7); byte 1 the read limit, byte 2 the number of
    targets and CutFinder's piece size, byte 3 the zstd frames' size; two bytes a target; the
    text (see fuzz_targets/prepare_cuts.rs)."""
    # A byte-order mark, blank lines of spaces, U+3000 and U+001C, carriage returns, a byte
    # that is not UTF-8, a last line without its newline.
    blocks = (
        "\ufeffa first document\nof two lines\r\n\n  \t\nsecond\n\u3000\r\n\n\n"
        "third, caf\u00e9\n\x1c\nnot blank \ufffd line\n\n\nlast, without a newline"
    ).encode()
    blocks = blocks.replace("\ufffd".encode(), b"\xff")
    jsonl = (
        b'{"text": "a"}\n\n{"text": "b\\u00e9", "id": 2}\r\n  \n{"text": 1}\n'
        b'{"text": "c\xe2\x82"}\n[1]\n{"text": "d"}'
    )
    lines = b"one\ntwo\r\n\n   \nthree \xe3\x80\x80\nfour\n\nfive"

    def seed(
        name: str, mode: int, limit: int, piece: int, chunk: int, targets: list[int], text: bytes
    ) -> None:
        head = bytes([mode, limit, len(targets) | (piece - 1) << 3, chunk - 1])
        write(
            "prepare_cuts", name, head + b"".join(t.to_bytes(2, "little") for t in targets) + text
        )

    for storage, name in ((0, "plain"), (1, "gzip"), (2, "zstd_frames")):
        for fmt, fname, text in ((0, "blocks", blocks), (1, "lines", lines), (2, "jsonl", jsonl)):
            mode = fmt | storage << 2 | (fmt + storage) % 4 << 5 | (0x90 if fmt == 1 else 0)
            targets = [len(text) // 5 * k for k in range(1, 5)]
            seed(f"{name}_{fname}", mode, 3 + 20 * fmt, 1 + 7 * storage, 16, targets, text)
    seed("plain_blocks_one_range", 0, 255, 1, 1, [], blocks)
    seed("zstd_byte_frames_jsonl", 2 | 2 << 2 | 0x90, 0, 3, 1, [5, 40, 41, 90], jsonl)


def prepare_clean() -> None:
    """Byte 0: normalize, filter, keep_empty, batch mode, a document per line (bits 0-4); byte
    1 min_line_chars, byte 2 min_doc_chars; the text (see fuzz_targets/prepare_clean.rs)."""
    text = (
        "  Cafe\u0301 au lait\r\n\r\nline two\t \u3000\n\n\n\nx\n"
        "the end\u0001, really \u0085 \u00a0\n\u1100\u1161\u11a8 e\u0000\u0301  "
    ).encode()
    write("prepare_clean", "defaults", bytes([3, 2, 20]) + text)
    write("prepare_clean", "normalize_only", bytes([1, 0, 0]) + text)
    write("prepare_clean", "filter_only", bytes([2, 3, 5]) + text)
    write("prepare_clean", "keep_empty", bytes([4, 0, 0]) + b" \r\n\x1c\xe3\x80\x80")
    write("prepare_clean", "invalid_utf8", bytes([3, 2, 3]) + b"ab\xff\xc3\n\xc2\x85 cd\xe2\x82")
    blocks = text + b"\n\n  \nsecond \xff document\r\n\n" + text
    write("prepare_clean", "batch_blocks", bytes([8 | 3, 2, 10]) + blocks)
    write("prepare_clean", "batch_lines", bytes([16 | 8 | 1, 0, 0]) + blocks)


def unigram_em() -> None:
    """Byte 0 the vocabulary size (10 + 4 x byte), byte 1 an alphabet (bit 0) and a special
    token (bit 1); then words, one a line (see fuzz_targets/unigram_em.rs)."""
    write("unigram_em", "english", bytes([20, 0]) + b"hello\nworld\nhello\nhelp\nyellow\nmellow\n")
    write("unigram_em", "repeats", bytes([16, 3]) + b"ab\nabc\nabcabc\nbca\ncab\nab\nab\n")
    syllables = ["ka", "to", "ri", "\u65e5", "\u672c", "\u043a\u043e\u0448", "\u00fc", "x"]
    words = [
        "".join(syllables[(i * 7 + k * 3) % len(syllables)] for k in range(1 + i % 4))
        for i in range(120)
    ]
    write("unigram_em", "scripts", bytes([60, 2]) + "\n".join(words).encode())
    write("unigram_em", "unk_text", bytes([12, 0]) + b"<UNK>\n<UNK>x\nx<UNK>\n\x00a\n")


def main() -> None:
    # Only the Rust targets' folders: fuzz/seeds/python/ belongs to the Python targets.
    for target in TARGETS:
        if (SEEDS / target).exists():
            shutil.rmtree(SEEDS / target)
    json_row()
    jsonl_reader()
    parquet_reader()
    npy_header()
    tokenizer_json()
    fast_encoder()
    compressed_parts()
    gzip_points()
    prepare_cuts()
    prepare_clean()
    unigram_em()
    total = 0
    for folder in (SEEDS / target for target in TARGETS):
        sizes = [p.stat().st_size for p in folder.iterdir()]
        total += sum(sizes)
        print(f"{folder.name}: {len(sizes)} seeds, {sum(sizes)} bytes, largest {max(sizes)}")
    print(f"total {total} bytes")


if __name__ == "__main__":
    main()
