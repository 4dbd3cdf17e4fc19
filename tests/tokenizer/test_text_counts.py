"""``train-tokenizer --text-field``: raw text read as ``prepare`` reads it (text, JSONL, Parquet,
compressed, ``datasets`` folders), each document one text; the tokenizer equals the one trained
on rows holding the same texts, and bad input fails naming the source, leaving nothing."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data_io.cli import main
from data_io.errors import ConfigError, InputError
from data_io.tokenizer.train import train_tokenizer
from tests.scale.inputs import rows, write_jsonl
from tests.tokenizer.unigram_oracle import assert_same_unigram

VOCAB = 700


def _texts() -> list[str]:
    return [t for r in rows(600, seed=7) for t in (r["instruction"], r["response"]) if t]


def _raw_sources(folder: Path, texts: list[str]) -> Path:
    """The texts spread over every kind of raw source, in name order."""
    folder.mkdir(parents=True)
    a, b, c, d = texts[:300], texts[300:600], texts[600:900], texts[900:]
    with gzip.open(folder / "a.jsonl.gz", "wt", encoding="utf-8") as f:
        f.writelines(json.dumps({"body": t}) + "\n" for t in a)
    pq.write_table(pa.table({"body": b}), folder / "b.parquet", row_group_size=64)
    (folder / "c.txt").write_text("\n".join(t.replace("\n", " ") for t in c) + "\n")
    write_jsonl(folder / "d.jsonl", [{"body": t} for t in d])
    return folder


def _rows_of(folder: Path, texts: list[str]) -> Path:
    """The same texts as rows (instruction and response each a text)."""
    pairs = [texts[i : i + 2] for i in range(0, len(texts), 2)]
    write_jsonl(folder / "rows.jsonl", [
        {"condition": "", "instruction": p[0], "response": p[1] if len(p) > 1 else ""}
        for p in pairs
    ])  # fmt: skip
    return folder


def test_raw_text_trains_the_tokenizer_of_the_same_texts_as_rows(tmp_path: Path):
    texts = _texts()
    texts[600:900] = [t.replace("\n", " ") for t in texts[600:900]]  # c.txt: a line each
    raw = _raw_sources(tmp_path / "raw", texts)
    result = train_tokenizer([raw], tmp_path / "text/tokenizer.json", vocab_size=VOCAB,
                             text_field="body", doc_per_line=True, progress=False)  # fmt: skip
    rows_folder = _rows_of(tmp_path / "rows", texts)
    train_tokenizer([rows_folder], tmp_path / "rows_out/tokenizer.json", vocab_size=VOCAB,
                    prefix_config=None, progress=False)  # fmt: skip
    assert (tmp_path / "text/tokenizer.json").read_bytes() == (
        tmp_path / "rows_out/tokenizer.json"
    ).read_bytes()
    assert result.texts_used == len(texts)
    assert [f.task for f in result.files] == [
        str(raw / name) for name in ("a.jsonl.gz", "b.parquet", "c.txt", "d.jsonl")
    ]
    assert result.counting.counted_bytes == sum(len(t.encode()) for t in texts)
    assert result.counting.reused_files == []
    # The scratch counts beside the output are gone.
    assert sorted(p.name for p in (tmp_path / "text").iterdir()) == [
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]


def test_a_saved_datasets_folder_is_a_source(tmp_path: Path):
    datasets = pytest.importorskip("datasets")
    texts = _texts()[:400]
    datasets.Dataset.from_dict({"text": texts}).save_to_disk(str(tmp_path / "saved"))
    result = train_tokenizer([tmp_path / "saved"], tmp_path / "out/tokenizer.json",
                             vocab_size=VOCAB, text_field="text", progress=False)  # fmt: skip
    assert result.texts_used == 400


def test_bad_raw_input_names_the_source_and_writes_nothing(tmp_path: Path, capsys):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "empty.txt").write_text("")
    out = tmp_path / "out" / "tokenizer.json"
    with pytest.raises(InputError, match=r"empty\.txt: empty input"):
        train_tokenizer([raw / "empty.txt"], out, text_field="text", progress=False)
    write_jsonl(raw / "wrong.jsonl", [{"other": "x"}])
    assert main(["train-tokenizer", str(raw / "wrong.jsonl"), "-o", str(out),
                 "--text-field", "text"]) == 1  # fmt: skip
    assert "wrong.jsonl" in capsys.readouterr().err
    assert not out.exists() and list(out.parent.iterdir()) == []
    with pytest.raises(ConfigError, match="--text-field"):
        train_tokenizer([raw], out, text_field="text", counts_dir=tmp_path / "c")


def test_raw_text_options_are_refused_where_they_would_do_nothing(tmp_path: Path, capsys):
    """--on-error skip does not apply to raw text (a bad document fails, naming its line), and
    --doc-per-line does nothing without --text-field: both refused before anything is read."""
    raw = tmp_path / "raw"
    raw.mkdir()
    write_jsonl(raw / "a.jsonl", [{"text": 5}, {"text": "hello there"}])
    out = tmp_path / "out" / "tokenizer.json"
    with pytest.raises(ConfigError, match=r"--on-error skip .* drop --on-error skip"):
        train_tokenizer([raw], out, text_field="text", on_error="skip", progress=False)
    with pytest.raises(InputError, match=r"a\.jsonl: line 1: field 'text' is a number"):
        train_tokenizer([raw], out, text_field="text", progress=False)
    rows_folder = _rows_of(tmp_path / "rows", _texts()[:50])
    assert main(["train-tokenizer", str(rows_folder), "-o", str(out), "--doc-per-line"]) == 1
    said = capsys.readouterr().err
    assert "--doc-per-line cuts the .txt files" in said and "needs --text-field FIELD" in said
    argv = ["train-tokenizer", str(rows_folder), "-o", str(out), "--doc-per-line"]
    assert main([*argv, "--executor", "local"]) == 1
    assert "--doc-per-line reads raw text, which needs --text-field" in capsys.readouterr().err
    assert not out.exists()
    # The same options where they apply still train.
    (raw / "a.jsonl").unlink()
    (raw / "b.txt").write_text("one line here\nanother line there\n" * 20)
    result = train_tokenizer(
        [raw], out, text_field="text", doc_per_line=True, vocab_size=300, progress=False
    )
    assert result.texts_used == 40 and out.is_file()


def test_a_short_vocabulary_from_raw_text_does_not_suggest_the_prefix_config(
    tmp_path: Path, capsys
):
    """--prefix-config does not apply with --text-field, so the short-vocabulary note does not
    offer it; on rows whose files max_per_file cut, it does."""
    from data_io.tokenizer.summary import caveats
    from data_io.tokenizer.train import TrainFileResult, TrainResult

    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.txt").write_text("one line here\nanother line there\n" * 20)
    out = tmp_path / "out" / "tokenizer.json"
    argv = ["train-tokenizer", str(raw), "-o", str(out), "--text-field", "text"]
    assert main([*argv, "--doc-per-line", "--vocab-size", "60000"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "not the 60,000 asked" in printed and "train on more texts or ask for fewer" in printed
    assert "--prefix-config" not in printed
    cut = TrainFileResult("t.jsonl", 10, 20, 5, 0, limited=True)
    result = TrainResult(str(out), 300, 5, 0.1, [cut], requested_vocab_size=60000)
    assert "(--prefix-config none uses every text)" in caveats(result)[0]


def test_invalid_utf8_replaced_and_empty_sources_are_said(tmp_path: Path, capsys):
    """The reading replaced invalid UTF-8 and counted it, and found an empty source among the
    inputs, but the run dropped both: nothing said (prepare says both of the same files)."""
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.txt").write_bytes(b"one line \xff here\nanother \xfe line\n" * 20)
    (raw / "empty.txt").write_text("")
    out = tmp_path / "out" / "tokenizer.json"
    result = train_tokenizer(
        [raw], out, text_field="text", doc_per_line=True, vocab_size=300, progress=False
    )
    assert result.invalid_utf8_lines == 40 and result.texts_used == 40
    assert any("empty.txt (no documents)" in name for name in result.skipped_files)
    assert main(["train-tokenizer", str(raw), "-o", str(out), "--text-field", "text",
                 "--vocab-size", "300"]) == 0  # fmt: skip
    printed = " ".join(capsys.readouterr().out.split())
    assert "invalid UTF-8 replaced with U+FFFD on 40 lines of the raw text" in printed
    assert "skipped 1 input file, e.g." in printed and "empty.txt (no documents)" in printed


def test_unigram_on_raw_text_trains_the_file_the_same_texts_as_rows_train(tmp_path: Path, capsys):
    """Unigram trained only through tokenizers' own trainer, fed rows: raw text was refused.
    It now learns from the rust trainer's counts, raw text's too: the same documents as rows
    (the instruction of each, an empty response) give the same file, byte for byte, and the
    hf trainer's pieces."""
    rng = random.Random(4)
    words = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyzäö", k=rng.randint(1, 7))) for _ in range(300)]  # fmt: skip
    docs = [" ".join(rng.choices(words, k=rng.randint(5, 40))) for _ in range(200)]
    raw, rows = tmp_path / "raw", tmp_path / "rows"
    raw.mkdir()
    rows.mkdir()
    (raw / "a.txt").write_text("\n\n".join(docs) + "\n")
    (rows / "r.jsonl").write_text(
        "".join(
            json.dumps({"condition": "", "instruction": d, "response": ""}) + "\n" for d in docs
        )
    )
    common = ["--tokenizer-type", "unigram", "--vocab-size", "600", "--prefix-config", "none"]
    assert main(["train-tokenizer", str(raw), "-o", str(tmp_path / "t" / "tokenizer.json"),
                 "--text-field", "text", *common]) == 0  # fmt: skip
    assert "EM passes in" in capsys.readouterr().out
    assert main(["train-tokenizer", str(rows), "-o", str(tmp_path / "r" / "tokenizer.json"),
                 *common]) == 0  # fmt: skip
    assert main(["train-tokenizer", str(rows), "-o", str(tmp_path / "h" / "tokenizer.json"),
                 "--trainer", "hf", *common]) == 0  # fmt: skip
    trained = (tmp_path / "t" / "tokenizer.json").read_bytes()
    assert trained == (tmp_path / "r" / "tokenizer.json").read_bytes()
    assert_same_unigram(trained, (tmp_path / "h" / "tokenizer.json").read_bytes())
