"""HRM-Text (the original data_io) users drop in unchanged (docs/compat/hrm-text.md).

- ``compat=original``: every ``.npy`` the sampler writes is byte-identical (SHA-256) to what
  the original sampler writes for the same input and seed. The original's bytes come from
  ``original_sampler`` below, an independent re-derivation in plain numpy of formats.md §4
  (the original's algorithm) and of the original's pool dtype rule.
- the ``tokenizer`` and ``train_tokenizer`` binaries run the original README's commands
  verbatim, from a ``tokenizer/`` folder, and give what ``data_io tokenize`` /
  ``data_io train-tokenizer`` give.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from data_io.errors import ConfigError
from data_io.sampling import parse_overrides, sample
from data_io.tokenize import tokenize
from tests.conftest import EXAMPLE_ROWS

REPO = Path(__file__).resolve().parents[2]
CRATE = REPO / "tokenizer"
INDEX_NAMES = ("inst_start", "inst_len", "resp_start", "resp_len")

# The original README's two commands, verbatim (they run in the repository root).
TRAIN_COMMAND = (
    "(cd tokenizer && cargo run --release --bin train_tokenizer -- ../data ../data_clustered "
    "-o ../trained_tokenizers/bpe/tokenizer.json)"
)
TOKENIZE_COMMAND = (
    "(cd tokenizer && cargo run --release --bin tokenizer -- ../data ../data_clustered "
    "--tokenizer-path ../trained_tokenizers/bpe/tokenizer.json -o ../data_tokenized_bpe_65k)"
)


# --- The original's files and algorithm, re-derived from formats.md -------------------------


def original_npy(array: np.ndarray) -> bytes:
    """A 1-D array as the original tokenizer (Rust, ndarray-npy) writes it: the header dict
    without numpy's trailing ", }", spaces to a 64-byte boundary, a newline, the data."""
    text = f"{{'descr': '{array.dtype.str}', 'fortran_order': False, 'shape': ({len(array)},)}}"
    body = text.encode("ascii")
    padded = body + b" " * (64 - (10 + len(body) + 1) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(padded).to_bytes(2, "little") + padded + array.tobytes()


@dataclass
class Rows:
    inst_len: list[int]
    resp_len: list[int]


def write_original_tokenized(
    root: Path, tasks: dict[str, Rows], vocab_size: int | None, seed: int = 1
) -> Path:
    """A tokenized folder as the original tokenizer leaves it (formats.md §3): <u4 tokens,
    <u8 index arrays, {"source_mtime", "source_size"} records, tokenizer_info.json with the
    original keys only (serde_json sorts them)."""
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True)
    info: dict[str, object] = {
        "boq": "<|im_start|>",
        "condition_mapping": {"cot": "<|object_ref_end|>", "direct": "<|object_ref_start|>"},
        "eoa": "<|box_end|>",
        "eoq": "<|im_end|>",
        "tokenizer_path": "../trained_tokenizers/bpe/tokenizer.json",
    }
    if vocab_size is not None:
        info["vocab_size"] = vocab_size
    (root / "tokenizer_info.json").write_text(json.dumps(info, separators=(",", ":")))
    top = 1000 if vocab_size is None else vocab_size
    for name, rows in tasks.items():
        folder = root / name
        folder.mkdir()
        inst_len = np.array(rows.inst_len, dtype="<u8")
        resp_len = np.array(rows.resp_len, dtype="<u8")
        starts = np.concatenate([[0], np.cumsum(inst_len + resp_len)[:-1]]).astype("<u8")
        total = int((inst_len + resp_len).sum())
        tokens = rng.integers(0, top, total).astype("<u4")
        if total:
            tokens[0] = top - 1  # the largest id the vocabulary has
        arrays = {
            "tokens": tokens,
            "inst_start": starts[: len(inst_len)],
            "inst_len": inst_len,
            "resp_start": (starts[: len(inst_len)] + inst_len).astype("<u8"),
            "resp_len": resp_len,
        }
        for array_name, array in arrays.items():
            (folder / f"{array_name}.npy").write_bytes(original_npy(array))
        (folder / "metadata.json").write_text(
            json.dumps({"source_mtime": 1_700_000_000, "source_size": total * 7})
        )
    return root


@dataclass
class Rule:
    prefix: str
    max_per_file: int | None = None
    long_context: str = "truncate"
    repeat: int = 1


def write_rules(path: Path, rules: list[Rule]) -> Path:
    lines = []
    for rule in rules:
        lines.append(f"- prefix: {rule.prefix}")
        if rule.max_per_file is not None:
            lines.append(f"  max_per_file: {rule.max_per_file}")
        lines.append(f"  long_context: {rule.long_context}")
        lines.append(f"  repeat: {rule.repeat}")
    path.write_text("\n".join(lines) + "\n")
    return path


def original_pool_dtype(vocab_size: int | None) -> type:
    """formats.md §4: the original compares vocab_size (not the largest id) with each type's
    maximum, and uses int32 when tokenizer_info.json has no vocab_size."""
    if vocab_size is None:
        return np.int32
    if vocab_size <= 255:
        return np.uint8
    if vocab_size <= 65535:
        return np.uint16
    return np.int32


def original_sampler(
    tokenized: Path,
    output: Path,
    rules: list[Rule],
    *,
    seed: int,
    epochs: int,
    context_size: int = 4097,
    min_resp_length: int = 2,
) -> None:
    """formats.md §4 steps 1-5, row by row where the spec speaks of rows: what the original
    sample_tokenized.py writes (np.lib.format.open_memmap for the pool, np.save per array)."""
    info = json.loads((tokenized / "tokenizer_info.json").read_text())
    names = sorted(p.name for p in tokenized.iterdir() if p.is_dir())
    tasks = []
    offset = 0
    for name in names:
        arrays = {key: np.load(tokenized / name / f"{key}.npy") for key in INDEX_NAMES}
        rule = next((r for r in rules if name.startswith(r.prefix)), Rule(prefix=""))
        tasks.append((name, arrays, rule, offset))
        # Step 1: offsets from the rows before filtering.
        offset += int(arrays["inst_len"].sum()) + int(arrays["resp_len"].sum())
    output.mkdir(parents=True)
    pool = np.lib.format.open_memmap(
        output / "tokens.npy", mode="w+", dtype=original_pool_dtype(info.get("vocab_size")),
        shape=(offset,),
    )  # fmt: skip
    for name, _arrays, _rule, start in tasks:
        source = np.load(tokenized / name / "tokens.npy")
        pool[start : start + len(source)] = source
    pool.flush()
    del pool
    # Step 2: filter each task (lists of per-row tuples, offsets moved into the pool).
    kept = []
    for _name, arrays, rule, start in tasks:
        rows = []
        for i in range(len(arrays["inst_len"])):
            inst, resp = int(arrays["inst_len"][i]), int(arrays["resp_len"][i])
            if resp < min_resp_length:
                continue
            allowed = context_size - min(inst, context_size)
            if rule.long_context == "truncate":
                if allowed < 1:
                    continue
                resp = min(resp, allowed)
            elif resp > allowed:
                continue
            rows.append(
                (
                    int(arrays["inst_start"][i]) + start,
                    inst,
                    int(arrays["resp_start"][i]) + start,
                    resp,
                )
            )
        kept.append((rows, rule))
    # Steps 3-5.
    rng = np.random.Generator(np.random.Philox(seed))
    perms: list[np.ndarray | None] = [None] * len(kept)
    cursors = [0] * len(kept)
    for epoch in range(epochs):
        epoch_rows = []
        for index, (rows, rule) in enumerate(kept):
            n = len(rows)
            want = (n if rule.max_per_file is None else min(rule.max_per_file, n)) * rule.repeat
            got = 0
            while got < want:
                perm = perms[index]
                if perm is None or cursors[index] >= n:
                    perm = perms[index] = rng.permutation(n)
                    cursors[index] = 0
                take = min(n - cursors[index], want - got)
                for row in perm[cursors[index] : cursors[index] + take]:
                    epoch_rows.append(rows[int(row)])
                cursors[index] += take
                got += take
        table = np.array(epoch_rows, dtype=np.int64).reshape(-1, 4)
        order = rng.permutation(len(epoch_rows))
        folder = output / f"epoch_{epoch}"
        folder.mkdir()
        for column, key in enumerate(INDEX_NAMES):
            np.save(folder / f"{key}.npy", np.ascontiguousarray(table[order, column]))


def npy_checksums(folder: Path) -> dict[str, str]:
    """SHA-256 of every .npy under ``folder``, by relative path: the original's contributors'
    proof that two runs agree."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*.npy"))
    }


def run_sampler(tokenized: Path, output: Path, rules: Path, *extra: str):
    config = parse_overrides(
        [f"tokenized_path={tokenized}", f"output_path={output}",
         f"prefix_config_path={rules}", "plot=false", *extra]
    )  # fmt: skip
    return sample(config, stdout=io.StringIO(), progress=False)


# A corpus with every case the two settings touch: rows cut to a 1-token response
# (context 64), instructions that fill the context, short responses, a capped task whose
# permutation runs across epochs, a drop-mode task, a repeated task and an empty task.
def mixed_corpus(rng: np.random.Generator) -> dict[str, Rows]:
    def rows(count: int, max_inst: int = 80, max_resp: int = 60) -> Rows:
        return Rows(
            inst_len=[int(x) for x in rng.integers(2, max_inst, count)],
            resp_len=[int(x) for x in rng.integers(1, max_resp, count)],
        )

    truncated = rows(30)
    truncated.inst_len[:4] = [63, 63, 64, 70]  # leaves 1, 1, 0, 0 response tokens
    truncated.resp_len[:4] = [5, 9, 5, 5]
    return {
        "a__truncated.jsonl": truncated,
        "b__capped.parquet": rows(40, 20, 20),
        "c__drop.jsonl": rows(25),
        "d__repeat.jsonl": rows(6, 20, 20),
        "e__empty.jsonl": Rows(inst_len=[], resp_len=[]),
        "f__free.jsonl": rows(12, 30, 30),
    }


MIXED_RULES = [
    Rule("b__", max_per_file=7),
    Rule("c__", long_context="drop"),
    Rule("d__", repeat=2),
]


def test_compat_original_npy_files_match_the_original_sampler_byte_for_byte(tmp_path: Path):
    corpus = write_original_tokenized(
        tmp_path / "tok", mixed_corpus(np.random.default_rng(3)), vocab_size=65_536
    )
    rules = write_rules(tmp_path / "rules.yaml", MIXED_RULES)
    settings = {"seed": 7, "epochs": 4, "context_size": 64}
    original_sampler(corpus, tmp_path / "original", MIXED_RULES, **settings)
    result = run_sampler(
        corpus, tmp_path / "ours", rules, "compat=original",
        *(f"{key}={value}" for key, value in settings.items()),
    )  # fmt: skip
    want = npy_checksums(tmp_path / "original")
    assert len(want) == 1 + 4 * 4
    assert npy_checksums(tmp_path / "ours") == want
    # The case that needs the setting: a 65,536-token vocabulary gets an int32 pool...
    assert result.pool_dtype == np.dtype("<i4")
    assert np.load(tmp_path / "ours" / "tokens.npy", mmap_mode="r").dtype == np.int32
    # ...and the rows cut to one response token are sampled.
    epoch = np.load(tmp_path / "ours" / "epoch_0" / "resp_len.npy")
    assert (epoch == 1).sum() >= 2

    # The default differs on both counts, so checksums cannot match without the setting.
    default = run_sampler(
        corpus, tmp_path / "default", rules, *(f"{k}={v}" for k, v in settings.items())
    )
    assert default.pool_dtype == np.dtype("<u2")
    assert (np.load(tmp_path / "default" / "epoch_0" / "resp_len.npy") == 1).sum() == 0
    assert npy_checksums(tmp_path / "default")["tokens.npy"] != want["tokens.npy"]


@pytest.mark.parametrize(
    ("vocab_size", "original", "ours"),
    [
        (255, "u1", "u1"),
        (256, "<u2", "u1"),  # the original compares the size, not the largest id (255)
        (65_535, "<u2", "<u2"),
        (65_536, "<i4", "<u2"),
        (None, "<i4", "<i4"),  # no vocab_size in tokenizer_info.json
    ],
)
def test_compat_original_pool_dtype_follows_the_original_rule(
    tmp_path: Path, vocab_size: int | None, original: str, ours: str
):
    rng = np.random.default_rng(11)
    tasks = {
        "x__one.jsonl": Rows([int(v) for v in rng.integers(2, 9, 15)], [int(v) for v in rng.integers(1, 9, 15)]),
        "y__two.jsonl": Rows([int(v) for v in rng.integers(2, 9, 9)], [int(v) for v in rng.integers(1, 9, 9)]),
    }  # fmt: skip
    corpus = write_original_tokenized(tmp_path / "tok", tasks, vocab_size=vocab_size)
    rules = write_rules(tmp_path / "rules.yaml", [Rule("x__", max_per_file=4)])
    original_sampler(corpus, tmp_path / "original", [Rule("x__", max_per_file=4)], seed=0, epochs=3)
    compat = run_sampler(corpus, tmp_path / "compat", rules, "compat=original", "epochs=3")
    assert compat.pool_dtype == np.dtype(original)
    assert npy_checksums(tmp_path / "compat") == npy_checksums(tmp_path / "original")
    default = run_sampler(corpus, tmp_path / "default", rules, "epochs=3")
    assert default.pool_dtype == np.dtype(ours)


def test_data_io_tokenize_then_compat_sample_matches_the_original_end_to_end(
    small_tokenizer: Path, tmp_path: Path
):
    """Tokenized by `data_io tokenize` (defaults: <u4 tokens, the original's headers), then
    sampled with compat=original: the original sampler's bytes, tokens.npy included."""
    tokenized = tmp_path / "tok"
    tokenize([EXAMPLE_ROWS], tokenized, tokenizer_path=small_tokenizer, progress=False)
    for task in (p for p in tokenized.iterdir() if p.is_dir()):
        data = (task / "tokens.npy").read_bytes()
        assert data == original_npy(np.load(task / "tokens.npy")), task.name
    rules = [Rule("data__", max_per_file=3), Rule("data_clustered__facts", long_context="drop")]
    rules_file = write_rules(tmp_path / "rules.yaml", rules)
    original_sampler(tokenized, tmp_path / "original", rules, seed=5, epochs=3, context_size=40)
    run_sampler(
        tokenized, tmp_path / "ours", rules_file, "compat=original", "seed=5", "epochs=3",
        "context_size=40",
    )  # fmt: skip
    want = npy_checksums(tmp_path / "original")
    assert npy_checksums(tmp_path / "ours") == want and len(want) == 13


def test_sample_tokenized_py_takes_compat_on_the_command_line(tmp_path: Path):
    corpus = write_original_tokenized(
        tmp_path / "tok", mixed_corpus(np.random.default_rng(8)), vocab_size=65_536
    )
    rules = write_rules(tmp_path / "rules.yaml", MIXED_RULES)
    original_sampler(corpus, tmp_path / "original", MIXED_RULES, seed=0, epochs=2, context_size=64)
    done = subprocess.run(
        [sys.executable, str(REPO / "sample_tokenized.py"), f"tokenized_path={corpus}",
         f"output_path={tmp_path / 'ours'}", f"prefix_config_path={rules}", "epochs=2",
         "context_size=64", "compat=original", "plot=false"],
        capture_output=True, text=True, cwd=tmp_path, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "### Task Coverage Stats" in done.stdout or "Coverage" in done.stdout
    assert npy_checksums(tmp_path / "ours") == npy_checksums(tmp_path / "original")


def test_compat_settings_are_checked(tmp_path: Path):
    corpus = write_original_tokenized(tmp_path / "tok", {"a.jsonl": Rows([3], [4])}, 65_536)
    rules = write_rules(tmp_path / "rules.yaml", [])
    base = [f"tokenized_path={corpus}", f"prefix_config_path={rules}"]
    # Defaults unchanged.
    default = parse_overrides(base)
    assert default.compat == "none" and default.short_truncated == "drop"
    compat = parse_overrides([*base, "compat=original"])
    assert compat.short_truncated == "keep"
    assert parse_overrides([*base, "compat=original", "short_truncated=keep"]).compat == "original"
    with pytest.raises(ConfigError, match=r"'short_truncated' must be 'keep' with compat=original"):
        parse_overrides([*base, "compat=original", "short_truncated=drop"])
    with pytest.raises(ConfigError, match=r"'compat' must be 'none' or 'original', got 'v1'"):
        parse_overrides([*base, "compat=v1"])


# --- The original's binaries --------------------------------------------------------------


@pytest.fixture(scope="session")
def cargo_target() -> Path:
    """Build both binaries once per session, in CARGO_TARGET_DIR when set (the Makefile and CI
    set it), else in the workspace's target/, where the extension's build already is: only the
    main crate without bindings, clap, serde_yaml and the binaries are compiled (docs/compat)."""
    if shutil.which("cargo") is None:
        pytest.fail("cargo is needed to build the tokenizer/ binaries (install Rust)")
    target = Path(os.environ.get("CARGO_TARGET_DIR") or REPO / "target")
    started = time.monotonic()
    done = subprocess.run(
        ["cargo", "build", "--release", "--bins"],
        cwd=CRATE, env={**os.environ, "CARGO_TARGET_DIR": str(target)},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    print(f"tokenizer/ binaries built in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return target


@pytest.fixture()
def original_layout(tmp_path: Path) -> Path:
    """A checkout laid out as the original README expects, on small local data: data/,
    data_clustered/, prefix_config.yaml, and a tokenizer/ crate (a copy of ours, a package of
    its own there, whose dependency points at this repository, so that the session's build is
    reused)."""
    root = tmp_path / "data_io"
    shutil.copytree(EXAMPLE_ROWS / "data", root / "data")
    shutil.copytree(EXAMPLE_ROWS / "data_clustered", root / "data_clustered")
    shutil.copy(REPO / "prefix_config.yaml", root / "prefix_config.yaml")
    crate = root / "tokenizer"
    shutil.copytree(CRATE / "src", crate / "src")
    # The workspace's lock: the same versions as the session's build, so nothing is rebuilt.
    shutil.copy(REPO / "Cargo.lock", crate / "Cargo.lock")
    manifest = (CRATE / "Cargo.toml").read_text()
    assert 'data_io = { path = ".." }' in manifest
    manifest = manifest.replace('path = ".."', f"path = {json.dumps(str(REPO))}")
    (crate / "Cargo.toml").write_text(manifest)
    return root


def run_shell(command: str, cwd: Path, target: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["bash", "-c", command], cwd=cwd, capture_output=True, text=True, check=False,
        env={**os.environ, "CARGO_TARGET_DIR": str(target), "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr[-4000:]}"
    return done


def data_io(*args: str, cwd: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "data_io", *args], cwd=cwd, capture_output=True, text=True,
        check=False, env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_the_original_readme_commands_run_verbatim_and_match_data_io(
    cargo_target: Path, original_layout: Path
):
    root = original_layout
    run_shell(TRAIN_COMMAND, root, cargo_target)
    trained = root / "trained_tokenizers" / "bpe"
    assert {p.name for p in trained.iterdir()} == {
        "tokenizer.json", "config.json", "tokenizer_config.json",
    }  # fmt: skip
    data_io(
        "train-tokenizer", "data", "data_clustered", "-o", "reference/tokenizer.json",
        "--prefix-config", "prefix_config.yaml", "-q", cwd=root,
    )  # fmt: skip
    for name in ("tokenizer.json", "config.json", "tokenizer_config.json"):
        assert (trained / name).read_bytes() == (root / "reference" / name).read_bytes(), name

    run_shell(TOKENIZE_COMMAND, root, cargo_target)
    ours = root / "data_tokenized_bpe_65k"
    data_io(
        "tokenize", "data", "data_clustered", "--tokenizer-path",
        "trained_tokenizers/bpe/tokenizer.json", "-o", "reference_tok", "-q", cwd=root,
    )  # fmt: skip
    reference = root / "reference_tok"
    checksums = npy_checksums(ours)
    assert len(checksums) == 6 * 5 and checksums == npy_checksums(reference)
    assert json.loads((ours / "tokenizer_info.json").read_text()) == json.loads(
        (reference / "tokenizer_info.json").read_text()
    )
    for task in (p for p in ours.iterdir() if p.is_dir()):
        record = json.loads((task / "metadata.json").read_text())
        other = json.loads((reference / task.name / "metadata.json").read_text())
        # The same cache record: a later `data_io tokenize` keeps what the binary wrote.
        assert record == other, task.name

    # Incremental like data_io: a second run keeps everything, a deleted source's folder goes.
    (root / "data" / "arithmetic.jsonl").unlink()
    again = run_shell(TOKENIZE_COMMAND, root, cargo_target)
    assert "0 tokenized, 5 unchanged, 0 failed" in again.stdout
    assert not (ours / "arithmetic.jsonl").exists()
    # The binary's folder is one data_io tokenize continues without redoing anything.
    data_io(
        "tokenize", "data", "data_clustered", "--tokenizer-path",
        "trained_tokenizers/bpe/tokenizer.json", "-o", "data_tokenized_bpe_65k", "-q", cwd=root,
    )  # fmt: skip
    assert npy_checksums(ours) == {
        k: v for k, v in checksums.items() if not k.startswith("arithmetic.jsonl/")
    }


def test_binaries_help_lists_the_original_arguments(cargo_target: Path):
    release = cargo_target / "release"
    tokenizer_help = subprocess.run(
        [str(release / "tokenizer"), "--help"], capture_output=True, text=True, check=True
    ).stdout
    for flag in ("-o, --output-dir", "-t, --tokenizer-path", "--boq", "--eoq", "--eoa",
                 "--conditions", "Qwen/Qwen3-Next-80B-A3B-Instruct", "<|object_ref_start|>",
                 "data_io tokenize"):  # fmt: skip
        assert flag in tokenizer_help, flag
    train_help = subprocess.run(
        [str(release / "train_tokenizer"), "--help"], capture_output=True, text=True, check=True
    ).stdout
    for flag in ("-o <OUT>", "--seed", "-p, --prefix-config", "../prefix_config.yaml",
                 "--truncate-len", "--limit-mul-factor", "--tokenizer-type", "--vocab-size",
                 "65536", "--special-tokens", "<|PAD|>", "data_io train-tokenizer"):  # fmt: skip
        assert flag in train_help, flag


def test_binaries_fail_clearly(cargo_target: Path, tmp_path: Path):
    release = cargo_target / "release"
    rows = tmp_path / "rows"
    shutil.copytree(EXAMPLE_ROWS / "data", rows)
    # The original's default tokenizer is a Hub id; nothing is downloaded here.
    done = subprocess.run(
        [str(release / "tokenizer"), str(rows), "-o", str(tmp_path / "out")],
        capture_output=True, text=True, check=False,
        env={**os.environ, "HF_HUB_CACHE": str(tmp_path / "empty_cache")},
    )  # fmt: skip
    assert done.returncode == 1
    assert "tokenizer: error:" in done.stderr
    assert "Qwen/Qwen3-Next-80B-A3B-Instruct" in done.stderr and "data_io tokenize" in done.stderr
    assert not (tmp_path / "out").exists()
    # A prefix_config.yaml that data_io refuses is refused here, naming the item.
    bad = tmp_path / "rules.yaml"
    bad.write_text("- prefix: a__\n  max_per_fil: 3\n")
    done = subprocess.run(
        [str(release / "train_tokenizer"), str(rows), "-o", str(tmp_path / "t" / "tokenizer.json"),
         "--prefix-config", str(bad)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert 'item 1 (prefix "a__"): unknown field(s) max_per_fil' in done.stderr
    assert not (tmp_path / "t").exists()


def test_compat_original_keeps_short_truncated_rows_from_python_too() -> None:
    # Settled by the config itself, not only by the command line: a SampleConfig made in Python
    # with compat="original" must write what the original writes.
    from data_io.sampling.config import SampleConfig

    assert SampleConfig(compat="original").short_truncated == "keep"
    assert SampleConfig().short_truncated == "drop"
    assert SampleConfig(compat="original", short_truncated="drop").short_truncated == "drop"
