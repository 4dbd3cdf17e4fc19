"""data_io.prepare.prepare end to end: the MyPT layout, the loader, every option."""

from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from data_io import _core
from data_io.errors import ConfigError, InputError, TokenizerError
from data_io.load.datasets.shards import MemoryMappedDataset
from data_io.prepare import prepare
from data_io.prepare.dedup import hash_texts
from data_io.prepare.split import is_val
from tests.formats.parted import parted
from tests.prepare.helpers import (
    documents,
    read_split,
    split_documents,
    tree_bytes,
    write_jsonl,
    write_txt,
)

REPO = Path(__file__).resolve().parents[2]


def run(inputs, out: Path, tokenizer: Path | str, **options):
    options.setdefault("tokens_per_shard", 500)
    options.setdefault("progress", False)
    return prepare(inputs, out, tokenizer=str(tokenizer), **options)


def expected_split(docs: list[str], split: str, seed=0, fraction=0.1, dedup=True) -> list[str]:
    """The oracle: first occurrences (when dedup), in order, in the split their hash says."""
    seen: set[str] = set()
    kept = []
    for doc in docs:
        if dedup and doc in seen:
            continue
        seen.add(doc)
        kept.append(doc)
    val = is_val(hash_texts(kept), seed, fraction)
    return [d for d, v in zip(kept, val, strict=True) if v == (split == "val")]


def test_mypt_layout_loads_with_memory_mapped_dataset(small_tokenizer: Path, tmp_path: Path):
    docs = documents(800, seed=1, duplicates=100)
    write_txt(tmp_path / "in" / "a.txt", docs[:400])
    write_jsonl(tmp_path / "in" / "b.jsonl", docs[400:])
    out = tmp_path / "out"
    result = run([tmp_path / "in"], out, small_tokenizer)
    names = sorted(p.name for p in out.iterdir())
    assert names == [
        ".prepare",
        "dataset_metadata.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "train",
        "val",
    ]
    meta = json.loads((out / "dataset_metadata.json").read_text())
    assert meta["dtype"] == "uint16" and meta["vocab_size"] == 600
    dataset = MemoryMappedDataset(out / "train", 65, file_pattern="*.bin")
    assert len(dataset) > 0
    window = dataset[0]["input_ids"]
    train = read_split(out, "train")
    assert window.tolist() == train[:64].tolist()
    assert MemoryMappedDataset(out / "val", 17, file_pattern="*.bin").summary()
    # every shard but the last of a split holds exactly tokens_per_shard tokens
    for split in ("train", "val"):
        sizes = [s["tokens"] for s in meta["splits"][split]["shards"]]
        assert all(size == 500 for size in sizes[:-1]) and 0 < sizes[-1] <= 500
        assert sum(sizes) == meta["splits"][split]["tokens"] == result.tokens[split]
    assert result.duplicates == 100
    assert result.documents["train"] + result.documents["val"] == 800


def test_tokens_are_the_encoder_s_of_each_kept_document(small_tokenizer: Path, tmp_path: Path):
    docs = documents(300, seed=2, duplicates=40)
    write_txt(tmp_path / "a.txt", docs)
    out = tmp_path / "out"
    result = run([tmp_path / "a.txt"], out, small_tokenizer, val_fraction=0.3)
    reference = Tokenizer.from_file(str(small_tokenizer))
    for split in ("train", "val"):
        got = split_documents(read_split(out, split), result.eos_id)
        want = [
            reference.encode(d, add_special_tokens=False).ids
            for d in expected_split(docs, split, fraction=0.3)
        ]
        assert got == want, split
    assert result.documents == {
        s: len(expected_split(docs, s, fraction=0.3)) for s in ("train", "val")
    }


def test_no_dedup_keeps_duplicates_in_the_same_split(small_tokenizer: Path, tmp_path: Path):
    docs = documents(200, seed=3, duplicates=50)
    write_txt(tmp_path / "a.txt", docs)
    result = run(
        [tmp_path / "a.txt"], tmp_path / "out", small_tokenizer, dedup=False, val_fraction=0.5
    )
    assert result.duplicates == 0
    assert result.documents == {
        s: len(expected_split(docs, s, fraction=0.5, dedup=False)) for s in ("train", "val")
    }


def test_seed_changes_the_split_not_the_documents(small_tokenizer: Path, tmp_path: Path):
    write_txt(tmp_path / "a.txt", documents(400, seed=4))
    a = run([tmp_path / "a.txt"], tmp_path / "a", small_tokenizer, seed=1, val_fraction=0.3)
    b = run([tmp_path / "a.txt"], tmp_path / "b", small_tokenizer, seed=2, val_fraction=0.3)
    assert (
        a.documents != b.documents
        or read_split(tmp_path / "a", "val").tolist() != read_split(tmp_path / "b", "val").tolist()
    )
    assert sum(a.tokens.values()) == sum(b.tokens.values())


def test_npy_format_and_explicit_dtype(small_tokenizer: Path, tmp_path: Path):
    write_txt(tmp_path / "a.txt", documents(100, seed=5))
    out = tmp_path / "out"
    run([tmp_path / "a.txt"], out, small_tokenizer, format="npy", dtype="uint32")
    shards = sorted((out / "train").glob("*.npy"))
    assert shards and all(np.load(s).dtype == np.uint32 for s in shards)
    assert len(MemoryMappedDataset(out / "train", 33)) > 0


def test_dtype_too_small_for_the_vocabulary(small_tokenizer, huge_tokenizer, tmp_path):
    write_txt(tmp_path / "a.txt", documents(10))
    with pytest.raises(ConfigError, match=r"70002 tokens.*too many for dtype uint16.*uint32"):
        run([tmp_path / "a.txt"], tmp_path / "o1", huge_tokenizer, dtype="uint16")
    with pytest.raises(ConfigError, match=r"600 tokens.*too many for dtype uint8"):
        run([tmp_path / "a.txt"], tmp_path / "o2", small_tokenizer, dtype="uint8")
    assert not (tmp_path / "o1").exists() or not any((tmp_path / "o1").iterdir())
    result = run([tmp_path / "a.txt"], tmp_path / "o3", huge_tokenizer)
    assert result.dtype == "uint32"


def test_char_tokenizer_mypt_style(tmp_path: Path):
    docs = ["hello world, hello again", "another little document here"]
    write_txt(tmp_path / "a.txt", docs)
    out = tmp_path / "out"
    result = run([tmp_path / "a.txt"], out, "char", val_fraction=0.0)
    state = json.loads((out / "tokenizer_state.json").read_text())
    chars = state["chars"]  # MyPT's: id i is chars[i], the EOS (id 0) first
    assert chars == ["<|endoftext|>", *sorted(set("".join(docs)))]
    # uint16 although 22 ids fit uint8: later inputs may add characters, the dtype is fixed now.
    assert result.dtype == "uint16" and result.vocab_size == len(chars)
    got = split_documents(read_split(out, "train"), 0)
    assert ["".join(chars[i] for i in doc) for doc in got] == docs
    assert not (out / "tokenizer.json").exists()


def test_char_vocabulary_grows_past_uint8_on_a_later_run(tmp_path: Path):
    ascii_docs = ["plain ascii text, quite a lot of it"] * 1
    write_txt(tmp_path / "a.txt", ascii_docs)
    out = tmp_path / "out"
    run([tmp_path / "a.txt"], out, "char", val_fraction=0.0)
    many = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 400))  # 400 new characters
    write_txt(tmp_path / "b.txt", [many])
    result = run([tmp_path / "a.txt", tmp_path / "b.txt"], out, "char", val_fraction=0.0)
    assert result.dtype == "uint16" and result.vocab_size > 400
    chars = json.loads((out / "tokenizer_state.json").read_text())["chars"]
    got = split_documents(read_split(out, "train"), 0)
    assert ["".join(chars[i] for i in doc) for doc in got] == [*ascii_docs, many]


def test_tokenizer_without_eos_fails_before_writing(no_eos_tokenizer: Path, tmp_path: Path):
    write_txt(tmp_path / "a.txt", ["hello world " * 5])
    with pytest.raises(TokenizerError, match="--eos-token"):
        run([tmp_path / "a.txt"], tmp_path / "out", no_eos_tokenizer)
    assert not (tmp_path / "out" / "dataset_metadata.json").exists()
    result = run([tmp_path / "a.txt"], tmp_path / "out", no_eos_tokenizer, eos_token="</s>")
    assert result.eos_id == 1 and read_split(tmp_path / "out", "train")[-1] == 1


def test_bad_input_leaves_nothing_that_looks_finished(small_tokenizer: Path, tmp_path: Path):
    write_txt(tmp_path / "in" / "a.txt", documents(300))
    (tmp_path / "in" / "b.jsonl").write_text('{"text": "fine enough document"}\n{"t": 1}\n')
    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"b\.jsonl: line 2: no field 'text'"):
        run([tmp_path / "in"], out, small_tokenizer)
    assert not out.exists() or sorted(p.name for p in out.iterdir()) == []


def test_everything_filtered_is_an_error(small_tokenizer: Path, tmp_path: Path):
    (tmp_path / "a.txt").write_text("short\n\ntiny\n")
    with pytest.raises(InputError, match=r"no document is left.*2 read.*2 too short"):
        run([tmp_path / "a.txt"], tmp_path / "out", small_tokenizer)
    result = run([tmp_path / "a.txt"], tmp_path / "out", small_tokenizer, filter=False)
    assert result.documents["train"] + result.documents["val"] == 2


def test_truncated_gzip_input_fails_cleanly(small_tokenizer: Path, tmp_path: Path):
    data = gzip.compress("\n\n".join(documents(3000)).encode())
    (tmp_path / "a.txt.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match=r"a\.txt\.gz: truncated gz"):
        run([tmp_path / "a.txt.gz"], tmp_path / "out", small_tokenizer)
    assert not list((tmp_path / "out").rglob("shard_*")) if (tmp_path / "out").exists() else True


def a_file_of_parts(path: Path, suffix: str) -> tuple[bytearray, range]:
    """Write to ``path`` a file of parts (60 kB of text each); its bytes, and the file offsets
    of its middle part."""
    data = bytearray(parted("\n\n".join(documents(6000, seed=3)).encode(), suffix, 60_000))
    path.write_bytes(bytes(data))
    starts = [*_core.compressed_parts(str(path), suffix[1:]), len(data)]
    assert len(starts) > 5
    k = len(starts) // 2
    return data, range(starts[k], starts[k + 1])


def damaged_in_the_middle(path: Path, suffix: str) -> range:
    """Write to ``path`` a file of parts with 8 bytes flipped in the middle of its middle part;
    the file offsets of that part."""
    data, part = a_file_of_parts(path, suffix)
    middle = (part.start + part.stop) // 2
    data[middle : middle + 8] = bytes(b ^ 0x5A for b in data[middle : middle + 8])
    path.write_bytes(bytes(data))
    return part


def named_place(error: Exception, suffix: str) -> int:
    """The file offset that a corrupt compressed file's error names."""
    found = re.search(rf"corrupt {suffix[1:]} file near byte (\d+) \(", str(error))
    assert found, error
    return int(found[1])


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("suffix", [".xz", ".bz2", ".zst", ".gz"])
def test_a_corrupt_part_is_named_at_its_place_in_the_file(
    small_tokenizer: Path, tmp_path: Path, suffix: str, threads: int
):
    # One stream read whole (threads 1, and zstd and gzip at 2) or parts on lanes (xz and
    # bzip2 at 2): the same place, where the decoder failed, inside the damaged part.
    path = tmp_path / f"a.txt{suffix}"
    part = damaged_in_the_middle(path, suffix)
    with pytest.raises(InputError, match=r"re-download or re-compress it") as failed:
        run([path], tmp_path / "out", small_tokenizer, threads=threads)
    assert named_place(failed.value, suffix) in part, (str(failed.value), part)
    if "in the part from byte" in str(failed.value):
        assert f"in the part from byte {part.start})" in str(failed.value)


@pytest.mark.parametrize("threads", [1, 12])
@pytest.mark.parametrize("suffix", [".bz2", ".zst", ".gz"])
def test_a_part_whose_stored_checksum_fails_is_named_at_its_place(
    small_tokenizer: Path, tmp_path: Path, suffix: str, threads: int
):
    """The middle part's data decodes but its stored checksum (gzip's CRC-32, zstd's content
    checksum, bzip2's stream CRC: a byte of each flipped) does not match it: the place named,
    read as one stream or on lanes (12 threads), lies in that part, with the decoder's reason."""
    path = tmp_path / f"a.txt{suffix}"
    data, part = a_file_of_parts(path, suffix)
    # gzip: the CRC-32 opens the 8-byte trailer; zstd: the checksum ends the frame; bzip2: the
    # stream CRC ends the stream, its last bits before the padding in the last byte.
    data[part.stop - (8 if suffix == ".gz" else 1)] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"re-download or re-compress it") as failed:
        run([path], tmp_path / "out", small_tokenizer, threads=threads)
    assert named_place(failed.value, suffix) in part, (str(failed.value), part)
    if "in the part from byte" in str(failed.value):
        assert f"in the part from byte {part.start})" in str(failed.value)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"tokens_per_shard": 0}, "tokens_per_shard must be an integer >= 1"),
        ({"format": "txt"}, "format must be one of bin, npy"),
        ({"dtype": "int8"}, "dtype must be one of"),
        ({"invalid_utf8": "ignore"}, "invalid_utf8 must be one of replace, fail"),
        ({"val_fraction": 1.5}, "val_fraction must be a number"),
        ({"threads": 0}, "threads must be an integer >= 1"),
        ({"seed": -1}, "seed must be an integer >= 0"),
        ({"dedup_memory": "big"}, "not a size"),
        ({"text_field": ""}, "text_field must be a non-empty string"),
    ],
)
def test_bad_options(small_tokenizer: Path, tmp_path: Path, options, message):
    write_txt(tmp_path / "a.txt", documents(5))
    with pytest.raises(ConfigError, match=message):
        run([tmp_path / "a.txt"], tmp_path / "out", small_tokenizer, **options)


def test_output_inside_an_input_folder_is_refused(small_tokenizer: Path, tmp_path: Path):
    write_txt(tmp_path / "a.txt", documents(5))
    with pytest.raises(ConfigError, match="outside the inputs"):
        run([tmp_path], tmp_path / "out", small_tokenizer)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "data_io", "prepare", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )


def test_same_bytes_with_one_or_two_threads(small_tokenizer: Path, tmp_path: Path):
    docs = documents(3000, seed=6, duplicates=300)
    write_txt(tmp_path / "in" / "a.txt", docs[:1500])
    write_jsonl(tmp_path / "in" / "b.jsonl", docs[1500:])
    common = ["--tokenizer", str(small_tokenizer), "--tokens-per-shard", "1000", "-q"]
    one = cli(str(tmp_path / "in"), "-o", str(tmp_path / "one"), "--threads", "1", *common)
    two = cli(str(tmp_path / "in"), "-o", str(tmp_path / "two"), "--threads", "2", *common)
    assert one.returncode == two.returncode == 0, one.stderr + two.stderr
    first, second = tree_bytes(tmp_path / "one"), tree_bytes(tmp_path / "two")
    assert first == second and len(first) > 4


def test_cli_summary_and_errors(small_tokenizer: Path, tmp_path: Path):
    write_txt(tmp_path / "a.txt", documents(50, duplicates=5))
    done = cli(
        str(tmp_path / "a.txt"), "-o", str(tmp_path / "out"), "--tokenizer", str(small_tokenizer)
    )
    assert done.returncode == 0, done.stderr
    for line in ("documents read", "documents dropped: duplicate", "train", "val", "dtype uint16"):
        assert line in done.stdout
    again = cli(
        str(tmp_path / "a.txt"), "-o", str(tmp_path / "out"), "--tokenizer", str(small_tokenizer)
    )
    assert "nothing to do" in again.stdout
    bad = cli(
        str(tmp_path / "missing.txt"),
        "-o",
        str(tmp_path / "o2"),
        "--tokenizer",
        str(small_tokenizer),
    )
    assert bad.returncode == 1 and "data_io prepare: error:" in bad.stderr


def test_datasets_folder_input_and_its_rerun(small_tokenizer: Path, tmp_path: Path):
    import datasets

    docs = documents(120, seed=8)
    datasets.Dataset.from_dict({"body": docs}).save_to_disk(tmp_path / "saved")
    out = tmp_path / "out"
    result = run([tmp_path / "saved"], out, small_tokenizer, text_field="body")
    assert result.documents_read == 120 and not result.nothing_to_do
    assert run([tmp_path / "saved"], out, small_tokenizer, text_field="body").nothing_to_do


def test_a_split_or_config_with_no_datasets_input_is_refused_not_ignored(
    small_tokenizer: Path, tmp_path: Path
):
    """A folder of a dataset's split files without the datasets markers is read as plain
    files, every split's together: ``--split test`` would have been ignored."""
    import datasets

    files = tmp_path / "download" / "data"
    files.mkdir(parents=True)
    (files / "train-0.jsonl").write_text(
        "".join(json.dumps({"text": d}) + "\n" for d in documents(30, 1))
    )
    (files / "test-0.jsonl").write_text(
        "".join(json.dumps({"text": d}) + "\n" for d in documents(10, 2))
    )
    for given, said in (({"split": "test"}, "--split test chooses"),
                        ({"hf_config": "en"}, "--hf-config en chooses"),
                        ({"split": "test", "hf_config": "en"}, "--split test and --hf-config en choose")):  # fmt: skip
        with pytest.raises(ConfigError, match=f"^{said} from a datasets source.*no input is one"):
            run([tmp_path / "download"], tmp_path / "out", small_tokenizer, **given)
        assert not (tmp_path / "out").exists()
    # With a datasets source among the inputs, the split chooses its rows.
    saved = tmp_path / "saved"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": documents(20, 3)}),
                          "test": datasets.Dataset.from_dict({"text": documents(7, 4)})}).save_to_disk(saved)  # fmt: skip
    out = tmp_path / "mixed"
    result = run([saved, files / "train-0.jsonl"], out, small_tokenizer, split="test")
    assert result.documents_read == 7 + 30
    # A later run into that folder may repeat its split while it adds plain files only (a
    # script passing the same options to every run); another split is still a mistake.
    more = tmp_path / "more.txt"
    more.write_text("\n\n".join(documents(5, 5)) + "\n")
    assert run([more], out, small_tokenizer, split="test").documents_read == 5
    with pytest.raises(ConfigError, match=r"^--split validation chooses from a datasets source"):
        run([tmp_path / "download"], out, small_tokenizer, split="validation")


def test_inputs_of_other_fields_and_splits_join_a_folder(small_tokenizer: Path, tmp_path: Path):
    """The text field, split and configuration choose the text of one input: recorded with it,
    not for the folder, so that a folder of text files takes a JSONL file whose text is in
    another field, and a dataset's other split. An input already in the folder, given with
    another choice, is refused (skipping it would leave out the text asked for)."""
    import datasets

    out = tmp_path / "out"
    plain = tmp_path / "a.txt"
    plain.write_text("\n\n".join(documents(20, 1)) + "\n")
    run([plain], out, small_tokenizer)
    body = tmp_path / "b.jsonl"
    body.write_text("".join(json.dumps({"body": d}) + "\n" for d in documents(15, 2)))
    assert run([body], out, small_tokenizer, text_field="body").documents_read == 15
    saved = tmp_path / "saved"
    datasets.DatasetDict({"train": datasets.Dataset.from_dict({"text": documents(9, 3)}),
                          "test": datasets.Dataset.from_dict({"text": documents(4, 4)})}).save_to_disk(saved)  # fmt: skip
    assert run([saved], out, small_tokenizer, split="test").documents_read == 4
    metadata = json.loads((out / "dataset_metadata.json").read_text())
    reads = {Path(e["name"]).name: e.get("read") for e in metadata["inputs"]}
    assert reads == {"a.txt": None, "b.jsonl": {"text_field": "body"},
                     "saved": {"text_field": "text", "split": "test", "hf_config": None}}  # fmt: skip
    # The same input again with another choice: refused, naming what differs.
    with pytest.raises(ConfigError, match=r"b\.jsonl is in .* already, read with other options "
                       r"\(text_field 'body' then, 'text' now\)"):  # fmt: skip
        run([body], out, small_tokenizer)
    with pytest.raises(ConfigError, match=r"split 'test' then, 'train' now"):
        run([saved], out, small_tokenizer)
    # ... and with the same choices, nothing to do.
    assert run([plain, body], out, small_tokenizer, text_field="body").nothing_to_do
    # The shards are those of one folder made in the same order from the start.
    one = tmp_path / "one"
    run([plain], one, small_tokenizer)
    run([body], one, small_tokenizer, text_field="body")
    run([saved], one, small_tokenizer, split="test")
    shards = lambda folder: {p.relative_to(folder).as_posix(): p.read_bytes()  # noqa: E731
                             for p in sorted(folder.rglob("*.bin"))}  # fmt: skip
    assert shards(out) == shards(one) and shards(out)


def test_doc_per_line_and_invalid_utf8_policy(small_tokenizer: Path, tmp_path: Path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"first document on one line\nsecond document, bad \xff byte\n")
    result = run([path], tmp_path / "o1", small_tokenizer, doc_per_line=True, val_fraction=0)
    assert result.documents_read == 2 and result.invalid_utf8 == 1
    reference = Tokenizer.from_file(str(small_tokenizer))
    got = split_documents(read_split(tmp_path / "o1", "train"), result.eos_id)
    assert got[1] == reference.encode("second document, bad \ufffd byte").ids
    with pytest.raises(InputError, match=r"a\.txt: line 2: invalid UTF-8 at byte offset 48"):
        run([path], tmp_path / "o2", small_tokenizer, invalid_utf8="fail")
    blocks = run([path], tmp_path / "o3", small_tokenizer, val_fraction=0)
    assert blocks.documents_read == 1  # without --doc-per-line the two lines are one block


def test_a_folder_recording_the_text_field_for_itself_still_guards_its_inputs(
    small_tokenizer: Path, tmp_path: Path
):
    """Folders written before inputs recorded their text field hold it in their options: an
    input of theirs given with another field is refused by that record."""
    out = tmp_path / "out"
    body = tmp_path / "b.jsonl"
    body.write_text("".join(json.dumps({"body": d}) + "\n" for d in documents(15, 2)))
    run([body], out, small_tokenizer, text_field="body")
    path = out / "dataset_metadata.json"
    metadata = json.loads(path.read_text())
    for entry in metadata["inputs"]:
        del entry["read"]
    metadata["options"].update(text_field="body", split="train", hf_config=None)
    path.write_text(json.dumps(metadata))
    with pytest.raises(ConfigError, match=r"text_field 'body' then, 'text' now"):
        run([body], out, small_tokenizer)
    assert run([body], out, small_tokenizer, text_field="body").nothing_to_do
    # A run that adds an input writes options without the field: the older input's entry
    # keeps it, and guards it still.
    plain = tmp_path / "a.txt"
    plain.write_text("\n\n".join(documents(5, 5)) + "\n")
    run([plain], out, small_tokenizer)
    metadata = json.loads(path.read_text())
    assert "text_field" not in metadata["options"]
    assert [e.get("read") for e in metadata["inputs"]] == [{"text_field": "body"}, None]
    with pytest.raises(ConfigError, match=r"text_field 'body' then, 'text' now"):
        run([body], out, small_tokenizer)


def test_a_copy_of_an_input_given_with_another_field_is_refused(
    small_tokenizer: Path, tmp_path: Path
):
    """A copy is known by its content and skipped; asked for with another text field than its
    original was read with, skipping it would leave that text out."""
    out = tmp_path / "out"
    rows = "".join(json.dumps({"text": d, "body": d.upper()}) + "\n" for d in documents(15, 2))
    (tmp_path / "a.jsonl").write_text(rows)
    (tmp_path / "b.jsonl").write_text(rows)
    run([tmp_path / "a.jsonl"], out, small_tokenizer)
    said = r"b\.jsonl \(the same content as .*a\.jsonl\) is in .* \(text_field 'text' then, 'body' now\)"
    with pytest.raises(ConfigError, match=said):
        run([tmp_path / "b.jsonl"], out, small_tokenizer, text_field="body")
    assert run([tmp_path / "b.jsonl"], out, small_tokenizer).nothing_to_do


def test_prepare_and_its_plan_give_each_option_the_same_default():
    """`prepare`'s keyword defaults are written out again in `plan_run`'s signature (which
    `check_options` reads): a default changed in one only would plan one run and do another."""
    import inspect

    from data_io.prepare.api import prepare
    from data_io.prepare.run_plan import plan_run

    def defaults(function) -> dict:
        parameters = inspect.signature(function).parameters.values()
        return {p.name: p.default for p in parameters if p.kind is p.KEYWORD_ONLY}

    ours, planned = defaults(prepare), defaults(plan_run)
    shared = set(ours) & set(planned)
    assert len(shared) >= 20  # the options, not a few names in common by chance
    assert {name: ours[name] for name in shared} == {name: planned[name] for name in shared}
