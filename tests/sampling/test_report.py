"""The Markdown analytics and the PNG: numbers re-derived independently from the outputs."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import numpy as np

from data_io.sampling import parse_overrides, sample
from data_io.sampling.synthetic import SyntheticTask, write_corpus
from data_io.util.words import counted

RULES = """
- prefix: cat__cot_
- prefix: cat__
  max_per_file: 3
- prefix: rep
  repeat: 4
"""


def _setup(tmp_path: Path) -> tuple[Path, Path]:
    tasks = {
        "cat__a.parquet": SyntheticTask(np.full(10, 4), np.array([5] * 8 + [1, 1])),
        "cat__cot_b.parquet": SyntheticTask(np.full(4, 3), np.full(4, 6)),
        "cat__cot_c.parquet": SyntheticTask(np.full(2, 3), np.full(2, 6)),
        "rep.jsonl": SyntheticTask(np.array([2, 30]), np.array([3, 9])),
        "zero.jsonl": SyntheticTask(np.zeros(0), np.zeros(0)),
    }
    corpus = write_corpus(tmp_path / "tok", tasks, vocab_size=300)
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    return corpus, rules


def _sample(tmp_path: Path, *extra: str):
    corpus, rules = _setup(tmp_path)
    config = parse_overrides(
        [
            f"tokenized_path={corpus}",
            f"output_path={tmp_path / 'out'}",
            f"prefix_config_path={rules}",
            "epochs=3",
            "context_size=35",
            *extra,
        ]
    )
    stdout = io.StringIO()
    result = sample(config, stdout=stdout, progress=False)
    return result, stdout.getvalue()


def _table(report: str, title: str) -> dict[str, list[str]]:
    section = report.split(f"### {title}")[1].split("\n### ")[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if (
            line.startswith("| ")
            and not line.startswith("| Name")
            and not line.startswith("| Task")
        ):
            rows[cells[0].strip("*")] = cells[1:]
    return rows


def test_task_and_category_tables_match_the_epoch_files(tmp_path: Path) -> None:
    result, report = _sample(tmp_path)
    out = tmp_path / "out"
    # Independent count: how often each pool offset was sampled, from the epoch files.
    starts = np.concatenate([np.load(out / f"epoch_{e}" / "inst_start.npy") for e in range(3)])
    lens = np.concatenate(
        [
            np.load(out / f"epoch_{e}" / "inst_len.npy")
            + np.load(out / f"epoch_{e}" / "resp_len.npy")
            for e in range(3)
        ]
    )
    # Tasks occupy the pool in name order; their spans follow from the source sizes.
    names = [
        "cat__a.parquet",
        "cat__cot_b.parquet",
        "cat__cot_c.parquet",
        "rep.jsonl",
        "zero.jsonl",
    ]
    sizes = [10 * 4 + 8 * 5 + 2, 4 * 9, 2 * 9, 2 + 3 + 30 + 9, 0]
    bounds = np.cumsum([0, *sizes])
    tasks = _table(report, "Task Coverage Stats")
    assert list(tasks) == sorted(names)
    total_cov = len(starts)
    for index, name in enumerate(names):
        mine = (starts >= bounds[index]) & (starts < bounds[index + 1])
        cov_rows, cov_toks = int(mine.sum()), int(lens[mine].sum())
        assert tasks[name][2] == f"{cov_rows:,} ({cov_rows / max(1, total_cov):.1%})"
        assert tasks[name][3].startswith(f"{cov_toks:,} (")
    # cat__a keeps 8 rows (2 short responses), capped at 3 per epoch: 9 sampled rows.
    assert tasks["cat__a.parquet"][0].startswith("8 (")
    assert tasks["cat__a.parquet"][2].startswith("9 (")
    # rep.jsonl: row 2 (30 + 9 > 35) is truncated to 5, repeated 4 times per epoch.
    assert tasks["rep.jsonl"][2].startswith("24 (")
    categories = _table(report, "Category Coverage Stats")
    assert list(categories) == ["GLOBAL", "cat", "rep.jsonl", "zero.jsonl"]
    assert categories["GLOBAL"][2] == f"{total_cov:,} (100.0%)"
    assert categories["cat"][2].startswith(f"{9 + 3 * 6:,} (")
    assert result.analytics.total.cov_rows == total_cov


def test_drops_truncations_and_overlaps_are_reported_once(tmp_path: Path) -> None:
    _, report = _sample(tmp_path)
    drops = _table(report, "Dropped and Truncated Rows")
    assert drops["cat__a.parquet"] == ["10", "8", "0", "2", "0", "0", "0"]
    assert drops["rep.jsonl"] == ["2", "2", "1", "0", "0", "0", "0"]
    assert "cat__cot_b.parquet" not in drops  # untouched tasks are not listed
    # The total is over every task, listed or not: source rows add up to the corpus.
    total = drops["total, all 5 tasks"]
    assert total == ["**18**", "**16**", "**1**", "**2**", "**0**", "**0**", "**0**"]
    overlap_lines = [line for line in report.splitlines() if "also 'cat__'" in line]
    assert len(overlap_lines) == 1
    assert overlap_lines[0].startswith("- 2 tasks match 'cat__cot_'")


def test_global_summary_and_plot(tmp_path: Path) -> None:
    result, report = _sample(tmp_path)
    summary = report.split("### Global Summary")[1]
    total = result.analytics.total
    assert (
        f"**Total Unique Rows Sampled:** {total.unique_cov_rows:,} out of {total.rows:,}" in summary
    )
    assert total.unique_cov_rows == total.rows  # everything sampled at least once here
    # Separate list items: plain consecutive lines would render as one paragraph.
    assert "\n- **Total Unique Tokens Sampled:** " in summary
    assert "\n- **Total Unique Rows Sampled:** " in summary
    plot = tmp_path / "out" / "analytics.png"
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # Relative links: from the current folder on stdout (``> show_analytics.md``), from the
    # output folder in the stored copy beside the figure.
    assert f"]({os.path.relpath(plot)})" in report
    stored = (tmp_path / "out" / "analytics.md").read_text()
    assert "![Length distributions and tokens per category](analytics.png)" in stored
    assert re.search(r"`.*out`: 180 tokens \(uint16\), 3 epochs of \d+ rows", report)


def test_reused_output_links_the_plot_from_the_current_folder(tmp_path: Path, monkeypatch) -> None:
    corpus, rules = _setup(tmp_path)
    config = parse_overrides(
        [
            f"tokenized_path={corpus}",
            f"output_path={tmp_path / 'out'}",
            f"prefix_config_path={rules}",
        ]
    )
    sample(config, stdout=io.StringIO(), progress=False)
    monkeypatch.chdir(tmp_path)
    stdout = io.StringIO()
    assert sample(config, stdout=stdout, progress=False).reused
    assert "](out/analytics.png)" in stdout.getvalue()


def test_plot_marks_the_context_and_shows_every_category(tmp_path: Path, monkeypatch) -> None:
    from matplotlib.figure import Figure

    figures: list[Figure] = []
    real_savefig = Figure.savefig

    def keep(self, *args, **kwargs):
        figures.append(self)
        return real_savefig(self, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", keep)
    # One category a million times larger than another: both bars must be on the axis.
    tasks = {
        "big__a.jsonl": SyntheticTask(np.full(2000, 500), np.full(2000, 500)),
        "tiny__b.jsonl": SyntheticTask(np.full(1, 2), np.full(1, 2)),
    }
    corpus = write_corpus(tmp_path / "tok", tasks, vocab_size=300)
    (tmp_path / "rules.yaml").write_text("")
    config = parse_overrides(
        [
            f"tokenized_path={corpus}",
            f"output_path={tmp_path / 'out'}",
            f"prefix_config_path={tmp_path / 'rules.yaml'}",
            "epochs=1",
            "context_size=2049",
        ]
    )
    sample(config, stdout=io.StringIO(), progress=False)
    (figure,) = figures
    lengths, bars = figure.axes[0], figure.axes[3]
    assert bars.get_legend() is None  # no legend over the bars
    (legend,) = figure.legends
    labels = [text.get_text() for text in legend.get_texts()]
    assert labels == ["corpus (after filtering)", "sampled per epoch", "context_size (2,049)"]
    assert [line.get_xdata()[0] for line in lengths.get_lines()] == [2049]
    assert bars.get_xlim()[0] <= 4  # the tiny category's 4 tokens are visible


def test_plot_can_go_elsewhere_or_be_disabled(tmp_path: Path) -> None:
    elsewhere = tmp_path / "figs" / "lengths.png"
    elsewhere.parent.mkdir()
    result, report = _sample(tmp_path, f"plot_path={elsewhere}")
    assert elsewhere.exists() and result.plot_path == elsewhere
    assert f"]({os.path.relpath(elsewhere)})" in report
    assert not (tmp_path / "out" / "analytics.png").exists()
    result, report = _sample(tmp_path / "b", "plot=false")
    assert result.plot_path is None and "![" not in report
    assert not (tmp_path / "b" / "out" / "analytics.png").exists()


def _report_of(corpus: Path, out: Path, rules: Path, *overrides: str) -> str:
    """The Markdown report a sample of ``corpus`` into ``out`` prints (no plot)."""
    stdout = io.StringIO()
    config = parse_overrides(
        [f"tokenized_path={corpus}", f"output_path={out}", f"prefix_config_path={rules}",
         "plot=false", *overrides]
    )  # fmt: skip
    sample(config, stdout=stdout, progress=False)
    return stdout.getvalue()


def test_nothing_dropped_says_so(tmp_path: Path) -> None:
    corpus = write_corpus(
        tmp_path / "tok", {"t.jsonl": SyntheticTask(np.full(3, 3), np.full(3, 3))}, vocab_size=20
    )
    rules = tmp_path / "r.yaml"
    rules.write_text("")
    report = _report_of(corpus, tmp_path / "o", rules)
    assert "No row was dropped or truncated." in report
    assert "Matched by Several Prefixes" not in report


def test_a_rule_that_takes_no_row_is_said_not_only_shown_as_zeros(tmp_path: Path, capsys) -> None:
    corpus = write_corpus(
        tmp_path / "tok",
        {
            "keep.jsonl": SyntheticTask(np.full(4, 3), np.full(4, 3)),
            "off__a.jsonl": SyntheticTask(np.full(5, 2), np.full(5, 4)),
        },
        vocab_size=20,
    )
    rules = tmp_path / "r.yaml"
    rules.write_text("- prefix: off__\n  max_per_file: 0\n")
    report = _report_of(corpus, tmp_path / "o", rules, "epochs=2")
    # Independently: keep.jsonl fills the pool's first 4 * 6 tokens; nothing starts after.
    starts = np.concatenate(
        [np.load(tmp_path / "o" / f"epoch_{e}" / "inst_start.npy") for e in range(2)]
    )
    assert len(starts) == 8 and int(starts.max()) < 4 * 6
    assert _table(report, "Task Coverage Stats")["off__a.jsonl"][:3] == [
        "5 (55.6%)",
        "30 (55.6%)",
        "0 (0.0%)",
    ]
    line = "1 task keeps rows but their rule takes none of them (max_per_file: 0): off__a.jsonl"
    assert f"**Not sampled:** {line}" in report
    assert (tmp_path / "o" / "analytics.md").read_text(encoding="utf-8") == report
    err = capsys.readouterr().err
    assert f"their rule in {rules} takes none of them (max_per_file: 0): off__a.jsonl" in err


def test_length_histogram_equals_numpy_histogram() -> None:
    """The PNG's bincount-based histogram is np.histogram's, counts and weighted sums."""
    from data_io.sampling.report import length_bins, length_histogram

    rng = np.random.default_rng(4)
    for trial in range(60):
        lengths = rng.integers(0, int(rng.integers(1, 20_000)), int(rng.integers(1, 3000)))
        weights = rng.integers(0, 5, len(lengths)) / 3
        bins = length_bins(lengths)
        if trial % 3 == 0 and len(bins) > 6:
            bins = bins[2:-3]  # values below the first and above the last edge are left out
        assert length_histogram(lengths, bins).tolist() == np.histogram(lengths, bins)[0].tolist()
        expected = np.histogram(lengths, bins, weights=weights)[0]
        assert np.allclose(length_histogram(lengths, bins, weights), expected, rtol=0, atol=1e-9)
    zeros = np.zeros(5, dtype=np.int64)  # only empty rows: nothing is counted, no crash
    assert length_histogram(zeros, length_bins(zeros)).tolist() == [0]


def test_token_axis_labels_are_compact() -> None:
    from data_io.sampling.report import _compact_number

    assert [_compact_number(v) for v in (0.5, 1, 999, 1000, 25_000, 1e6, 2.5e6, 3e9)] == [
        "0.5", "1", "999", "1k", "25k", "1M", "2.5M", "3G",
    ]  # fmt: skip


def test_report_saved_elsewhere_links_the_plot_from_there(tmp_path: Path, monkeypatch) -> None:
    """`data_io example --workdir ex` run from another folder saves the report in ex/: the
    link must be relative to ex/, not to the current folder."""
    corpus, rules = _setup(tmp_path)
    config = parse_overrides(
        [
            f"tokenized_path={corpus}",
            f"output_path={tmp_path / 'out'}",
            f"prefix_config_path={rules}",
        ]
    )
    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    monkeypatch.chdir(elsewhere)
    for expect_reuse in (False, True):  # built, then reused: both printed copies
        stdout = io.StringIO()
        result = sample(config, stdout=stdout, progress=False, report_dir=tmp_path / "reports")
        assert result.reused is expect_reuse
        assert "](../out/analytics.png)" in stdout.getvalue()
    stored = (tmp_path / "out" / "analytics.md").read_text()
    assert "](analytics.png)" in stored  # the stored copy, relative to its own folder


def _cells(line: str) -> list[str]:
    """A Markdown table row's cells, split as GFM does (at a `|` not escaped by `\\`)."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _unescape(cell: str) -> str:
    return re.sub(r"\\(.)", r"\1", cell)


def test_names_with_markdown_characters_keep_the_tables_whole(tmp_path: Path) -> None:
    """A `|` in a task or category name would split its cell; `*`, `_` at a word's edge,
    backticks and `<` would render as markup: escaped, and read back as the names."""
    names = ["a|b.jsonl", "c*d*e.jsonl", "_f_`g`<h>.jsonl", "plain__name.jsonl"]
    tasks = {name: SyntheticTask(np.full(3, 2), np.array([3, 3, 50])) for name in names}
    corpus = write_corpus(tmp_path / "tok", tasks, vocab_size=300)
    rules = tmp_path / "rules.yaml"
    rules.write_text("- prefix: a\n  max_per_file: 2\n")
    config = parse_overrides(
        [f"tokenized_path={corpus}", f"output_path={tmp_path / 'out'}",
         f"prefix_config_path={rules}", "epochs=1", "context_size=20", "plot=false"]
    )  # fmt: skip
    stdout = io.StringIO()
    sample(config, stdout=stdout, progress=False)
    report = stdout.getvalue()
    assert (tmp_path / "out" / "analytics.md").read_text() == report
    # Readable where nothing needs escaping: `__` inside a word is not emphasis.
    assert "| **plain__name.jsonl** |" in report and "| **c\\*d\\*e.jsonl** |" in report
    for title, columns, expected in (
        ("Category Coverage Stats", 7, {"a|b.jsonl", "c*d*e.jsonl", "_f_`g`<h>.jsonl", "plain"}),
        ("Task Coverage Stats", 7, set(names)),
        ("Dropped and Truncated Rows", 8, set(names)),
    ):
        section = report.split(f"### {title}")[1].split("\n### ")[0]
        rows = [_cells(line) for line in section.splitlines() if line.startswith("|")]
        assert {len(cells) for cells in rows} == {columns}, title
        found = {_unescape(cells[0]).strip("*") for cells in rows[2:]}
        assert found - {"GLOBAL", "total, all 4 tasks"} == expected, title
    # The notes under the tables name tasks too: escaped as the cells are.
    note = next(line for line in report.splitlines() if line.startswith("**No prefix rule:**"))
    listed = note.split("once per epoch: ")[1]
    assert "c\\*d\\*e.jsonl" in listed and "\\_f\\_\\`g\\`\\<h>.jsonl" in listed
    assert set(_unescape(listed).split(", ")) == {"c*d*e.jsonl", "_f_`g`<h>.jsonl",
                                                  "plain__name.jsonl"}  # fmt: skip


def test_counts_of_one_are_singular(tmp_path: Path) -> None:
    """One task, one epoch, one row: "1 epoch of 1 row", not "1 epochs of 1 rows"."""
    assert counted(1, "row") == "1 row" and counted(2_000, "row") == "2,000 rows"
    assert (
        counted(1, "match", "matches") == "1 match"
        and counted(0, "match", "matches") == "0 matches"
    )
    corpus = write_corpus(
        tmp_path / "tok", {"one.jsonl": SyntheticTask(np.array([1]), np.array([2]))}, vocab_size=50
    )
    rules = tmp_path / "rules.yaml"
    rules.write_text("[]\n")
    config = parse_overrides(
        [f"tokenized_path={corpus}", f"output_path={tmp_path / 'out'}",
         f"prefix_config_path={rules}", "epochs=1", "context_size=3", "plot=false"]
    )  # fmt: skip
    stdout = io.StringIO()
    sample(config, stdout=stdout, progress=False)
    report = stdout.getvalue()
    assert "`: 3 tokens (uint8), 1 epoch of 1 row." in report, report
