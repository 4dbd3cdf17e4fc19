"""The unigram file data_io's EM passes write, held to the one `tokenizers`' trainer writes
(``--trainer hf``): the same pieces, scores equal but for the last bits of the E step's sums
(data_io adds them in a fixed number of shares of the words, the crate in one chunk a thread),
and the same file around the model."""

from __future__ import annotations

import json


def assert_same_unigram(ours: bytes, theirs: bytes, tolerance: float = 1e-9) -> None:
    mine, oracle = json.loads(ours), json.loads(theirs)
    assert mine["model"]["type"] == oracle["model"]["type"] == "Unigram"
    pieces = dict(mine["model"].pop("vocab"))
    expected = dict(oracle["model"].pop("vocab"))
    assert pieces.keys() == expected.keys(), sorted(pieces.keys() ^ expected.keys())[:10]
    worst = max(abs(pieces[p] - expected[p]) for p in pieces)
    assert worst <= tolerance, worst
    assert mine == oracle  # everything but the pieces' order and last bits
