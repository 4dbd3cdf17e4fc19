"""Where a text dataset is, decided without reading a row: a local file (the format from its
extension), a ``save_to_disk`` folder, any other local folder (e.g. an ``hf download`` copy of a
Hub dataset, read by ``datasets.load_dataset(DIR)``), or a Hub id. ``resolve_text_source`` returns
a :class:`TextSource`, which pickles as names and paths and opens ``datasets`` on demand.

Shared by the load stage's HF text datasets and ``prepare``'s Hub inputs; ``datasets`` is imported
only when a source is opened.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data_io.errors import ConfigError, InputError
from data_io.util.console import quiet_off_terminal, reader_errors_unlogged
from data_io.util.hub import hub_unreachable, offline_by_environment

__all__ = ["TEXT_FORMATS", "TextSource", "load_failed", "resolve_text_source"]

# ``datasets`` builder for each accepted file extension (after a compression suffix).
TEXT_FORMATS = {
    ".jsonl": "json",
    ".json": "json",
    ".parquet": "parquet",
    ".csv": "csv",
    ".txt": "text",
}
_COMPRESSIONS = (".gz", ".bz2", ".xz", ".zst")
_SAVED_MARKERS = ("state.json", "dataset_dict.json")
# A path-like name that does not exist is a typo, not a Hub id.
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[\w.-]+)?")


@dataclass(frozen=True)
class TextSource:
    """A resolved text source; pickles as names and paths, opens ``datasets`` on demand."""

    name: str
    split: str
    config: str | None
    kind: str  # "files" | "saved" | "folder" | "hub"
    files: tuple[Path, ...] = ()  # the local files whose stat identifies the data

    @property
    def label(self) -> str:
        config = f" (config {self.config!r})" if self.config else ""
        return f"dataset {self.name!r}{config} split {self.split!r}"

    def identity(self) -> dict[str, Any]:
        """What identifies the data without reading it: names, sizes and mtimes of local
        files; for the Hub, the id, config and split (the eager class adds the datasets
        fingerprint, which covers the revision)."""
        ident: dict[str, Any] = {
            "kind": self.kind,
            "name": self.name,
            "config": self.config,
            "split": self.split,
        }
        if self.files:
            root = Path(self.name)
            base = root if root.is_dir() else root.parent
            ident["files"] = [_file_stat(path, base) for path in self.files]
        return ident

    def check_reachable(self) -> None:
        """For a Hub dataset: fail at once when the Hub does not answer (instead of after
        ``datasets``' ~20 s of retries). With ``HF_HUB_OFFLINE`` set, ``datasets`` reads its
        local cache, so nothing is asked."""
        if self.kind != "hub" or offline_by_environment():
            return
        reason = hub_unreachable()
        if reason is not None:
            raise InputError(
                f"{self.label}: {self.name!r} is not a local file or folder, and the Hugging Face "
                f"Hub is not reachable ({reason}). Pass the path of a local copy (download it "
                f"where the Hub is reachable: `hf download {self.name} --repo-type dataset "
                "--local-dir DIR`), or set HF_HUB_OFFLINE=1 to read it from the local Hugging "
                "Face cache"
            )

    @quiet_off_terminal
    def load(self, *, streaming: bool) -> Any:
        """The rows as a ``datasets`` Dataset, or an IterableDataset when ``streaming``."""
        import datasets  # noqa: PLC0415  heavy: datasets (~1 s), only for HF sources

        self.check_reachable()
        with reader_errors_unlogged():
            try:
                if self.kind == "saved":
                    return _load_saved(self, streaming)
                if self.kind == "files":
                    builder = _builder_of(self.files[0])
                    return datasets.load_dataset(
                        builder,
                        data_files={self.split: [str(p) for p in self.files]},
                        split=self.split,
                        streaming=streaming,
                    )
                return datasets.load_dataset(
                    self.name, self.config, split=self.split, streaming=streaming
                )
            except InputError:
                raise
            except Exception as err:  # datasets raises many unrelated types: classify once here
                raise load_failed(self, err) from err


def resolve_text_source(name: str | os.PathLike[str], split: str, config: str | None) -> TextSource:
    """Decide what ``name`` is (local file, saved dataset, folder, Hub id), reading no rows."""
    if not isinstance(split, str) or not split:
        raise ConfigError(f"split must be a non-empty string such as 'train', got {split!r}")
    if config is not None and (not isinstance(config, str) or not config):
        raise ConfigError(f"dataset_config must be a non-empty string or None, got {config!r}")
    text = os.fspath(name)
    path = Path(text).expanduser()
    if path.is_file():
        _builder_of(path)  # an unsupported extension fails here, before any work
        _no_config(config, "a file")
        return TextSource(str(path), split, config, "files", (path,))
    if path.is_dir():
        files = _folder_files(path)
        kind = "saved" if any((path / m).is_file() for m in _SAVED_MARKERS) else "folder"
        if kind == "saved":
            _no_config(config, "a save_to_disk folder")
        if not files:
            raise InputError(
                f"{path}: the folder holds no files; pass a folder with data files "
                f"({', '.join(TEXT_FORMATS)}), a save_to_disk folder, or a file"
            )
        return TextSource(str(path), split, config, kind, tuple(files))
    if any(c in text for c in "*?["):
        # A quoted pattern ('data/*.txt'): the shell did not expand it, and no name has it.
        raise InputError(
            f"dataset {text!r} looks like a pattern: no file or folder has that name, and "
            "patterns are not expanded here; let the shell expand it (leave it unquoted), or "
            "pass the folder"
        )
    if text.startswith((".", "/", "~")) or Path(text).suffix.lower() in TEXT_FORMATS:
        raise InputError(
            f"dataset {text!r} does not exist; pass an existing file or folder, or a Hub id "
            "such as 'org/name'"
        )
    if not _HUB_ID.fullmatch(text):
        raise ConfigError(
            f"dataset {text!r} is neither a local file or folder nor a Hub id ('org/name')"
        )
    return TextSource(text, split, config, "hub")


def _no_config(config: str | None, what: str) -> None:
    if config is not None:
        raise ConfigError(
            f"dataset_config {config!r} applies to Hub datasets and their downloaded folders; "
            f"{what} has none: leave dataset_config unset"
        )


def _builder_of(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in _COMPRESSIONS:
        suffixes.pop()
    builder = TEXT_FORMATS.get(suffixes[-1] if suffixes else "")
    if builder is None:
        raise InputError(
            f"{path}: cannot tell the format from the extension; text files must end in "
            f"{', '.join(TEXT_FORMATS)} (optionally + {', '.join(_COMPRESSIONS)})"
        )
    return builder


def _folder_files(folder: Path) -> list[Path]:
    """The files of a local dataset folder, sorted; hidden entries (``hf download`` keeps its
    bookkeeping in ``.cache/``, git in ``.git/``) are not data."""
    files = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).parts
        if path.is_file() and not any(part.startswith(".") for part in relative):
            files.append(path)
    return files


def _file_stat(path: Path, base: Path) -> list[Any]:
    stat = path.stat()
    return [path.relative_to(base).as_posix(), stat.st_size, stat.st_mtime_ns]


@quiet_off_terminal
def _load_saved(source: TextSource, streaming: bool) -> Any:
    import datasets  # noqa: PLC0415  heavy: datasets (~1 s), only for HF sources

    try:
        loaded = datasets.load_from_disk(source.name)
    except IndexError:  # datasets itself fails on a saved dataset of no rows (no data files)
        if _saved_without_data(Path(source.name), source.split):
            raise InputError(f"{source.label}: holds no rows; pass a dataset with text") from None
        raise
    if isinstance(loaded, datasets.DatasetDict):
        if source.split not in loaded:
            raise InputError(
                f"{source.name}: the saved dataset has no split {source.split!r} (it has "
                f"{', '.join(loaded)}); pass split= one of them"
            )
        loaded = loaded[source.split]
    if len(loaded) == 0:  # to_iterable_dataset() fails obscurely on zero rows
        raise InputError(f"{source.label}: holds no rows; pass a dataset with text")
    return loaded.to_iterable_dataset() if streaming else loaded


def _saved_without_data(folder: Path, split: str) -> bool:
    """Whether a ``save_to_disk`` folder (or its ``split``'s, for a DatasetDict) records no
    data files: the dataset of no rows that ``load_from_disk`` cannot open."""
    for state in (folder / "state.json", folder / split / "state.json"):
        try:
            recorded = json.loads(state.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(recorded, dict) and recorded.get("_data_files") == []:
            return True
    return False


def load_failed(source: TextSource, err: Exception) -> InputError:
    """One InputError for whatever ``datasets`` raised while opening ``source``."""
    from datasets.exceptions import DatasetNotFoundError  # noqa: PLC0415  heavy: datasets (~1 s), only for HF sources

    detail = f"{type(err).__name__}: {err}"
    if source.kind == "hub" and isinstance(err, (ConnectionError, DatasetNotFoundError, OSError)):
        return InputError(
            f"{source.label}: the Hugging Face Hub could not be reached, or it has no dataset "
            f"{source.name!r} ({detail}). To use a local copy, download it where the Hub is "
            f"reachable (`hf download {source.name} --repo-type dataset --local-dir DIR`), "
            "then pass DIR as the dataset name"
        )
    if isinstance(err, StopIteration):  # the JSON builder's way of saying "no rows to infer from"
        return InputError(
            f"{source.label}: holds no rows (an empty file?); pass a dataset with text"
        )
    if isinstance(err, ValueError) and "split" in str(err).lower():
        return InputError(f"{source.label}: {detail}; pass split= one of the splits it names")
    where = ", ".join(str(p) for p in source.files[:3]) or source.name
    return InputError(
        f"{source.label}: cannot read {where} ({detail}); fix the file or pass the right "
        "format, config or split"
    )
