"""A generated adversarial corpus for encoder exactness (issue 12), deterministic for a seed.

Each text is labelled with the class it stresses, so a difference names what broke:

- ``category``: a character of every Unicode general category next to one of every other,
  in several contexts (glued, after a space, before a newline, after an apostrophe, ...);
- ``digits``: runs of 1-5 digits of many scripts (ASCII, Arabic-Indic, Devanagari, fullwidth,
  mathematical), with letters, spaces and punctuation around them, and No/Nl numbers;
- ``contraction``: ``'s 't 're 've 'm 'll 'd`` in every letter case, with ``ſ`` (folds to s),
  the Kelvin sign (folds to k) and curly or modifier apostrophes;
- ``long``: 10,000-character runs with no split point (letters, spaces, punctuation, CJK, ...);
- ``whitespace``: mixes of space, tab, newline, ``\\r\\n``, NBSP, U+2028/2029, ideographic space,
  vertical tab, form feed, NEL, at the start, between words and trailing before the end;
- ``nfc``: combining marks and sequences NFC changes (decomposed é, Hangul jamo, singletons such
  as U+212B, canonical reordering, composition exclusions);
- ``emoji``: ZWJ sequences, skin tones, flags, keycaps, tag sequences;
- ``cjk``, ``rtl``: Chinese, Japanese, Korean; Arabic and Hebrew with marks and bidi controls;
- ``replaced``: invalid UTF-8 and lone surrogates as an upstream reader leaves them (U+FFFD);
- ``special``: special-token strings as plain text, whole, cut, nested and glued;
- ``mixed``: random concatenations of all of the above.

    from adversarial import adversarial_corpus
    texts = adversarial_corpus(seed=0, special_tokens=["<|endoftext|>"])  # [(label, text)]
"""

from __future__ import annotations

import functools
import itertools
import random
import sys
import unicodedata
from collections.abc import Iterable, Sequence

LabelledText = tuple[str, str]

# Every general category but Cs: lone surrogates cannot reach a UTF-8 encoder.
CATEGORIES = ("Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps",
              "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co",
              "Cn")  # fmt: skip

APOSTROPHES = ("'", "\u2019", "\u2018", "\u02bc", "\uff07")  # ' ’ ‘ ʼ ＇
CONTRACTIONS = ("s", "t", "re", "ve", "m", "ll", "d")
# Characters whose case folding lands on a contraction letter (onig's (?i:...) may match them).
FOLDS_TO = {"s": ("\u017f",), "k": ("\u212a",)}  # ſ, KELVIN SIGN

# The zero of ten-digit runs in several scripts (each is followed by its 1..9).
DIGIT_ZEROS = (0x30, 0x660, 0x6F0, 0x966, 0x9E6, 0xE50, 0xFF10, 0x1D7CE, 0x1D7F6)
OTHER_NUMBERS = "\u00b2\u00b3\u00b9\u00bc\u00bd\u2160\u216b\u2460\u3007\u4e00"  # ²³¹¼½ⅠⅫ①〇一

WHITESPACE = (" ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u2028", "\u2029", "\u3000", "\x0b",
              "\x0c", "\x85", "\u200b", "\u2009", "\u202f")  # fmt: skip

NFC_CASES = (
    "e\u0301",  # é decomposed
    "A\u030a",  # Å decomposed
    "\u212b",  # ANGSTROM SIGN: singleton, NFC gives U+00C5
    "\u2126",  # OHM SIGN: singleton, NFC gives U+03A9
    "\u1100\u1161\u11a8",  # Hangul jamo L V T: NFC composes 각
    "\u1100\u1161",  # L V
    "\uac00\u11a8",  # LV syllable + T: NFC composes
    "a\u0302\u0323",  # marks out of canonical order: NFC reorders then composes ậ
    "a\u0323\u0302",
    "\u0915\u093c",  # composition exclusion (U+0958 stays decomposed)
    "\u0344",  # decomposes to two marks
    "\u0958",  # excluded precomposed: NFC decomposes it
    "\u00c5\u0301",  # precomposed + extra mark
    "o\u0308\u0304",  # ȫ
    "\u0301",  # a mark with no base
    "\u034f",  # combining grapheme joiner
    "\ufb01",  # ligature fi: NFC keeps it (NFKC would not)
    "\u1e9b\u0323",  # ẛ̣ : the standard NFC/NFKC example
)

EMOJI = (
    "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466",  # family ZWJ
    "\U0001f3f3\ufe0f\u200d\U0001f308",  # rainbow flag
    "\U0001f44d\U0001f3fd",  # thumbs up, skin tone
    "\U0001f1ef\U0001f1f5\U0001f1fa\U0001f1f8",  # JP US flags
    "1\ufe0f\u20e3",  # keycap 1
    "\U0001f3f4\U000e0067\U000e0062\U000e0065\U000e006e\U000e0067\U000e007f",  # England tag flag
    "\u2764\ufe0f",
    "\U0001f600\U0001f601\U0001f602",
    "\U0001f9d1\u200d\U0001f4bb",
)

CJK = (
    "机器学习是人工智能的一个分支。",
    "東京は日本の首都です。カタカナとひらがな",
    "한국어 텍스트는 공백으로 단어를 나눕니다.",
    "中文，标点符号：“引号”（括号）！",
    "ＡＢＣ１２３全角文字",
    "𠀀𠀁𪚥",  # CJK extension B (astral)
)

RTL = (
    "مرحبا بالعالم، هذا نص عربي.",
    "السَّلَامُ عَلَيْكُمْ",  # with harakat (Mn)
    "שלום עולם",
    "בְּרֵאשִׁית",  # with niqqud
    "\u200fRTL mark\u200e and LRM",
    "العدد ١٢٣٤٥ و ۶۷۸",
    "abc \u202bembedded\u202c def",
)

REPLACED = (
    b"abc\xff\xfedef".decode("utf-8", "replace"),
    b"\xc3\x28 broken two-byte".decode("utf-8", "replace"),
    b"trunc\xe2\x82".decode("utf-8", "replace"),
    "lone \ud800 surrogate".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
    "\ufffd\ufffd \ufffdx",
)

MISC = (
    "\ufeffBOM at the start",
    "nul\x00inside",
    "\x01\x02\x1f controls",
    "\ue000\U000f0000\U0010ffff private use",
    "\ufffe\uffff noncharacters",
    "https://example.org/a_b-c?x=1&y=2#frag",
    "def f(x):\n    return x ** 2  # comment\n",
    "   leading spaces",
    "CamelCaseWord snake_case_word kebab-case-word",
    "e.g. i.e. U.S.A. ... !!! ??? ---",
)


@functools.cache
def _category_members() -> dict[str, tuple[str, ...]]:
    """Code points of each general category (per Python's Unicode tables), for sampling."""
    members: dict[str, list[str]] = {c: [] for c in CATEGORIES}
    for code in range(sys.maxunicode + 1):
        category = unicodedata.category(chr(code))
        if category in members and (category != "Cn" or len(members["Cn"]) < 4096):
            members[category].append(chr(code))
    return {c: tuple(chars) for c, chars in members.items()}


def category_boundaries(rng: random.Random) -> list[LabelledText]:
    """For every ordered pair of categories, a text putting a member of one next to the other."""
    members = _category_members()
    texts = []
    for left, right in itertools.product(CATEGORIES, repeat=2):
        a, b = rng.choice(members[left]), rng.choice(members[right])
        c, d = rng.choice(members[left]), rng.choice(members[right])
        contexts = (
            a + b,
            f" {a}{b}",
            f"{a} {b}",
            f"{a}{b}\n",
            f"x{a}{b}y",
            f"'{a}{b}",
            f"1{a}{b}2",
        )
        texts.append((f"category {left}|{right}", "".join(contexts) + c + d + c))
    return texts


def digit_runs(rng: random.Random) -> list[LabelledText]:
    texts = []
    for zero in DIGIT_ZEROS:
        digits = [chr(zero + i) for i in range(10)]
        for length in range(1, 6):
            run = "".join(rng.choice(digits) for _ in range(length))
            text = f"{run} x{run} {run}. ({run}) ab{run}cd,{run}{run} {run}\n{run}"
            texts.append((f"digits U+{zero:04X} x{length}", text))
    for length in range(1, 6):
        run = "".join(rng.choice(OTHER_NUMBERS) for _ in range(length))
        texts.append((f"digits No/Nl x{length}", f"{run} a{run}1{run} {run}"))
    texts.append(("digits mixed", "1,234.56 1e-10 0x1F 3/4 v2.0.1 2024-01-02 12:30"))
    return texts


def _cases(suffix: str) -> Iterable[str]:
    """Every upper/lower spelling of ``suffix``, plus letters that case-fold onto its own."""
    options = [(ch.lower(), ch.upper(), *FOLDS_TO.get(ch, ())) for ch in suffix]
    return ("".join(chosen) for chosen in itertools.product(*options))


def contractions() -> list[LabelledText]:
    texts = []
    for suffix in CONTRACTIONS:
        for spelled in _cases(suffix):
            for apostrophe in APOSTROPHES:
                piece = apostrophe + spelled
                text = f"it{piece} x {piece} {piece}{piece}end{piece}\n{piece}. 1{piece}"
                texts.append((f"contraction {piece!r}", text))
    texts.append(("contraction kelvin", "'\u212a 'k 'K"))
    texts.append(("contraction lone", "' '' ''' 'x 'sx 'lll 'ree 'dd rock'n'roll"))
    return texts


def long_runs() -> list[LabelledText]:
    n = 10_000
    return [
        ("long letters", "a" * n),
        ("long letters mixed case", "aB" * (n // 2)),
        ("long spaces", " " * n),
        ("long spaces then word", " " * n + "word"),
        ("long punctuation", "!" * n),
        ("long punctuation mixed", "!?.,;:-" * (n // 7)),
        ("long newlines", "\n" * n),
        ("long crlf", "\r\n" * (n // 2)),
        ("long digits", "7" * n),
        ("long cjk", "漢" * n),
        ("long accented", "é" * n),
        ("long decomposed", "e\u0301" * (n // 2)),
        ("long emoji", "\U0001f600" * (n // 4)),
        ("long tabs", "\t" * n),
    ]


def whitespace_mixes(rng: random.Random) -> list[LabelledText]:
    texts = []
    for first, second in itertools.product(WHITESPACE, repeat=2):
        gap = first + second
        texts.append((f"whitespace {gap!r}", f"{gap}word{gap}word {gap}!{gap}1{gap}"))
    for _ in range(60):
        gap = "".join(rng.choice(WHITESPACE) for _ in range(rng.randint(1, 6)))
        texts.append((f"whitespace run {gap!r}", f"a{gap}b{gap}\n{gap}"))
    return texts


def nfc_sequences() -> list[LabelledText]:
    texts = []
    for case in NFC_CASES:
        text = f"{case} x{case}y {case}{case} 1{case} '{case}s \n{case}"
        texts.append((f"nfc {case!r}", text))
    texts.append(("nfc marks run", "a" + "\u0301\u0302\u0303\u0304\u0305" * 2 + " b\u0301" * 3))
    return texts


def fixed_classes() -> list[LabelledText]:
    groups = {"emoji": EMOJI, "cjk": CJK, "rtl": RTL, "replaced": REPLACED, "misc": MISC}
    texts = []
    for label, items in groups.items():
        for item in items:
            texts.append((label, item))
            texts.append((f"{label} in context", f"Say {item}, then {item}!{item}\n"))
    return texts


def special_strings(special_tokens: Sequence[str]) -> list[LabelledText]:
    texts = []
    for token in special_tokens:
        cut = token[: len(token) // 2]
        texts.append((f"special {token}", token))
        texts.append((f"special {token} in text", f"before {token} after{token}{token}\n{token}"))
        texts.append((f"special {token} cut", f"{cut} {cut}{token[len(cut) :]}x {token[1:]}"))
        texts.append((f"special {token} nested", f"<|{token}|> {token[:-1]}{token}"))
    return texts


def _atoms(special_tokens: Sequence[str]) -> list[str]:
    """Short pieces of every class, for the mixed texts (and the property tests' strategies)."""
    return [
        *(a + c for a in APOSTROPHES for c in ("s", "S", "\u017f", "t", "RE", "ll", "D")),
        *WHITESPACE,
        *NFC_CASES,
        *EMOJI,
        *(chr(z + 7) for z in DIGIT_ZEROS),
        *OTHER_NUMBERS,
        *special_tokens,
        "the",
        " word",
        "Word",
        "x",
        ".",
        "!!",
        "'",
        "漢字",
        "مرحبا",
        "שלום",
        "\ufffd",
    ]


def mixed(rng: random.Random, special_tokens: Sequence[str], count: int) -> list[LabelledText]:
    atoms = _atoms(special_tokens)
    return [
        (f"mixed #{i}", "".join(rng.choice(atoms) for _ in range(rng.randint(1, 40))))
        for i in range(count)
    ]


def adversarial_corpus(
    seed: int = 0,
    special_tokens: Sequence[str] = ("<|endoftext|>", "<|im_end|>"),
    mixed_count: int = 500,
) -> list[LabelledText]:
    """Every class above, in a fixed order; the same seed gives the same texts."""
    rng = random.Random(seed)
    tokens = list(dict.fromkeys(["<|endoftext|>", "<|im_start|>", "<|im_end|>", *special_tokens]))
    corpus = [
        *category_boundaries(rng),
        *digit_runs(rng),
        *contractions(),
        *long_runs(),
        *whitespace_mixes(rng),
        *nfc_sequences(),
        *fixed_classes(),
        *special_strings(tokens),
        *mixed(rng, tokens, mixed_count),
        ("empty", ""),
    ]
    # An upstream reader never hands lone surrogates on (they are not UTF-8).
    return [(label, _replace_surrogates(text)) for label, text in corpus]


def _replace_surrogates(text: str) -> str:
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def atoms(special_tokens: Sequence[str] = ("<|endoftext|>", "<|im_end|>")) -> list[str]:
    """The pieces the mixed texts are made of, for property-test strategies."""
    return _atoms(special_tokens)
