"""The encoder race's corpus: real multilingual documentation from Debian packages, as rows.

Sources (``apt-get download``, extracted once under ``~/.cache/data_io/debian-docs/<package>``):
the Debian Administrator's Handbook in 26 languages (``debian-handbook``, HTML stripped to
text), the Debian Reference in 9 (``debian-reference-*``, HTML), man pages in 13 languages
(``manpages-*``, groff sources), Perl's POD documentation (``perl-doc``), PostgreSQL's manual
(``postgresql-doc-15``, HTML), git's and Node.js's (``git-doc``, ``nodejs-doc``: AsciiDoc and
Markdown), the Python 3.11 documentation (``python3.11-doc``,
benchmarks/corpus.py) and the Linux kernel documentation (``linux-doc-6.1``,
benchmarks/prepare.py), interleaved file by file until the wanted size (about 155 MB exist).
The CJK-heavy slice (the handbook and the Debian Reference in ja, ko, zh, and the Japanese and
Chinese man pages, about 20 MB exist) is written apart.

Each corpus is a folder of rows (``rows/*.jsonl``: condition, instruction, response: a text's
paragraphs paired, as benchmarks/corpus.py does) for ``data_io tokenize``, and the same texts in
the same order one per line (``docs/*.jsonl``: ``{"text": ...}``) for file APIs that read one
field. Sizes are UTF-8 bytes of text (the instructions and responses).

    python -m benchmarks.tokenize_corpus OUT [--mb 150] [--cjk-mb 20]
"""

from __future__ import annotations

import gzip
import html.parser
import importlib.util
import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path

_HERE = Path(__file__).resolve().parent
CACHE = Path.home() / ".cache" / "data_io" / "debian-docs"
CONDITIONS = ("direct", "cot", "noisy", "synth")  # one tag per row
MANPAGE_LANGUAGES = ("de", "fr", "es", "ru", "ja", "zh_CN", "zh_TW", "pl", "uk", "it", "nl", "cs",
                     "pt_BR")  # fmt: skip
REFERENCE_LANGUAGES = ("en", "de", "fr", "es", "it", "ja", "pt", "zh-cn", "zh-tw")
CJK_HANDBOOKS = ("ja-JP", "ko-KR", "zh-CN", "zh-TW")
CJK_MANPAGES = ("ja", "zh_CN", "zh_TW")
CJK_REFERENCES = ("ja", "zh-cn", "zh-tw")
FORMAT = 2  # bump when the rows change: built corpora are rebuilt


def _load(name: str):
    """benchmarks/<name>.py, loaded by its path (this folder's tokenize.py shadows the standard
    library's, so the folder is never put on the import path)."""
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", _HERE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def deb_tree(package: str) -> Path:
    """The extracted root of a Debian package, downloaded with apt-get once."""
    return _load("corpus").extract_deb(package, CACHE / package / "x")


class _TextOfHtml(html.parser.HTMLParser):
    """Visible text of an HTML page, a paragraph per block element (scripts and styles out)."""

    BLOCKS = frozenset(
        [
            "p",
            "div",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "li",
            "pre",
            "dt",
            "dd",
            "tr",
            "table",
            "section",
            "title",
        ]
    )

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in ("script", "style"):
            self.skip += 1
        elif tag in self.BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self.skip = max(0, self.skip - 1)
        elif tag in self.BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(data)


def html_text(page: str) -> str:
    parser = _TextOfHtml()
    parser.feed(page)
    return "".join(parser.parts)


def _read(path: Path) -> str | None:
    """A file's text (gunzipped when .gz); None when it is not UTF-8 text."""
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        return data.decode("utf-8")
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError):
        return None


# -- sources: each yields (name, text) per file, in sorted order ----------------------------------
def handbook(languages: tuple[str, ...] | None = None) -> Iterator[tuple[str, str]]:
    root = deb_tree("debian-handbook") / "usr/share/doc/debian-handbook/html"
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    chosen = [f for f in folders if languages is None or f.name in languages]
    # Round-robin over languages, so a partial corpus is still multilingual.
    for page in _interleave([sorted(f.glob("*.html")) for f in chosen]):
        text = _read(page)
        if text is not None:
            yield f"handbook/{page.parent.name}/{page.name}", html_text(text)


def _interleave(groups: list[list[Path]]) -> Iterator[Path]:
    """The first file of each group, then the second of each, ...: a partial corpus still has
    every language."""
    return (p for group in itertools.zip_longest(*groups) for p in group if p is not None)


def manpages(languages: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    groups = []
    for language in languages:
        package = "manpages-" + language.lower().replace("_", "-").replace("zh-cn", "zh")
        package = package.replace("zh-tw", "zh")
        root = deb_tree(package) / "usr/share/man" / language
        groups.append(sorted(root.rglob("*.gz")) if root.is_dir() else [])
    for page in _interleave(groups):
        text = _read(page)
        if text is not None:
            yield f"man/{page.relative_to(page.parents[2])}", text


def debian_reference(languages: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    groups = []
    for language in languages:
        root = deb_tree(f"debian-reference-{language}") / "usr/share/debian-reference"
        groups.append(sorted(root.glob(f"*.{language}.html")))
    for page in _interleave(groups):
        text = _read(page)
        if text is not None:
            yield f"reference/{page.name}", html_text(text)


def perl_docs() -> Iterator[tuple[str, str]]:
    for page in sorted((deb_tree("perl-doc") / "usr/share/perl").rglob("*.pod")):
        text = _read(page)
        if text is not None:
            yield f"perl/{page.name}", text


def postgresql_docs() -> Iterator[tuple[str, str]]:
    root = deb_tree("postgresql-doc-15") / "usr/share/doc/postgresql-doc-15/html"
    for page in sorted(root.glob("*.html")):
        text = _read(page)
        if text is not None:
            yield f"postgresql/{page.name}", html_text(text)


def package_texts(package: str, folder: str, pattern: str) -> Iterator[tuple[str, str]]:
    """Text files (plain or .gz) matching ``pattern`` under ``folder`` of a package."""
    for page in sorted((deb_tree(package) / folder).rglob(pattern)):
        text = _read(page)
        if text is not None:
            yield f"{package}/{page.name}", text


def python_docs() -> Iterator[tuple[str, str]]:
    for page in sorted(_load("corpus").docs_sources().rglob("*.rst.txt")):
        text = _read(page)
        if text is not None:
            yield f"python/{page.name}", text


def linux_docs() -> Iterator[tuple[str, str]]:
    prepare = _load("prepare")
    for path in prepare._text_files(prepare._linux_docs()):
        text = _read(path)
        if text is not None:
            yield f"linux/{path.name}", text


# -- rows -----------------------------------------------------------------------------------------
def rows_of(text: str, start: int) -> list[dict[str, str]]:
    """Consecutive paragraph pairs of a text (paragraphs of at least 40 characters)."""
    paragraphs = [p.strip() for p in text.split("\n\n")]
    paragraphs = [p for p in paragraphs if len(p) >= 40]
    return [
        {
            "condition": CONDITIONS[(start + k) % len(CONDITIONS)],
            "instruction": paragraphs[i],
            "response": paragraphs[i + 1],
        }
        for k, i in enumerate(range(0, len(paragraphs) - 1, 2))
    ]


def write_corpus(
    out: Path, sources: list[Iterator[tuple[str, str]]], megabytes: float, name: str
) -> dict:
    """Rows from ``sources`` (round-robin by file) until ``megabytes`` of text, one rows file and
    one docs file per source kind; reused when already built at that size."""
    done = out / "corpus.json"
    if done.is_file():
        info = json.loads(done.read_text())
        if info.get("format") == FORMAT and info.get("megabytes") == megabytes:
            return info
    for sub in ("rows", "docs"):
        for old in (out / sub).glob("*.jsonl"):
            old.unlink()
        (out / sub).mkdir(parents=True, exist_ok=True)
    writers: dict[str, tuple] = {}
    total = count = 0
    limit = megabytes * 1e6
    for source_file in (item for group in itertools.zip_longest(*sources) for item in group):
        if source_file is None or total >= limit:
            continue
        kind = source_file[0].split("/")[0]
        if kind not in writers:
            writers[kind] = (
                (out / "rows" / f"{kind}.jsonl").open("w", encoding="utf-8"),
                (out / "docs" / f"{kind}.jsonl").open("w", encoding="utf-8"),
            )
        rows_file, docs_file = writers[kind]
        for row in rows_of(source_file[1], count):
            rows_file.write(json.dumps(row, ensure_ascii=False) + "\n")
            for field in ("instruction", "response"):
                docs_file.write(json.dumps({"text": row[field]}, ensure_ascii=False) + "\n")
                total += len(row[field].encode("utf-8"))
            count += 1
    for rows_file, docs_file in writers.values():
        rows_file.close()
        docs_file.close()
    if total < limit:
        raise SystemExit(f"{name}: only {total / 1e6:.1f} MB of text found; ask for less")
    info = {"format": FORMAT, "megabytes": megabytes, "text_bytes": total, "rows": count}
    info["kinds"] = sorted(writers)
    done.write_text(json.dumps(info))
    return info


def build(out: Path, megabytes: float = 150, cjk_megabytes: float = 20) -> dict[str, Path]:
    """The main multilingual corpus (``out/main``) and the CJK-heavy slice (``out/cjk``)."""
    write_corpus(
        out / "main",
        [
            handbook(),
            debian_reference(REFERENCE_LANGUAGES),
            manpages(MANPAGE_LANGUAGES),
            perl_docs(),
            postgresql_docs(),
            package_texts("git-doc", "usr/share/doc/git-doc", "*.txt"),
            package_texts("nodejs-doc", "usr/share/doc/nodejs/api", "*.md.gz"),
            python_docs(),
            linux_docs(),
        ],
        megabytes,
        "multilingual corpus",
    )
    write_corpus(
        out / "cjk",
        [handbook(CJK_HANDBOOKS), debian_reference(CJK_REFERENCES), manpages(CJK_MANPAGES)],
        cjk_megabytes,
        "CJK slice",
    )
    return {"main": out / "main", "cjk": out / "cjk"}


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--mb", type=float, default=150)
    parser.add_argument("--cjk-mb", type=float, default=20)
    args = parser.parse_args()
    for name, path in build(args.out, args.mb, args.cjk_mb).items():
        print(f"{name}: {path} {json.loads((path / 'corpus.json').read_text())}")


if __name__ == "__main__":
    sys.exit(main())
