"""Plans written before the scale layer ran stages by name (``data_io.stage``) still load, show
their status and resume to the output one run on one machine writes (issue 24). The plans in
``old_plans/`` were written by the earlier code (see its README) over the deterministic inputs
the other scale tests use, which are made again here."""

from __future__ import annotations

import json
import os
from pathlib import Path

from data_io.prepare import prepare
from data_io.scale import ExecutorSettings, Manifest, resume
from data_io.scale.status import status
from data_io.tokenize import tokenize

from .inputs import ROOT, tree_bytes, write_inputs
from .test_prepare import OPTIONS, _inputs, _tree

OLD_PLANS = Path(__file__).resolve().parent / "old_plans"
SETTINGS = ExecutorSettings(kind="local", workers=2, threads_per_unit=1)


def _install(name: str, root: Path, output: str) -> Manifest:
    """The old plan, its paths pointed at ``root`` and this repository, saved where it was, and
    its inputs given the modification times it recorded."""
    text = (OLD_PLANS / name).read_text(encoding="utf-8")
    text = text.replace("@ROOT@", str(root)).replace("@REPO@", str(ROOT))
    plan = json.loads(text)
    for entry in plan["inputs"]:
        source = Path(entry.get("source") or entry["name"])
        os.utime(source, ns=(entry["mtime_ns"], entry["mtime_ns"]))
    path = root / output / ".data_io_scale" / "manifest.json"
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    return Manifest.load(path)


def test_an_old_tokenize_plan_resumes_to_the_one_run_output(tmp_path: Path) -> None:
    inputs = write_inputs(tmp_path / "in")
    manifest = _install("tokenize.json", tmp_path, "out")
    assert manifest.stage == "tokenize" and len(manifest.units) == 15
    report = status(manifest)
    assert not report.complete and report.counts["pending"] == 15
    outcome = resume(manifest, SETTINGS, progress=False)
    assert outcome.unfinished == [] and not outcome.result.failed
    assert status(Manifest.load(manifest.path)).finalized
    tokenize([inputs], tmp_path / "one", tokenizer_path=ROOT / "trained_tokenizers" / "bpe" /
             "tokenizer.json", progress=False)  # fmt: skip
    assert tree_bytes(tmp_path / "out") == tree_bytes(tmp_path / "one")


def test_an_old_prepare_plan_resumes_to_the_one_run_output(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path / "pin")
    manifest = _install("prepare.json", tmp_path, "pout")
    assert manifest.stage == "prepare" and len(manifest.units) == 4
    outcome = resume(manifest, SETTINGS, progress=False)
    assert outcome.unfinished == [] and outcome.result is not None
    # The units' parts were used: a part made under an old plan records the text field in its
    # options, not with its input, and is still the same work.
    assert sorted(outcome.result.from_parts) == sorted(u.source for u in manifest.units)
    options = {**OPTIONS, "tokenizer": str(ROOT / "trained_tokenizers" / "bpe" / "tokenizer.json")}
    prepare([inputs], tmp_path / "one", progress=False, **options)
    assert _tree(tmp_path / "pout") == _tree(tmp_path / "one")
