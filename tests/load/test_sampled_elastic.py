"""Elastic resume of ``SampledDataset``: a state saved at one world size resumes at another.

The oracle is independent of the scheduler: every fixture row carries its own tag token, so
the rows a batch holds are read off the batch itself. Across the stop, the job as a whole must
see a prefix of the epoch's row order, each row exactly once, and the rows it never sees must be
exactly the ones the resumed dataset's summary reports as dropped.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from sampled_fixture import ROW_TAG, Sampled, write_sampled

from data_io.errors import ConfigError
from data_io.load import ResumableDataLoader, SampledDataset

pytestmark = [
    pytest.mark.filterwarnings("ignore:This DataLoader will create"),
    pytest.mark.filterwarnings("ignore:'set_vital' is deprecated"),
]
N_ROWS = 240
EPOCH = 1


@pytest.fixture(scope="module")
def sampled(tmp_path_factory: pytest.TempPathFactory) -> Sampled:
    return write_sampled(tmp_path_factory.mktemp("elastic"), n_rows=N_ROWS, epochs=2)


def tags(batch: dict[str, torch.Tensor]) -> list[int]:
    """The pool rows a batch holds, read from their tag tokens."""
    ids = batch["input_ids"].reshape(-1).numpy()
    return (ids[(ids >= ROW_TAG) & (ids < ROW_TAG + N_ROWS)] - ROW_TAG).tolist()


def settings(layout: str, world: int, rank: int) -> dict:
    if layout == "prefixlm_packed":  # the trainer's global batch in tokens, split over ranks
        return {
            "layout": layout,
            "batch_max_length": 384 // world,
            "rank": rank,
            "world_size": world,
        }
    return {"layout": layout, "batch_size": 12 // world, "rank": rank, "world_size": world}


def run_ranks(sampled, layout, world, state=None, steps=None, workers=0):
    """Every rank's rows, step by step, and rank 0's state after ``steps`` steps."""
    seen: list[list[int]] = []
    saved = None
    for rank in range(world):
        dataset = SampledDataset(sampled.path, epoch=EPOCH, **settings(layout, world, rank))
        loader = ResumableDataLoader(dataset, num_workers=workers)
        if state is not None:
            loader.load_state_dict(state)
        rows: list[int] = []
        for batch in itertools.islice(loader, steps):  # exactly `steps` batches taken
            rows += tags(batch)
        if rank == 0 and steps is not None:
            saved = loader.state_dict()
        seen.append(rows)
    return seen, saved, dataset


@pytest.mark.parametrize("layout", ["prefixlm_packed", "causal_padded"])
@pytest.mark.parametrize(("before", "after"), [(2, 3), (3, 1), (1, 4), (4, 2)])
@pytest.mark.parametrize("stop", [0, 1, 5])
def test_no_row_twice_none_skipped(sampled: Sampled, layout, before, after, stop):
    order = sampled.epochs[EPOCH].tolist()  # pool row of every epoch row
    first, state, _ = run_ranks(sampled, layout, before, steps=stop)
    head = sorted(r for rows in first for r in rows)
    assert head == sorted(order[: len(head)])  # a prefix of the epoch, each row once
    second, _, resumed = run_ranks(
        sampled, layout, after, state=state, workers=2 if after < 3 else 0
    )
    tail = sorted(r for rows in second for r in rows)
    assert tail == sorted(order[len(head) : len(head) + len(tail)])
    assert resumed.row_offset == len(head)
    dropped = resumed.summary()["rows_dropped"]
    assert len(head) + len(tail) + sum(dropped.values()) == N_ROWS


def test_a_resumed_state_resumes_again_at_a_third_size(sampled: Sampled):
    layout = "prefixlm_packed"
    order = sampled.epochs[EPOCH].tolist()
    a, state_a, _ = run_ranks(sampled, layout, 2, steps=3)
    b, state_b, _ = run_ranks(sampled, layout, 3, state=state_a, steps=2)
    assert state_b["row_offset"] == sum(map(len, a))
    c, _, _ = run_ranks(sampled, layout, 1, state=state_b)
    rows = [r for part in (a, b, c) for rows in part for r in rows]
    assert len(rows) == len(set(rows))
    assert sorted(rows) == sorted(order[: len(rows)])


def test_same_world_size_resumes_the_exact_batches(sampled: Sampled):
    """After an elastic resume, saving and resuming at the same size is exact, batch by batch."""
    layout = "prefixlm_packed"
    _, state, _ = run_ranks(sampled, layout, 2, steps=4)

    def resumed(saved: dict) -> SampledDataset:
        dataset = SampledDataset(sampled.path, epoch=EPOCH, **settings(layout, 3, 1))
        dataset.load_state_dict(saved)
        return dataset

    reference = list(resumed(state))
    assert len(reference) > 3
    loader = ResumableDataLoader(resumed(state))
    it = iter(loader)
    head = [next(it) for _ in range(2)]
    rest = list(ResumableDataLoader(resumed(loader.state_dict())))
    assert len(head) + len(rest) == len(reference)
    for got, want in zip(head + rest, reference, strict=True):
        assert all(torch.equal(got[k], want[k]) for k in want)


def test_worker_state_cannot_change_topology(sampled: Sampled):
    layout = "prefixlm_packed"
    dataset = SampledDataset(sampled.path, epoch=EPOCH, **settings(layout, 2, 0))
    state = dataset.state_dict()
    state.update(num_workers=3, worker_id=1)
    moved = SampledDataset(sampled.path, epoch=EPOCH, **settings(layout, 3, 0))
    with pytest.raises(ConfigError, match=r"another topology .*ResumableDataLoader\.state_dict"):
        moved.load_state_dict(state)


def rank_batches(sampled: Sampled, layout: str, rank: int) -> list[dict[str, torch.Tensor]]:
    return list(SampledDataset(sampled.path, epoch=EPOCH, **settings(layout, 2, rank)))


def same_batches(a: list[dict[str, torch.Tensor]], b: list[dict[str, torch.Tensor]]) -> bool:
    return len(a) == len(b) and all(
        x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
        for x, y in zip(a, b, strict=True)
    )


@pytest.mark.parametrize("layout", ["prefixlm_packed", "causal_padded"])
@pytest.mark.parametrize("workers", [0, 2])
def test_rank_0s_state_resumes_every_rank_of_the_same_world_size(sampled: Sampled, layout, workers):
    """A trainer that saves the data state from rank 0 only loads it on every rank: ranks take
    the same steps, so rank 1 continues with exactly its own remaining batches."""
    stop = 3
    loader = ResumableDataLoader(
        SampledDataset(sampled.path, epoch=EPOCH, **settings(layout, 2, 0))
    )
    for _ in itertools.islice(loader, stop):
        pass
    state = loader.state_dict()
    for rank in (0, 1):
        dataset = SampledDataset(sampled.path, epoch=EPOCH, **settings(layout, 2, rank))
        resumed = ResumableDataLoader(dataset, num_workers=workers)
        resumed.load_state_dict(state)
        assert resumed.state_dict()["config"]["rank"] == rank  # saved again as this rank's
        tail = list(resumed)
        assert same_batches(tail, rank_batches(sampled, layout, rank)[stop:])
        assert resumed.state_dict()["config"]["rank"] == rank


def test_another_ranks_dataset_state_resumes_this_rank(sampled: Sampled):
    """The same for the dataset's own state (torchdata's StatefulDataLoader saves it)."""
    layout = "causal_padded"
    source = SampledDataset(sampled.path, epoch=EPOCH, **settings(layout, 2, 1))
    for _ in itertools.islice(source, 2):
        pass
    other = SampledDataset(sampled.path, epoch=EPOCH, **settings(layout, 2, 0))
    other.load_state_dict(source.state_dict())
    assert same_batches(list(other), rank_batches(sampled, layout, 0)[2:])


def test_another_ranks_state_with_other_settings_is_refused(sampled: Sampled):
    """Only the rank may differ at the same world size: a changed setting is still named."""
    state = SampledDataset(
        sampled.path, epoch=EPOCH, **settings("causal_padded", 2, 0)
    ).state_dict()
    other = SampledDataset(
        sampled.path, epoch=EPOCH, target_only=False, **settings("causal_padded", 2, 1)
    )
    with pytest.raises(
        ConfigError, match=r"settings changed \(target_only: saved True, now False\);"
    ):
        other.load_state_dict(state)


def test_other_settings_still_refused(sampled: Sampled):
    state = SampledDataset(
        sampled.path, epoch=EPOCH, **settings("prefixlm_packed", 2, 0)
    ).state_dict()
    moved = SampledDataset(
        sampled.path, epoch=EPOCH, target_only=False, **settings("prefixlm_packed", 3, 0)
    )
    with pytest.raises(ConfigError, match=r"target_only: saved True, now False"):
        moved.load_state_dict(state)


@pytest.mark.parametrize("value", [-1, N_ROWS + 1, "3", True])
def test_a_damaged_row_offset_is_refused(sampled: Sampled, value):
    dataset = SampledDataset(sampled.path, epoch=EPOCH, **settings("causal_padded", 2, 0))
    state = dataset.state_dict()
    state["row_offset"] = value
    with pytest.raises(ConfigError, match=r"row_offset is"):
        dataset.load_state_dict(state)


@pytest.mark.parametrize("layout", ["prefixlm_packed", "causal_padded"])
@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("base_step", "3", r"base_step is '3', not an integer >= 0"),
        ("base_step", 3.0, r"base_step is 3.0, not an integer >= 0"),
        ("yielded", None, r"yielded is None, not an integer >= 0"),
        ("yielded", -1, r"yielded is -1, not an integer >= 0"),
        ("epoch", "1", r"epoch is '1', not an integer >= 0"),
        ("num_workers", 0, r"num_workers is 0, not an integer >= 1"),
        ("worker_id", 5, r"worker_id 5 of 1 workers"),
        ("base_step", 10**6, r"the state is at step 1000000 of epoch 1, which has \d+ steps"),
    ],
)
def test_a_damaged_position_is_refused_at_load(sampled: Sampled, layout, key, value, message):
    """Before: a wrong type raised TypeError at the next iteration, yielded=-1 served the last
    batch again and a step past the end resumed into an empty epoch, all without a word."""
    loader = ResumableDataLoader(
        SampledDataset(sampled.path, epoch=EPOCH, **settings(layout, 1, 0))
    )
    next(iter(loader))
    state = loader.state_dict()
    state[key] = value
    resumed = ResumableDataLoader(
        SampledDataset(sampled.path, epoch=EPOCH, **settings(layout, 1, 0))
    )
    with pytest.raises(ConfigError, match=message):
        resumed.load_state_dict(state)


@pytest.mark.parametrize(("key", "value"), [("world_size", "2"), ("batch_max_length", None)])
def test_a_damaged_saved_topology_is_refused_before_an_elastic_resume(sampled: Sampled, key, value):
    state = SampledDataset(
        sampled.path, epoch=EPOCH, **settings("prefixlm_packed", 2, 0)
    ).state_dict()
    state["config"][key] = value
    moved = SampledDataset(sampled.path, epoch=EPOCH, **settings("prefixlm_packed", 3, 0))
    with pytest.raises(ConfigError, match=rf"config\.{key} is {value!r}, not an integer >= 1"):
        moved.load_state_dict(state)


def test_a_state_saved_at_the_end_of_the_epoch_still_loads(sampled: Sampled):
    for layout in ("prefixlm_packed", "causal_padded"):
        loader = ResumableDataLoader(
            SampledDataset(sampled.path, epoch=EPOCH, **settings(layout, 2, 1))
        )
        served = len(list(loader))
        state = loader.state_dict()
        assert state["base_step"] == served > 0
        resumed = ResumableDataLoader(
            SampledDataset(sampled.path, epoch=EPOCH, **settings(layout, 2, 1))
        )
        resumed.load_state_dict(state)
        assert list(resumed) == []


def test_older_state_without_row_offset_still_resumes(sampled: Sampled):
    layout = "causal_padded"
    loader = ResumableDataLoader(
        SampledDataset(sampled.path, epoch=EPOCH, **settings(layout, 1, 0))
    )
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    del state["row_offset"]
    state["version"] = 2
    resumed = SampledDataset(sampled.path, epoch=EPOCH, **settings(layout, 1, 0))
    resumed.load_state_dict(state)
    expected = SampledDataset(sampled.path, epoch=EPOCH, **settings(layout, 1, 0)).batch_at(1)
    assert torch.equal(next(iter(resumed))["input_ids"], expected["input_ids"])


def test_a_state_refused_after_its_epoch_was_opened_leaves_the_dataset_where_it_was(
    tmp_path,
) -> None:
    write_sampled(tmp_path / "s", n_rows=60, epochs=2)
    ds = SampledDataset(tmp_path / "s", epoch=0, batch_max_length=96)
    first = next(iter(ds))
    state = SampledDataset(tmp_path / "s", epoch=1, batch_max_length=96).state_dict()
    state["config"]["num_rows"] = 7  # refused once epoch 1 is open: its rows are counted there
    with pytest.raises(ConfigError, match=r"epoch 1 of .* has 60 rows, the saved state had 7"):
        ds.load_state_dict(state)
    assert ds.epoch == 0 and ds.num_rows == 60
    again = next(iter(ds))
    assert all(torch.equal(torch.as_tensor(first[k]), torch.as_tensor(again[k])) for k in first)
