"""Every relative link of README.md and docs/**/*.md leads to a file that exists and, when it
names a heading (``performance.md#prepare``), to a heading of that file, by GitHub's anchor
rules: the heading's text lowercased, markup and punctuation dropped, spaces made hyphens, and a
repeated heading numbered ``-1``, ``-2``, ..."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]

_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"#{1,6}\s+(.*?)\s*#*\s*$")


def _prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, inline code spans removed."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, re.sub(r"`[^`]*`", "``", line)))
    return lines


def github_anchor(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match:
            anchor = github_anchor(match.group(1))
            count = seen.get(anchor, 0)
            seen[anchor] = count + 1
            found.add(anchor if count == 0 else f"{anchor}-{count}")
    return found


def test_the_anchor_rule():
    assert github_anchor("TextEncoder.encode_batch: the in-memory race (issue 27)") == (
        "textencoderencode_batch-the-in-memory-race-issue-27"
    )
    assert github_anchor("Load: sampled batches (`SampledDataset`)") == (
        "load-sampled-batches-sampleddataset"
    )


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(doc: Path):
    broken = []
    for number, line in _prose_lines(doc.read_text(encoding="utf-8")):
        for target in _LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            path, _, fragment = target.partition("#")
            resolved = (doc.parent / path).resolve() if path else doc
            where = f"{doc.relative_to(REPO)}:{number}: {target}"
            if not resolved.exists():
                broken.append(f"{where}: no such file")
            elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
                broken.append(f"{where}: no heading with that anchor in {path or doc.name}")
    assert not broken, "\n".join(broken)
