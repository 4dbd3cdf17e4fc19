"""Build the embedded example's raw inputs: ``data_io/example_data/raw`` (mirrors ``raw_data/``).

Small made-up datasets in the upstream layouts of four cleaners:

- ``hub/openai/gsm8k``: the folder `hf download openai/gsm8k` produces (Hub style, Parquet);
- ``Platypus/ARB``: the five JSON arrays of `hf download imone/ARB` (raw files);
- ``FLAN/<subset>/part.0.parquet``: `hf download Open-Orca/FLAN` (clustered, grouped by task);
- ``amps.tar.gz``: the AMPS archive, Mathematica part (raw archive, read without extracting).

Run ``python -m tests.cleaning.make_example_raw [FOLDER]`` to rebuild them; the output is
deterministic, and tests/cleaning/test_example_raw.py checks the committed copy against it.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from .upstream import write_hub_copy, write_json, write_parquet, write_tar_gz

DEFAULT = Path(__file__).resolve().parents[2] / "data_io" / "example_data" / "raw"
NAMES = ["Ava", "Ben", "Chloé", "Dmitri", "Esi", "Farah", "Goro", "Hana"]
ITEMS = ["apples", "pencils", "stamps", "marbles", "books", "tickets"]


def _gsm8k(rng: random.Random) -> list[dict]:
    rows = []
    for _ in range(40):
        name, item = rng.choice(NAMES), rng.choice(ITEMS)
        a, b, c = rng.randint(2, 30), rng.randint(2, 9), rng.randint(1, 20)
        total = a * b - c
        rows.append(
            {
                "question": f"{name} buys {b} packs of {a} {item} and gives {c} away. "
                f"How many {item} does {name} keep?",
                "answer": f"{name} buys {a}*{b} = <<{a}*{b}={a * b}>>{a * b} {item}.\n"
                f"After giving {c} away: {a * b}-{c} = <<{a * b}-{c}={total}>>{total}.\n#### {total}",
            }
        )
    return rows


def _arb(rng: random.Random) -> dict[str, list[dict]]:
    files: dict[str, list[dict]] = {}
    for name in ("math", "reading", "law", "science", "physics"):
        items = []
        for _ in range(6):
            x, y = rng.randint(2, 50), rng.randint(2, 50)
            if name == "law":
                items.append(
                    {
                        "instruction": f"A contract names {x} parties and {y} obligations. Which clause governs?\n"
                        "A. the first\nB. the second\nC. the third\nD. none",
                        "response": rng.choice("ABCD"),
                    }
                )
            else:
                items.append(
                    {
                        "instruction": f"In this {name} problem, combine {x} and {y}: what is their product?",
                        "response": f"The product of {x} and {y} is {x}×{y} = {x * y}.",
                    }
                )
        files[f"{name}.json"] = items
    return files


def _flan(rng: random.Random) -> dict[str, dict[str, list]]:
    shards: dict[str, dict[str, list]] = {}
    tasks = {
        "cot_zsopt_data": ["cot_gsm8k", "cot_esnli"],
        "flan_zsopt_data": ["glue/sst2:2.0.0", "anli/r1:0.1.0"],
        "niv2_zsopt_data": [
            "task001_quoref_question_generation",
            "task1391_winogrande_easy_answer_generation",
        ],
    }
    for subset, names in tasks.items():
        columns: dict[str, list] = {"inputs": [], "targets": [], "_template_idx": [], "_task_source": [],
                                    "_task_name": [], "_template_type": []}  # fmt: skip
        for index in range(12):
            task = names[index % 2]
            x, y = rng.randint(1, 99), rng.randint(1, 99)
            if subset.startswith("cot"):
                inputs = f"Q: Is {x} + {y} greater than 100? Let's think step by step."
                targets = f"{x} + {y} = {x + y}. {x + y} is {'greater' if x + y > 100 else 'not greater'} than 100. So the answer is {'yes' if x + y > 100 else 'no'}."
            else:
                inputs = f"Sentence: the show had {x} scenes and {y} songs. Is the review positive?"
                targets = rng.choice(["positive", "negative"])
            columns["inputs"].append(inputs)
            columns["targets"].append(targets)
            columns["_template_idx"].append(index % 3)
            columns["_task_source"].append(subset.split("_")[0])
            columns["_task_name"].append(task)
            columns["_template_type"].append("zs_opt")
        shards[f"{subset}/part.0.parquet"] = columns
    return shards


def _amps(rng: random.Random) -> list[tuple[str, bytes]]:
    members: list[tuple[str, bytes]] = [
        ("amps/khan/algebra/1.json", b'{"problem": "2+2", "hints": ["4"]}')
    ]
    for topic, subtask in (("algebra", "linear_equations"), ("calculus", "derivatives_w_steps")):
        for index in range(10):
            a, b = rng.randint(2, 12), rng.randint(1, 40)
            if subtask.endswith("w_steps"):
                text = f"Problem:\nDifferentiate {a}x^2 + {b}x.\nAnswer:\nd/dx {a}x^2 = {2 * a}x; d/dx {b}x = {b}.\n{2 * a}x + {b}"
            else:
                text = f"Problem:\nSolve {a}x = {a * b}.\nAnswer:\nx = {b}"
            members.append((f"amps/mathematica/{topic}/{subtask}/{index}.txt", text.encode()))
    return members


def build(root: Path) -> None:
    rng = random.Random(2026)
    write_hub_copy(root / "hub" / "openai" / "gsm8k", {("main", "train"): _gsm8k(rng)})
    for name, items in _arb(rng).items():
        write_json(root / "Platypus" / "ARB" / name, items)
    for name, columns in _flan(rng).items():
        write_parquet(root / "FLAN" / name, columns)
    write_tar_gz(root / "amps.tar.gz", _amps(rng))


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT)
