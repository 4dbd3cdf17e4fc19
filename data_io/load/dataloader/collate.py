"""Whole batches at once: ``get_batch(indices)`` on a dataset, and the DataLoader plumbing for it.

A dataset that can build a batch itself (``MemoryMappedDataset``, ``MixtureDataset``) reads every
window straight into the batch's arrays and packs the whole batch with one set of numpy
operations, instead of making ``batch_size`` small dicts of tensors and stacking them. Inside a
DataLoader worker the batch's tensors are allocated in shared memory from the start (as torch's
``default_collate`` does), so handing them to the main process copies nothing more. Datasets
without ``get_batch`` are fetched item by item and collated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, default_collate, get_worker_info

from data_io.load.packing.layouts import IGNORE_INDEX
from data_io.load.protocols import BatchSource, provides

__all__ = ["BatchedView", "collate_samples", "new_batch_tensor", "pack_rows"]


def new_batch_tensor(shape: tuple[int, ...], dtype: torch.dtype = torch.int64) -> torch.Tensor:
    """An uninitialised tensor, in shared memory when made inside a DataLoader worker."""
    if get_worker_info() is None:
        return torch.empty(shape, dtype=dtype)
    numel = int(np.prod(shape))
    storage = torch.empty(0, dtype=dtype)._typed_storage()._new_shared(numel, device="cpu")
    return torch.empty(0, dtype=dtype).new(storage).view(shape)


def pack_rows(
    input_ids: torch.Tensor,
    labels: torch.Tensor,
    eos_token_id: int,
    *,
    position_ids: bool = False,
    cu_seqlens: bool = False,
) -> dict[str, torch.Tensor]:
    """Pack rows of ``(input_ids, labels)`` (labels = input shifted by one) in place.

    An EOS belongs to the document it ends: where the input is an EOS, its label (the next
    document's first token) becomes ``IGNORE_INDEX``. ``doc_ids`` numbers the documents of each
    row from 0; ``position_ids`` restart at 0 per document; ``cu_seqlens`` are the document
    boundaries of the flattened ``(rows * context)`` token stream (int32), what varlen attention
    kernels take for a whole batch.
    """
    inputs, targets = input_ids.numpy(), labels.numpy()
    rows, context = inputs.shape
    ends = inputs == eos_token_id
    targets[ends] = IGNORE_INDEX
    doc = new_batch_tensor((rows, context))
    doc_np = doc.numpy()
    doc_np[:, 0] = 0
    np.cumsum(ends[:, :-1], axis=1, out=doc_np[:, 1:])
    batch = {"input_ids": input_ids, "labels": labels, "doc_ids": doc}
    if position_ids or cu_seqlens:
        # Input t starts a document when it is its row's first token or follows an EOS.
        starts = np.empty((rows, context), dtype=bool)
        starts[:, 0] = True
        starts[:, 1:] = ends[:, :-1]
        if position_ids:
            positions = new_batch_tensor((rows, context))
            index = np.broadcast_to(np.arange(context, dtype=np.int64), (rows, context))
            last_start = np.where(starts, index, 0)
            np.maximum.accumulate(last_start, axis=1, out=last_start)
            np.subtract(index, last_start, out=positions.numpy())
            batch["position_ids"] = positions
        if cu_seqlens:
            bounds = np.flatnonzero(starts.ravel())
            out = new_batch_tensor((bounds.shape[0] + 1,), torch.int32)
            out_np = out.numpy()
            out_np[:-1] = bounds
            out_np[-1] = rows * context
            batch["cu_seqlens"] = out
    return batch


def cu_seqlens_from_doc_ids(doc_ids: torch.Tensor) -> torch.Tensor:
    """Document boundaries of the flattened batch, from each row's ``doc_ids`` (int32)."""
    doc = doc_ids.numpy()
    rows, context = doc.shape
    starts = np.empty((rows, context), dtype=bool)
    starts[:, 0] = True
    np.not_equal(doc[:, 1:], doc[:, :-1], out=starts[:, 1:])
    bounds = np.flatnonzero(starts.ravel())
    out = new_batch_tensor((bounds.shape[0] + 1,), torch.int32)
    out.numpy()[:-1] = bounds
    out.numpy()[-1] = rows * context
    return out


def collate_items(dataset: Any, indices: Sequence[int]) -> dict[str, torch.Tensor]:
    """``dataset.get_batch(indices)``, or its items fetched one by one and collated."""
    if provides(dataset, BatchSource):
        return dataset.get_batch(indices)
    return collate_samples([dataset[int(i)] for i in indices])


class BatchedView(Dataset):
    """What the loader hands torch's DataLoader: one "item" per batch of indices.

    torch calls ``__getitems__`` with a batch's indices; the whole batch comes back as the
    list's single element, and the DataLoader's ``collate_fn`` (``first``) unwraps it.
    """

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return collate_items(self.dataset, [index])

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, torch.Tensor]]:
        return [collate_items(self.dataset, indices)]


def first(batches: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return batches[0]


def collate_samples(samples: Sequence[Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Stack samples into a batch; ``cu_seqlens`` become the flattened batch's boundaries.

    Varlen attention kernels take one ``cu_seqlens`` for the whole ``(batch * context)`` token
    stream, so sample ``i``'s boundaries are shifted by ``i * context`` and joined.
    """
    if not samples:
        raise ValueError("cannot collate an empty batch")
    keys = list(samples[0])
    batch: dict[str, torch.Tensor] = {}
    for key in keys:
        if key == "cu_seqlens":
            context = samples[0]["input_ids"].shape[-1]
            parts = [samples[0]["cu_seqlens"]]
            parts += [s["cu_seqlens"][1:] + i * context for i, s in enumerate(samples) if i]
            batch[key] = torch.cat(parts).to(torch.int32)
        else:
            # default_collate stacks straight into shared memory inside a worker, saving the
            # copy that sending a batch to the main process would otherwise make.
            batch[key] = default_collate([s[key] for s in samples])
    return batch
