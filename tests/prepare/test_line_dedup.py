"""``--dedup line`` (MyPT's mode) against an oracle in plain Python: the documents read and
cleaned by the Python reader, every line that is not blank kept only the first time it is
seen, a document that lost a line rebuilt from its kept lines, then encoded by the
``tokenizers`` package. Decided as batches arrive and after the run (sorted runs, spilled in a
tiny budget), in one run and incrementally; the same folder either way."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from data_io.errors import ConfigError
from data_io.formats.raw_text import ReadOptions, ReadStats, expand_inputs
from data_io.prepare import prepare
from data_io.prepare.dedup import OnlineDedup
from data_io.prepare.normalize import CleanOptions, CleanStats
from data_io.prepare.split import is_val
from tests.formats.raw_text_oracle import read_documents
from tests.prepare.clean_oracle import clean_batch
from tests.prepare.helpers import WORDS, folder_files, read_split

TOKENIZER = Path(__file__).resolve().parents[2] / "trained_tokenizers" / "bpe" / "tokenizer.json"
BOILERPLATE = ["Home | About | Contact", "Copyright 2026, all rights reserved.", "    return x"]


def _page(rng: random.Random, number: int) -> str:
    """A document of a few paragraphs; some lines recur across documents (boilerplate, common
    sentences), some paragraphs have several lines."""
    paragraphs = []
    for _ in range(rng.randint(1, 4)):
        lines = []
        for _ in range(rng.randint(1, 3)):
            roll = rng.random()
            if roll < 0.25:
                lines.append(rng.choice(BOILERPLATE))
            elif roll < 0.45:
                lines.append(f"a common sentence number {rng.randrange(12)} about {WORDS[3]}")
            else:
                words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
                lines.append(f"page {number}: {words}")
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


def _corpus(path: Path, count: int, seed: int) -> Path:
    rng = random.Random(seed)
    rows = [_page(rng, seed * 10_000 + i) for i in range(count)]
    rows += rows[: count // 10]  # whole pages published again: every line a duplicate
    path.write_text("".join(json.dumps({"text": row}) + "\n" for row in rows))
    return path


def _oracle_documents(inputs: list[Path]) -> list[str]:
    """The documents prepare keeps, in order, by the Python reader, cleaner and a set."""
    sources, _ = expand_inputs([str(p) for p in inputs], ReadOptions())
    seen: set[str] = set()
    kept = []
    for source in sources:
        texts = list(read_documents(source, ReadOptions(), ReadStats()))
        for text in clean_batch(texts, CleanOptions(), CleanStats()):
            lines, dropped = [], False
            blank = False
            for line in text.split("\n"):
                if not line or line.isspace():
                    blank = True
                    continue
                if line in seen:
                    dropped = True
                    continue
                seen.add(line)
                lines.append(("\n\n" if blank and lines else "\n" if lines else "") + line)
                blank = False
            rebuilt = text if not dropped else "".join(lines)
            kept.append((text, rebuilt if lines else None))
    return kept  # type: ignore[return-value]


def _expected_splits(
    inputs: list[Path], eos: int, seed: int = 0, val_fraction: float = 0.1
) -> dict:
    tokenizer = Tokenizer.from_file(str(TOKENIZER))
    streams: dict[str, list[int]] = {"train": [], "val": []}
    for cleaned, rebuilt in _oracle_documents(inputs):
        if rebuilt is None:
            continue
        digest = hashlib.blake2b(cleaned.encode(), digest_size=16).digest()
        hashes = np.frombuffer(digest, dtype=">u8").astype(np.uint64).reshape(1, 2)
        split = "val" if is_val(hashes, seed, val_fraction)[0] else "train"
        streams[split] += [*tokenizer.encode(rebuilt, add_special_tokens=False).ids, eos]
    return streams


def _prepare(inputs: list[Path], out: Path, monkeypatch, *, online: bool, budget: str = "1GB"):
    monkeypatch.setattr(OnlineDedup, "fits", staticmethod(lambda *_: online))
    return prepare(
        inputs, out, tokenizer=str(TOKENIZER), dedup="line", tokens_per_shard=3000,
        dedup_memory=budget, progress=False,
    )  # fmt: skip


@pytest.mark.parametrize("online,budget", [(True, "1GB"), (False, "1GB"), (False, "4KB")])
def test_lines_are_kept_the_first_time_as_the_oracle_keeps_them(
    tmp_path: Path, monkeypatch, online: bool, budget: str
) -> None:
    inputs = [_corpus(tmp_path / "a.jsonl", 300, seed=1), _corpus(tmp_path / "b.jsonl", 200, 2)]
    out = tmp_path / "out"
    result = _prepare(inputs, out, monkeypatch, online=online, budget=budget)
    expected = _expected_splits(inputs, result.eos_id)
    for split in ("train", "val"):
        assert read_split(out, split).tolist() == expected[split], split
    oracle = _oracle_documents(inputs)
    assert result.duplicates == sum(rebuilt is None for _, rebuilt in oracle) >= 50
    assert result.duplicate_lines > result.duplicates
    assert result.documents["train"] + result.documents["val"] == len(oracle) - result.duplicates
    if budget == "4KB":
        assert result.dedup_runs > 10 and result.dedup_peak_bytes <= 4096
    metadata = json.loads((out / "dataset_metadata.json").read_text())
    assert metadata["options"]["dedup"] == "line"
    assert metadata["runs"][0]["duplicate_lines"] == result.duplicate_lines


def test_a_later_run_drops_the_lines_an_earlier_run_kept(tmp_path: Path, monkeypatch) -> None:
    first = _corpus(tmp_path / "a.jsonl", 200, seed=3)
    second = _corpus(tmp_path / "b.jsonl", 200, seed=4)
    folders = {}
    for online in (True, False):
        out = tmp_path / f"out_{online}"
        _prepare([first], out, monkeypatch, online=online)
        later = _prepare([first, second], out, monkeypatch, online=online)
        assert later.new_inputs == [str(second)]
        expected = _expected_splits([first, second], later.eos_id)
        for split in ("train", "val"):
            assert read_split(out, split).tolist() == expected[split], split
        folders[online] = folder_files(out)
    assert folders[True] == folders[False]  # the same shards, hashes and metadata either way


def test_hashes_outgrowing_the_budget_start_the_run_again_after_it(
    tmp_path: Path, monkeypatch
) -> None:
    inputs = [_corpus(tmp_path / "a.jsonl", 400, seed=5)]
    spooled = _prepare(inputs, tmp_path / "spooled", monkeypatch, online=False, budget="8KB")
    restarted = _prepare(inputs, tmp_path / "restarted", monkeypatch, online=True, budget="8KB")
    assert restarted.dedup_runs > 0  # the sorted runs decided it
    assert folder_files(tmp_path / "spooled") == folder_files(tmp_path / "restarted")
    assert (restarted.duplicates, restarted.duplicate_lines) == (
        spooled.duplicates,
        spooled.duplicate_lines,
    )


def test_the_char_tokenizer_encodes_the_kept_lines(tmp_path: Path) -> None:
    inputs = [_corpus(tmp_path / "a.jsonl", 100, seed=6)]
    out = tmp_path / "out"
    prepare(inputs, out, tokenizer="char", dedup="line", val_fraction=0.0, progress=False)
    state = json.loads((out / "tokenizer_state.json").read_text())
    chars = state["chars"]
    text = "".join(chars[i] if i else "\x00" for i in read_split(out, "train").tolist())
    expected = [rebuilt for _, rebuilt in _oracle_documents(inputs) if rebuilt is not None]
    assert text.split("\x00")[:-1] == expected


def test_the_cli_takes_dedup_line_and_counts_the_lines(tmp_path: Path, capsys) -> None:
    inputs = _corpus(tmp_path / "a.jsonl", 100, seed=7)
    out = tmp_path / "out"
    from data_io.cli import main

    args = [
        "prepare",
        str(inputs),
        "-o",
        str(out),
        "--tokenizer",
        str(TOKENIZER),
        "--dedup",
        "line",
    ]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "lines dropped: duplicate" in printed
    assert "every line a duplicate" in printed
    with pytest.raises(ConfigError, match="dedup: 'line' then, 'doc' now"):
        prepare([inputs], out, tokenizer=str(TOKENIZER), dedup="doc", progress=False)


@pytest.mark.parametrize("online", [True, False])
def test_a_later_run_with_no_line_keeps_the_earlier_runs_hashes(
    tmp_path: Path, monkeypatch, online: bool
) -> None:
    first = _corpus(tmp_path / "a.jsonl", 50, seed=8)
    short = tmp_path / "b.jsonl"
    short.write_text(json.dumps({"text": "too short"}) + "\n")  # dropped by the filter
    out = tmp_path / "out"
    _prepare([first], out, monkeypatch, online=online)
    _prepare([first, short], out, monkeypatch, online=online)
    metadata = json.loads((out / "dataset_metadata.json").read_text())
    assert (out / ".prepare" / metadata["dedup_hashes"]).is_file()
    third = tmp_path / "c.jsonl"  # the first's pages again, in another order
    third.write_text("".join(reversed(first.read_text().splitlines(keepends=True))))
    again = _prepare([first, short, third], out, monkeypatch, online=online)
    # Every line of the copy was prepared before: no document of it is left.
    assert again.duplicates > 40 and again.documents == {"train": 0, "val": 0}
