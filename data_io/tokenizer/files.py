"""Finding a tokenizer: a tokenizer.json file, a folder holding one, or a Hub repository id."""

from __future__ import annotations

from pathlib import Path

from data_io.errors import TokenizerError
from data_io.util.console import on_terminal, quiet_hub_libraries

TOKENIZER_FILE = "tokenizer.json"


def resolve_tokenizer(spec: str | Path) -> Path:
    """Return the path of the tokenizer JSON named by ``spec``.

    ``spec`` is a file, a folder holding ``tokenizer.json``, or a Hugging Face Hub id
    (``org/name``), fetched through ``huggingface_hub`` when the Hub is reachable.
    """
    path = Path(spec)
    if path.is_file():
        return path
    if path.is_dir():
        candidate = path / TOKENIZER_FILE
        if candidate.is_file():
            return candidate
        raise TokenizerError(f"{path} is a folder without {TOKENIZER_FILE}; pass the file itself")
    if path.suffix == ".json" or path.is_absolute() or str(spec).startswith("."):
        relative = "" if path.is_absolute() else f" (relative to the current folder {Path.cwd()})"
        raise TokenizerError(
            f"tokenizer {spec} does not exist{relative}; pass an existing tokenizer.json, a "
            "folder holding one, or a Hub id: --tokenizer-path for `data_io tokenize`, "
            "--tokenizer for `data_io prepare`, --compare for `data_io train-tokenizer`, "
            "data.tokenizer_path in a loader config "
            "(tokenizer_path= in the Python API)"
        )
    return _from_hub(str(spec))


def _from_hub(repo_id: str) -> Path:
    from huggingface_hub import hf_hub_download  # noqa: PLC0415  heavy: huggingface_hub, only when the Hub is asked
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError  # noqa: PLC0415  heavy: huggingface_hub, only when the Hub is asked

    try:
        with quiet_hub_libraries(not on_terminal()):  # no download bar in a log file
            return Path(hf_hub_download(repo_id, TOKENIZER_FILE))
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError, ValueError) as exc:
        raise TokenizerError(
            f"tokenizer {repo_id!r} is neither a local file or folder nor reachable on the "
            f"Hugging Face Hub ({type(exc).__name__}: {exc}). Download it first "
            f"(`hf download {repo_id} {TOKENIZER_FILE} --local-dir DIR`) and pass DIR."
        ) from exc
