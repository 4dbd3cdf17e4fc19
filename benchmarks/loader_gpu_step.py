"""One training step of a tiny model on CUDA from data_io.load batches, and host→device speed.

    .venv/bin/python -m benchmarks.loader_gpu_step                  # generates a tiny sampled folder
    .venv/bin/python -m benchmarks.loader_gpu_step --path /dev/shm/sampled --epoch 0

For each layout it builds a DataLoader (pinned memory, 2 workers), moves batches to the GPU,
runs forward + backward + an optimizer step of a one-block transformer whose attention mask is
derived from the batch (prefix-LM: bidirectional inside each row's instruction, causal after;
rows never see each other), and prints the loss and the host→device throughput. Without CUDA it
says so and exits with status 0: there is nothing to measure.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from data_io.load import ResumableDataLoader, SampledDataset, split_scalars


def tiny_sampled(folder: Path, rows: int = 20_000, vocab: int = 1024, seed: int = 0) -> Path:
    """A small sampled folder (formats.md §4) with random tokens."""
    rng = np.random.default_rng(seed)
    il = rng.integers(4, 200, rows)
    rl = rng.integers(2, 600, rows)
    sizes = il + rl
    starts = np.cumsum(sizes) - sizes
    np.save(folder / "tokens.npy", rng.integers(0, vocab, int(sizes.sum()), dtype=np.uint16))
    (folder / "epoch_0").mkdir()
    order = rng.permutation(rows)
    columns = {"inst_start": starts, "inst_len": il, "resp_start": starts + il, "resp_len": rl}
    for name, values in columns.items():
        np.save(folder / "epoch_0" / f"{name}.npy", values[order].astype("<i8"))
    meta = {
        "tokenizer_info": {"vocab_size": vocab},
        "vocab_size": None,
        "max_seq_len": 1024,
        "total_length": int(sizes.sum()),
    }
    (folder / "metadata.json").write_text(json.dumps(meta))
    return folder


class TinyLM(nn.Module):
    """Embedding, one pre-norm attention + MLP block, output head."""

    def __init__(self, vocab: int, dim: int = 256, heads: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.norm_out = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.heads = heads

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """ids (B, T); mask (B, T, T) True where a query may attend to a key."""
        x = self.embed(ids)
        b, t, d = x.shape
        q, k, v = (
            self.qkv(self.norm1(x))
            .view(b, t, 3, self.heads, d // self.heads)
            .permute(2, 0, 3, 1, 4)
        )
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None])
        x = x + self.out(att.transpose(1, 2).reshape(b, t, d))
        x = x + self.mlp(self.norm2(x))
        return self.head(self.norm_out(x))


def prefixlm_mask(batch: dict[str, torch.Tensor], scalars: dict[str, int]) -> torch.Tensor:
    """(1, T, T) mask from cu_seqlens / prefix_lens; padding attends to itself only."""
    t = batch["input_ids"].shape[0]
    device = batch["input_ids"].device
    n = scalars["numseqs"]
    cu = batch["cu_seqlens"][: n + 1].long()
    lens = cu[1:] - cu[:-1]
    row = torch.repeat_interleave(
        torch.arange(n, device=device), lens, output_size=scalars["total_seqlen"]
    )
    seg = torch.full((t,), -1, device=device, dtype=torch.long)
    seg[: scalars["total_seqlen"]] = row
    pos = batch["position_ids"].long()
    prefix = batch["prefix_lens"][:n].long()[row.clamp(min=0)]
    prefix_all = torch.zeros(t, device=device, dtype=torch.long)
    prefix_all[: scalars["total_seqlen"]] = prefix
    same_row = (seg[:, None] == seg[None, :]) & (seg[:, None] >= 0)
    visible = (pos[None, :] <= pos[:, None]) | (pos[None, :] < prefix_all[:, None])
    mask = same_row & visible
    mask |= torch.eye(t, dtype=torch.bool, device=device)  # padding queries: avoid empty rows
    return mask[None]


def step(
    model: nn.Module,
    optim: torch.optim.Optimizer,
    ids: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor,
) -> float:
    logits = model(ids, mask)
    loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten().long(), ignore_index=-100)
    loss.backward()
    optim.step()
    optim.zero_grad(set_to_none=True)
    return loss.item()


def transfer_rate(
    loader: ResumableDataLoader, batches: int, device: torch.device
) -> tuple[float, float]:
    """(GB/s, tokens/s) moving ``batches`` batches to ``device`` (non-blocking from pinned memory)."""
    it = iter(loader)
    first = next(it)  # workers started
    nbytes = tokens = 0
    torch.cuda.synchronize()
    start = time.perf_counter()
    for batch in [first, *(next(it) for _ in range(batches - 1))]:
        tensors, scalars = split_scalars(batch)
        for value in tensors.values():
            value.to(device, non_blocking=True)
        nbytes += sum(v.numel() * v.element_size() for v in tensors.values())
        tokens += scalars.get(
            "total_seqlen", int(batch.get("attention_mask", torch.zeros(1)).sum())
        )
    torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    return nbytes / elapsed / 1e9, tokens / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--path", type=Path, help="sampled folder (default: generate a tiny one)")
    parser.add_argument("--epoch", type=int, default=0)
    parser.add_argument("--batch-max-length", type=int, default=4096)
    parser.add_argument("--batches", type=int, default=200, help="batches timed for host→device")
    parser.add_argument(
        "--cpu-check",
        action="store_true",
        help="run the two steps on the CPU (no timing): checks the script itself",
    )
    args = parser.parse_args()
    on_cuda = torch.cuda.is_available() and not args.cpu_check
    if not on_cuda and not args.cpu_check:
        print("CUDA is not available on this machine: no GPU step to run, nothing measured.")
        return 0
    device = torch.device("cuda" if on_cuda else "cpu")
    name = torch.cuda.get_device_name(device) if on_cuda else "cpu (check only)"
    print(f"device: {name}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory(prefix="loader-gpu-") as tmp:
        path = args.path or tiny_sampled(Path(tmp))
        meta = json.loads((path / "metadata.json").read_text())
        vocab = int(meta["tokenizer_info"]["vocab_size"])
        model = TinyLM(vocab).to(device)
        optim = torch.optim.AdamW(model.parameters(), lr=1e-3)

        packed = SampledDataset(path, epoch=args.epoch, batch_max_length=args.batch_max_length)
        loader = ResumableDataLoader(packed, num_workers=2, pin_memory=True, prefetch_factor=8)
        batch = next(iter(loader))
        tensors, scalars = split_scalars(batch)
        if on_cuda:
            assert all(v.is_pinned() for v in tensors.values()), "pin_memory did not pin the batch"
        gpu = {k: v.to(device, non_blocking=True) for k, v in tensors.items()}
        mask = prefixlm_mask(gpu, scalars)
        loss = step(model, optim, gpu["input_ids"][None].long(), gpu["labels"][None], mask)
        print(
            f"prefixlm_packed: one step OK, loss {loss:.3f} ({scalars['numseqs']} rows, {scalars['total_seqlen']} tokens)"
        )
        if on_cuda:
            again = ResumableDataLoader(packed, num_workers=2, pin_memory=True, prefetch_factor=8)
            gbps, tps = transfer_rate(again, args.batches, device)
            print(
                f"prefixlm_packed host→device: {gbps:.2f} GB/s, "
                f"{tps / 1e6:.2f} M real tokens/s over {args.batches} batches"
            )

        padded = SampledDataset(path, epoch=args.epoch, layout="causal_padded", batch_size=8)
        batch = next(iter(ResumableDataLoader(padded, num_workers=2, pin_memory=True)))
        gpu = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        t = gpu["input_ids"].shape[1]
        causal = torch.ones(t, t, dtype=torch.bool, device=device).tril()
        mask = causal[None] & gpu["attention_mask"].bool()[:, None, :]
        mask |= torch.eye(t, dtype=torch.bool, device=device)[None]
        # Hugging Face convention: labels align with input_ids, the model's loss shifts them.
        loss = step(model, optim, gpu["input_ids"][:, :-1], gpu["labels"][:, 1:], mask[:, :-1, :-1])
        print(
            f"causal_padded: one step OK, loss {loss:.3f} (batch {tuple(gpu['input_ids'].shape)})"
        )
        if on_cuda:
            again = ResumableDataLoader(padded, num_workers=2, pin_memory=True, prefetch_factor=8)
            gbps, tps = transfer_rate(again, args.batches, device)
            print(
                f"causal_padded host→device: {gbps:.2f} GB/s, "
                f"{tps / 1e6:.2f} M real tokens/s over {args.batches} batches"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
