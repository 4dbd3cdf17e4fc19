"""The sampler's analytics: Markdown on stdout (formats.md §4 step 7) and a PNG of lengths.

The coverage tables keep the original's layout (category table with a GLOBAL row, task table,
global summary; percentages relative to GLOBAL) so that reports stay comparable across
versions. Added: rows dropped and truncated per task and why, the prefix rules that overlap,
and a figure with the length distributions and tokens per category.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TextIO

import numpy as np

from data_io.sampling.algorithm import DROP_REASONS, FilteredTask, Rows

GLOBAL = "GLOBAL"


@dataclass
class CoverageStats:
    """Rows and tokens of a task or category after filtering, and how much was sampled."""

    rows: int = 0
    toks: int = 0
    inst_toks: int = 0
    resp_toks: int = 0
    cov_rows: int = 0  # sampled rows over all epochs, with repeats
    cov_toks: int = 0
    cov_inst: int = 0
    cov_resp: int = 0
    unique_cov_rows: int = 0  # rows sampled at least once
    unique_cov_toks: int = 0

    def add(self, other: CoverageStats) -> None:
        for item in fields(self):
            setattr(self, item.name, getattr(self, item.name) + getattr(other, item.name))


def task_stats(item: FilteredTask, coverage: np.ndarray) -> CoverageStats:
    inst, resp = item.inst_len, item.resp_len
    stats = CoverageStats(rows=item.rows, inst_toks=int(inst.sum()), resp_toks=int(resp.sum()))
    stats.toks = stats.inst_toks + stats.resp_toks
    stats.cov_rows = int(coverage.sum())
    stats.cov_inst = int(np.dot(inst, coverage)) if item.rows else 0
    stats.cov_resp = int(np.dot(resp, coverage)) if item.rows else 0
    stats.cov_toks = stats.cov_inst + stats.cov_resp
    covered = coverage > 0
    stats.unique_cov_rows = int(covered.sum())
    stats.unique_cov_toks = int(inst[covered].sum() + resp[covered].sum())
    return stats


@dataclass
class Analytics:
    """Everything the report prints, computed once from the filtered tasks and coverage."""

    tasks: dict[str, CoverageStats]
    categories: dict[str, CoverageStats]  # includes GLOBAL
    filtered: Sequence[FilteredTask]

    @classmethod
    def build(cls, filtered: Sequence[FilteredTask], rows: Rows, coverage: np.ndarray) -> Analytics:
        tasks: dict[str, CoverageStats] = {}
        categories: dict[str, CoverageStats] = {GLOBAL: CoverageStats()}
        for item, base in zip(filtered, rows.task_base, strict=True):
            stats = task_stats(item, coverage[base : base + item.rows])
            tasks[item.task.name] = stats
            categories[GLOBAL].add(stats)
            categories.setdefault(item.task.category, CoverageStats()).add(stats)
        return cls(tasks=tasks, categories=categories, filtered=filtered)

    @property
    def total(self) -> CoverageStats:
        return self.categories[GLOBAL]


# Characters of a name that break a table row (``|``) or render as markup in a cell (code
# spans, emphasis, strikethrough, HTML tags, and the escape character itself).
_MARKDOWN_SPECIAL = re.compile(r"[\\|`*~<]|(?<!\w)_+|_+(?!\w)")


def markdown_cell(name: str) -> str:
    """``name`` for a Markdown table cell, shown as written: ``|`` and markup characters are
    backslash-escaped; ``_`` only at a word's edge (``_a_``): inside a word, as in the
    ``__`` of task names, it renders as itself, so names stay readable in the raw text."""
    return _MARKDOWN_SPECIAL.sub(lambda match: "".join("\\" + char for char in match[0]), name)


def _num(value: int) -> str:
    return f"{value:,}"


def _num_pct(value: int, total: int) -> str:
    return f"{_num(value)} ({value / max(1, total):.1%})"


def _coverage_table(out: TextIO, title: str, data: dict[str, CoverageStats], ref: CoverageStats):
    header = (
        "| Name | Rows (%) | Tokens (%) | Cov Rows (%) | Cov Toks (%) | Cov IToks (%) "
        "| Cov RToks (%) |"
    )
    print(f"\n### {title} Coverage Stats", file=out)
    print(header, file=out)
    print("".join(char if char == "|" else "-" for char in header), file=out)
    for name, s in sorted(data.items()):
        print(
            f"| **{markdown_cell(name)}** | {_num_pct(s.rows, ref.rows)} "
            f"| {_num_pct(s.toks, ref.toks)} "
            f"| {_num_pct(s.cov_rows, ref.cov_rows)} | {_num_pct(s.cov_toks, ref.cov_toks)} "
            f"| {_num_pct(s.cov_inst, ref.cov_inst)} | {_num_pct(s.cov_resp, ref.cov_resp)} |",
            file=out,
        )


def _drop_table(out: TextIO, filtered: Sequence[FilteredTask]) -> None:
    print("\n### Dropped and Truncated Rows", file=out)
    affected = [
        item for item in filtered if item.truncated or any(item.drops.get(r) for r in DROP_REASONS)
    ]
    if not affected:
        print("No row was dropped or truncated.", file=out)
        return
    print(
        "Rows are counted under the first reason that applies; truncated rows are kept with "
        "their response cut to fit the context.\n",
        file=out,
    )
    header = "| Task | Source rows | Kept | Truncated | " + " | ".join(DROP_REASONS) + " |"
    print(header, file=out)
    print("".join(char if char == "|" else "-" for char in header), file=out)
    for item in affected:
        print(
            f"| {markdown_cell(item.task.name)} | "
            + " | ".join(_num(v) for v in _drop_row(item))
            + " |",
            file=out,
        )
    # Over every task, listed or not: "Source rows" and "Kept" then add up to the corpus.
    totals = np.sum([_drop_row(item) for item in filtered], axis=0, dtype=np.int64)
    count = len(filtered)
    label = f"**total, {'the only task' if count == 1 else f'all {count} tasks'}**"
    print(f"| {label} | " + " | ".join(f"**{_num(int(v))}**" for v in totals) + " |", file=out)


def _drop_row(item: FilteredTask) -> list[int]:
    return [item.task.rows, item.rows, item.truncated] + [
        item.drops.get(reason, 0) for reason in DROP_REASONS
    ]


PLOT_ALT = "Length distributions and tokens per category"


def plot_link(plot: Path, base: Path) -> str:
    """The image's path as the Markdown file at ``base`` (a folder) should link it:
    relative, so that the report and its figure can be moved or served together."""
    return Path(os.path.relpath(plot, base)).as_posix()


def relink_plot(text: str, old_link: str, new_link: str) -> str:
    """The report ``text`` with its image link changed (for a copy written elsewhere)."""
    return text.replace(f"![{PLOT_ALT}]({old_link})", f"![{PLOT_ALT}]({new_link})")


def write_markdown(
    out: TextIO,
    analytics: Analytics,
    *,
    notes: Sequence[str] = (),
    overlaps: Sequence[str] = (),
    plot_link: str | None = None,
) -> None:
    """Print the whole report (the only thing the sampler writes to stdout); ``plot_link``
    is the figure's path relative to where the report goes (:func:`plot_link`)."""
    _coverage_table(out, "Category", analytics.categories, analytics.total)
    _coverage_table(out, "Task", analytics.tasks, analytics.total)
    _drop_table(out, analytics.filtered)
    if overlaps:
        print("\n### Tasks Matched by Several Prefixes", file=out)
        for line in overlaps:
            print(f"- {line}", file=out)
    total = analytics.total
    # A list: consecutive lines would render as one paragraph.
    print("\n### Global Summary\n", file=out)
    print(
        f"- **Total Unique Tokens Sampled:** {_num(total.unique_cov_toks)} out of "
        f"{_num(total.toks)} ({total.unique_cov_toks / max(1, total.toks):.2%})",
        file=out,
    )
    print(
        f"- **Total Unique Rows Sampled:** {_num(total.unique_cov_rows)} out of "
        f"{_num(total.rows)} ({total.unique_cov_rows / max(1, total.rows):.2%})",
        file=out,
    )
    for note in notes:
        print(f"\n{note}", file=out)
    if plot_link is not None:
        print(f"\n![{PLOT_ALT}]({plot_link})", file=out)
    print(file=out)


def preload_matplotlib() -> None:
    """Import what :func:`write_plot` needs (called early, from a helper thread)."""
    import matplotlib.backends.backend_agg  # noqa: PLC0415  heavy: matplotlib, only when a plot is drawn
    import matplotlib.figure  # noqa: F401, PLC0415  heavy: matplotlib, only when a plot is drawn


def _plain_number(value: float, _pos: object = None) -> str:
    return f"{value:,.0f}" if value >= 1 else f"{value:g}"


def _compact_number(value: float, _pos: object = None) -> str:
    """1k, 1M, 1G: the token axis spans many decades, whose full numbers would collide."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:g}{suffix}"
    return _plain_number(value)


def _plain_log_axis(axis, formatter=_plain_number) -> None:
    """Log scale with plain-number labels and no minor ticks (minor ticks and mathtext
    labels are what makes rendering a log axis slow)."""
    from matplotlib.ticker import FuncFormatter, NullLocator  # noqa: PLC0415  heavy: matplotlib, only when a plot is drawn

    axis.set_major_formatter(FuncFormatter(formatter))
    axis.set_minor_locator(NullLocator())


def length_bins(lengths: np.ndarray) -> np.ndarray:
    """About 60 integer bin edges, evenly spaced on a log scale from 1 to past the longest."""
    top = max(2, int(lengths.max()) + 1)
    return np.unique(np.geomspace(1, top, 60).astype(np.int64))


def length_histogram(
    lengths: np.ndarray, bins: np.ndarray, weights: np.ndarray | None = None
) -> np.ndarray:
    """``np.histogram(lengths, bins, weights=weights)[0]`` for integer lengths and integer
    edges, from one ``bincount`` (a pass over the rows) instead of a binary search per row.

    Edge ``i`` to ``i + 1`` is ``[bins[i], bins[i + 1])``, the last one closed as in numpy;
    lengths (never negative) below ``bins[0]`` or above ``bins[-1]`` are not counted.
    """
    first, last = int(bins[0]), int(bins[-1])
    # Row counts (or weight sums) per length 0..max; lengths past ``last`` are sliced off.
    per_length = np.bincount(lengths, weights=weights, minlength=last + 1)[first : last + 1]
    # Sums from each edge up to the next one; the last bin runs to the end (closed).
    return np.add.reduceat(per_length, bins[:-1] - first)


def write_plot(
    path: Path,
    filtered: Sequence[FilteredTask],
    rows: Rows,
    coverage: np.ndarray,
    epochs: int,
    context_size: int | None = None,
) -> None:
    """PNG: instruction/response/total length histograms (corpus vs sampled per epoch, the
    context limit marked) and tokens per category (same two series, one legend for all).
    Written to a temporary name, renamed.

    Uses matplotlib's object API (a ``Figure`` and the Agg canvas), not pyplot: no global
    figure registry, so it may run in any thread.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415  heavy: matplotlib, only when a plot is drawn
    from matplotlib.figure import Figure  # noqa: PLC0415  heavy: matplotlib, only when a plot is drawn

    figure = Figure(figsize=(12, 8))
    FigureCanvasAgg(figure)
    axes = figure.subplots(2, 2)
    figure.subplots_adjust(left=0.17, right=0.98, top=0.92, bottom=0.06, hspace=0.3, wspace=0.25)
    weights = coverage / max(1, epochs)
    series = (
        ("instruction", rows.inst_len),
        ("response", rows.resp_len),
        ("total", rows.inst_len + rows.resp_len),
    )
    for axis, (label, lengths) in zip(axes.flat, series, strict=False):
        if len(lengths):
            bins = length_bins(lengths)
            corpus = length_histogram(lengths, bins)
            sampled = length_histogram(lengths, bins, weights)
            axis.stairs(corpus, bins, label="corpus (after filtering)")
            axis.stairs(sampled, bins, label="sampled per epoch")
            axis.set_xscale("log")
            axis.set_yscale("log")
            _plain_log_axis(axis.xaxis)
            _plain_log_axis(axis.yaxis)
            if context_size is not None:
                axis.axvline(
                    context_size, color="0.4", linestyle="--", linewidth=1,
                    label=f"context_size ({context_size:,})",
                )  # fmt: skip
        axis.set_title(f"{label} length (tokens)")
        axis.set_ylabel("rows")
    # One legend above all panels: inside an axis it covers bars or steps.
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:
        figure.legend(handles, labels, loc="upper center", ncols=len(handles), frameon=False)
    categories: dict[str, list[float]] = {}
    for item, base in zip(filtered, rows.task_base, strict=True):
        cov = coverage[base : base + item.rows]
        lengths = item.inst_len + item.resp_len
        entry = categories.setdefault(item.task.category, [0.0, 0.0])
        entry[0] += float(lengths.sum())
        entry[1] += float(np.dot(lengths, cov)) / max(1, epochs) if item.rows else 0.0
    axis = axes.flat[3]
    # Empty categories get no bar on the log axis (zero tokens).
    names = sorted(categories)
    positions = np.arange(len(names))
    # Same colours and order as the histograms' two series, so the figure legend fits.
    axis.barh(positions - 0.2, [categories[n][0] for n in names], height=0.4)
    axis.barh(positions + 0.2, [categories[n][1] for n in names], height=0.4)
    axis.set_yticks(positions, names, fontsize=7)
    positive = [value for entry in categories.values() for value in entry if value > 0]
    if positive:
        axis.set_xscale("log")
        _plain_log_axis(axis.xaxis, _compact_number)
        # Start a decade below the smallest bar: autoscaling a log axis may start near the
        # largest bars and hide the small categories.
        axis.set_xlim(left=10 ** math.floor(math.log10(min(positive) / 2)))
    axis.set_title("tokens per category")
    temporary = path.with_name(f".{path.name}.tmp")
    # zlib level 1: a few tens of KB more than the default level 6, at a quarter of the time.
    figure.savefig(temporary, format="png", dpi=80, pil_kwargs={"compress_level": 1})
    temporary.replace(path)
