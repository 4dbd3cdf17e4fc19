"""pipe.clean_natural_reasoning on a local copy in the `hf download` layout (one JSONL file)."""

from __future__ import annotations

import json
from pathlib import Path

from pipe.clean_natural_reasoning import CLEANER

from .upstream import assert_offline_run_names_hub_download, read_jsonl, row, run_expecting_error


def _item(question: str | None, reference: str | None) -> dict:
    # The upstream fields, the unused model responses included.
    return {
        "question": question,
        "reference_answer": reference,
        "responses": [{"response_model": "Llama-3.3-70B-Instruct", "response": "unused"}],
    }


ITEMS = [
    _item("What is the boiling point of water at sea level? ", "  100 °C\n"),
    _item("Prove that there are infinitely many primes.", "Euclid's argument."),
    _item("Show That x = 1.", "x = 1"),  # the filter lower-cases first
    _item("How can we improve the yield?", "Raise the temperature."),  # substring rule: dropped
    _item("What is 6 x 7?", "   \n\t"),  # empty after stripping
    _item("What is 6 x 8?", ""),
    _item("What is 6 x 9?", None),
    _item(None, "orphan"),
    _item("  Ünïcode question, kept as-is  ", "\u3000réponse\xa0"),  # str.strip trims both
    _item("Zero-width space is not whitespace", "\u200bkept\u200b"),
    _item("Shows that? 'show  that' with two spaces is not a marker", "ok"),
    _item("PROVE IT LOUDLY", "no"),
    _item("Separators\x1c\x1f are whitespace to Python", "\x1c\x1d 42 \x1e\x1f"),
]
EXPECTED = [
    row("noisy,direct", "What is the boiling point of water at sea level? ", "100 °C"),
    row("noisy,direct", "  Ünïcode question, kept as-is  ", "réponse"),
    row("noisy,direct", "Zero-width space is not whitespace", "\u200bkept\u200b"),
    row("noisy,direct", "Shows that? 'show  that' with two spaces is not a marker", "ok"),
    row("noisy,direct", "Separators\x1c\x1f are whitespace to Python", "42"),
]


def _copy(root: Path, items: list[dict]) -> Path:
    """The `hf download facebook/natural_reasoning` layout: one JSON Lines file at the top."""
    root.mkdir(parents=True)
    (root / "README.md").write_text("---\nlicense: cc-by-nc-4.0\n---\nA test stand-in.\n")
    with (root / "natural_reasoning.jsonl").open("w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(item, ensure_ascii=False) + "\n")
    return root


def _independent(items: list[dict]) -> list[dict]:
    """cleaners.md §3.4 in plain Python, row by row (null fields left out)."""
    rows = []
    for item in items:
        question, reference = item["question"], item["reference_answer"]
        if question is None or reference is None or not reference.strip():
            continue
        if "prove" in question.lower() or "show that" in question.lower():
            continue
        rows.append(row("noisy,direct", question, reference.strip()))
    return rows


def test_rows_filters_and_drops(tmp_path: Path) -> None:
    out = tmp_path / "natural_reasoning.jsonl"
    report = CLEANER.run(_copy(tmp_path / "copy", ITEMS), out, progress=False)
    assert read_jsonl(out) == EXPECTED == _independent(ITEMS)
    assert report.records == len(ITEMS) and report.rows_written == 5
    assert dict(report.drops) == {
        "proof question": 4,
        "no reference answer": 3,
        "null question": 1,
    }


AWKWARD = [
    " \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000",
    "\u200b\u2060\ufeff\u180e",  # zero-width and format characters: not whitespace to Python
    "İSTANBUL ſHOW THAT K\u212a Å\u212b ΣΑΣ PRoVE ＰＲＯＶＥ",
    "pro\u0301ve show\xa0that prov\ne improvE",
]


def test_vectorised_equals_python_on_awkward_text(tmp_path: Path) -> None:
    """Differential: the Arrow trim/lower-case equal str.strip/str.lower on every mix below."""
    items = []
    for left in AWKWARD:
        for right in AWKWARD:
            items.append(_item(f"{left}question{right}", f"{left}answer{right}"))
            items.append(_item(f"{right}{left}", f"{left}x{right}"))
    out = tmp_path / "out.jsonl"
    CLEANER.run(_copy(tmp_path / "copy", items), out, progress=False)
    assert read_jsonl(out) == _independent(items)
    assert len(_independent(items)) >= 8  # the comparison covers kept rows, not only drops


def test_many_batches_keep_source_order(tmp_path: Path) -> None:
    items = [_item(f"q{i}" + (" prove" if i % 7 == 0 else ""), f" a{i} ") for i in range(20_000)]
    out = tmp_path / "out.jsonl"
    report = CLEANER.run(_copy(tmp_path / "copy", items), out, progress=False)
    assert read_jsonl(out) == _independent(items)
    assert dict(report.drops) == {"proof question": len(range(0, 20_000, 7))}


def test_missing_field_names_the_rows(tmp_path: Path) -> None:
    items = [{"question": "q", "answer": "not the upstream name"}]
    run_expecting_error(
        CLEANER,
        _copy(tmp_path / "copy", items),
        tmp_path / "out.jsonl",
        "default/train row 0",
        "column(s) ['reference_answer'] missing",
    )


def test_module_without_network_or_copy_says_what_to_download(tmp_path: Path) -> None:
    assert_offline_run_names_hub_download(
        "pipe.clean_natural_reasoning", tmp_path, "facebook/natural_reasoning"
    )
