"""The plan: deterministic, cut at line starts / row groups, largest first, incremental."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from data_io.errors import ConfigError, InputError
from data_io.scale.manifest import Manifest
from data_io.scale.plan import plan_tokenize
from data_io.tokenize import tokenize, tokenize_options

from .inputs import TOKENIZER, write_inputs

UNIT = 100_000


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_inputs(tmp_path_factory.mktemp("inputs"))


def _options(inputs: Path, out: Path) -> dict:
    return tokenize_options([inputs], out, tokenizer_path=TOKENIZER)


def test_plan_is_deterministic_and_covers_every_file(inputs: Path, tmp_path: Path) -> None:
    first = plan_tokenize(_options(inputs, tmp_path / "out"), UNIT)
    again = plan_tokenize(_options(inputs, tmp_path / "out"), UNIT)
    assert first.units == again.units
    by_task: dict[str, list] = {}
    for unit in first.units:
        by_task.setdefault(unit.task, []).append(unit)
    assert set(by_task) == {"big.jsonl", "small.jsonl", "groups.parquet", "packed.jsonl.gz"}
    # Largest first, ids in that order.
    assert [u.bytes for u in first.units] == sorted((u.bytes for u in first.units), reverse=True)
    assert [u.id for u in first.units] == sorted(u.id for u in first.units)
    # Small and compressed files stay whole.
    assert [u.span for u in by_task["small.jsonl"]] == [{"kind": "whole"}]
    assert [u.span for u in by_task["packed.jsonl.gz"]] == [{"kind": "whole"}]


def test_jsonl_ranges_start_at_line_starts_and_tile_the_file(inputs: Path, tmp_path: Path) -> None:
    plan = plan_tokenize(_options(inputs, tmp_path / "out"), UNIT)
    units = sorted((u for u in plan.units if u.task == "big.jsonl"), key=lambda u: u.index)
    data = (inputs / "big.jsonl").read_bytes()
    assert len(units) > 3 and all(u.count == len(units) for u in units)
    assert units[0].span["start"] == 0 and units[-1].span["end"] == len(data)
    for before, after in itertools.pairwise(units):
        assert before.span["end"] == after.span["start"]
        assert data[after.span["start"] - 1 : after.span["start"]] == b"\n"


def test_parquet_ranges_are_whole_row_groups(inputs: Path, tmp_path: Path) -> None:
    plan = plan_tokenize(_options(inputs, tmp_path / "out"), UNIT)
    units = sorted((u for u in plan.units if u.task == "groups.parquet"), key=lambda u: u.index)
    groups = pq.ParquetFile(inputs / "groups.parquet").metadata.num_row_groups
    assert len(units) > 1
    spans = [(u.span["start"], u.span["end"]) for u in units]
    assert spans[0][0] == 0 and spans[-1][1] == groups
    assert all(a[1] == b[0] for a, b in itertools.pairwise(spans))


def test_plan_holds_only_what_a_run_would_redo(inputs: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    tokenize([inputs / "small.jsonl"], out, tokenizer_path=TOKENIZER, progress=False)
    plan = plan_tokenize(tokenize_options([inputs / "small.jsonl"], out, tokenizer_path=TOKENIZER))
    assert plan.units == [] and plan.inputs == []


def test_manifest_round_trips_and_says_what_is_missing(inputs: Path, tmp_path: Path) -> None:
    plan = plan_tokenize(_options(inputs, tmp_path / "out"), UNIT)
    path = plan.save()
    loaded = Manifest.load(tmp_path / "out")  # the output folder is enough
    assert loaded.units == plan.units and loaded.options == plan.options
    assert loaded.path == path
    assert {loaded.state(u.id) for u in loaded.units} == {"pending"}
    with pytest.raises(ConfigError, match="no plan here"):
        Manifest.load(tmp_path / "elsewhere")
    with pytest.raises(ConfigError, match="no unit 'u999'"):
        loaded.unit("u999")


@pytest.mark.parametrize(
    ("cut", "said"),
    [
        (lambda text: text[: len(text) // 2], "not a readable plan (Expecting"),
        (lambda text: "", "not a readable plan (Expecting value"),
        (lambda text: "[1, 2]", "format 'list', expected 'data_io-scale/1'"),
        (lambda text: text.replace("data_io-scale/1", "data_io-scale/9"), "format 'data_io-sc"),
    ],
)
def test_a_damaged_plan_says_how_to_go_on(inputs: Path, tmp_path: Path, cut, said: str) -> None:
    """A truncated plan (a full disk, an editor) said only what JSON found wrong."""
    path = plan_tokenize(_options(inputs, tmp_path / "out"), UNIT).save()
    path.write_text(cut(path.read_text()))
    with pytest.raises(ConfigError, match=rf"{re.escape(said)}.*plan the run again \(remove"):
        Manifest.load(tmp_path / "out")


def _plan_with_unit_1(inputs: Path, tmp_path: Path, field: str, value: object) -> Path:
    """A saved plan whose second unit's ``field`` was edited to ``value``."""
    import json

    path = plan_tokenize(_options(inputs, tmp_path / "out"), UNIT).save()
    content = json.loads(path.read_text())
    content["units"][1][field] = value
    path.write_text(json.dumps(content))
    return path


@pytest.mark.parametrize("value", ["../u1", ".hidden", "a/b", ""])
def test_a_unit_id_edited_to_lead_outside_the_plan_is_refused(
    inputs: Path, tmp_path: Path, value: str
) -> None:
    path = _plan_with_unit_1(inputs, tmp_path, "id", value)
    said = f"unit 1: id {value!r} is not a plain name"
    with pytest.raises(ConfigError, match=rf"{re.escape(said)}.*plan the run again"):
        Manifest.load(path)


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("span", {"kind": "weird"}, "unit 1: span kind 'weird' is not one of whole, bytes"),
        ("span", {}, "unit 1: span kind None is not one of"),
    ],
)
def test_a_unit_span_of_no_known_kind_is_refused_at_load(
    inputs: Path, tmp_path: Path, field: str, value: object, said: str
) -> None:
    path = _plan_with_unit_1(inputs, tmp_path, field, value)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=rf"{re.escape(said)}.*plan the run again"):
        Manifest.load(path)


def test_a_plan_of_no_known_stage_is_refused_at_load(inputs: Path, tmp_path: Path) -> None:
    import json

    path = plan_tokenize(_options(inputs, tmp_path / "out"), UNIT).save()
    content = json.loads(path.read_text())
    path.write_text(json.dumps({**content, "stage": "frobnicate"}))
    with pytest.raises(ConfigError, match=r"stage 'frobnicate' is not one of train-tokenizer"):
        Manifest.load(path)


@pytest.mark.parametrize("value", ["../../../escaped", "/abs/task", ""])
def test_a_tokenize_unit_task_edited_to_lead_outside_its_parts_is_refused(
    inputs: Path, tmp_path: Path, value: str
) -> None:
    from data_io.scale.units import run_unit

    manifest = Manifest.load(_plan_with_unit_1(inputs, tmp_path, "task", value))
    with pytest.raises(ConfigError, match=rf"task {re.escape(repr(value))} leads outside"):
        run_unit(manifest, manifest.units[1].id, threads=1)
    assert not (tmp_path / "escaped").exists()


def test_bad_unit_size_is_refused(inputs: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unit size"):
        plan_tokenize(_options(inputs, tmp_path / "out"), 0)


def test_a_broken_parquet_file_is_named_when_the_plan_cuts_it(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "broken.parquet").write_bytes(b"PAR1" + b"\0" * 200_000)
    with pytest.raises(InputError, match=r"broken\.parquet: not a readable Parquet file"):
        plan_tokenize(_options(inputs, tmp_path / "out"), UNIT)


@pytest.mark.parametrize(
    ("span", "words"),
    [
        ({"kind": "whole"}, "whole file"),
        ({"kind": "bytes", "start": 0, "end": 10}, "bytes 0..10"),
        ({"kind": "text", "start": 5, "end": 9}, "text bytes 5..9"),
        ({"kind": "parts", "start": 2, "end": 4}, "parts 2..4"),
        ({"kind": "row_groups", "start": 0, "end": 3}, "row groups 0..3"),
    ],
)
def test_a_failed_units_span_is_said_in_words(span: dict, words: str) -> None:
    from data_io.scale.status import _span_words

    assert _span_words(span) == words
