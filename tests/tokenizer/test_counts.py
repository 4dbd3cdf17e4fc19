"""The Rust trainer's counting pass beyond one table in memory: a memory budget that spills
sorted runs (same tokenizer, nothing left behind), and ``--counts DIR``, which keeps each file's
counts so a re-run counts only new or changed files (same tokenizer as counting everything)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from data_io.cli import main
from data_io.errors import ConfigError, InputError
from data_io.tokenizer.train import train_tokenizer
from tests.prepare.test_os_errors import REPO, assert_one_line, small_tmpfs
from tests.scale.inputs import rows, write_jsonl

VOCAB = 700


def _inputs(folder: Path) -> Path:
    write_jsonl(folder / "a.jsonl", rows(400, seed=1))
    write_jsonl(folder / "b.jsonl", rows(300, seed=2))
    write_jsonl(folder / "c.jsonl", rows(200, seed=3))
    return folder


def _train(inputs: Path, out: Path, **options):
    return train_tokenizer(
        [inputs], out / "tokenizer.json", vocab_size=VOCAB, prefix_config=None, progress=False,
        **options,
    )  # fmt: skip


def test_a_tiny_budget_spills_and_gives_the_same_tokenizer(tmp_path: Path):
    inputs = _inputs(tmp_path / "in")
    # More texts than one batch of the counter (8,192), so the tables spill more than once.
    write_jsonl(inputs / "long.jsonl", rows(9000, seed=5))
    whole = _train(inputs, tmp_path / "whole")
    spilled = _train(inputs, tmp_path / "spilled", count_memory=1)
    assert whole.counting is not None and whole.counting.spill.runs == 0
    assert spilled.counting is not None and spilled.counting.spill.runs >= 2
    assert spilled.counting.spill.run_bytes > 0
    assert (tmp_path / "spilled/tokenizer.json").read_bytes() == (
        tmp_path / "whole/tokenizer.json"
    ).read_bytes()
    assert spilled.counting.words == whole.counting.words
    assert spilled.counting.pieces == whole.counting.pieces
    # The spill folder was beside the output, and is gone.
    assert spilled.counting.spill.spill_dir.startswith(str(tmp_path / "spilled"))
    assert sorted(p.name for p in (tmp_path / "spilled").iterdir()) == [
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
    ]


def test_kept_counts_are_reused_and_only_new_or_changed_files_are_counted(tmp_path: Path):
    inputs = _inputs(tmp_path / "in")
    counts = tmp_path / "counts"
    first = _train(inputs, tmp_path / "first", counts_dir=counts)
    assert first.counting.reused_files == []
    assert sorted(p.name for p in counts.iterdir()) == sorted(
        f"{t}.jsonl.words{ext}" for t in "abc" for ext in ("", ".json")
    )
    again = _train(inputs, tmp_path / "again", counts_dir=counts)
    assert sorted(again.counting.reused_files) == ["a.jsonl", "b.jsonl", "c.jsonl"]
    assert again.counting.counted_bytes == 0
    assert again.files == first.files

    # A new file and a changed one are counted; the result is a fresh run's.
    write_jsonl(inputs / "d.jsonl", rows(150, seed=4))
    write_jsonl(inputs / "b.jsonl", rows(300, seed=22))
    grown = _train(inputs, tmp_path / "grown", counts_dir=counts)
    assert sorted(grown.counting.reused_files) == ["a.jsonl", "c.jsonl"]
    fresh = _train(inputs, tmp_path / "fresh")
    assert (tmp_path / "grown/tokenizer.json").read_bytes() == (
        tmp_path / "fresh/tokenizer.json"
    ).read_bytes()
    assert grown.files == fresh.files

    # Another seed or truncation chooses other texts: nothing is reused.
    other = _train(inputs, tmp_path / "other", counts_dir=counts, truncate_len=20)
    assert other.counting.reused_files == []


def test_a_damaged_count_file_is_an_error_naming_it(tmp_path: Path):
    inputs = _inputs(tmp_path / "in")
    counts = tmp_path / "counts"
    _train(inputs, tmp_path / "first", counts_dir=counts)
    run = counts / "b.jsonl.words"
    run.write_bytes(run.read_bytes()[:-40])
    with pytest.raises(InputError, match=r"b\.jsonl\.words.*delete it"):
        _train(inputs, tmp_path / "second", counts_dir=counts)
    assert not (tmp_path / "second/tokenizer.json").exists()
    # A damaged header (its JSON) says so, and to delete the file, too.
    damaged = bytearray((counts / "a.jsonl.words").read_bytes())
    damaged[damaged.index(b":")] = ord("#")
    (counts / "a.jsonl.words").write_bytes(bytes(damaged))
    with pytest.raises(InputError, match=r"a\.jsonl\.words: its header is not a word-count "
                       r"header: .*; delete it to count its input again"):  # fmt: skip
        _train(inputs, tmp_path / "second", counts_dir=counts)
    for name in ("a", "b"):
        (counts / f"{name}.jsonl.words").unlink()
    assert _train(inputs, tmp_path / "second", counts_dir=counts).counting.reused_files == [
        "c.jsonl"
    ]


def test_counts_of_another_normaliser_or_regex_are_refused(tmp_path: Path):
    inputs = _inputs(tmp_path / "in")
    counts = tmp_path / "counts"
    _train(inputs, tmp_path / "first", counts_dir=counts)
    sidecar = counts / "a.jsonl.words.json"
    record = json.loads(sidecar.read_text())
    record["key"]["words"]["pre_tokenizer"] = r"\s+"
    sidecar.write_text(json.dumps(record))
    with pytest.raises(InputError, match=r"a\.jsonl\.words\.json.*pre-tokenizer regex"):
        _train(inputs, tmp_path / "second", counts_dir=counts)


def test_counting_options_belong_to_the_rust_trainer(tmp_path: Path):
    inputs = _inputs(tmp_path / "in")
    for options in ({"counts_dir": tmp_path / "c"}, {"count_memory": 1 << 20}):
        with pytest.raises(ConfigError, match="rust trainer"):
            _train(inputs, tmp_path / "out", trainer="hf", **options)
    with pytest.raises(ConfigError, match="count_memory"):
        _train(inputs, tmp_path / "out", count_memory=0)


def test_the_command_line_takes_memory_sizes_and_prints_the_passes(tmp_path: Path, capsys):
    inputs = _inputs(tmp_path / "in")
    out = tmp_path / "out" / "tokenizer.json"
    args = ["train-tokenizer", str(inputs), "-o", str(out), "--vocab-size", str(VOCAB),
            "--prefix-config", "none", "--count-memory", "0.001M"]  # fmt: skip
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "distinct pre-tokens" in printed and "spilled past --count-memory" in printed
    assert "peak memory" in printed
    with pytest.raises(SystemExit):
        main([*args[:-1], "lots"])
    assert "not a memory size" in capsys.readouterr().err
    shutil.rmtree(out.parent)


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_full_disk_while_spilling_is_one_line_and_leaves_nothing(tmp_path: Path):
    inputs = _inputs(tmp_path / "in")

    # Words seen once (letters: digits split apart), so the spilled runs outgrow the disk.
    def word(n: int) -> str:
        return "".join(chr(97 + n // 26**j % 26) for j in range(5))

    unique = [{"condition": "", "instruction": " ".join(word(12 * i + k) for k in range(12)),
               "response": word(10**6 + i)} for i in range(10_000)]  # fmt: skip
    write_jsonl(inputs / "unique.jsonl", unique)
    with small_tmpfs(tmp_path / "disk", "256k") as disk:
        out = disk / "out" / "tokenizer.json"
        failed = subprocess.run(
            [sys.executable, "-m", "data_io", "train-tokenizer", str(inputs), "-o", str(out),
             "--vocab-size", str(VOCAB), "--prefix-config", "none", "--count-memory", "1"],
            cwd=REPO, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert failed.returncode == 1
        assert_one_line(failed.stderr, "No space left on device", "[ENOSPC]", "free space")
        # No spill folder, no run, no tokenizer: nothing that looks finished.
        assert list(out.parent.iterdir()) == []
