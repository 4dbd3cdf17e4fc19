"""The sampler reproduces formats.md §4 steps 1–6 element for element.

``reference_sample`` below is an independent, deliberately plain re-derivation written from
the spec text (row-by-row Python loops, no code shared with data_io.sampling): the production
output must equal it exactly for several corpora, caps, repeats, modes and seeds.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from data_io.sampling import parse_overrides, sample
from data_io.sampling.synthetic import SyntheticTask, random_task, write_corpus

FIELDS = ("inst_start", "inst_len", "resp_start", "resp_len")


# ---------------------------------------------------------------------------------------------
# The independent reference (spec text -> loops)
# ---------------------------------------------------------------------------------------------


@dataclass
class RefRule:
    max_per_file: int | None = None
    long_context: str = "truncate"
    repeat: int = 1


def _rule_for(name: str, rules: list[tuple[str, RefRule]]) -> RefRule:
    for prefix, rule in rules:
        if name.startswith(prefix):
            return rule
    return RefRule()


def reference_sample(
    corpus: Path,
    rules: list[tuple[str, RefRule]],
    *,
    seed: int,
    epochs: int,
    context_size: int,
    min_resp_length: int,
    drop_truncated_to_one: bool = False,
) -> tuple[list[dict[str, list[int]]], int, list[int]]:
    """Returns (epoch arrays, total_length, expected pool as a list of ids)."""
    names = sorted(p.name for p in corpus.iterdir() if p.is_dir() and not p.name.startswith("."))
    pool: list[int] = []
    task_rows: list[list[tuple[int, int, int, int]]] = []
    task_rules: list[RefRule] = []
    running = 0
    for name in names:
        folder = corpus / name
        cols = {f: [int(x) for x in np.load(folder / f"{f}.npy")] for f in FIELDS}
        offset = running
        running += sum(cols["inst_len"]) + sum(cols["resp_len"])
        pool.extend(int(x) for x in np.load(folder / "tokens.npy"))
        rule = _rule_for(name, rules)
        kept = []
        for i in range(len(cols["inst_len"])):
            inst_len, resp_len = cols["inst_len"][i], cols["resp_len"][i]
            if resp_len < min_resp_length:
                continue
            allowed = context_size - min(inst_len, context_size)
            if rule.long_context == "truncate":
                if allowed < 1:
                    continue
                new_len = min(resp_len, allowed)
                if drop_truncated_to_one and new_len < resp_len and new_len < 2:
                    continue
                resp_len = new_len
            elif resp_len > allowed:
                continue
            kept.append(
                (cols["inst_start"][i] + offset, inst_len, cols["resp_start"][i] + offset, resp_len)
            )
        task_rows.append(kept)
        task_rules.append(rule)

    rng = np.random.Generator(np.random.Philox(seed))
    perms: list[list[int] | None] = [None] * len(names)
    cursors = [0] * len(names)
    result = []
    total_tokens = 0
    for _epoch in range(epochs):
        epoch_rows = []
        for t, rows in enumerate(task_rows):
            n = len(rows)
            rule = task_rules[t]
            want = n if rule.max_per_file is None else min(rule.max_per_file, n)
            want *= rule.repeat
            for _ in range(want):
                if perms[t] is None or cursors[t] >= n:
                    perms[t] = [int(x) for x in rng.permutation(n)]
                    cursors[t] = 0
                epoch_rows.append(rows[perms[t][cursors[t]]])
                cursors[t] += 1
        total_tokens += sum(row[1] + row[3] for row in epoch_rows)
        order = [int(x) for x in rng.permutation(len(epoch_rows))]
        shuffled = [epoch_rows[j] for j in order]
        result.append({f: [row[k] for row in shuffled] for k, f in enumerate(FIELDS)})
    return result, round(total_tokens / epochs), pool


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------


def _write_rules(path: Path, rules: list[tuple[str, RefRule]]) -> Path:
    items = []
    for prefix, rule in rules:
        item: dict[str, object] = {"prefix": prefix}
        if rule.max_per_file is not None:
            item["max_per_file"] = rule.max_per_file
        item["long_context"] = rule.long_context
        item["repeat"] = rule.repeat
        items.append(item)
    path.write_text(json.dumps(items))  # JSON is valid YAML
    return path


def run_sampler(tmp_path: Path, corpus: Path, rules, **overrides):
    tmp_path.mkdir(parents=True, exist_ok=True)
    rules_path = _write_rules(tmp_path / "rules.yaml", rules)
    out = tmp_path / "out"
    args = [
        f"tokenized_path={corpus}",
        f"output_path={out}",
        f"prefix_config_path={rules_path}",
        "plot=false",
        *(f"{key}={value}" for key, value in overrides.items()),
    ]
    report = io.StringIO()
    result = sample(parse_overrides(args), stdout=report, progress=False)
    return out, result, report.getvalue()


def assert_matches_reference(tmp_path: Path, corpus: Path, rules, **settings) -> None:
    seed = settings.get("seed", 0)
    epochs = settings.get("epochs", 3)
    context_size = settings.get("context_size", 4097)
    min_resp = settings.get("min_resp_length", 2)
    policy = settings.get("short_truncated", "keep")
    out, result, _ = run_sampler(
        tmp_path,
        corpus,
        rules,
        seed=seed,
        epochs=epochs,
        context_size=context_size,
        min_resp_length=min_resp,
        short_truncated=policy,
        allow_empty=settings.get("allow_empty", False),
    )
    expected, total_length, pool = reference_sample(
        corpus,
        rules,
        seed=seed,
        epochs=epochs,
        context_size=context_size,
        min_resp_length=min_resp,
        drop_truncated_to_one=policy == "drop",
    )
    for epoch, arrays in enumerate(expected):
        for name in FIELDS:
            actual = np.load(out / f"epoch_{epoch}" / f"{name}.npy")
            assert actual.dtype == np.dtype("<i8")
            assert actual.tolist() == arrays[name], (epoch, name)
    assert not (out / f"epoch_{epochs}").exists()
    tokens = np.load(out / "tokens.npy", mmap_mode="r")
    assert tokens.tolist() == pool
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["total_length"] == total_length == result.total_length
    assert metadata["vocab_size"] is None
    assert metadata["max_seq_len"] == context_size
    assert metadata["tokenizer_info"] == json.loads((corpus / "tokenizer_info.json").read_text())


def _corpus(root: Path, seed: int, sizes: dict[str, int], **task_kwargs) -> Path:
    rng = np.random.default_rng(seed)
    tasks = {name: random_task(rng, rows, **task_kwargs) for name, rows in sizes.items()}
    return write_corpus(root, tasks, vocab_size=1000, seed=seed)


MIXED_RULES = [
    ("flan__cot_", RefRule()),
    ("flan__", RefRule(max_per_file=7)),
    ("dm__", RefRule(max_per_file=40, long_context="drop")),
    ("small", RefRule(repeat=3)),
    ("capped_rep", RefRule(max_per_file=5, repeat=4, long_context="drop")),
]
MIXED_SIZES = {
    "flan__cot_a.parquet": 23,
    "flan__b.parquet": 30,
    "flan__c.parquet": 4,
    "dm__x.parquet": 90,
    "small.jsonl": 6,
    "capped_rep.jsonl": 13,
    "free.jsonl": 17,
    "empty.jsonl": 0,
}


# ---------------------------------------------------------------------------------------------
# Equivalence
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 12345])
@pytest.mark.parametrize("context_size", [4097, 200, 40])
def test_mixed_corpus_matches_reference(tmp_path: Path, seed: int, context_size: int) -> None:
    corpus = _corpus(tmp_path / "tok", seed, MIXED_SIZES)
    assert_matches_reference(
        tmp_path, corpus, MIXED_RULES, seed=seed, epochs=4, context_size=context_size
    )


@pytest.mark.parametrize("policy", ["keep", "drop"])
def test_truncation_policies_match_reference(tmp_path: Path, policy: str) -> None:
    # Short context: many rows are truncated, several to a single response token.
    corpus = _corpus(tmp_path / "tok", 5, {"a.jsonl": 60, "b.jsonl": 45}, max_inst=60)
    assert_matches_reference(
        tmp_path, corpus, [("b", RefRule(max_per_file=9))], context_size=50, short_truncated=policy
    )


def test_min_resp_length_and_epochs_match_reference(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "tok", 9, {"t1.jsonl": 40, "t2.jsonl": 25, "t3.jsonl": 3})
    rules = [("t1", RefRule(max_per_file=11, repeat=2)), ("t3", RefRule(repeat=5))]
    assert_matches_reference(tmp_path, corpus, rules, min_resp_length=5, epochs=7, seed=77)


def test_repeat_larger_than_corpus(tmp_path: Path) -> None:
    """The original sized the epoch buffer to the corpus and crashed here."""
    corpus = _corpus(tmp_path / "tok", 3, {"tiny.jsonl": 3, "other.jsonl": 2})
    rules = [("tiny", RefRule(repeat=50)), ("other", RefRule(repeat=1000))]
    assert_matches_reference(tmp_path, corpus, rules, epochs=2)
    rows = np.load(tmp_path / "out" / "epoch_0" / "inst_len.npy")
    assert len(rows) > 5  # far more rows per epoch than the corpus has


def test_mixed_token_dtypes_and_pool(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    tasks = {
        "a.jsonl": random_task(rng, 20, token_dtype="<u2"),
        "b.jsonl": random_task(rng, 15, token_dtype="<u4"),
        "c.jsonl": random_task(rng, 10, token_dtype="u1"),
    }
    corpus = write_corpus(tmp_path / "tok", tasks, vocab_size=200)
    assert_matches_reference(tmp_path, corpus, [])
    assert np.load(tmp_path / "out" / "tokens.npy", mmap_mode="r").dtype == np.uint8


def test_rows_point_at_their_own_tokens(tmp_path: Path) -> None:
    """Offsets move into the pool: each sampled row reads back its source tokens."""
    corpus = _corpus(tmp_path / "tok", 8, {"a.jsonl": 12, "b.jsonl": 9, "c.jsonl": 14})
    out, _, _ = run_sampler(tmp_path, corpus, [], context_size=100000)
    pool = np.load(out / "tokens.npy", mmap_mode="r")
    sources = []
    for name in ("a.jsonl", "b.jsonl", "c.jsonl"):
        tokens = np.load(corpus / name / "tokens.npy")
        starts = np.load(corpus / name / "inst_start.npy")
        resp_lens = np.load(corpus / name / "resp_len.npy")
        lens = np.load(corpus / name / "inst_len.npy") + resp_lens
        for start, length, resp_len in zip(starts, lens, resp_lens, strict=True):
            if resp_len >= 2:  # min_resp_length
                sources.append(tuple(tokens[int(start) : int(start + length)].tolist()))
    arrays = {f: np.load(out / "epoch_0" / f"{f}.npy") for f in FIELDS}
    seen = set()
    for i in range(len(arrays["inst_start"])):
        start, inst_len = int(arrays["inst_start"][i]), int(arrays["inst_len"][i])
        assert int(arrays["resp_start"][i]) == start + inst_len
        row = tuple(pool[start : start + inst_len + int(arrays["resp_len"][i])].tolist())
        seen.add(row)
    assert seen == set(sources)  # every kept row once per epoch (no cap), no other row
    assert len(arrays["inst_start"]) == len(sources)


# ---------------------------------------------------------------------------------------------
# Properties of the algorithm (beyond equality with the reference)
# ---------------------------------------------------------------------------------------------


def test_capped_task_walks_all_rows_before_repeating(tmp_path: Path) -> None:
    tasks = {"t.jsonl": SyntheticTask(inst_len=np.full(10, 3), resp_len=np.full(10, 4))}
    corpus = write_corpus(tmp_path / "tok", tasks, vocab_size=100)
    out, _, _ = run_sampler(tmp_path, corpus, [("t", RefRule(max_per_file=4))], epochs=5)
    starts = [np.load(out / f"epoch_{e}" / "inst_start.npy").tolist() for e in range(5)]
    assert all(len(epoch) == 4 for epoch in starts)
    # Epochs 0 and 1 take 8 distinct rows of the first permutation; epoch 2 takes its last
    # 2 rows, then 2 of a fresh one: all 10 rows appear before any row repeats.
    assert len(set(starts[0] + starts[1])) == 8
    assert set(starts[0] + starts[1] + starts[2]) == set(range(0, 70, 7))


def test_max_per_file_zero_samples_nothing_from_the_task(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "tok", 2, {"off.jsonl": 20, "on.jsonl": 5})
    rules = [("off", RefRule(max_per_file=0))]
    assert_matches_reference(tmp_path, corpus, rules)
    _, result, report = run_sampler(tmp_path / "again", corpus, rules)
    assert result.analytics.tasks["off.jsonl"].cov_rows == 0
    assert result.analytics.tasks["off.jsonl"].rows > 0
    assert "| **off.jsonl** |" in report


def test_zero_row_corpus(tmp_path: Path) -> None:
    tasks = {
        "a.jsonl": SyntheticTask(inst_len=np.zeros(0), resp_len=np.zeros(0)),
        "b.jsonl": SyntheticTask(inst_len=np.zeros(0), resp_len=np.zeros(0)),
    }
    corpus = write_corpus(tmp_path / "tok", tasks)
    # An empty sample is refused unless asked for (test_sampling_empty.py); asked for, it
    # matches the original.
    assert_matches_reference(tmp_path, corpus, [], epochs=2, allow_empty=True)
    out = tmp_path / "out"
    assert np.load(out / "tokens.npy").shape == (0,)
    assert np.load(out / "epoch_1" / "resp_len.npy").shape == (0,)
    assert json.loads((out / "metadata.json").read_text())["total_length"] == 0


def test_task_fully_filtered_out(tmp_path: Path) -> None:
    """All rows dropped: the task keeps its pool slot and is reported with its drops."""
    tasks = {
        "a.jsonl": SyntheticTask(inst_len=np.full(4, 3), resp_len=np.full(4, 1)),
        "b.jsonl": SyntheticTask(inst_len=np.full(3, 5), resp_len=np.full(3, 6)),
    }
    corpus = write_corpus(tmp_path / "tok", tasks, vocab_size=50)
    assert_matches_reference(tmp_path, corpus, [])
    _, result, report = run_sampler(tmp_path / "again", corpus, [])
    assert result.analytics.tasks["a.jsonl"].rows == 0
    assert result.pool_tokens == 4 * 4 + 3 * 11
    assert "| a.jsonl | 4 | 0 | 0 | 4 | 0 | 0 | 0 |" in report


@pytest.mark.parametrize("mode", ["truncate", "drop"])
def test_context_boundaries(tmp_path: Path, mode: str) -> None:
    """inst_len == context_size, inst_len + resp_len == context_size, and one past it."""
    context = 20
    inst = np.array([20, 21, 15, 15, 15, 18, 19, 2])
    resp = np.array([3, 2, 5, 6, 20, 3, 4, 18])
    tasks = {"t.jsonl": SyntheticTask(inst_len=inst, resp_len=resp)}
    corpus = write_corpus(tmp_path / "tok", tasks, vocab_size=100)
    rules = [("t", RefRule(long_context=mode))]
    for policy in ("keep", "drop"):
        assert_matches_reference(
            tmp_path / policy, corpus, rules, context_size=context, short_truncated=policy
        )
    _, result, _ = run_sampler(
        tmp_path / "x", corpus, rules, context_size=context, short_truncated="keep"
    )
    item = result.analytics.filtered[0]
    kept = list(zip(item.inst_len.tolist(), item.resp_len.tolist(), strict=True))
    if mode == "truncate":
        # 20 and 21 fill the context; 15+5 fits exactly; 15+6 and 15+20 cut to 5; 18+3 cut
        # to 2; 19+4 cut to 1 (kept only with short_truncated=keep); 2+18 fits exactly.
        assert kept == [(15, 5), (15, 5), (15, 5), (18, 2), (19, 1), (2, 18)]
        assert item.truncated == 4
    else:
        assert kept == [(15, 5), (2, 18)]
        assert item.truncated == 0


def test_short_truncated_drop_is_the_default_and_is_counted(tmp_path: Path) -> None:
    inst = np.array([9, 9, 5])
    resp = np.array([5, 1, 3])  # row 0 would be cut to 1 token; row 1 is short at source
    tasks = {"t.jsonl": SyntheticTask(inst_len=inst, resp_len=resp)}
    corpus = write_corpus(tmp_path / "tok", tasks, vocab_size=100)
    out, result, report = run_sampler(tmp_path, corpus, [], context_size=10)
    item = result.analytics.filtered[0]
    assert item.resp_len.tolist() == [3]
    assert item.drops["truncation leaves a 1-token response (short_truncated=drop)"] == 1
    assert item.drops["response shorter than min_resp_length"] == 1
    assert np.all(np.load(out / "epoch_0" / "resp_len.npy") >= 2)
    assert "| t.jsonl | 3 | 1 | 0 | 1 | 0 | 0 | 1 |" in report


def test_runs_are_deterministic_and_seed_matters(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "tok", 6, MIXED_SIZES)
    outs = []
    for run, seed in enumerate((3, 3, 4)):
        out, _, report = run_sampler(tmp_path / f"run{run}", corpus, MIXED_RULES, seed=seed)
        outs.append(
            (
                [
                    np.load(out / f"epoch_{e}" / f"{f}.npy").tobytes()
                    for e in range(3)
                    for f in FIELDS
                ],
                (out / "tokens.npy").read_bytes(),
                report.replace(str(out), "<out>"),
            )
        )
    assert outs[0] == outs[1]
    assert outs[0][0] != outs[2][0]
    assert outs[0][1] == outs[2][1]  # the pool does not depend on the seed
