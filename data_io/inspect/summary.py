"""An ``InspectReport`` printed: the kind, its table, notes and problems."""

from __future__ import annotations

from data_io.inspect.report import InspectReport
from data_io.util.console import summary_console
from data_io.util.words import counted


def print_report(report: InspectReport) -> None:
    from rich.markup import escape  # noqa: PLC0415  CLI start-up: rich, only when a summary is printed
    from rich.table import Table  # noqa: PLC0415  CLI start-up: rich, only when a summary is printed

    console = summary_console()
    console.print(f"{report.path}: {report.kind}")
    for key, value in report.facts.items():
        console.print(f"  {key}: {escape(str(value))}")
    for title, rows in report.tables.items():
        if not rows:
            continue
        table = Table(title=title, box=None, pad_edge=False)
        for column in rows[0]:
            table.add_column(
                column, justify="left" if isinstance(rows[0][column], str) else "right"
            )
        for row in rows:
            table.add_row(*(f"{v:,}" if isinstance(v, int) else str(v) for v in row.values()))
        console.print(table)
    for i, sample in enumerate(report.samples):
        console.print(f"document {i}: {escape(repr(sample))}")
    for note in report.notes:
        console.print(f"note: {escape(note)}")
    for problem in report.problems:
        console.print(f"[red]problem:[/red] {escape(problem)}")
    console.print("ok" if report.ok else counted(report.problem_count, "problem"))
