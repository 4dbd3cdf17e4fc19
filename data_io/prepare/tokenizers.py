"""The tokenizers ``prepare`` can use, behind one small interface.

* ``PATH`` (a ``tokenizer.json`` or a folder holding one) or a Hub id: the project's Rust
  encoder (``data_io.tokenizer.encoder.TextEncoder``, parallel, GIL released), EOS from ``eos_token`` or
  the tokenizer's own (``tokenizer_config.json`` beside it, else ``<|endoftext|>``).
* ``gpt2``: GPT-2's byte-level BPE. Neither ``tiktoken`` (it downloads ``vocab.bpe`` on first
  use) nor ``tokenizers``/``transformers`` ship it, but ``openai-whisper`` does (its
  ``gpt2.tiktoken`` rank file): ``data_io.tokenizer.vocabularies`` builds the ``tokenizer.json`` from it,
  from the installed package or the archive fetched once from PyPI (never a hub), with the same
  ids as ``tiktoken``'s ``gpt2``; without PyPI, the local Hugging Face cache
  (``openai-community/gpt2``) is used, and without either the error says how to get one.
* ``char``: one id per character, as MyPT: the vocabulary is the characters of the prepared
  text, sorted, with ``<|endoftext|>`` as id 0; saved as ``tokenizer_state.json``. During the run
  the ids are provisional (the code points; EOS past the last code point) and ``remap`` turns
  them into the final ids once every character is known. A later incremental run keeps the old
  ids and appends new characters after them, so old shards stay valid.

Every tokenizer appends its EOS id after each document.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from data_io import _core
from data_io.errors import ConfigError, InputError, TokenizerError
from data_io.tokenizer import vocabularies
from data_io.tokenizer.encoder import TextEncoder
from data_io.util.fs import naming, removed_on_failure, sha256

__all__ = [
    "CHAR_EOS",
    "CHAR_STATE_FILE",
    "TOKENIZER_FILES",
    "PrepTokenizer",
    "load_tokenizer",
    "state_characters",
    "write_state",
]

CHAR_STATE_FILE = "tokenizer_state.json"
GPT2_HUB_ID = "openai-community/gpt2"
CHAR_EOS = "<|endoftext|>"
_PROVISIONAL_EOS = 0x110000  # one past the last Unicode code point
# What a run may write beside the shards (the HF files copied, or the char vocabulary).
_HF_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
TOKENIZER_FILES = (*_HF_FILES, CHAR_STATE_FILE)


class PrepTokenizer(Protocol):
    kind: str  # "hf" | "char"
    spec: str  # as the user named it

    @property
    def eos_id(self) -> int: ...
    @property
    def vocab_size(self) -> int: ...
    def fingerprint(self) -> str: ...
    @property
    def core_encoder(self) -> _core.Encoder | None: ...
    def encode(self, texts: list[str]) -> tuple[NDArray[np.uint32], NDArray[np.int64]]: ...
    def remap(self, ids: NDArray[np.uint32]) -> NDArray[np.uint32]: ...
    def finish(self) -> None: ...
    def save(self, folder: Path) -> list[str]: ...
    def decode(self, ids: list[int]) -> str: ...


def load_tokenizer(spec: str, eos_token: str | int | None, out: Path) -> PrepTokenizer:
    """The tokenizer named by ``spec``; ``out`` is the output folder (a char vocabulary of an
    earlier run there is continued)."""
    if not isinstance(spec, str) or not spec:
        raise ConfigError(
            f"tokenizer must be gpt2, qwen, qwen2.5, qwen3.5, char, a path or a Hub id, got "
            f"{spec!r}"
        )
    if spec == "char":
        if eos_token not in (None, CHAR_EOS, 0):
            raise ConfigError(
                f"eos_token {eos_token!r} does not apply to the char tokenizer (its EOS is "
                f"{CHAR_EOS!r}, id 0); leave --eos-token unset"
            )
        return CharTokenizer.continuing(out / CHAR_STATE_FILE)
    if spec == "gpt2":
        return HfTokenizer(_gpt2_tokenizer(), spec, eos_token)
    if spec in vocabularies.VOCABULARIES and not Path(spec).exists():
        # Qwen's vocabularies, as `train-tokenizer --compare` names them: built from the rank
        # file of a pinned PyPI package, never the Hub (where a bare "qwen" names no repo).
        return HfTokenizer(vocabularies.vocabulary_path(spec), spec, eos_token)
    return HfTokenizer(spec, spec, eos_token)


def _gpt2_tokenizer() -> Path:
    """GPT-2's ``tokenizer.json``: built from the rank file a PyPI package ships
    (``data_io.tokenizer.vocabularies``: ``openai-whisper``'s ``gpt2.tiktoken``, read from the installed
    package or its archive fetched once from PyPI), else the local Hugging Face cache."""

    try:
        return vocabularies.vocabulary_path("gpt2")
    except (InputError, TokenizerError, ConfigError, OSError) as pypi_error:
        from huggingface_hub import hf_hub_download  # noqa: PLC0415  heavy: huggingface_hub, only when the Hub is asked
        from huggingface_hub.errors import LocalEntryNotFoundError  # noqa: PLC0415  heavy: huggingface_hub, only when the Hub is asked

        try:
            return Path(hf_hub_download(GPT2_HUB_ID, "tokenizer.json", local_files_only=True))
        except (LocalEntryNotFoundError, OSError, ValueError) as err:
            raise TokenizerError(
                f"--tokenizer gpt2: GPT-2's vocabulary could not be built from PyPI package data "
                f"({pypi_error}), and {GPT2_HUB_ID} is not in the local Hugging Face cache; "
                "install it where PyPI is reachable (`pip install --no-deps openai-whisper`), or "
                f"fetch `hf download {GPT2_HUB_ID} tokenizer.json --local-dir DIR` and pass "
                "--tokenizer DIR"
            ) from err


class HfTokenizer:
    """A tokenizers JSON file, encoded by the project's Rust encoder."""

    kind = "hf"

    def __init__(self, path: str | Path, spec: str, eos_token: str | int | None) -> None:
        self.spec = spec
        self._encoder = TextEncoder(path)
        try:
            self._eos_id = self._encoder.eos_id_for(eos_token)
        except ConfigError as err:
            raise TokenizerError(
                f"{err}. The EOS id follows every document: name the token ending a document "
                "with --eos-token TOKEN_OR_ID (Python: eos_token=)"
            ) from err

    @property
    def path(self) -> Path:
        return Path(self._encoder.path)

    @property
    def eos_id(self) -> int:
        return self._eos_id

    @property
    def vocab_size(self) -> int:
        return self._encoder.vocab_size

    def fingerprint(self) -> str:
        return f"sha256:{sha256(self.path)}"

    @property
    def core_encoder(self) -> _core.Encoder:
        """The Rust encoder: ``prepare_batch`` encodes with it, the batch never in Python."""
        return self._encoder.core

    def encode(self, texts: list[str]) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
        ids, offsets = self._encoder.encode_batch(texts, self._eos_id)
        return ids, offsets

    def remap(self, ids: NDArray[np.uint32]) -> NDArray[np.uint32]:
        return ids  # already final

    def finish(self) -> None:
        pass

    def save(self, folder: Path) -> list[str]:
        """Copy the tokenizer (and its config files, when beside it) into ``folder``."""
        written = []
        for name in _HF_FILES:
            source = self.path if name == "tokenizer.json" else self.path.parent / name
            if source.is_file():
                _copy_atomic(source, folder / name)
                written.append(name)
        return written

    def decode(self, ids: list[int]) -> str:
        from tokenizers import Tokenizer  # noqa: PLC0415  heavy: tokenizers, only to decode with the HF library

        return str(Tokenizer.from_file(str(self.path)).decode(ids, skip_special_tokens=False))


def _copy_atomic(source: Path, target: Path) -> None:
    temporary = target.with_name(f".{target.name}.tmp")
    with removed_on_failure(temporary):
        shutil.copyfile(source, temporary)
        os.replace(temporary, target)


@dataclass
class CharTokenizer:
    """Characters to ids; ids of characters known before this run never change."""

    spec: str
    known: list[str]  # id i + 1 is known[i]; id 0 is the EOS
    seen: set[int]  # code points met in this run
    kind: str = "char"

    @classmethod
    def continuing(cls, state: Path) -> CharTokenizer:
        known: list[str] = []
        if state.is_file():
            known = _read_char_state(state)
        return cls("char", known, set())

    @property
    def eos_id(self) -> int:
        return 0

    @property
    def vocab_size(self) -> int:
        return 1 + len(self.known)

    def fingerprint(self) -> str:
        # The ids of a char vocabulary only grow, so the kind names it; the state file says more.
        return "char:v1"

    @property
    def core_encoder(self) -> None:
        """No Rust encoder: ``encode`` takes the batch's texts."""
        return None

    def encode(self, texts: list[str]) -> tuple[NDArray[np.uint32], NDArray[np.int64]]:
        """Code points of each text then the provisional EOS; ``remap`` makes them final."""
        lengths = np.fromiter((len(t) + 1 for t in texts), dtype=np.int64, count=len(texts))
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        # One UTF-32 buffer with a separator slot after each text, filled with the EOS.
        encoded = "\x00".join(texts) + "\x00" if texts else ""
        ids = np.frombuffer(encoded.encode("utf-32-le"), dtype=np.uint32).copy()
        ids[offsets[1:] - 1] = _PROVISIONAL_EOS
        self.seen.update(np.unique(ids[ids != _PROVISIONAL_EOS]).tolist())
        return ids, offsets

    def finish(self) -> None:
        """Fix the vocabulary: known characters keep their ids, new ones follow, sorted."""
        known = set(map(ord, self.known))
        self.known.extend(chr(c) for c in sorted(self.seen - known))
        table = np.zeros(_PROVISIONAL_EOS + 1, dtype=np.uint32)
        table[[ord(c) for c in self.known]] = np.arange(1, len(self.known) + 1, dtype=np.uint32)
        table[_PROVISIONAL_EOS] = 0
        self._table = table

    def remap(self, ids: NDArray[np.uint32]) -> NDArray[np.uint32]:
        return self._table[ids]

    def save(self, folder: Path) -> list[str]:
        # MyPT's trainer rebuilds its char tokenizer from "token_kind" and "chars", id i being
        # chars[i]: the EOS (id 0) is listed first under its name, a string no single
        # character of the text can equal, so MyPT decodes it and never encodes to it.
        state = {
            "token_kind": "char",
            "chars": [CHAR_EOS, *self.known],
            "first_char_id": 0,
            "eos_token": CHAR_EOS,
            "eos_id": 0,
            "vocab_size": self.vocab_size,
        }
        write_state(folder, state)
        return [CHAR_STATE_FILE]

    def decode(self, ids: list[int]) -> str:
        return "".join(CHAR_EOS if i == 0 else self.known[i - 1] for i in ids)


def write_state(folder: Path, state: dict[str, Any]) -> None:
    """``tokenizer_state.json`` in ``folder``, written whole or not at all."""
    target = folder / CHAR_STATE_FILE
    temporary = target.with_name(f".{target.name}.tmp")
    with removed_on_failure(temporary), naming(temporary):
        temporary.write_text(json.dumps(state, ensure_ascii=False, indent=1), encoding="utf-8")
        os.replace(temporary, target)


def state_characters(chars: Any) -> list[str]:
    """The characters of a char vocabulary (ids 1, 2, …) from a state's ``chars``: listed
    after the EOS (this version, MyPT-readable), or alone (earlier versions, first id 1)."""
    if not isinstance(chars, list):
        raise ValueError("'chars' must be a list of single characters")
    if chars and chars[0] == CHAR_EOS:
        chars = chars[1:]
    if not all(isinstance(c, str) and len(c) == 1 for c in chars):
        raise ValueError("'chars' must be a list of single characters")
    if len(set(chars)) != len(chars):
        raise ValueError("'chars' lists a character twice")
    return list(chars)


def _read_char_state(path: Path) -> list[str]:
    try:
        state: Any = json.loads(path.read_text(encoding="utf-8"))
        kind = state.get("token_kind", "char") if isinstance(state, dict) else "char"
        if kind == "char" or not isinstance(kind, str):
            return state_characters(state["chars"])
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise InputError(
            f"{path}: unreadable char tokenizer state ({err}); restore it or prepare into a "
            "new folder"
        ) from err
    # MyPT's layout writes this file for gpt2 too: the folder is not damaged, it holds
    # another tokenizer's ids.
    raise ConfigError(
        f"{path.parent} was prepared with --tokenizer {kind} ({path.name} says token_kind "
        f"{kind!r}), not char; re-run with --tokenizer {kind} (MyPT's --tokenization {kind}) "
        "to add inputs, or prepare into a new folder"
    )
