"""data_io.tokenizer.train: the trained file loads in tokenizers and transformers, has the
formats.md §2 pipeline and special tokens, round-trips text, and honours per-file limits."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from data_io import _core
from data_io.errors import ConfigError, InputError
from data_io.tokenizer.encoder import TextEncoder
from data_io.tokenizer.summary import summary_line
from data_io.tokenizer.train import core_options, train_tokenizer
from tests.conftest import EXAMPLE_ROWS
from tests.tokenizer.unigram_oracle import assert_same_unigram

SAMPLES = [
    "Translate into Japanese: おはようございます、お元気ですか？",
    "def f(x):\n    return x ** 2  # square\n",
    "Доброе утро — l'eau bout à cent degrés. 早上好",
    "The marker <|im_end|> is plain text here.",
    "   leading spaces and trailing\t\n",
]


def test_pipeline_and_special_tokens_follow_the_spec(small_tokenizer: Path):
    spec = json.loads(small_tokenizer.read_text())
    assert spec["normalizer"]["type"] == "NFC"
    split, byte_level = spec["pre_tokenizer"]["pretokenizers"]
    assert split["type"] == "Split" and split["behavior"] == "Isolated"
    assert split["pattern"]["Regex"] == _core.SPLIT_REGEX
    assert byte_level == {
        **byte_level,
        "type": "ByteLevel",
        "add_prefix_space": False,
        "use_regex": False,
    }
    assert spec["post_processor"]["type"] == "ByteLevel"
    assert spec["decoder"]["type"] == "ByteLevel"
    added = spec["added_tokens"]
    assert [t["content"] for t in added] == list(_core.DEFAULT_SPECIAL_TOKENS)
    assert [t["id"] for t in added] == list(range(len(added)))
    assert all(t["special"] for t in added)
    assert json.loads((small_tokenizer.parent / "config.json").read_text()) == {
        "model_type": "qwen3"
    }


def test_round_trips_text_in_tokenizers(small_tokenizer: Path):
    tok = Tokenizer.from_file(str(small_tokenizer))
    assert tok.get_vocab_size() == 600
    for text in SAMPLES:
        ids = tok.encode(text, add_special_tokens=False).ids
        assert tok.decode(ids, skip_special_tokens=False) == text


def test_loads_and_round_trips_in_transformers(small_tokenizer: Path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(small_tokenizer.parent))
    for text in SAMPLES[:3]:
        assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
    assert tok.convert_tokens_to_ids("<|im_start|>") == 6


def test_training_is_deterministic(tmp_path: Path, small_tokenizer: Path):
    again = tmp_path / "again" / "tokenizer.json"
    train_tokenizer([EXAMPLE_ROWS], again, vocab_size=600, prefix_config=None, progress=False)
    assert again.read_bytes() == small_tokenizer.read_bytes()


def test_prefix_config_limits_texts_per_file_by_seeded_choice(tmp_path: Path):
    config = tmp_path / "prefix_config.yaml"
    config.write_text("- prefix: data__arithmetic\n  max_per_file: 2\n")
    runs = []
    for seed in (0, 0, 1):
        out = tmp_path / f"s{len(runs)}" / "tokenizer.json"
        result = train_tokenizer(
            [EXAMPLE_ROWS],
            out,
            vocab_size=400,
            seed=seed,
            prefix_config=config,
            limit_mul_factor=5,
            progress=False,
        )
        per_file = {f.task: f for f in result.files}
        arithmetic = per_file["data__arithmetic.jsonl"]
        assert arithmetic.texts_available == 180 and arithmetic.texts_used == 10
        translations = per_file["data__translations.jsonl"]
        assert translations.texts_used == translations.texts_available == 96
        runs.append(out.read_bytes())
    assert runs[0] == runs[1]


def test_texts_are_truncated_to_truncate_len_characters(tmp_path: Path):
    rows = tmp_path / "rows"
    rows.mkdir()
    long_word = "abcdefghij" * 50
    (rows / "a.jsonl").write_text(
        "".join(
            json.dumps({"condition": "", "instruction": long_word, "response": long_word}) + "\n"
            for _ in range(5)
        )
    )
    out = tmp_path / "tok" / "tokenizer.json"
    train_tokenizer([rows], out, vocab_size=400, truncate_len=4, prefix_config=None, progress=False)
    vocab = json.loads(out.read_text())["model"]["vocab"]
    # Only the first four characters were seen, so no merge reaches past "abcd".
    assert "abcd" in vocab and not any("abcde" in token for token in vocab)


def test_unigram_trains_and_round_trips(tmp_path: Path):
    out = tmp_path / "uni" / "tokenizer.json"
    result = train_tokenizer(
        [EXAMPLE_ROWS],
        out,
        tokenizer_type="unigram",
        vocab_size=800,
        prefix_config=None,
        progress=False,
    )
    assert result.vocab_size <= 800
    tok = Tokenizer.from_file(str(out))
    assert json.loads(out.read_text())["model"]["type"] == "Unigram"
    for text in SAMPLES[:3]:
        assert tok.decode(tok.encode(text, add_special_tokens=False).ids) == text


def test_a_unigram_run_repeats_itself_byte_for_byte(tmp_path: Path):
    """tokenizers' own unigram training takes its words in a hash map's order (new each run)
    and gives the byte symbols it never learned made-up scores in that order: two runs wrote
    different files. The same rows, options and thread count now write the same bytes, and the
    made-up scores (the lowest learned score plus 0.0001 steps) go by code point, first to the
    symbols in the rows (which alone can have been learned)."""
    common = {"tokenizer_type": "unigram", "vocab_size": 500, "prefix_config": None,
              "progress": False}  # fmt: skip
    for threads in (1, 2):
        files = []
        for run in range(3):
            out = tmp_path / f"t{threads}-{run}" / "tokenizer.json"
            train_tokenizer([EXAMPLE_ROWS], out, threads=threads, **common)
            files.append(out.read_bytes())
        assert files[0] == files[1] == files[2], f"{threads} thread(s)"
    vocab = json.loads(files[0])["model"]["vocab"]
    lowest = min(score for _piece, score in vocab)
    made_up = [piece for piece, score in vocab if len(piece) == 1 and
               lowest <= score < lowest + 0.0001 * 256 and round((score - lowest) / 0.0001, 6).is_integer()]  # fmt: skip
    assert len(made_up) > 50  # the example rows hold few of the 256 bytes
    # The symbols never in the rows, by code point, then those in the rows (lowest, by code
    # point): the order is made of two rising runs.
    descents = sum(a > b for a, b in itertools.pairwise(made_up))
    assert descents <= 1, made_up


def test_a_unigram_special_token_that_is_also_a_learned_piece_is_in_the_vocabulary_once(
    tmp_path: Path,
):
    """tokenizers' unigram trainer lists the special tokens, then every piece it learned, one
    equal to a special token's text too: that text had two ids (the special token the second).
    It is kept once, at the special token's id, and both encoders agree on the file."""
    rows = tmp_path / "rows"
    rows.mkdir()
    text = "ab ab abab the cat the mat ab the"
    (rows / "r.jsonl").write_text(
        json.dumps({"condition": "", "instruction": text, "response": "ab the ab"}) + "\n"
    )
    out = tmp_path / "uni" / "tokenizer.json"
    specials = ["ab", "<b>"]
    result = train_tokenizer([rows], out, tokenizer_type="unigram", vocab_size=300,
                             special_tokens=specials, prefix_config=None, progress=False)  # fmt: skip
    spec = json.loads(out.read_text())
    pieces = [piece for piece, _score in spec["model"]["vocab"]]
    assert len(pieces) == len(set(pieces)) and pieces[: len(specials)] == specials
    assert [(t["id"], t["content"]) for t in spec["added_tokens"]] == list(enumerate(specials))
    reference = Tokenizer.from_file(str(out))
    assert reference.get_vocab_size() == len(pieces) == result.vocab_size
    assert [reference.token_to_id(token) for token in specials] == [0, 1]
    reference.encode_special_tokens = True
    assert list(TextEncoder(out).encode_batch([text]).ids) == reference.encode(text).ids
    assert reference.decode(reference.encode(text).ids, skip_special_tokens=False) == text


def test_bad_options_and_bad_rows(tmp_path: Path):
    out = tmp_path / "t" / "tokenizer.json"
    with pytest.raises(ConfigError, match="too small"):
        train_tokenizer([EXAMPLE_ROWS], out, vocab_size=100, prefix_config=None, progress=False)
    with pytest.raises(ConfigError, match=r"\.json file"):
        train_tokenizer(
            [EXAMPLE_ROWS], tmp_path / "t" / "tok.txt", prefix_config=None, progress=False
        )
    # Refused in Python's words, not as the Rust options' "expected usize at line 1 column N".
    for bad, message in (
        ({"threads": -3}, r"threads must be an integer >= 1, got -3"),
        ({"threads": 0}, r"threads must be an integer >= 1, got 0"),
        ({"threads": 10**6}, r"threads=1000000 is more than this machine can use"),
        ({"vocab_size": -5}, r"vocab_size must be at least 1, not -5"),
    ):
        with pytest.raises(ConfigError, match=message):
            train_tokenizer([EXAMPLE_ROWS], out, prefix_config=None, progress=False, **bad)
    with pytest.raises(ConfigError, match="twice"):
        train_tokenizer(
            [EXAMPLE_ROWS], out, special_tokens=["<a>", "<a>"], prefix_config=None, progress=False
        )
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "bad.jsonl").write_text(
        '{"condition": "", "instruction": "a", "response": "b"}\n{oops\n'
    )
    with pytest.raises(InputError, match=r"bad.jsonl:line 2: malformed JSON"):
        train_tokenizer([rows], out, vocab_size=300, prefix_config=None, progress=False)
    assert not out.exists()
    result = train_tokenizer(
        [rows], out, vocab_size=300, prefix_config=None, on_error="skip", progress=False
    )
    assert result.files[0].bad_rows == 1


def test_no_text_at_all_fails_and_writes_nothing(tmp_path: Path):
    out = tmp_path / "t" / "tokenizer.json"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(
        ConfigError, match=r"no \.jsonl, \.jsonl\.gz, \.jsonl\.zst or \.parquet files"
    ):
        train_tokenizer([empty], out, vocab_size=300, prefix_config=None, progress=False)
    (empty / "blank.jsonl").write_text("\n")
    with pytest.raises(InputError, match="no text to train on: 1 input file"):
        train_tokenizer([empty], out, vocab_size=300, prefix_config=None, progress=False)
    (empty / "bad.jsonl").write_text("{oops\n[1, 2]\n")
    with pytest.raises(InputError, match=r"all 2 row\(s\) were bad and skipped"):
        train_tokenizer(
            [empty], out, vocab_size=300, prefix_config=None, on_error="skip", progress=False
        )
    assert not out.parent.exists()


def test_limited_counts_only_files_cut_by_max_per_file(tmp_path: Path):
    rows = tmp_path / "rows"
    rows.mkdir()
    good = '{"condition": "", "instruction": "alpha beta", "response": "gamma delta"}\n'
    (rows / "capped.jsonl").write_text(good * 10)
    (rows / "with_bad.jsonl").write_text(good * 3 + "{oops\n")
    (rows / "under_cap.jsonl").write_text(good * 2)
    config = tmp_path / "prefix_config.yaml"
    config.write_text(
        "- prefix: capped\n  max_per_file: 1\n- prefix: under_cap\n  max_per_file: 100\n"
    )
    result = train_tokenizer(
        [rows],
        tmp_path / "t" / "tokenizer.json",
        vocab_size=300,
        prefix_config=config,
        limit_mul_factor=3,
        on_error="skip",
        progress=False,
    )
    per_file = {f.task: f for f in result.files}
    assert per_file["capped.jsonl"].limited and per_file["capped.jsonl"].texts_used == 3
    # Bad rows make texts_used < texts_available, but that is not max_per_file's doing.
    assert per_file["with_bad.jsonl"].bad_rows == 1 and not per_file["with_bad.jsonl"].limited
    assert not per_file["under_cap.jsonl"].limited
    assert [f.task for f in result.limited] == ["capped.jsonl"]
    assert "(1 limited by max_per_file)" in summary_line(result)


def test_compressed_inputs_and_skipped_files_are_shared_with_tokenize(tmp_path: Path):
    import gzip

    rows = tmp_path / "rows"
    rows.mkdir()
    good = '{"condition": "", "instruction": "alpha beta", "response": "gamma delta"}\n'
    (rows / "a.JSONL.GZ").write_bytes(b"\xef\xbb\xbf" + gzip.compress(good.encode() * 4))
    (rows / "b.jsonl").write_bytes(b"\xef\xbb\xbf" + good.encode() * 4)
    (rows / "notes.txt").write_text("x")
    with pytest.raises(InputError, match=r"a\.JSONL\.GZ: not a gzip file: it begins with ef bb bf"):
        train_tokenizer(
            [rows], tmp_path / "t" / "tokenizer.json", vocab_size=300, prefix_config=None
        )
    (rows / "a.JSONL.GZ").write_bytes(gzip.compress(b"\xef\xbb\xbf" + good.encode() * 4))
    result = train_tokenizer(
        [rows], tmp_path / "t" / "tokenizer.json", vocab_size=300, prefix_config=None
    )
    assert {f.task: f.rows for f in result.files} == {"a.JSONL.GZ": 4, "b.jsonl": 4}
    assert result.skipped_files == [str(rows / "notes.txt")]


def test_tokenizer_config_makes_transformers_agree_with_data_io(
    small_tokenizer: Path, tmp_path: Path
):
    from transformers import AutoTokenizer

    from data_io.tokenize import tokenize
    from tests.tokenize_oracle import load_task

    config = json.loads((small_tokenizer.parent / "tokenizer_config.json").read_text())
    assert config["split_special_tokens"] is True
    assert (config["pad_token"], config["eos_token"], config["bos_token"]) == (
        "<|PAD|>",
        "<|box_end|>",
        "<|im_start|>",
    )
    tok = AutoTokenizer.from_pretrained(str(small_tokenizer.parent))
    assert (tok.pad_token, tok.eos_token, tok.bos_token) == (
        "<|PAD|>",
        "<|box_end|>",
        "<|im_start|>",
    )
    assert tok.eos_token_id == tok.convert_tokens_to_ids("<|box_end|>") == 11
    text = "ask <|im_start|> and <|box_end|> as text"
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "a.jsonl").write_text(
        json.dumps({"condition": "", "instruction": "", "response": text}) + "\n"
    )
    tokenize([rows], tmp_path / "out", tokenizer_path=small_tokenizer, progress=False)
    task = load_task(tmp_path / "out" / "a.jsonl")
    start, length = int(task["resp_start"][0]), int(task["resp_len"][0])
    data_io_ids = task["tokens"][start : start + length - 1].tolist()  # without EOA
    assert tok.encode(text) == tok(text)["input_ids"] == data_io_ids
    assert 6 not in data_io_ids  # <|im_start|> stayed text


def test_the_shipped_tokenizer_has_the_same_tokenizer_config(small_tokenizer: Path):
    shipped = Path(__file__).resolve().parents[2] / "trained_tokenizers" / "bpe"
    assert json.loads((shipped / "tokenizer_config.json").read_text()) == json.loads(
        (small_tokenizer.parent / "tokenizer_config.json").read_text()
    )


def test_custom_special_tokens_leave_out_roles_they_lack(tmp_path: Path):
    out = tmp_path / "t" / "tokenizer.json"
    train_tokenizer(
        [EXAMPLE_ROWS],
        out,
        vocab_size=400,
        special_tokens=["<|PAD|>", "<|eos|>"],
        prefix_config=None,
        progress=False,
    )
    config = json.loads((out.parent / "tokenizer_config.json").read_text())
    assert config["pad_token"] == "<|PAD|>"
    assert "eos_token" not in config and "bos_token" not in config
    assert "extra_special_tokens" not in config


def test_role_flags_name_custom_special_tokens(tmp_path: Path, capsys):
    from data_io.cli import main

    out = tmp_path / "t" / "tokenizer.json"
    argv = ["train-tokenizer", str(EXAMPLE_ROWS), "-o", str(out), "--vocab-size", "400",
            "--prefix-config", "none", "--special-tokens", "<pad>", "<s>", "</s>"]  # fmt: skip
    assert main([*argv, "--eos-token", "</s>", "--bos-token", "<s>", "--pad-token", "<pad>"]) == 0
    config = json.loads((out.parent / "tokenizer_config.json").read_text())
    assert (config["pad_token"], config["bos_token"], config["eos_token"]) == (
        "<pad>",
        "<s>",
        "</s>",
    )
    assert "names no" not in capsys.readouterr().out
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(str(out.parent))
    assert loaded.eos_token == "</s>" and loaded.eos_token_id == 2
    assert main(argv) == 0  # no role flags: the summary says which roles are missing
    printed = capsys.readouterr().out
    assert "names no pad_token, bos_token, eos_token" in printed and "--eos-token" in printed


def test_the_core_writes_the_chosen_roles_with_the_tokenizer(tmp_path: Path):
    """The roles were written by Python after the core had written the tokenizer: a Ctrl-C
    between the two left a finished-looking folder whose eos_token was the default. The core
    now writes them in the one tokenizer_config.json, and checks them itself."""
    out = tmp_path / "t" / "tokenizer.json"
    settings = {"vocab_size": 300, "special_tokens": ["<pad>", "</s>"], "eos_token": "</s>",
                "pad_token": "<pad>", "prefix_config": None, "progress": False}  # fmt: skip
    options = core_options([EXAMPLE_ROWS], out, settings)
    assert options["roles"] == {"pad_token": "<pad>", "eos_token": "</s>"}
    trainer = options.pop("trainer")
    _core.train_tokenizer(json.dumps(options), trainer=trainer)  # the core alone
    config = json.loads((out.parent / "tokenizer_config.json").read_text())
    assert (config["pad_token"], config["eos_token"]) == ("<pad>", "</s>")
    assert "bos_token" not in config
    for roles, message in (({"eos_token": "</x>"}, r"--eos-token \"</x>\" is not one of the special"),
                           ({"cls_token": "</s>"}, r"no role \"cls_token\" to choose a token for")):  # fmt: skip
        with pytest.raises(ConfigError, match=message):
            _core.train_tokenizer(json.dumps({**options, "roles": roles}), trainer=trainer)


def test_role_token_must_be_a_special_token(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"--eos-token '</x>' is not one of the special tokens"):
        train_tokenizer([EXAMPLE_ROWS], tmp_path / "tokenizer.json", special_tokens=["<pad>"],
                        eos_token="</x>", prefix_config=None, progress=False)  # fmt: skip
    assert not (tmp_path / "tokenizer.json").exists()


def test_a_vocabulary_smaller_than_asked_is_said(tmp_path: Path, capsys):
    from data_io.cli import main

    out = tmp_path / "tokenizer.json"
    assert main(["train-tokenizer", str(EXAMPLE_ROWS), "-o", str(out), "--vocab-size", "60000",
                 "--prefix-config", "none"]) == 0  # fmt: skip
    size = Tokenizer.from_file(str(out)).get_vocab_size()
    printed = capsys.readouterr().out
    assert size < 60000
    assert f"the vocabulary has {size:,} tokens, not the 60,000 asked" in printed


@pytest.mark.parametrize(
    ("vocab_size", "specials"),
    [(300, []), (600, None), (2000, None), (800, ["<s>", "</s>", "<|x|>"])],
)
def test_the_rust_trainer_writes_the_files_the_hf_trainer_writes(
    tmp_path: Path, vocab_size: int, specials: list[str] | None
) -> None:
    """The default (rust) trainer against the tokenizers crate's BpeTrainer (--trainer hf), on
    the example rows: byte-identical tokenizer.json, config.json and tokenizer_config.json."""
    written = {}
    for trainer in ("rust", "hf"):
        out = tmp_path / trainer / "tokenizer.json"
        train_tokenizer([EXAMPLE_ROWS], out, vocab_size=vocab_size, prefix_config=None,
                        special_tokens=specials, progress=False, trainer=trainer)  # fmt: skip
        written[trainer] = {p.name: p.read_bytes() for p in sorted(out.parent.iterdir())}
    assert written["rust"] == written["hf"]
    assert len(json.loads(written["rust"]["tokenizer.json"])["model"]["merges"]) > 0


def test_unigram_from_the_rust_trainer_s_counts_is_the_hf_trainer_s_file(tmp_path: Path) -> None:
    """Unigram was trained by tokenizers' trainer alone, fed the texts (no --count-memory, no
    --counts, no --executor, no raw text). The rust trainer's counting pass now feeds data_io's
    EM passes: the same file, byte for byte, whether the counts stayed in memory, spilled past
    a budget of a few KiB, or were read back from --counts; and the hf trainer's pieces."""
    common = {"tokenizer_type": "unigram", "vocab_size": 700, "prefix_config": None,
              "special_tokens": ["<s>", "</s>"], "progress": False}  # fmt: skip
    runs = {
        "hf": {"trainer": "hf"},
        "rust": {},  # the default
        "spilled": {"count_memory": 4096},
        "counts": {"counts_dir": tmp_path / "counts"},
        "counts again": {"counts_dir": tmp_path / "counts"},
    }
    files = {}
    for name, options in runs.items():
        out = tmp_path / name / "tokenizer.json"
        result = train_tokenizer([EXAMPLE_ROWS], out, **common, **options)
        files[name] = out.read_bytes()
        assert (result.counting is None) == (name == "hf")
    assert result.counting is not None and result.counting.reused_files  # read back
    hf = files.pop("hf")
    assert len(set(files.values())) == 1, {k: len(v) for k, v in files.items()}
    assert_same_unigram(files["rust"], hf)


def test_trainer_choices_are_checked(tmp_path: Path) -> None:
    out = tmp_path / "t" / "tokenizer.json"
    with pytest.raises(ConfigError, match="trainer must be one of rust, hf"):
        train_tokenizer([EXAMPLE_ROWS], out, trainer="sentencepiece")
    with pytest.raises(ValueError, match="trainer must be"):
        options = core_options([EXAMPLE_ROWS], out, {"vocab_size": 300, "special_tokens": []})
        options.pop("trainer")
        _core.train_tokenizer(json.dumps(options), trainer="nope")
    assert not out.exists()


@pytest.mark.parametrize("tokenizer_type", ["bpe", "unigram"])
def test_special_tokens_that_are_empty_or_a_byte_symbol_are_refused(
    tmp_path: Path, tokenizer_type: str
):
    """A special token equal to a ByteLevel symbol would take that byte's place (the vocabulary
    one entry short, data_io's ids and tokenizers' apart); an empty one matches nothing."""
    out = tmp_path / "t" / "tokenizer.json"
    common = {"tokenizer_type": tokenizer_type, "vocab_size": 400, "prefix_config": None,
              "progress": False}  # fmt: skip
    for specials, message in (
        (["a", "<b>"], r"--special-tokens 'a' is one of the 256 byte-level symbols"),
        (["<b>", "\u0120"], r"--special-tokens 'Ġ' is one of the 256 byte-level symbols"),
        ([""], r"--special-tokens holds an empty token"),
    ):
        with pytest.raises(ConfigError, match=message):
            train_tokenizer([EXAMPLE_ROWS], out, special_tokens=specials, **common)
    assert not out.parent.exists()
    # Longer tokens are special tokens, and every byte keeps its token: both encoders agree.
    result = train_tokenizer([EXAMPLE_ROWS], out, special_tokens=["<b>", "<|a|>"], **common)
    spec = json.loads(out.read_text())
    assert [t["content"] for t in spec["added_tokens"]] == ["<b>", "<|a|>"]
    reference = Tokenizer.from_file(str(out))
    reference.encode_special_tokens = True
    assert result.vocab_size == reference.get_vocab_size()
    text = "a <|a|> ab <b>"
    assert list(TextEncoder(out).encode_batch([text]).ids) == reference.encode(text).ids


@pytest.mark.parametrize("tokenizer_type", ["bpe", "unigram"])
def test_rows_of_empty_texts_are_no_text_to_train_on(tmp_path: Path, tokenizer_type: str):
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "e.jsonl").write_text('{"condition":"direct","instruction":"","response":""}\n' * 3)
    out = tmp_path / "t" / "tokenizer.json"
    common = {"tokenizer_type": tokenizer_type, "vocab_size": 400, "prefix_config": None,
              "progress": False}  # fmt: skip
    with pytest.raises(InputError, match=r"no text to train on: 1 input file\(s\), their 6 text"):
        train_tokenizer([rows], out, **common)
    assert not out.parent.exists()
    # One non-empty text among them is enough.
    (rows / "f.jsonl").write_text('{"condition":"direct","instruction":"","response":"hi hi"}\n')
    assert train_tokenizer([rows], out, **common).texts_used == 8 and out.is_file()


def test_numeric_options_past_what_the_core_holds_are_refused(tmp_path: Path, capsys):
    from data_io.cli import main

    out = tmp_path / "t" / "tokenizer.json"
    base = ["train-tokenizer", str(EXAMPLE_ROWS), "-o", str(out), "-q"]
    for extra, said in (
        (["--vocab-size", "99999999999999999999999"], "--vocab-size must be at most 4,294,967,295"),
        (["--vocab-size", "5000000000"], "--vocab-size must be at most 4,294,967,295"),
        (["--count-memory", "99999999T"], "--count-memory must be at most 18,446,744,073,"),
        (["--seed", str(2**64)], "--seed must be at most 18,446,744,073,709,551,615"),
        (["--truncate-len", str(2**64)], "--truncate-len must be at most"),
        (["--limit-mul-factor", str(2**64)], "--limit-mul-factor must be at most"),
    ):
        assert main([*base, *extra]) == 1
        err = capsys.readouterr().err
        assert said in err and "serde" not in err and "line 1 column" not in err
    assert not out.parent.exists()
    assert main([*base, "--vocab-size", "300", "--seed", str(2**64 - 1)]) == 0


def test_an_output_or_counts_folder_under_a_file_is_said(tmp_path: Path, capsys):
    from data_io.cli import main

    blocker = tmp_path / "afile"
    blocker.write_text("x")
    base = ["train-tokenizer", str(EXAMPLE_ROWS), "-q", "--vocab-size", "300"]
    assert main([*base, "-o", str(blocker / "tokenizer.json")]) == 1
    assert f"{blocker} is a file, not a folder" in capsys.readouterr().err
    assert main([*base, "-o", str(blocker / "x" / "tokenizer.json")]) == 1
    assert f"lies under {blocker}, which is a file" in capsys.readouterr().err
    out = tmp_path / "t" / "tokenizer.json"
    assert main([*base, "-o", str(out), "--counts", str(blocker)]) == 1
    err = capsys.readouterr().err
    assert f"--counts {blocker}: {blocker} is a file, not a folder" in err
    assert "os error" not in err and not out.exists()
    assert main([*base, "-o", str(out), "--counts", str(tmp_path / "counts")]) == 0


def test_an_empty_input_folder_gives_train_tokenizers_reason(tmp_path: Path, capsys):
    from data_io.cli import main

    (tmp_path / "empty").mkdir()
    out = tmp_path / "t" / "tokenizer.json"
    assert main(["train-tokenizer", str(tmp_path / "empty"), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "it holds no files at all" in err and "most likely a wrong path" in err
    assert "tasks" not in err and not out.exists()


def test_a_missing_prefix_config_names_the_shipped_file(tmp_path: Path, capsys):
    from data_io.cli import main

    out = tmp_path / "t" / "tokenizer.json"
    assert main(["train-tokenizer", str(EXAMPLE_ROWS), "-o", str(out),
                 "--prefix-config", str(tmp_path / "nonexist.yaml")]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "ships prefix_config.yaml at its root" in err and "--prefix-config FILE" in err


def test_a_small_unigram_vocabulary_is_not_said_in_pair_merges(tmp_path: Path, capsys):
    from data_io.cli import main

    out = tmp_path / "tokenizer.json"
    assert main(["train-tokenizer", str(EXAMPLE_ROWS), "-o", str(out), "--vocab-size", "60000",
                 "--prefix-config", "none", "--tokenizer-type", "unigram"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "not the 60,000 asked: the unigram trainer found no more pieces" in printed
    assert "pairs" not in printed


def test_the_smallest_vocabulary_is_said_and_a_unigram_one_is_not_exceeded(tmp_path: Path):
    """The least --vocab-size is said as a number. A unigram vocabulary of exactly the byte
    tokens and the special tokens came out larger than asked (tokenizers' unigram trainer kept
    every piece it learned), with nothing said; it needs a piece more, and gets what it asks."""
    out = tmp_path / "t" / "tokenizer.json"
    common = {"prefix_config": None, "progress": False}
    with pytest.raises(ConfigError, match=r"31 special tokens; ask for at least 287 "):
        train_tokenizer([EXAMPLE_ROWS], out, vocab_size=286, **common)
    with pytest.raises(ConfigError, match="at least one learned piece; ask for at least 288 "):
        train_tokenizer([EXAMPLE_ROWS], out, vocab_size=287, tokenizer_type="unigram", **common)
    assert not out.parent.exists()
    for tokenizer_type, size in (("bpe", 287), ("unigram", 288)):
        result = train_tokenizer(
            [EXAMPLE_ROWS], out, vocab_size=size, tokenizer_type=tokenizer_type, **common
        )
        assert result.vocab_size == size == Tokenizer.from_file(str(out)).get_vocab_size()


@pytest.mark.parametrize("folder", ["tokenizer.json", "config.json", "tokenizer_config.json"])
def test_a_folder_where_a_file_is_written_is_refused_before_training(tmp_path: Path, folder: str):
    """A folder at the name of a file train-tokenizer writes failed its rename after training:
    'cannot rename into place ... Is a directory', a tokenizer.json.tmp-PID left beside it,
    and (for config.json) a tokenizer.json without its two companions."""
    out = tmp_path / "t" / "tokenizer.json"
    (out.parent / folder).mkdir(parents=True)
    with pytest.raises(
        ConfigError, match=f"{re.escape(str(out.parent / folder))} is a folder, where"
    ):
        train_tokenizer([EXAMPLE_ROWS], out, vocab_size=300, prefix_config=None, progress=False)
    assert [p.name for p in out.parent.iterdir()] == [folder]


def test_another_tokenizers_files_in_the_output_folder_are_refused(tmp_path: Path):
    """Trained into a folder holding another tokenizer's special_tokens_map.json and
    added_tokens.json, transformers loaded the folder with that tokenizer's eos/pad and an
    added token, not the pipeline's: data_io tokenize and transformers apart, nothing said."""
    out = tmp_path / "t" / "tokenizer.json"
    out.parent.mkdir()
    (out.parent / "special_tokens_map.json").write_text('{"eos_token": "<|zzz|>"}')
    (out.parent / "added_tokens.json").write_text('{"<|zzz|>": 50000}')
    common = {"vocab_size": 300, "prefix_config": None, "progress": False}
    with pytest.raises(
        ConfigError, match=r"holds another tokenizer's added_tokens\.json, special_tokens_map\.json"
    ):
        train_tokenizer([EXAMPLE_ROWS], out, **common)
    assert not out.exists()
    for name in ("special_tokens_map.json", "added_tokens.json"):
        (out.parent / name).unlink()
    train_tokenizer([EXAMPLE_ROWS], out, **common)
    train_tokenizer([EXAMPLE_ROWS], out, **common)  # its own files do not refuse a re-run
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(str(out.parent)).eos_token == "<|box_end|>"


def test_a_special_token_given_twice_says_how_to_fix_it(tmp_path: Path):
    """The core's 'special token "<a>" is given twice' named neither the option nor the fix."""
    out = tmp_path / "t" / "tokenizer.json"
    with pytest.raises(ConfigError, match=r"--special-tokens '<a>' is given twice; .* drop the"):
        train_tokenizer([EXAMPLE_ROWS], out, vocab_size=300, special_tokens=["<a>", "<b>", "<a>"])
    assert not out.parent.exists()
