"""``--dedup near`` against an exact-Jaccard oracle: on a corpus with planted near-duplicates
(documents edited a little, a lot, and unrelated ones), the documents with a close earlier
neighbour are dropped and the ones without any are kept; the bands' de-duplication is the same
in a budget a hundred times too small as in an in-memory set; and ``prepare`` records and
enforces the mode."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import numpy as np
import pytest

from data_io import _core
from data_io.errors import ConfigError
from data_io.formats.raw_reading import DocumentReader
from data_io.formats.raw_text import ReadOptions, ReadStats, expand_inputs
from data_io.prepare import prepare
from data_io.prepare.dedup import HashDedup, NearDedup, OnlineDedup
from data_io.prepare.state import STATE_DIR
from tests.prepare.helpers import folder_files

NGRAM = 5


def _shingles(text: str) -> set[tuple[str, ...]]:
    """The oracle's shingles: lowercased alphanumeric words, NGRAM at a time (ASCII text)."""
    words = re.findall(r"[^\W_]+", text.lower())
    return {tuple(words[i : i + NGRAM]) for i in range(len(words) - NGRAM + 1)}


def _jaccard(a: set[tuple[str, ...]], b: set[tuple[str, ...]]) -> float:
    return len(a & b) / len(a | b)


def _planted_corpus(seed: int = 7) -> list[str]:
    """Base documents and copies of each with a share of their words replaced, shuffled."""
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(20_000)]
    bases = [" ".join(rng.choices(vocabulary, k=200)) for _ in range(40)]
    documents = list(bases)
    for base in bases:
        for share in (0.0, 0.01, 0.03, 0.1, 0.3):
            words = base.split()
            for i in rng.sample(range(len(words)), int(share * len(words))):
                words[i] = rng.choice(vocabulary)
            documents.append(("Title: " if share == 0 else "") + " ".join(words))
    documents += bases[:5]  # and a few exact copies
    rng.shuffle(documents)
    return documents


class _Bar:
    def describe(self, _name: str) -> None: ...
    def advance_bytes(self, _n: int) -> None: ...


def _bands(folder: Path, documents: list[str], near: NearDedup) -> np.ndarray:
    path = folder / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents))
    options = ReadOptions()
    reader = DocumentReader(options, ReadStats(), _Bar())  # type: ignore[arg-type]
    bands = []
    for batch in reader.batches(expand_inputs([path], options)[0]):
        *_, counts, found, _ = _core.prepare_batch(
            batch,
            text_field="text",
            fail_invalid=False,
            normalize=False,
            filter=False,
            min_line_chars=0,
            min_doc_chars=0,
            resolve=reader.resolve,
            near=near.as_tuple(),
        )
        assert found is not None and counts["documents"] == len(found)
        bands.append(found)
    return np.concatenate(bands)


def _kept(work: Path, bands: np.ndarray, budget: int) -> np.ndarray:
    dedup = HashDedup(work, budget)
    for start in range(0, len(bands), 37):  # batches of an odd size
        dedup.add(bands[start : start + 37], start)
    keep, duplicates = dedup.keep_mask(len(bands), None, work / "kept.u64")
    assert duplicates == len(bands) - int(keep.sum())
    return np.array(keep)


def test_near_duplicates_of_an_earlier_document_are_dropped_and_others_kept(
    tmp_path: Path,
) -> None:
    documents = _planted_corpus()
    bands = _bands(tmp_path, documents, NearDedup(ngram=NGRAM))
    assert bands.shape == (len(documents), 14, 2)
    keep = _kept(tmp_path, bands, 1 << 20)
    shingles = [_shingles(d) for d in documents]
    closest = [
        max((_jaccard(shingles[j], shingles[i]) for i in range(j)), default=0.0)
        for j in range(len(documents))
    ]
    close = [j for j, s in enumerate(closest) if s >= 0.8]
    far = [j for j, s in enumerate(closest) if s < 0.3]
    assert len(close) >= 60 and len(far) >= 40  # the corpus holds both kinds
    # Pairs at 0.8 and above are found 92% of the time or more: every planted copy at 0.9+.
    assert all(not keep[j] for j, s in enumerate(closest) if s >= 0.9)
    assert sum(not keep[j] for j in close) / len(close) >= 0.95
    # Pairs under 0.3 are found 0.1% of the time: none of these.
    assert all(keep[j] for j in far)


def test_the_bands_dedup_in_a_small_budget_is_the_in_memory_one(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    # 2000 documents of 4 bands each, drawn from few values so that many repeat.
    bands = np.stack([rng.integers(0, 3000, size=(2000, 4)), np.tile(np.arange(4), (2000, 1))], -1)
    bands = bands.astype(np.uint64)
    seen: set[tuple[int, int]] = set()
    expected = []
    for document in bands:
        records = {(int(h), int(b)) for h, b in document}
        expected.append(not (records & seen))
        seen |= records
    assert 0 < sum(expected) < len(expected)
    for budget in (4096, 1 << 20):
        assert _kept(tmp_path, bands, budget).tolist() == expected


def test_prepare_near_records_its_parameters_and_keeps_them(tmp_path: Path) -> None:
    documents = _planted_corpus(seed=11)
    first = tmp_path / "a.jsonl"
    first.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents))
    out = tmp_path / "out"
    result = prepare([first], out, tokenizer="char", dedup="near", near_bands=20, progress=False)
    exact = prepare([first], tmp_path / "exact", tokenizer="char", progress=False)
    assert result.duplicates > exact.duplicates > 0
    metadata = json.loads((out / "dataset_metadata.json").read_text())
    options = metadata["options"]
    assert options["dedup"] == "near"
    assert options["near_dedup"] == {"ngram": 5, "bands": 20, "rows": 8, "seed": 0}
    second = tmp_path / "b.jsonl"
    second.write_text(json.dumps({"text": documents[0] + " and a little more"}) + "\n")
    with pytest.raises(ConfigError):
        prepare([first, second], out, tokenizer="char", dedup="near", progress=False)
    again = prepare(
        [first, second], out, tokenizer="char", dedup="near", near_bands=20, progress=False
    )
    assert again.duplicates == 1  # its near-duplicate was prepared by the first run


@pytest.mark.parametrize(
    "kwargs", [{"dedup": "fuzzy"}, {"dedup": "near", "near_rows": 0}, {"dedup": 1}]
)
def test_bad_dedup_options_are_refused(tmp_path: Path, kwargs: dict) -> None:
    (tmp_path / "a.txt").write_text("a document long enough to be kept\n")
    with pytest.raises(ConfigError):
        prepare([tmp_path / "a.txt"], tmp_path / "out", tokenizer="char", progress=False, **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"rows": 0}, "near_rows must be an integer 1..1024, got 0"),
        ({"bands": 1025}, "near_bands must be an integer 1..1024, got 1025"),
        ({"ngram": True}, "near_ngram must be an integer 1..1024, got True"),
        ({"bands": 1024, "rows": 1024}, "(1024 x 1024 = 1048576) is the number of MinHash"),
        ({"bands": 65, "rows": 16}, "(65 x 16 = 1040) is the number of MinHash"),
    ],
)
def test_near_parameters_out_of_range_are_refused_with_the_range(kwargs: dict, said: str) -> None:
    with pytest.raises(ConfigError) as caught:
        NearDedup(**kwargs).check_permutations()
    assert said in str(caught.value)


def test_a_folder_made_before_the_permutation_limit_keeps_its_bands_and_rows(
    tmp_path: Path,
) -> None:
    """64 x 32 = 2048 permutations were taken before the limit: the folder's later runs (and
    plans resumed) still take them; a new folder, or other values, may not."""
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps({"text": d}) + "\n" for d in _planted_corpus()[:6]))
    second.write_text("".join(json.dumps({"text": d}) + "\n" for d in _planted_corpus()[6:]))
    out = tmp_path / "out"
    big = {"dedup": "near", "near_bands": 64, "near_rows": 32, "tokenizer": "char"}
    with pytest.raises(ConfigError, match=r"64 x 32 = 2048"):
        prepare([first], out, progress=False, **big)
    # As a folder written before the limit has it: made with the limit out of the way.
    original = NearDedup.check_permutations
    NearDedup.check_permutations = lambda self: None  # type: ignore[method-assign]
    try:
        prepare([first], out, progress=False, **big)
    finally:
        NearDedup.check_permutations = original  # type: ignore[method-assign]
    again = prepare([first, second], out, progress=False, **big)
    assert sum(again.documents.values()) > 0
    options = json.loads((out / "dataset_metadata.json").read_text())["options"]
    assert options["near_dedup"]["bands"] * options["near_dedup"]["rows"] == 2048
    with pytest.raises(ConfigError, match=r"64 x 17 = 1088"):
        prepare([first, second], out, progress=False, **{**big, "near_rows": 17})


def test_the_most_permutations_are_taken() -> None:
    assert NearDedup(bands=64, rows=16).threshold() == pytest.approx((1 / 64) ** (1 / 16))
    assert NearDedup(bands=1024, rows=1).bands == 1024


def test_the_help_gives_the_chances_the_default_bands_and_rows_make(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--near-rows' help quotes the chance 1 - (1 - s^rows)^bands that a pair of similarity s
    shares a band: "half the time" is 0.68 with 14 x 8, not the threshold (1/14)^(1/8) = 0.72
    (65%)."""
    from data_io.cli import main

    with pytest.raises(SystemExit):
        main(["prepare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    found = re.search(
        r"Jaccard similarity ([\d.]+) match half the time, ([\d.]+) (\d+)%, ([\d.]+) (\d+)%", text
    )
    assert found, text
    near = NearDedup()

    def chance(s: float) -> float:
        return 1 - (1 - s**near.rows) ** near.bands

    assert chance(float(found[1])) == pytest.approx(0.5, abs=0.025)  # 0.68: 48%
    for similarity, percent in ((found[2], found[3]), (found[4], found[5])):
        assert round(100 * chance(float(similarity))) == int(percent)
    assert round(100 * chance(near.threshold())) == 65


def test_the_command_line_names_the_near_options_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from data_io.cli import main

    (tmp_path / "a.txt").write_text("a document long enough to be kept\n")
    args = ["prepare", str(tmp_path / "a.txt"), "-o", str(tmp_path / "out"), "--dedup", "near"]
    assert main([*args, "--tokenizer", "char", "--near-bands", "100", "--near-rows", "11"]) == 1
    err = capsys.readouterr().err
    assert "--near-bands x --near-rows (100 x 11 = 1100)" in err
    assert "at most 1024" in err
    assert not (tmp_path / "out" / "dataset_metadata.json").exists()


def test_the_command_line_takes_the_mode_and_refuses_a_contradiction(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from data_io.cli import main

    path = tmp_path / "a.jsonl"
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in _planted_corpus()))
    out = tmp_path / "out"
    args = ["prepare", str(path), "-o", str(out), "--tokenizer", "char"]
    assert main([*args, "--dedup", "near", "--near-rows", "6"]) == 0
    assert "duplicate" in capsys.readouterr().out
    options = json.loads((out / "dataset_metadata.json").read_text())["options"]
    assert (options["dedup"], options["near_dedup"]["rows"]) == ("near", 6)
    with pytest.raises(SystemExit):
        main([*args, "--dedup", "near", "--no-dedup"])
    assert "contradict" in capsys.readouterr().err


TOKENIZER = Path(__file__).resolve().parents[2] / "trained_tokenizers" / "bpe" / "tokenizer.json"


def test_near_duplicates_decided_as_they_arrive_write_what_the_sorted_runs_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bands in the online set (a document sharing one with an earlier document is
    dropped, before it is encoded) against the sorted runs after the run: the same shards,
    metadata and kept bands, in one run, incrementally, and when the set outgrows its budget
    (the run goes again with sorted runs)."""
    documents = _planted_corpus(seed=13)
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents[:150]))
    second.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents[150:]))
    folders = {}
    for way, budget in (("online", "1GB"), ("sorted", "1GB"), ("overflow", "8KB")):
        monkeypatch.setattr(OnlineDedup, "fits", staticmethod(lambda *_, w=way: w != "sorted"))
        out = tmp_path / way
        options = {"tokenizer": str(TOKENIZER), "dedup": "near", "dedup_memory": budget}
        one = prepare([first], out, progress=False, **options)
        two = prepare([first, second], out, progress=False, **options)
        assert one.duplicates > 0 and two.duplicates > 0
        if way == "online":
            assert two.dedup_runs == 0  # no sorted run: the set decided
        if way == "overflow":
            assert two.dedup_runs > 0  # the set overflowed: the sorted runs decided
        folders[way] = (one.duplicates, two.duplicates, folder_files(out))
    assert folders["online"] == folders["sorted"]
    assert folders["overflow"][:2] == folders["sorted"][:2]
    online = folders["online"][2]
    overflow = folders["overflow"][2]
    assert {k: v for k, v in overflow.items() if k != "metadata"} == {
        k: v for k, v in online.items() if k != "metadata"
    }


def test_a_damaged_band_number_in_the_kept_bands_sends_the_run_to_the_sorted_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The online set holds each band's hashes apart, so it cannot hold a record naming a band
    beyond the run's (a damaged kept-bands file of an earlier run): the run goes again with
    sorted runs, which write what they write from that file when chosen at once."""
    documents = _planted_corpus(seed=17)
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents[:150]))
    second.write_text("".join(json.dumps({"text": d}) + "\n" for d in documents[150:]))
    options = {"tokenizer": str(TOKENIZER), "dedup": "near", "progress": False}
    results = {}
    for way in ("online", "sorted"):
        out = tmp_path / way
        prepare([first], out, **options)
        (kept,) = list((out / STATE_DIR).glob("hashes_*.u64"))
        bands = np.fromfile(kept, dtype=np.uint64).reshape(-1, 2)
        bands[len(bands) // 2, 1] = 99  # a band the run does not have
        bands.tofile(kept)
        monkeypatch.setattr(OnlineDedup, "fits", staticmethod(lambda *_, w=way: w == "online"))
        result = prepare([first, second], out, **options)
        results[way] = (result.duplicates, result.dedup_runs > 0, folder_files(out))
    assert results["online"][1], "the online set refused the record: sorted runs decided"
    online, ordered = results["online"][2], results["sorted"][2]
    assert results["online"][0] == results["sorted"][0]
    assert {k: v for k, v in online.items() if k != "metadata"} == {
        k: v for k, v in ordered.items() if k != "metadata"
    }
