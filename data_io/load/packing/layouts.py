"""Turn sampled rows into the arrays of one batch, vectorised with numpy (no torch here).

A sampled row is an instruction ``i`` (BOQ … EOQ) and a response ``o`` (… EOA), both slices of
the token pool. Two layouts:

* ``packed_prefixlm`` — formats.md §5, the HRM-Text trainer's layout: the rows of one rank and
  step back to back in one ``capacity``-token row; per row ``inputs = i + o[:-1]``, labels shifted
  left by one (``[-100] * (len(i) - 1) + o`` when ``target_only``), positions restarting at 0.
* ``padded_causal`` — one row per sample, Hugging Face convention: ``input_ids = i + o``,
  ``labels`` aligned with ``input_ids`` (the model shifts them), instruction masked with -100 when
  ``target_only``, ``attention_mask`` 1 on real tokens; right-padded.

Both gather every token of the batch with a single fancy index into the pool, so the work per
batch is a handful of numpy calls whatever the number of rows.
"""

from __future__ import annotations

import numpy as np

from data_io.errors import InputError

__all__ = [
    "IGNORE_INDEX",
    "PACKED_KEYS",
    "PADDED_KEYS",
    "PAD_ID",
    "SCALAR_KEYS",
    "packed_prefixlm",
    "padded_causal",
]

IGNORE_INDEX = -100  # label of positions without a loss (PyTorch cross-entropy's ignore_index)
PAD_ID = 0  # input id of padding positions (the original pads with 0 too)
PACKED_KEYS = ("input_ids", "labels", "position_ids", "cu_seqlens", "prefix_lens", "causal_lens")
PADDED_KEYS = ("input_ids", "labels", "attention_mask")
# Per-batch integers the HRM-Text attention kernel wants on the host, not the GPU.
SCALAR_KEYS = (
    "total_seqlen",
    "numseqs",
    "max_seqlen_prefix",
    "max_seqlen_causal",
    "max_seqlen_all",
)


def _gather_rows(
    tokens: np.ndarray,
    rows: np.ndarray,
    ist: np.ndarray,
    il: np.ndarray,
    rst: np.ndarray,
    rl: np.ndarray,
    vocab_size: int | None,
) -> np.ndarray:
    """Tokens of ``i + o`` for every row, back to back (one fancy index into the pool)."""
    seg_start = np.stack((ist, rst), axis=1).ravel()
    seg_len = np.stack((il, rl), axis=1).ravel()
    seg_at = np.cumsum(seg_len) - seg_len  # where each segment lands in the output
    total = int(seg_len.sum())
    source = np.arange(total, dtype=np.int64) + np.repeat(seg_start - seg_at, seg_len)
    full = np.asarray(tokens[source])
    if full.size and vocab_size is not None:
        low, high = int(full.min()), int(full.max())
        if low < 0 or high >= vocab_size:
            bad = (full < 0) | (full >= vocab_size)
            row_of = np.repeat(rows, il + rl)
            at = int(np.argmax(bad))
            raise InputError(
                f"tokens.npy: epoch row {int(row_of[at])} holds token id {int(full[at])}, outside "
                f"the vocabulary (tokenizer_info.vocab_size={vocab_size}); the token pool and "
                "metadata.json come from different runs: re-run `data_io sample`"
            )
    return full


def packed_prefixlm(
    tokens: np.ndarray,
    rows: np.ndarray,
    ist: np.ndarray,
    il: np.ndarray,
    rst: np.ndarray,
    rl: np.ndarray,
    capacity: int,
    *,
    target_only: bool = True,
    vocab_size: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """One packed row: int32 ``(len(PACKED_KEYS), capacity)`` and int64 scalars (SCALAR_KEYS).

    ``rows`` are the epoch row numbers (for error messages); the other arrays are those rows'
    entries of the epoch index, int64, in packing order.
    """
    n = int(rows.shape[0])
    if n >= capacity:
        # cu_seqlens holds n + 1 boundaries in a capacity-long array.
        raise InputError(
            f"{n} rows packed into one {capacity}-token row leave no room for cu_seqlens; rows of "
            "1 token are not trainable: re-sample with min_resp_length >= 2"
        )
    full = _gather_rows(tokens, rows, ist, il, rst, rl, vocab_size)
    full_len = il + rl
    full_at = np.cumsum(full_len) - full_len
    row_len = full_len - 1  # what a row occupies once shifted
    used = int(row_len.sum())

    keep_input = np.ones(full.shape[0], dtype=bool)
    keep_input[full_at + full_len - 1] = False  # the last token (EOA) is never an input
    keep_label = np.ones(full.shape[0], dtype=bool)
    keep_label[full_at] = False  # the first token (BOQ) is never a label

    row_at = np.cumsum(row_len) - row_len
    position = np.arange(used, dtype=np.int32) - np.repeat(row_at, row_len).astype(np.int32)

    # All six arrays are rows of one buffer, and the scalars one small array: a batch is then two
    # storages, which is what DataLoader workers pay shared-memory transfers for.
    out = np.zeros((len(PACKED_KEYS), capacity), dtype=np.int32)
    input_ids, labels, position_ids, cu_seqlens, prefix_lens, causal_lens = out
    labels[used:] = IGNORE_INDEX  # padding: input PAD_ID (0), label -100, position 0
    input_ids[:used] = full[keep_input]
    labels[:used] = full[keep_label]
    position_ids[:used] = position
    if target_only:
        # Labels at positions 0 .. len(i) - 2 would be instruction tokens: not supervised.
        labels[:used][position < np.repeat(il - 1, row_len)] = IGNORE_INDEX

    prefix_lens[:n] = il
    causal_lens[:n] = rl - 1
    cu_seqlens[1 : n + 1] = np.cumsum(row_len)
    scalars = np.array(
        [used, n, int(il.max()), int(rl.max()) - 1, int(row_len.max())] if n else [0] * 5,
        dtype=np.int64,
    )
    return out, scalars


def padded_causal(
    tokens: np.ndarray,
    rows: np.ndarray,
    ist: np.ndarray,
    il: np.ndarray,
    rst: np.ndarray,
    rl: np.ndarray,
    *,
    pad_to: int | None = None,
    target_only: bool = True,
    vocab_size: int | None = None,
) -> np.ndarray:
    """int64 ``(len(PADDED_KEYS), rows, width)``: one row per sample, right-padded to ``pad_to``
    or else to the longest row of the batch."""
    full = _gather_rows(tokens, rows, ist, il, rst, rl, vocab_size)
    full_len = il + rl
    width = int(full_len.max()) if pad_to is None else int(pad_to)
    n = int(rows.shape[0])
    # Flat position of every token in the (n, width) output: row * width + column.
    row_at = np.cumsum(full_len) - full_len
    col = np.arange(full.shape[0]) - np.repeat(row_at, full_len)
    flat = col + np.repeat(np.arange(n) * width, full_len)

    out = np.empty((len(PADDED_KEYS), n * width), dtype=np.int64)  # one buffer, as above
    input_ids, labels, attention_mask = out
    input_ids.fill(PAD_ID)
    labels.fill(IGNORE_INDEX)
    attention_mask.fill(0)
    input_ids[flat] = full
    attention_mask[flat] = 1
    if target_only:
        supervised = col >= np.repeat(il, full_len)
        labels[flat[supervised]] = full[supervised]
    else:
        labels[flat] = full
    return out.reshape(len(PADDED_KEYS), n, width)
