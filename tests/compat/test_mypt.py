"""MyPT users drop in: the command lines of MyPT's large-dataset guide run verbatim, and the
output reads the way MyPT's own code reads it (``np.memmap(path, dtype=np.uint32)``, its
``Tokenizer.from_state``); folders MyPT wrote load in data_io.

The commands below are copied from ``shared/seeds/mypt-large-dataset-guide.md`` and run with
``bash`` in a folder holding ``scripts/prepare_dataset.py`` (ours), as a MyPT user runs them
from MyPT's checkout. The oracle for the ids is the ``tokenizers`` package (not data_io's
encoder) and, for ``char``, MyPT's own rule (``chars[i]`` is id ``i``).
"""

from __future__ import annotations

import collections
import json
import os
import random
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from data_io.errors import InputError
from data_io.load import MemoryMappedDataset
from data_io.load.build import build_data
from data_io.load.config import config_from_dict

REPO = Path(__file__).resolve().parents[2]
EOS = 50256  # GPT-2's <|endoftext|>, after every document

# (command as the guide prints it, the input files it names)
GUIDE_COMMANDS = {
    "step 1": (
        """python scripts/prepare_dataset.py \\
    --input_files wiki.txt books.txt news.txt \\
    --out_dir data/large_corpus \\
    --tokenization gpt2 \\
    --tokens_per_shard 10000000""",
        ["wiki.txt", "books.txt", "news.txt"],
    ),
    "example 1": (
        """python scripts/prepare_dataset.py \\
    --input_files wikipedia_en.txt gutenberg_books.txt \\
    --out_dir data/wiki_books \\
    --tokenization gpt2 \\
    --tokens_per_shard 10000000 \\
    --val_fraction 0.1""",
        ["wikipedia_en.txt", "gutenberg_books.txt"],
    ),
    "example 2": (
        """python scripts/prepare_dataset.py \\
    --input_files wiki_en.txt wiki_de.txt europarl.txt news_combined.txt \\
    --out_dir data/multilingual \\
    --tokenization gpt2 \\
    --tokens_per_shard 20000000  # Larger shards""",
        ["wiki_en.txt", "wiki_de.txt", "europarl.txt", "news_combined.txt"],
    ),
    "full example": (
        """python scripts/prepare_dataset.py \\
    --input_files data/source1.txt data/source2.txt data/source3.txt \\
    --out_dir data/my_large_dataset \\
    --tokenization gpt2 \\
    --tokens_per_shard 10000000 \\
    --val_fraction 0.15 \\
    --no_dedup  # Skip deduplication for speed""",
        ["data/source1.txt", "data/source2.txt", "data/source3.txt"],
    ),
    "quick start": (
        """python scripts/prepare_dataset.py \\
    --input_files data/*.txt \\
    --out_dir data/my_dataset""",
        ["data/a.txt", "data/b.txt"],
    ),
}

CHAR_COMMAND = """python scripts/prepare_dataset.py \\
    --input_files shakespeare.txt dante.txt \\
    --out_dir data/literature_char \\
    --tokenization char \\
    --tokens_per_shard 5000000  # Smaller shards for char-level"""

WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "a",
    "is",
    "that",
    "for",
    "it",
    "as",
    "was",
    "with",
    "be",
    "by",
    "on",
    "not",
    "he",
    "this",
    "are",
    "or",
    "his",
    "from",
    "at",
    "which",
    "but",
    "have",
    "an",
    "they",
    "you",
    "were",
    "her",
    "she",
    "there",
    "one",
    "all",
    "we",
    "can",
    "their",
    "has",
    "been",
    "if",
    "more",
    "when",
    "will",
    "would",
    "who",
    "so",
    "no",
    "river",
    "stone",
    "light",
    "garden",
    "winter",
    "letter",
    "music",
    "number",
    "market",
]


def _lines(seed: int, count: int) -> list[str]:
    """Lines of 4-14 words (most at least 20 characters), some short ones, repeated ones."""
    rng = random.Random(seed)
    lines = [" ".join(rng.choices(WORDS, k=rng.randint(4, 14))) for _ in range(count)]
    lines += ["too short", "tiny"]  # dropped by the filter (MyPT's too: under 20 characters)
    lines += lines[:5]  # repeated lines, dropped by de-duplication
    rng.shuffle(lines)
    return lines


def _workspace(tmp_path: Path, files: list[str]) -> dict[str, list[str]]:
    """A MyPT-like checkout: scripts/ (ours) and the input files; their lines by name."""
    (tmp_path / "scripts").symlink_to(REPO / "scripts")
    written = {}
    for number, name in enumerate(files):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = _lines(number, 150)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        written[name] = lines
    return written


def _run_verbatim(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``command`` through bash, ``python`` being this interpreter (the user's venv)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def _out_dir(command: str) -> str:
    found = re.search(r"--out_dir (\S+)", command)
    assert found is not None
    return found.group(1)


def _read_like_mypt(out: Path) -> dict[str, list[np.ndarray]]:
    """Every shard of each split as MyPT's trainer maps it: uint32, no header, no metadata."""
    return {
        split: [
            np.memmap(p, dtype=np.uint32, mode="r") for p in sorted((out / split).glob("*.bin"))
        ]
        for split in ("train", "val")
    }


def _documents(tokens: np.ndarray, eos: int) -> list[tuple[int, ...]]:
    ends = np.flatnonzero(tokens == eos)
    assert len(ends) and ends[-1] == len(tokens) - 1, "every document ends with the EOS"
    starts = np.concatenate([[0], ends[:-1] + 1])
    return [tuple(tokens[s:e].tolist()) for s, e in zip(starts, ends, strict=True)]


def _kept(lines: list[str], dedup: bool) -> list[str]:
    """What MyPT's pipeline keeps of the lines: long enough, once each unless --no_dedup."""
    kept = [line for line in lines if len(line) >= 20]
    return list(dict.fromkeys(kept)) if dedup else kept


@pytest.mark.parametrize("name", sorted(GUIDE_COMMANDS))
def test_guide_command_runs_verbatim_and_mypt_reads_the_tokens(tmp_path, name):
    command, files = GUIDE_COMMANDS[name]
    lines = _workspace(tmp_path, files)
    done = _run_verbatim(command, tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / _out_dir(command)

    # MyPT's layout: the guide's tree, shards numbered across train/ then val/.
    for name_ in ("dataset_metadata.json", "tokenizer_state.json"):
        assert (out / name_).is_file(), name_
    shards = _read_like_mypt(out)
    assert shards["train"] and shards["val"], "both splits have shards"
    names = [p.name for split in ("train", "val") for p in sorted((out / split).glob("*.bin"))]
    assert names == [f"shard_{i:05d}.bin" for i in range(len(names))]
    state = json.loads((out / "tokenizer_state.json").read_text())
    assert state == {"token_kind": "gpt2", "chars": None}  # MyPT's Tokenizer.get_state()
    metadata = json.loads((out / "dataset_metadata.json").read_text())
    assert metadata["tokenization"] == "gpt2"
    assert metadata["train_shards"] == len(shards["train"])
    assert metadata["val_shards"] == len(shards["val"])
    assert metadata["total_shards"] == len(names)
    tokens = np.concatenate([np.asarray(a) for split in shards.values() for a in split])
    assert metadata["total_tokens"] == len(tokens)

    # The ids, against the tokenizers package on every line MyPT would keep.
    from tokenizers import Tokenizer

    oracle = Tokenizer.from_file(str(out / "tokenizer.json"))
    dedup = "--no_dedup" not in command
    expected = [line for name_ in files for line in _kept(lines[name_], dedup)]
    if dedup:  # also across files
        expected = list(dict.fromkeys(expected))
    want = collections.Counter(tuple(e.ids) for e in oracle.encode_batch(expected))
    assert collections.Counter(_documents(tokens, EOS)) == want


def test_char_example_reads_back_with_mypts_tokenizer_state(tmp_path):
    lines = _workspace(tmp_path, ["shakespeare.txt", "dante.txt"])
    (tmp_path / "shakespeare.txt").write_text(
        "\n".join(lines["shakespeare.txt"] + ["Thou art more lovely, ÿ and more temperate"]),
        encoding="utf-8",
    )
    done = _run_verbatim(CHAR_COMMAND, tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "data/literature_char"
    state = json.loads((out / "tokenizer_state.json").read_text(encoding="utf-8"))
    # MyPT's Tokenizer.from_state: token_kind and chars; id i is chars[i].
    assert state["token_kind"] == "char"
    chars = state["chars"]
    itos = dict(enumerate(chars))
    stoi = {c: i for i, c in enumerate(chars)}
    shards = _read_like_mypt(out)
    tokens = np.concatenate([np.asarray(a) for split in shards.values() for a in split])
    assert int(tokens.max()) < len(chars)  # MyPT's vocab_size is len(chars)
    eos = stoi["<|endoftext|>"]
    decoded = ["".join(itos[i] for i in doc) for doc in _documents(tokens, eos)]
    text = (tmp_path / "shakespeare.txt").read_text(encoding="utf-8").splitlines()
    expected = list(dict.fromkeys(_kept(text, True) + _kept(lines["dante.txt"], True)))
    assert collections.Counter(decoded) == collections.Counter(expected)
    # MyPT encodes a line to the same ids (its stoi), never to the EOS.
    for doc, line in zip(_documents(tokens, eos)[:20], decoded[:20], strict=False):
        assert tuple(stoi[c] for c in line) == doc


def test_more_input_continues_mypts_numbering_and_keeps_earlier_bytes(tmp_path):
    # Three runs: from the third on, a split's numbers have gaps (train 0-3 and 6-7), and the
    # continued last shard and the new ones must never share a name, final or temporary.
    _workspace(tmp_path, ["a.txt", "b.txt", "c.txt", "d.txt", "e.txt"])
    small = "--tokens_per_shard 700 --val_fraction 0.2"
    command = "python scripts/prepare_dataset.py --out_dir ds {small} --input_files {files}"
    runs = ["a.txt b.txt", "a.txt b.txt c.txt", "a.txt b.txt c.txt d.txt e.txt"]
    before: dict[Path, bytes] = {}
    for files in runs:
        done = _run_verbatim(command.format(small=small, files=files), tmp_path)
        assert done.returncode == 0, done.stderr
        after = sorted((tmp_path / "ds").rglob("*.bin"))
        numbers = [int(p.stem.split("_")[1]) for p in after]
        assert len(set(numbers)) == len(numbers), "a number is never used twice across splits"
        assert len(after) > len(before)
        for path, data in before.items():  # earlier shards: unchanged, or grown at their end
            assert path.read_bytes()[: len(data)] == data
        metadata = json.loads((tmp_path / "ds" / "dataset_metadata.json").read_text())
        assert metadata["total_tokens"] * 4 == sum(p.stat().st_size for p in after)
        for split in ("train", "val"):
            recorded = [s["name"] for s in metadata["splits"][split]["shards"]]
            assert recorded == [p.name for p in after if p.parent.name == split]
            sizes = [(tmp_path / "ds" / split / n).stat().st_size // 4 for n in recorded]
            assert all(size == 700 for size in sizes[:-1]), sizes
        before = {p: p.read_bytes() for p in after}
    train = sorted(int(p.stem.split("_")[1]) for p in (tmp_path / "ds" / "train").glob("*.bin"))
    assert train != list(range(len(train))), "the runs left gaps in train/'s numbers"


def test_a_mypt_folder_is_not_extended_in_another_layout(tmp_path):
    _workspace(tmp_path, ["a.txt", "b.txt"])
    first = "python scripts/prepare_dataset.py --input_files a.txt --out_dir ds"
    assert _run_verbatim(first, tmp_path).returncode == 0
    done = _run_verbatim("data_io prepare a.txt b.txt -o ds --dtype uint32", tmp_path)
    assert done.returncode != 0
    assert "prepared in the mypt layout" in done.stderr


def test_help_lists_mypts_spellings_as_aliases():
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts/prepare_dataset.py"), "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    for flag, ours in [
        ("--input_files", "INPUT"),
        ("--out_dir", "--output"),
        ("--tokenization", "--tokenizer"),
        ("--tokens_per_shard", "--tokens-per-shard"),
        ("--val_fraction", "--val-fraction"),
        ("--no_normalize", "--no-normalize"),
        ("--no_filter", "--no-filter"),
        ("--no_dedup", "--no-dedup"),
    ]:
        assert re.search(rf"{flag}\b.*= {ours}", done.stdout, re.S), flag


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("--tokens_per_shard 50 --tokens-per-shard 60", "disagree"),
        ("--tokens_per_shard 50 --tokens-per-shard 10000000", "disagree"),  # ours at its default
        ("--val_fraction 0.2 --val-fraction 0.0", "disagree"),
        ("--dtype uint16", "layout mypt writes uint32 shards"),
        ("--format npy", "layout mypt writes raw .bin shards"),
        ("--tokenization gpt2 --tokenizer-path x", "unrecognized arguments"),
        ("--tokenizer Qwen/Qwen3", "MyPT's layout (chosen by MyPT's flags"),
        # In the words the user typed: MyPT's spelling of the option, not ours.
        ("--val_fraction 1.5", "--val_fraction must be a number in [0, 1), got 1.5"),
    ],
)
def test_contradicting_mypt_flags_are_refused_before_any_work(tmp_path, extra, message):
    _workspace(tmp_path, ["a.txt"])
    done = _run_verbatim(
        f"python scripts/prepare_dataset.py --input_files a.txt --out_dir ds {extra}", tmp_path
    )
    assert done.returncode != 0
    assert message in done.stderr
    assert not list((tmp_path / "ds").rglob("*.bin"))


def _mypt_folder(tmp_path: Path, metadata: dict[str, object] | None) -> tuple[Path, np.ndarray]:
    """A folder as MyPT's own prepare_dataset.py writes it: uint32 shards, no dtype key."""
    out = tmp_path / "mypt_dataset"
    tokens = np.arange(3000, dtype=np.uint32) * 16 % 50257
    (out / "train").mkdir(parents=True)
    (out / "val").mkdir()
    tokens[:2000].tofile(out / "train" / "shard_00000.bin")
    tokens[2000:].tofile(out / "val" / "shard_00001.bin")
    if metadata is not None:
        (out / "dataset_metadata.json").write_text(json.dumps(metadata))
    return out, tokens


MYPT_METADATA = {
    "total_tokens": 3000,
    "total_shards": 2,
    "train_shards": 1,
    "val_shards": 1,
    "tokens_per_shard": 2000,
    "tokenization": "gpt2",
    "vocab_size": 50304,  # MyPT pads GPT-2's vocabulary for its model
    "input_files": ["wiki.txt"],
}


def test_a_folder_mypt_wrote_loads_as_uint32(tmp_path):
    out, tokens = _mypt_folder(tmp_path, MYPT_METADATA)
    dataset = MemoryMappedDataset(str(out / "train"), 101, file_pattern="*.bin")
    assert len(dataset) == 2000 // 101  # windows of seq_len + 1 tokens, one after another
    for i in range(len(dataset)):
        assert dataset.window(i).tolist() == tokens[i * 101 : (i + 1) * 101].tolist()


def test_a_mypt_folder_loads_with_gpt2s_vocabulary_below_its_padded_size(tmp_path):
    # MyPT's vocab_size (50,304) is its model's embedding size, not a bound of the ids: a
    # vocabulary of 50,257 (GPT-2's) must not be refused as smaller than the shards declare.
    out, tokens = _mypt_folder(tmp_path, MYPT_METADATA)
    config = config_from_dict(
        {
            "data": {
                "dataset_path": str(out / "train"),
                "file_pattern": "*.bin",
                "vocab_size": 50257,
            },
            "train": {"seq_len": 100},
        }
    )
    built = build_data(config)
    assert len(built.dataset) == 2000 // 101
    assert built.dataset.window(3).tolist() == tokens[303:404].tolist()


def test_bin_shards_without_mypts_keys_are_still_refused(tmp_path):
    out, _ = _mypt_folder(tmp_path, {"tokenization": "gpt2"})
    with pytest.raises(InputError, match="never guessed from the file size"):
        MemoryMappedDataset(str(out / "train"), 100, file_pattern="*.bin")


def test_dual_eval_reads_the_domain_val_and_a_general_val(tmp_path):
    # MyPT's `train.py --dataset_dir data/domain_corpus --eval_dataset_dir data/general_corpus`:
    # train on the domain's train/, evaluate on its val/ ("val") and the general val/.
    _workspace(tmp_path, ["domain.txt", "general.txt"])
    for corpus in ("domain", "general"):
        done = _run_verbatim(
            f"python scripts/prepare_dataset.py --input_files {corpus}.txt "
            f"--out_dir data/{corpus}_corpus --val_fraction 0.3",
            tmp_path,
        )
        assert done.returncode == 0, done.stderr
    data = tmp_path / "data"
    job = tmp_path / "job.toml"
    job.write_text(
        f"""
[data]
dataset_path = "{data / "domain_corpus/train"}"
file_pattern = "*.bin"

[eval]
enabled = true
steps = 2
dataset_path = "{data / "domain_corpus/val"}"
file_pattern = "*.bin"

[eval.sets.general]
dataset_path = "{data / "general_corpus/val"}"
file_pattern = "*.bin"

[train]
seq_len = 16
batch_size = 2
"""
    )
    from data_io.load import build_eval_loaders

    loaders = build_eval_loaders(job, 0, 1)
    assert list(loaders) == ["val", "general"]
    for name, corpus in (("val", "domain"), ("general", "general")):
        shards = _read_like_mypt(data / f"{corpus}_corpus")["val"]
        tokens = np.concatenate([np.asarray(a) for a in shards]).astype(np.int64)
        batch = next(iter(loaders[name]))
        assert batch["input_ids"][0].tolist() == tokens[:16].tolist()


def test_input_files_given_twice_reads_both_lists(tmp_path):
    # argparse would keep only the last list and drop a.txt without a word.
    _workspace(tmp_path, ["a.txt", "b.txt"])
    done = _run_verbatim(
        "python scripts/prepare_dataset.py --input_files a.txt --out_dir ds --input_files b.txt",
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    metadata = json.loads((tmp_path / "ds" / "dataset_metadata.json").read_text())
    assert [Path(p).name for p in metadata["input_files"]] == ["a.txt", "b.txt"]
