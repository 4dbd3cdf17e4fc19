"""data_io.inspect: validation and description of shard, tokenized and sampled folders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from data_io.errors import DataIoError, InputError
from data_io.inspect import inspect_path
from tests.prepare.helpers import documents, write_txt
from tests.prepare.test_api import REPO, run
from tests.sampled_fixture import write_sampled


@pytest.fixture()
def prepared(small_tokenizer: Path, tmp_path: Path) -> Path:
    docs = documents(300, seed=21)
    write_txt(tmp_path / "a.txt", docs)
    out = tmp_path / "out"
    run([tmp_path / "a.txt"], out, small_tokenizer, val_fraction=0.2)
    return out


def test_prepared_folder_is_valid_and_decodes_its_first_documents(prepared: Path):
    report = inspect_path(prepared, documents=2)
    assert report.ok, report.problems
    assert report.kind == "prepare shard folder" and report.facts["dtype"] == "uint16"
    meta = json.loads((prepared / "dataset_metadata.json").read_text())
    assert [r["documents"] for r in report.tables["splits"]] == [
        meta["splits"][s]["documents"] for s in ("train", "val")
    ]
    assert len(report.samples) == 2 and report.samples[0].startswith("doc ")


def test_char_folder_decodes_with_its_state(tmp_path: Path):
    write_txt(tmp_path / "a.txt", ["first document of text", "second document of text"])
    run([tmp_path / "a.txt"], tmp_path / "out", "char", val_fraction=0.0)
    report = inspect_path(tmp_path / "out")
    assert report.ok and report.samples == ["first document of text", "second document of text"]


def test_changed_shard_is_found(prepared: Path):
    shard = prepared / "train" / "shard_00000.bin"
    data = bytearray(shard.read_bytes())
    data[10] ^= 1
    shard.write_bytes(bytes(data))
    report = inspect_path(prepared)
    assert any("shard_00000.bin: content differs" in p for p in report.problems)
    assert inspect_path(prepared, verify=False).ok  # sizes and ids alone still agree


def test_truncated_missing_and_stray_files_are_found(prepared: Path):
    train = prepared / "train"
    (train / "shard_00001.bin").write_bytes((train / "shard_00001.bin").read_bytes()[:-2])
    (train / "shard_00002.bin").unlink()
    (train / ".shard_00009.bin.tmp").write_bytes(b"")
    (prepared / ".prepare" / "journal.json").write_text("{}")
    problems = "\n".join(inspect_path(prepared).problems)
    assert "shard_00001.bin: 998 bytes, expected 1000" in problems
    assert "shard_00002.bin: missing" in problems
    assert ".shard_00009.bin.tmp: a temporary file of an unfinished run" in problems
    assert "a run was interrupted" in problems
    # The shards' own problems are the report: no EOS count of a split read in part, and no
    # blame on the tokenizer for a memory map of a shard cut short.
    assert "EOS tokens in the shards" not in problems
    assert "cannot decode documents" not in problems


def test_a_truncated_shard_is_the_one_problem_not_a_cascade(prepared: Path):
    shard = prepared / "train" / "shard_00000.bin"
    shard.write_bytes(shard.read_bytes()[:-3])
    problems = inspect_path(prepared, documents=2).problems
    assert len(problems) == 1 and "shard_00000.bin: " in problems[0], problems
    assert "the shard is truncated or was replaced" in problems[0]


def test_a_later_shard_missing_does_not_hide_a_missing_tokenizer(prepared: Path):
    """Documents are decoded from the first train shard: only that one must be whole."""
    shards = sorted((prepared / "train").glob("shard_*.bin"))
    assert len(shards) >= 2
    (prepared / "tokenizer.json").unlink()
    shards[-1].unlink()
    problems = inspect_path(prepared, documents=2).problems
    assert any("cannot decode documents with the saved tokenizer" in p for p in problems)
    assert any(f"{shards[-1].name}: missing" in p for p in problems)


def test_a_whole_shard_with_an_eos_overwritten_is_counted(prepared: Path):
    """Sizes agree, so the EOS count is checked: one end of document gone is found."""
    meta = json.loads((prepared / "dataset_metadata.json").read_text())
    eos, dtype = meta["eos_id"], np.dtype(meta["dtype"])
    shard = prepared / "train" / "shard_00000.bin"
    tokens = np.fromfile(shard, dtype=dtype)
    first_eos = int(np.flatnonzero(tokens == eos)[0])
    tokens[first_eos] = 0 if eos else 1
    tokens.tofile(shard)
    problems = "\n".join(inspect_path(prepared, verify=False).problems)
    documents = meta["splits"]["train"]["documents"]
    assert f"EOS tokens in the shards, the metadata records {documents} documents" in problems


def test_unlisted_file_is_reported_with_what_to_do(prepared: Path):
    (prepared / "train" / "notes.bin").write_bytes(b"\x00\x00")
    problems = inspect_path(prepared).problems
    assert len(problems) == 1 and "notes.bin: a file the metadata does not list" in problems[0]
    assert "move it out" in problems[0]


def test_eos_that_text_can_produce_is_not_a_problem(small_tokenizer: Path, tmp_path: Path):
    """With an ordinary token as EOS, documents may hold it: the count is a lower bound."""
    docs = [f"sentence one. sentence two. document {i}." for i in range(40)]
    write_txt(tmp_path / "a.txt", docs)
    out = tmp_path / "out"
    run([tmp_path / "a.txt"], out, small_tokenizer, eos_token=".", val_fraction=0.0)
    report = inspect_path(out)
    assert report.ok, report.problems
    assert report.facts["train_eos_inside_text"] >= 3 * len(docs)
    shard = sorted((out / "train").glob("*.bin"))[0]
    shard.write_bytes(shard.read_bytes()[: -2 * 10])  # cut: fewer EOS than documents
    assert any("bytes, expected" in p for p in inspect_path(out).problems)


def test_flat_folder_without_prepare_metadata(
    prepared: Path, small_tokenizer: Path, tmp_path: Path
):
    report = inspect_path(prepared / "train")
    assert report.ok and report.kind == "train split of a prepare shard folder"
    assert report.notes[-1].endswith(
        f"inspected here as flat shards; `data_io inspect {prepared}` checks the shards against "
        "its dataset_metadata.json (sizes, SHA-256, one EOS per document) and decodes documents "
        "with the saved tokenizer"
    )
    meta = json.loads((prepared / "dataset_metadata.json").read_text())
    assert report.facts["tokens"] == meta["splits"]["train"]["tokens"]
    assert report.facts["shards"] == len(meta["splits"]["train"]["shards"])
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "s.bin").write_bytes(b"\x00" * 8)
    assert "without a declared token dtype" in inspect_path(bare).problems[0]
    report = inspect_path(prepared / "train", tokenizer=str(small_tokenizer), documents=2)
    assert len(report.samples) == 1 and len(report.samples[0]) > 100  # the stream's head


def test_an_empty_split_of_a_prepare_folder_is_recognised(
    prepared: Path, small_tokenizer: Path, tmp_path: Path
):
    """An empty val/ (val_fraction 0) was "the folder is empty; pass a prepare, flat shard, ..."
    and exit 1, though prepare wrote it so; a split whose shards were deleted is a problem
    that says so, and a malformed parent metadata sends the user to inspect the parent."""
    write_txt(tmp_path / "a.txt", documents(40, seed=3))
    out = tmp_path / "no_val"
    run([tmp_path / "a.txt"], out, small_tokenizer, val_fraction=0.0)
    report = inspect_path(out / "val")
    assert report.ok and report.kind == "val split of a prepare shard folder"
    assert report.facts == {"shards": 0, "tokens": 0}
    assert (
        "prepare wrote no val shard (its dataset_metadata.json records none, val_fraction 0)"
        in report.notes[0]
    )
    assert f"`data_io inspect {out}` checks" in report.notes[0]
    assert inspect_path(out).ok
    for shard in (prepared / "val").iterdir():
        shard.unlink()
    listed = len(
        json.loads((prepared / "dataset_metadata.json").read_text())["splits"]["val"]["shards"]
    )
    report = inspect_path(prepared / "val")
    assert report.problems == [
        f"{prepared / 'val'}: no shard here, and {prepared / 'dataset_metadata.json'} lists "
        f"{listed} for the val split: they were moved or deleted; restore them or re-prepare "
        f"into a new folder. `data_io inspect {prepared}` checks the shards against its "
        "dataset_metadata.json (sizes, SHA-256, one EOS per document) and decodes documents "
        "with the saved tokenizer"
    ]
    meta = json.loads((out / "dataset_metadata.json").read_text())
    del meta["splits"]["val"]
    (out / "dataset_metadata.json").write_text(json.dumps(meta))
    report = inspect_path(out / "val")
    assert report.problems == [
        f"{out / 'val'}: no shard here, and {out / 'dataset_metadata.json'} is malformed; "
        f"`data_io inspect {out}` says what is wrong with it"
    ]


def test_flat_folder_with_a_declared_eos_decodes_documents(
    prepared: Path, small_tokenizer: Path, tmp_path: Path
):
    meta = json.loads((prepared / "dataset_metadata.json").read_text())
    flat = tmp_path / "flat"
    flat.mkdir()
    for shard in (prepared / "train").glob("*.bin"):
        (flat / shard.name).write_bytes(shard.read_bytes())
    declared = {"dtype": meta["dtype"], "eos_id": meta["eos_id"]}
    (flat / "dataset_metadata.json").write_text(json.dumps(declared))
    report = inspect_path(flat, tokenizer=str(small_tokenizer), documents=2)
    assert report.ok, report.problems
    assert report.samples == inspect_path(prepared, documents=2).samples


def test_sampled_folder(tmp_path: Path):
    write_sampled(tmp_path / "sampled", n_rows=50, epochs=2)
    report = inspect_path(tmp_path / "sampled")
    assert report.ok and report.kind == "sampled folder"
    assert [e["epoch"] for e in report.tables["epochs"]] == [0, 1]
    np.save(tmp_path / "sampled" / "epoch_1" / "inst_len.npy", np.zeros(3, dtype=np.int64))
    assert inspect_path(tmp_path / "sampled").problems


def test_tokenized_folder(rows_dir: Path, small_tokenizer: Path, tmp_path: Path):
    from data_io.tokenize import tokenize

    tokenize([rows_dir], tmp_path / "tok", tokenizer_path=small_tokenizer, progress=False)
    report = inspect_path(tmp_path / "tok", documents=1)
    assert report.ok and report.facts["tasks"] > 0 and len(report.samples) == 1
    task = next(p for p in (tmp_path / "tok").iterdir() if p.is_dir())
    np.save(task / "resp_len.npy", np.zeros(1, dtype=np.uint64))
    assert any("disagree on the row count" in p for p in inspect_path(tmp_path / "tok").problems)


def test_a_tokenized_folder_of_an_interrupted_run_is_noted_as_sample_notes_it(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path
):
    """A run stopped midway left a temporary and files without their tasks: inspect said
    "ok" where sample warned."""
    import shutil

    from data_io.tokenize import tokenize

    out = tmp_path / "tok"
    tokenize([rows_dir], out, tokenizer_path=small_tokenizer, progress=False)
    assert inspect_path(out).notes == []
    lost = next(p for p in sorted(out.iterdir()) if p.is_dir())
    shutil.rmtree(lost)  # as if its tokenize had not run yet
    (out / ".data_io-tmp-x.jsonl-123").mkdir()
    report = inspect_path(out)
    assert report.ok
    assert any("1 half-written folder of an interrupted tokenize run" in n for n in report.notes)
    assert any(
        f"1 row file under the tokenizer's inputs has no task in {out} ({lost.name})" in n
        and "a sample of this folder would leave them out" in n
        for n in report.notes
    ), report.notes


def test_not_a_folder(tmp_path: Path):
    with pytest.raises(InputError, match="not a folder"):
        inspect_path(tmp_path / "nope")


def test_cli_exit_codes(prepared: Path):
    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "data_io", "inspect", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )

    good = cli(str(prepared))
    assert good.returncode == 0 and "prepare shard folder" in good.stdout and "ok" in good.stdout
    (prepared / "val" / "shard_00000.bin").write_bytes(b"")
    bad = cli(str(prepared), "--json")
    assert bad.returncode == 1 and json.loads(bad.stdout)["ok"] is False


def test_missing_tokenizer_and_broken_metadata_are_reported(prepared: Path, tmp_path: Path):
    (prepared / "tokenizer.json").unlink()
    report = inspect_path(prepared, documents=2)
    assert not report.ok
    assert any("cannot decode documents with the saved tokenizer" in p for p in report.problems)
    (prepared / "dataset_metadata.json").write_text("{broken")
    report = inspect_path(prepared, documents=2)
    assert not report.ok
    assert any("dataset_metadata.json: unreadable" in p for p in report.problems)


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (lambda m: m.pop("dtype"), "'dtype' is None, not an integer dtype"),
        (lambda m: m.update(dtype="float7"), "'dtype' is 'float7'"),
        (lambda m: m.update(splits={}), "'splits.train' has no list of shards"),
        (
            lambda m: m["splits"]["train"]["shards"][0].update(tokens="x"),
            "'splits.train.shards' holds",
        ),
    ],
)
def test_malformed_prepare_metadata_is_a_problem_not_a_traceback(prepared: Path, edit, said: str):
    path = prepared / "dataset_metadata.json"
    meta = json.loads(path.read_text())
    edit(meta)
    path.write_text(json.dumps(meta))
    report = inspect_path(prepared)
    assert not report.ok and report.kind == "prepare shard folder (malformed metadata)"
    assert len(report.problems) == 1 and said in report.problems[0], report.problems
    assert report.problems[0].startswith(f"{path}: ") and "re-prepare" in report.problems[0]
    cli = subprocess.run(
        [sys.executable, "-m", "data_io", "inspect", str(prepared)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert cli.returncode == 1 and "Traceback" not in cli.stderr and said in cli.stdout


@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (lambda t: np.save(t / "tokens.npy", np.load(t / "tokens.npy").astype(np.float32)),
         "tokens.npy has dtype <f4; token ids must be <u4, <u2 or u1"),
        (lambda t: np.save(t / "tokens.npy", np.load(t / "tokens.npy").astype(np.int64) - 5),
         "tokens.npy has dtype <i8"),
        (lambda t: np.save(t / "inst_start.npy", np.load(t / "inst_start.npy") + 10**9),
         "a response must follow its instruction"),
        (lambda t: np.save(t / "inst_len.npy", -np.load(t / "inst_len.npy").astype(np.int64)),
         "inst_len.npy row 0 is negative"),
    ],
)  # fmt: skip
def test_a_tokenized_task_that_sample_refuses_is_a_problem(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path, damage, said: str
):
    """inspect said "ok" of float or signed token ids and of rows pointing outside the pool,
    which `data_io sample` then refused: it runs sample's own checks of each task."""
    from data_io.tokenize import tokenize

    tokenize([rows_dir], tmp_path / "tok", tokenizer_path=small_tokenizer, progress=False)
    task = min(p for p in (tmp_path / "tok").iterdir() if p.is_dir())
    damage(task)
    report = inspect_path(tmp_path / "tok")
    assert not report.ok
    assert any(p.startswith(f"task {task.name}: ") and said in p for p in report.problems), (
        report.problems
    )
    assert any(f"delete {task} and re-run `data_io tokenize" in p for p in report.problems)
    assert task.name not in [row["task"] for row in report.tables["tasks"]]


@pytest.mark.parametrize(
    ("content", "said"), [("garbage", "cannot be read as JSON"), ("[]", "must hold a JSON object")]
)
def test_an_unreadable_tokenizer_info_is_a_problem_not_a_traceback(
    rows_dir: Path, small_tokenizer: Path, tmp_path: Path, content: str, said: str
):
    from data_io.tokenize import tokenize

    tokenize([rows_dir], tmp_path / "tok", tokenizer_path=small_tokenizer, progress=False)
    (tmp_path / "tok" / "tokenizer_info.json").write_text(content)
    report = inspect_path(tmp_path / "tok")
    assert not report.ok and report.kind == "tokenized folder"
    assert report.problems[0].startswith(f"{tmp_path / 'tok' / 'tokenizer_info.json'} {said}")


def _with_marker(folder: Path, epochs: int) -> None:
    """The sampler's marker block and counts (write_sampled writes the original's metadata)."""
    meta = json.loads((folder / "metadata.json").read_text())
    tokens = np.load(folder / "tokens.npy", mmap_mode="r")
    rows = len(np.load(folder / "epoch_0" / "inst_len.npy"))
    meta.update(
        {
            "data_io": {"inputs": "x", "config": {"seed": 0}, "code": "test"},
            "token_dtype": tokens.dtype.name,
            "epochs": epochs,
            "rows_per_epoch": rows,
            "num_tokens": len(tokens),
        }
    )
    (folder / "metadata.json").write_text(json.dumps(meta))


def test_a_sampled_folder_that_lost_an_epoch_is_a_problem(tmp_path: Path):
    """The loader refuses a folder missing an epoch metadata.json promises; inspect said ok."""
    import shutil

    write_sampled(tmp_path / "sampled", n_rows=20, epochs=2)
    _with_marker(tmp_path / "sampled", epochs=2)
    assert inspect_path(tmp_path / "sampled").ok
    shutil.rmtree(tmp_path / "sampled" / "epoch_1")
    report = inspect_path(tmp_path / "sampled")
    assert not report.ok
    assert report.problems == [
        f"{tmp_path / 'sampled'}: epoch_1 missing, though metadata.json says epochs 0..1 were "
        "sampled; the folder is incomplete: re-run `data_io sample` to rebuild the folder"
    ]


def test_a_sampled_folder_whose_tokenizer_is_gone_says_why_no_rows_are_decoded(
    tmp_path: Path, small_tokenizer: Path
):
    write_sampled(tmp_path / "sampled", n_rows=20, epochs=1, vocab_size=600)
    report = inspect_path(tmp_path / "sampled", documents=2)  # its tokenizer_path is "x"
    assert report.ok and report.samples == []
    assert report.notes == ["rows not decoded: the tokenizer x is not here; pass --tokenizer PATH"]
    with pytest.raises(DataIoError, match=r"tokenizer /nonexistent\.json does not exist"):
        inspect_path(tmp_path / "sampled", documents=2, tokenizer="/nonexistent.json")
    meta = json.loads((tmp_path / "sampled" / "metadata.json").read_text())
    del meta["tokenizer_info"]["tokenizer_path"]  # none recorded: not "the tokenizer None"
    (tmp_path / "sampled" / "metadata.json").write_text(json.dumps(meta))
    report = inspect_path(tmp_path / "sampled", documents=2)
    assert report.notes == ["rows not decoded: no tokenizer is recorded; pass --tokenizer PATH"]
    report = inspect_path(tmp_path / "sampled", documents=2, tokenizer=str(small_tokenizer))
    assert report.ok and len(report.samples) == 2 and report.notes == []


def test_documents_must_not_be_negative(prepared: Path, capsys: pytest.CaptureFixture[str]):
    """--documents -1 decoded all documents but the last (a slice from the end)."""
    from data_io.cli import main
    from data_io.errors import ConfigError

    for bad, said in (("-1", "must be 0 or more, got -1"), ("x", "'x' is not an integer")):
        with pytest.raises(SystemExit) as stop:
            main(["inspect", str(prepared), "--documents", bad])
        assert stop.value.code == 2 and f"argument --documents: {said}" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="documents must be an integer >= 0, got -2"):
        inspect_path(prepared, documents=-2)
    assert inspect_path(prepared, documents=0).samples == []
