"""StatefulLoader: exact resume with the same topology, elastic resume with another one.

An uninterrupted run is compared with one stopped after K steps, its state saved (through JSON,
as a checkpoint would) and resumed with another world size, batch size or number of workers.
Sample ids come from the data itself (``id_shards``), and each step's global order is rebuilt
from the ranks' batches (rank r holds positions r, r + W, ... of the step).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

from data_io.errors import ConfigError
from data_io.load import MemoryMappedDataset, MixtureDataset, StatefulLoader
from data_io.load.order.mixing import resolve_phases
from data_io.load.order.samplers import MixtureOrder, ShuffledOrder
from tests.load.id_shards import SOURCE_STRIDE, sample_ids, write_id_source

WINDOW = 9  # 8 input tokens


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("sources")
    return [
        write_id_source(root / "web", 0, [9 * 150 + 4, 9 * 90]),
        write_id_source(root / "code", 1, [9 * 70]),
        write_id_source(root / "books", 2, [9 * 30 + 8, 9 * 13, 5]),
    ]


def single(folders: list[Path]) -> tuple[MemoryMappedDataset, ShuffledOrder]:
    dataset = MemoryMappedDataset(folders[0], WINDOW)
    return dataset, ShuffledOrder(len(dataset), seed=5)


PHASES = [{"start_step": 7, "dataset_weights": {"web": 0, "code": 1, "books": 3}, "lr_scale": 0.5}]


def mixture(folders: list[Path]) -> tuple[MixtureDataset, MixtureOrder]:
    parts = [MemoryMappedDataset(f, WINDOW) for f in folders]
    names = ["web", "code", "books"]
    phases = resolve_phases(names, [5, 3, 2], 1.5, PHASES)
    return MixtureDataset(parts, names), MixtureOrder([len(p) for p in parts], phases, seed=11)


MAKERS = {"single": single, "mixture": mixture}


def loaders(folders, kind: str, world: int, workers: int, batch: int, state=None):
    made = []
    for rank in range(world):
        dataset, order = MAKERS[kind](folders)
        loader = StatefulLoader(
            dataset,
            order,
            batch_size=batch,
            rank=rank,
            world_size=world,
            num_workers=workers,
            names=getattr(dataset, "names", None),
        )
        if state is not None:
            loader.load_state_dict(json.loads(json.dumps(state)))
        made.append(loader)
    return made


def run(made: list[StatefulLoader], steps: int) -> list[list[int]]:
    """The global order of ``steps`` steps, epochs continuing as a training loop would."""
    iters = [iter(loader) for loader in made]
    world = len(made)
    order = []
    for _ in range(steps):
        per_rank = []
        for i, loader in enumerate(made):
            try:
                batch = next(iters[i])
            except StopIteration:  # the epoch ended: the training loop starts the next one
                iters[i] = iter(loader)
                batch = next(iters[i])
            per_rank.append(sample_ids(batch))
        per_step = len(per_rank[0]) * world
        order.append([per_rank[k % world][k // world] for k in range(per_step)])
    return order


def flat(steps: list[list[int]]) -> list[int]:
    return [i for step in steps for i in step]


TOPOLOGIES = [
    # (world, workers, batch) before -> after
    ((1, 0, 8), (8, 1, 1)),
    ((2, 1, 4), (2, 3, 4)),
    ((8, 3, 1), (1, 0, 8)),
    ((2, 0, 2), (1, 1, 2)),  # the global batch halves
    ((1, 0, 4), (2, 0, 8)),  # and quadruples
]


@pytest.mark.parametrize("kind", ["single", "mixture"])
@pytest.mark.parametrize(("before", "after"), TOPOLOGIES)
def test_resume_continues_the_global_order(folders, kind: str, before, after) -> None:
    g_before, g_after = before[0] * before[2], after[0] * after[2]
    stop = 48 // g_before  # steps before the checkpoint: 48 samples in
    total = 48 + 240  # past the end of an epoch of "single" (240 windows) and of phase 0
    reference = flat(run(loaders(folders, kind, *before), total // g_before))
    first_part = loaders(folders, kind, *before)
    head = flat(run(first_part, stop))
    assert head == reference[:48]
    state = first_part[0].state_dict()
    assert all(loader.state_dict() == state for loader in first_part)  # one state for all ranks
    tail = flat(run(loaders(folders, kind, *after, state=state), 240 // g_after))
    if kind == "single":
        # The order itself does not depend on the step size: exactly the same samples, in order.
        assert tail == reference[48 : 48 + len(tail)]
    else:
        # A mixture shuffles within each step, so compare over blocks aligned to both step sizes.
        block = int(np.lcm(g_before, g_after))
        for start in range(0, len(tail) - block + 1, block):
            got = Counter(tail[start : start + block])
            want = Counter(reference[48 + start : 48 + start + block])
            assert got == want, f"block at {48 + start}"


@pytest.mark.parametrize("kind", ["single", "mixture"])
@pytest.mark.parametrize("workers", [0, 1, 3])
def test_same_topology_resume_gives_identical_batches(folders, kind: str, workers: int) -> None:
    uninterrupted = loaders(folders, kind, 2, workers, 3)
    reference = run(uninterrupted, 40)
    stopped = loaders(folders, kind, 2, workers, 3)
    run(stopped, 13)
    resumed = loaders(folders, kind, 2, workers, 3, state=stopped[1].state_dict())
    assert run(resumed, 27) == reference[13:]


def test_reference_runs_do_not_depend_on_workers(folders) -> None:
    assert run(loaders(folders, "mixture", 2, 0, 3), 9) == run(
        loaders(folders, "mixture", 2, 3, 3), 9
    )


def test_mixture_phase_switches_and_sources_are_counted(folders) -> None:
    (loader,) = loaders(folders, "mixture", 1, 0, 4)
    assert loader.phase == 0 and loader.lr_scale == 1.0
    steps = run([loader], 12)
    assert loader.phase == 1 and loader.lr_scale == 0.5
    sources = [[i // SOURCE_STRIDE for i in step] for step in steps]
    assert all(0 not in s for s in sources[7:])  # web has weight 0 from step 7
    counted = loader.token_counts()
    drawn = Counter(s for step in sources for s in step)
    assert counted == {n: drawn[i] * (WINDOW - 1) for i, n in enumerate(["web", "code", "books"])}


def test_a_pass_over_a_source_repeats_nothing(folders) -> None:
    (loader,) = loaders(folders, "mixture", 1, 0, 10)
    ids = flat(run([loader], 30))
    books = [i for i in ids if i // SOURCE_STRIDE == 2]
    size = len(MemoryMappedDataset(folders[2], WINDOW))
    assert len(books) > size
    assert len(set(books[:size])) == size  # the first pass is a permutation of the source


def test_state_is_small_and_json(folders) -> None:
    (loader,) = loaders(folders, "mixture", 1, 0, 4)
    run([loader], 5)
    state = loader.state_dict()
    # The position itself: a few integers, whatever the size of the data.
    assert len(json.dumps(state["state"])) < 200
    assert len(json.dumps(state)) < 2000


def test_resume_refuses_other_data_or_config(folders, tmp_path: Path) -> None:
    (loader,) = loaders(folders, "single", 1, 0, 4)
    run([loader], 2)
    state = loader.state_dict()
    other_files = MemoryMappedDataset(folders[1], WINDOW)
    with pytest.raises(ConfigError, match=r"saved for other data \(.*data_dir saved .*web"):
        StatefulLoader(
            other_files, ShuffledOrder(len(other_files), 5), batch_size=4
        ).load_state_dict(state)
    dataset = MemoryMappedDataset(folders[0], WINDOW)
    with pytest.raises(ConfigError, match="seed saved 5, now 6"):
        StatefulLoader(dataset, ShuffledOrder(len(dataset), 6), batch_size=4).load_state_dict(state)
    fresh = StatefulLoader(dataset, ShuffledOrder(len(dataset), 5), batch_size=4)
    with pytest.raises(ConfigError, match="not a data_io loader state"):
        fresh.load_state_dict({"epoch": 3})
    with pytest.raises(ConfigError, match="not a data_io loader state"):
        fresh.load_state_dict([1, 2])
    broken = dict(state, state={"epoch": 0})
    with pytest.raises(ConfigError, match="not a shuffled order state"):
        fresh.load_state_dict(broken)


@pytest.mark.parametrize(
    ("kind", "edit", "message"),
    [
        ("single", {"position": -4}, "position must be an integer in"),
        ("single", {"position": 10**6}, "position must be an integer in"),
        ("single", {"position": None}, "position must be an integer"),
        ("single", {"epoch": 1.5}, "epoch must be an integer >= 0"),
        ("mixture", {"position": -100}, "position must be an integer in"),
        ("mixture", {"phase": -1}, r"phase must be an integer in \[0, 1\]"),
        ("mixture", {"phase": 5}, r"phase must be an integer in \[0, 1\]"),
        ("mixture", {"phase_samples": -3}, "phase_samples must be an integer >= 0"),
        ("mixture", {"phase_counts": [0]}, "phase_counts must be 3 integers"),
        ("mixture", {"phase_counts": [0, -1, 2]}, "phase_counts must be 3 integers"),
        # Phase 1 starts at step 7: the state's phase must be the one its step is in.
        ("mixture", {"phase": 1}, r"phase 1 at step 2, where the phases give 0"),
        ("mixture", {"step": 9}, r"phase 0 at step 9, where the phases give 1"),
    ],
)
def test_hand_edited_states_are_checked(folders, kind: str, edit: dict, message: str) -> None:
    (loader,) = loaders(folders, kind, 1, 0, 4)
    run([loader], 2)
    state = loader.state_dict()
    state["state"] = {**state["state"], **edit}
    (fresh,) = loaders(folders, kind, 1, 0, 4)
    with pytest.raises(ConfigError, match=message):
        fresh.load_state_dict(state)


@pytest.mark.parametrize("key", ["fingerprint", "identity", "order", "state"])
def test_a_state_missing_a_key_is_named(folders, key: str) -> None:
    """A state without its fingerprint was refused as one of other data ("the files' names,
    dtypes or lengths differ"), which sent the user after their shards."""
    (loader,) = loaders(folders, "single", 1, 0, 4)
    run([loader], 2)
    state = loader.state_dict()
    del state[key]
    (fresh,) = loaders(folders, "single", 1, 0, 4)
    with pytest.raises(
        ConfigError, match=rf"not a complete data_io loader state \(missing {key}\)"
    ):
        fresh.load_state_dict(state)


def test_mixture_source_change_is_named(folders, tmp_path: Path) -> None:
    (loader,) = loaders(folders, "mixture", 1, 0, 4)
    state = loader.state_dict()
    state["data"]["code"]["tokens"] += 1
    state["fingerprint"] = "other"
    (fresh,) = loaders(folders, "mixture", 1, 0, 4)
    with pytest.raises(ConfigError, match="source code: tokens saved"):
        fresh.load_state_dict(state)


def test_bad_loader_arguments(folders) -> None:
    dataset, order = single(folders)
    with pytest.raises(ConfigError, match="batch_size"):
        StatefulLoader(dataset, order, batch_size=0)
    with pytest.raises(ConfigError, match="num_workers"):
        StatefulLoader(dataset, order, batch_size=1, num_workers=-1)
    with pytest.raises(ConfigError, match="rank"):
        StatefulLoader(dataset, order, batch_size=1, rank=3, world_size=2)
    too_big = StatefulLoader(dataset, order, batch_size=len(dataset) + 1)
    with pytest.raises(ConfigError, match="lower batch_size"):
        next(iter(too_big))


def test_batches_are_tensors_of_the_window(folders) -> None:
    (loader,) = loaders(folders, "single", 1, 0, 4)
    batch = next(iter(loader))
    assert batch["input_ids"].dtype == torch.int64 and batch["input_ids"].shape == (4, 8)
    assert torch.equal(batch["labels"][:, :-1], batch["input_ids"][:, 1:])
    assert len(loader) == 240 // 4 - 1  # one batch taken


def test_lr_scale_inside_the_loop_is_the_batch_being_trained_on(folders) -> None:
    """The phase switches at step 7: the batch of step 7 is the first trained with 0.5, and a
    trainer reads lr_scale right after receiving it (the state has already moved past it)."""
    (loader,) = loaders(folders, "mixture", 1, 0, 4)
    scales, phases, next_phases = [], [], []
    for step, _batch in enumerate(loader):
        scales.append(loader.lr_scale)
        phases.append(loader.phase)
        next_phases.append(loader.next_phase)
        if step == 9:
            break
    assert scales == [1.0] * 7 + [0.5] * 3
    assert phases == [0] * 7 + [1] * 3
    assert next_phases == [0] * 6 + [1] * 4
    state = loader.state_dict()
    (resumed,) = loaders(folders, "mixture", 1, 0, 4, state=state)
    assert resumed.lr_scale == 0.5 and resumed.phase == 1  # before a batch: the next step's
