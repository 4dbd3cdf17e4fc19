"""data_io.cleaning.scaled: what ``data_io clean --executor`` records per unit and reports."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from data_io.cleaning.scaled import STAGE

from .upstream import write_hub_copy, write_json


@dataclass
class _Plan:
    """The part of a saved plan that the clean stage reads: its folder, units and records."""

    output: str
    units: list = field(default_factory=list)
    done: dict[str, dict[str, Any]] = field(default_factory=dict)

    def read_record(self, unit_id: str, kind: str) -> dict[str, Any] | None:
        assert kind == "done"
        return self.done.get(unit_id)


def _run_all(workdir: Path, names: list[str]) -> dict[str, Any]:
    plan = STAGE.plan({"names": names, "workdir": str(workdir)})
    saved = _Plan(str(workdir), plan.units)
    for unit in plan.units:
        saved.done[unit.id] = STAGE.run_unit(saved, unit, None)  # type: ignore[arg-type]
    return STAGE.finalize(saved, missing=[], progress=False).result  # type: ignore[arg-type]


def test_report_shows_drops_and_removed_files_as_one_process_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    work = tmp_path / "work"
    arb = work / "raw_data" / "Platypus" / "ARB"
    for name in ("math", "reading", "law", "science", "physics"):
        write_json(arb / f"{name}.json", [{"instruction": name, "response": "r"}])
    write_hub_copy(
        work / "raw_data" / "hub" / "openai" / "gsm8k",
        {
            ("main", "train"): [
                {"question": "q", "answer": None},
                {"question": "p", "answer": "#### 1"},
            ]
        },
    )
    _run_all(work, ["arb"])
    write_json(arb / "math.json", [])  # the next run has no rows for arb_math.jsonl
    capsys.readouterr()
    result = _run_all(work, ["gsm8k_train", "arb"])
    assert STAGE.report(result, quiet=False) == 0
    said = capsys.readouterr().out.splitlines()
    assert (
        "  removed data/Platypus/arb_math.jsonl: the last run wrote it, this run had no rows for it"
        in said
    )
    assert "  gsm8k_train: dropped 1: null field: answer" in said
    assert said[-1] == "6 records read, 5 rows written by 2 cleaners, 1 record dropped"
    assert not (work / "data" / "Platypus" / "arb_math.jsonl").exists()


def test_warnings_of_a_unit_reach_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cache").write_text("a file where the cache folder should be\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    work = tmp_path / "work"
    for name in ("math", "reading", "law", "science", "physics"):
        write_json(
            work / "raw_data/Platypus/ARB" / f"{name}.json",
            [{"instruction": name, "response": "r"}],
        )
    STAGE.report(_run_all(work, ["arb"]), quiet=True)
    assert capsys.readouterr().err.startswith(
        "clean arb: warning: the outputs are written, but the list of them cannot be saved"
    )
