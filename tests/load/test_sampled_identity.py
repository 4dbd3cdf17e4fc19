"""A saved loader state resumes only the sample it was saved on (issue 9: nothing mixed).

Two samples of one corpus with different seeds have the same row count but other rows in every
position; a state from one must be refused by the other, whether the folders carry the
sampler's marker or come from the original pipeline (no marker).
"""

from __future__ import annotations

import io
import json
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from sampled_fixture import write_sampled

from data_io.errors import ConfigError
from data_io.formats.sampled import folder_identity, read_metadata
from data_io.load import ResumableDataLoader, SampledDataset
from data_io.sampling import parse_overrides, sample
from data_io.sampling.synthetic import random_task, write_corpus

BML = 160  # tokens per packed row: fits every row of both kinds of folder below


def sample_corpus(corpus: Path, out: Path, seed: int) -> Path:
    sample(
        parse_overrides(
            [
                f"tokenized_path={corpus}",
                f"output_path={out}",
                f"prefix_config_path={corpus.parent / 'rules.yaml'}",
                f"seed={seed}",
                "epochs=2",
                "context_size=120",
                "plot=false",
            ]
        ),
        stdout=io.StringIO(),
        progress=False,
    )
    return out


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Sampler-built folders: seed 0, seed 1, and seed 0 again in another place."""
    root = tmp_path_factory.mktemp("marker")
    rng = np.random.default_rng(5)
    tasks = {"a.jsonl": random_task(rng, 120, max_inst=60, max_resp=60)}
    tasks["b.jsonl"] = random_task(rng, 80, max_inst=40, max_resp=70)
    corpus = write_corpus(root / "tok", tasks, vocab_size=300)
    (root / "rules.yaml").write_text("[]\n")
    return {
        "seed0": sample_corpus(corpus, root / "seed0", 0),
        "seed1": sample_corpus(corpus, root / "seed1", 1),
        "seed0_again": sample_corpus(corpus, root / "elsewhere" / "seed0", 0),
    }


def same(a: list[dict[str, torch.Tensor]], b: list[dict[str, torch.Tensor]]) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
        for x, y in zip(a, b, strict=True)
    )


def stop_and_save(path: Path, stop: int, epoch: int = 1) -> tuple[list, dict]:
    loader = ResumableDataLoader(SampledDataset(path, epoch=epoch, batch_max_length=BML))
    it = iter(loader)
    head = [next(it) for _ in range(stop)]
    # Through pickle, as a checkpoint would store it.
    return head, pickle.loads(pickle.dumps(loader.state_dict()))


def test_other_seed_same_row_count_is_refused(sampled: dict[str, Path]) -> None:
    a, b = SampledDataset(sampled["seed0"], epoch=1), SampledDataset(sampled["seed1"], epoch=1)
    assert a.num_rows == b.num_rows  # the old check (row count) could not tell them apart
    _, state = stop_and_save(sampled["seed0"], 3)
    target = ResumableDataLoader(SampledDataset(sampled["seed1"], epoch=0, batch_max_length=BML))
    with pytest.raises(ConfigError) as caught:
        target.load_state_dict(state)
    message = str(caught.value)
    # Which folder, seed and epoch it came from, and which it is loaded into.
    assert f"saved on sampled folder {sampled['seed0']} (seed 0, epoch 1, marker" in message
    assert f"loaded into {sampled['seed1']} (seed 1, epoch 0, marker" in message
    assert "different samples" in message and "step 0" in message
    # Refused before anything changed: the target still starts its own epoch 0 at step 0.
    assert target.dataset.epoch == 0
    assert target.state_dict()["base_step"] == 0


def test_same_folder_resumes_bit_identically(sampled: dict[str, Path]) -> None:
    reference = list(SampledDataset(sampled["seed0"], epoch=1, batch_max_length=BML))
    assert len(reference) > 4
    for stop in (0, 2, len(reference) - 1):
        head, state = stop_and_save(sampled["seed0"], stop)
        assert state["folder"]["kind"] == "marker" and state["folder"]["seed"] == 0
        resumed = ResumableDataLoader(
            SampledDataset(sampled["seed0"], epoch=0, batch_max_length=BML), num_workers=1
        )
        resumed.load_state_dict(state)
        assert same(head + list(resumed), reference), f"stop={stop}"


def test_same_sample_rebuilt_elsewhere_resumes(sampled: dict[str, Path]) -> None:
    # Same inputs, config and code: the same rows, so a state moves with it (another node).
    reference = list(SampledDataset(sampled["seed0"], epoch=1, batch_max_length=BML))
    head, state = stop_and_save(sampled["seed0"], 2)
    resumed = SampledDataset(sampled["seed0_again"], epoch=1, batch_max_length=BML)
    resumed.load_state_dict(state)
    assert same(head + list(resumed), reference)
    # The state now names the folder it was loaded into.
    assert resumed.state_dict()["folder"]["path"] == str(sampled["seed0_again"])


def test_marker_identity_follows_the_marker(sampled: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(sampled["seed0"], copy)
    ident = folder_identity(copy, read_metadata(copy))
    assert ident == folder_identity(sampled["seed0"], read_metadata(sampled["seed0"]))
    meta = json.loads((copy / "metadata.json").read_text())
    meta["data_io"]["code"] += "-changed"
    (copy / "metadata.json").write_text(json.dumps(meta))
    assert folder_identity(copy, read_metadata(copy)).digest != ident.digest


# -- folders written by the original pipeline (no marker) ----------------------------------


@pytest.fixture
def original(tmp_path: Path) -> dict[str, Path]:
    """Original-format folders of one corpus (same rows, same lengths) with two seeds."""
    return {
        "seed0": write_sampled(tmp_path / "o0", n_rows=80, epochs=2, seed=0).path,
        "seed1": write_sampled(tmp_path / "o1", n_rows=80, epochs=2, seed=0).path,
    }


def reshuffle(folder: Path, epoch: int, seed: int) -> None:
    """Another seed's order of the same rows (what re-sampling with another seed does)."""
    order = np.random.default_rng(seed).permutation(80)
    for name in ("inst_start", "inst_len", "resp_start", "resp_len"):
        path = folder / f"epoch_{epoch}" / f"{name}.npy"
        np.save(path, np.load(path)[order])


def test_original_format_folder_loads_and_resumes(original: dict[str, Path]) -> None:
    path = original["seed0"]
    reference = list(SampledDataset(path, epoch=1, batch_max_length=BML))
    head, state = stop_and_save(path, 3)
    assert state["folder"]["kind"] == "content" and state["folder"]["seed"] is None
    resumed = SampledDataset(path, epoch=1, batch_max_length=BML)
    resumed.load_state_dict(state)
    assert same(head + list(resumed), reference)


def test_original_format_other_order_is_refused(original: dict[str, Path]) -> None:
    reshuffle(original["seed1"], epoch=1, seed=7)
    _, state = stop_and_save(original["seed0"], 2)
    with pytest.raises(ConfigError, match=r"original-format folder, seed not recorded, epoch 1"):
        SampledDataset(original["seed1"], batch_max_length=BML).load_state_dict(state)


def test_original_format_identity_sees_other_epochs_and_metadata(
    original: dict[str, Path],
) -> None:
    def digest(path: Path) -> str:
        return folder_identity(path, read_metadata(path)).digest

    a, b = original["seed0"], original["seed1"]
    assert digest(a) == digest(b)  # identical content, different paths
    reshuffle(b, epoch=0, seed=3)  # an epoch other than the one being resumed
    assert digest(a) != digest(b)
    shutil.rmtree(b)
    shutil.copytree(a, b)
    meta = json.loads((b / "metadata.json").read_text())
    meta["total_length"] += 1
    (b / "metadata.json").write_text(json.dumps(meta))
    assert digest(a) != digest(b)


def test_large_epoch_fingerprint_samples_the_whole_array(tmp_path: Path) -> None:
    # Beyond 64 runs of 512 elements only samples are hashed; a reorder anywhere is still seen.
    path = write_sampled(tmp_path / "big", n_rows=50, epochs=1).path
    for name in ("inst_start", "inst_len", "resp_start", "resp_len"):
        column = path / "epoch_0" / f"{name}.npy"
        np.save(column, np.tile(np.load(column), 2000))  # 100,000 rows, every row repeated
    before = folder_identity(path, read_metadata(path)).digest
    assert SampledDataset(path, batch_max_length=BML).num_rows == 100_000
    starts = np.load(path / "epoch_0" / "inst_start.npy")
    starts[60_000:] = np.random.default_rng(1).permutation(starts[60_000:])
    np.save(path / "epoch_0" / "inst_start.npy", starts)
    assert folder_identity(path, read_metadata(path)).digest != before


# -- states from before folders were recorded, and malformed states ------------------------


def legacy(state: dict) -> dict:
    """The same position as data_io wrote it before state version 2."""
    old = {k: v for k, v in state.items() if k != "folder"}
    old["version"] = 1
    return old


def test_legacy_state_is_refused_clearly_and_accepted_on_request(sampled: dict[str, Path]) -> None:
    reference = list(SampledDataset(sampled["seed0"], epoch=1, batch_max_length=BML))
    head, state = stop_and_save(sampled["seed0"], 2)
    target = SampledDataset(sampled["seed0"], epoch=1, batch_max_length=BML)
    with pytest.raises(
        ConfigError, match=r"version 1\) was saved by an older data_io.*check_folder=False"
    ):
        target.load_state_dict(legacy(state))
    target.load_state_dict(legacy(state), check_folder=False)
    # Re-saved as a current state naming this folder.
    assert target.state_dict()["version"] == 3  # the current version
    assert target.state_dict()["folder"]["digest"] == state["folder"]["digest"]
    assert same(head + list(target), reference)


def test_check_folder_false_still_checks_rows_and_settings(
    sampled: dict[str, Path], original: dict[str, Path]
) -> None:
    _, state = stop_and_save(original["seed0"], 1)  # 80 rows per epoch
    with pytest.raises(ConfigError, match=r"has \d+ rows, the saved state had 80"):
        SampledDataset(sampled["seed0"], batch_max_length=BML).load_state_dict(
            state, check_folder=False
        )
    with pytest.raises(ConfigError, match="batch_max_length: saved 160, now 150"):
        SampledDataset(original["seed0"], batch_max_length=150).load_state_dict(
            state, check_folder=False
        )


@pytest.mark.parametrize("drop", ["epoch", "config", "base_step", "yielded"])
def test_incomplete_state_is_refused(original: dict[str, Path], drop: str) -> None:
    _, state = stop_and_save(original["seed0"], 1)
    del state[drop]
    with pytest.raises(ConfigError, match=f"not a complete SampledDataset state.*{drop}"):
        SampledDataset(original["seed0"], batch_max_length=BML).load_state_dict(state)
