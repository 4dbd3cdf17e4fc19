"""What a ``tokenize`` run reports: one ``FileResult`` per source file in a ``TokenizeResult``,
which raises the run's failures as one error (``raise_for_failures``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from data_io.errors import InputError, OutputError, error_class
from data_io.util.words import counted

# How many tasks or files a message lists by name; the rest are counted.
MAX_LISTED = 15


@dataclass(frozen=True)
class FileResult:
    """What happened to one source file."""

    task: str
    source: str
    status: str  # "tokenized", "unchanged" or "failed"
    reason: str
    rows: int
    tokens: int
    bad_rows: int
    bad_row_examples: list[str]
    warnings: list[str]
    bytes: int
    seconds: float
    error: str | None
    error_kind: str | None


@dataclass(frozen=True)
class TokenizeResult:
    """The report of one ``tokenize`` run."""

    output: str
    tokenizer_path: str
    vocab_size: int
    token_dtype: str
    threads: int
    seconds: float
    files: list[FileResult]
    removed_orphans: list[str] = field(default_factory=list)
    # Task folders not produced by this run that stay, "name (reason)": only a folder whose
    # recorded source file is gone is removed.
    kept: list[str] = field(default_factory=list)
    left_alone: list[str] = field(default_factory=list)
    # The run's input roots (absolute) and the files under them that are not rows.
    inputs: list[str] = field(default_factory=list)
    skipped_files: list[str] = field(default_factory=list)
    # Task folders tokenized with another tokenizer or options than tokenizer_info.json says,
    # "name (why)", and the command that repairs the folder (None when nothing is mixed).
    mixed: list[str] = field(default_factory=list)
    repair_command: str | None = None
    # What the output folder holds after the run, over every task folder (kept ones too).
    output_tasks: int = 0
    output_rows: int = 0
    output_tokens: int = 0
    # The engine that encoded: "fast-bpe" (exact, served by the fast encoder) or
    # "hf-tokenizers", with the reason the fast one does not serve this tokenizer.
    encoder: str = ""
    encoder_fallback: str | None = None

    @classmethod
    def from_json(cls, text: str) -> TokenizeResult:
        raw = json.loads(text)
        raw["files"] = [FileResult(**f) for f in raw["files"]]
        return cls(**raw)

    def with_status(self, status: str) -> list[FileResult]:
        return [f for f in self.files if f.status == status]

    @property
    def failed(self) -> list[FileResult]:
        return self.with_status("failed")

    @property
    def mixed_warning(self) -> str | None:
        """What is mixed in the output folder and how to repair it, or None."""
        if not self.mixed:
            return None
        listed = "\n".join(f"  - {task}" for task in self.mixed[:MAX_LISTED])
        more = (
            f"\n  ... and {len(self.mixed) - MAX_LISTED} more"
            if len(self.mixed) > MAX_LISTED
            else ""
        )
        return (
            f"the output {self.output} is MIXED: {counted(len(self.mixed), 'task folder')} "
            f"{'does' if len(self.mixed) == 1 else 'do'} not match "
            f"its tokenizer_info.json (tokenizer {self.tokenizer_path}); a model trained on it "
            f"sees two tokenizations:\n{listed}{more}\n"
            f"Repair it (fix the failed files first, if any) with:\n  {self.repair_command}"
        )

    def raise_for_failures(self) -> None:
        """Raise if any file failed or the output is MIXED (everything in one message), or if
        the output holds no row at all.

        The class is that of the first failed file's error; a MIXED output without failed
        files raises OutputError: the folder is unfit for training until repaired.
        """
        failed = self.failed
        if not failed and not self.mixed:
            self._raise_if_no_rows()
            return
        parts = []
        if failed:
            lines = "\n".join(f"  - {f.error}" for f in failed)
            parts.append(
                f"{len(failed)} of {counted(len(self.files), 'file')} failed; the other outputs are "
                f"intact: mend what each names, and a re-run redoes only those:\n{lines}"
            )
        if self.mixed_warning:
            parts.append(self.mixed_warning)
        raised = error_class(failed[0].error_kind) if failed else OutputError
        error = raised("\n".join(parts))
        error.result = self  # type: ignore[attr-defined]
        raise error

    def _raise_if_no_rows(self) -> None:
        # Every file empty or all its rows bad (under --on-error skip): the tasks are valid
        # but hold nothing to train on. Fine only if the folder has other tasks.
        if self.kept or any(f.rows for f in self.files):
            return
        bad = sum(f.bad_rows for f in self.files)
        rows = "the row was" if bad == 1 else f"all {bad:,} rows were"
        why = f"{rows} bad and skipped" if bad else "every file is empty"
        error = InputError(
            f"no rows at all: {counted(len(self.files), 'input file')} under {', '.join(self.inputs)} "
            f"and {why}; the output {self.output} holds no training data. Check the inputs "
            f"(run with --on-error fail to see the first bad row)"
        )
        error.result = self  # type: ignore[attr-defined]
        raise error
