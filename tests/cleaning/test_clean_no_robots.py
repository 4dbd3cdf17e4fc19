"""pipe.clean_no_robots on a local copy in the `hf download HuggingFaceH4/no_robots` layout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from data_io.errors import InputError
from pipe.clean_no_robots import CLEANER

from .upstream import read_jsonl, write_hub_copy

REPO_ROOT = Path(__file__).resolve().parents[2]


def _conversation(*turns: tuple[str, str], category: str = "Chat") -> dict:
    # The upstream columns, the unused ones included.
    messages = [{"content": content, "role": role} for role, content in turns]
    first_user = next((content for role, content in turns if role == "user"), "")
    return {"prompt": first_user, "prompt_id": "0" * 64, "messages": messages, "category": category}


TRAIN = [
    _conversation(
        ("user", "  Write a haiku about rain. "), ("assistant", "Soft rain on the roof\n")
    ),
    _conversation(
        ("system", "You are Ünï, a terse bot."),
        ("user", "Hi!"),
        ("assistant", "Hello."),
        ("user", "A later turn, ignored."),
        ("assistant", "Ignored too."),
    ),
    _conversation(("user", "Only one message")),
    _conversation(("system", "A system message and"), ("user", "no assistant")),
    _conversation(("assistant", "Assistant first"), ("user", "then user")),
    _conversation(("system", "s"), ("assistant", "a"), ("user", "u")),
    _conversation(("user", "u1"), ("user", "u2"), ("assistant", "a")),
    {**_conversation(("user", "x")), "messages": [{"content": None, "role": "user"}] * 2},
    {
        **_conversation(("user", "x")),
        "messages": [
            {"content": None, "role": "system"},
            {"content": "u", "role": "user"},
            {"content": "a", "role": "assistant"},
        ],
    },
    {
        **_conversation(("user", "x")),
        "messages": [{"content": "u", "role": "user"}, {"content": None, "role": "assistant"}],
    },
]
TEST = [_conversation(("system", ""), ("user", "From the test split"), ("assistant", "Kept."))]
# Every split in the dataset's order (train, then test); nothing stripped.
EXPECTED = [
    {
        "condition": "cot",
        "instruction": "  Write a haiku about rain. ",
        "response": "Soft rain on the roof\n",
    },
    {"condition": "cot", "instruction": "You are Ünï, a terse bot.\n\nHi!", "response": "Hello."},
    {"condition": "cot", "instruction": "\n\nFrom the test split", "response": "Kept."},
]


def _copy(root: Path, train: list[dict], test: list[dict]) -> Path:
    return write_hub_copy(root, {("default", "train"): train, ("default", "test"): test})


def test_first_exchange_of_every_split(tmp_path: Path) -> None:
    out = tmp_path / "no_robots.jsonl"
    report = CLEANER.run(_copy(tmp_path / "copy", TRAIN, TEST), out, progress=False)
    assert read_jsonl(out) == EXPECTED
    assert report.records == 11 and report.rows_written == 3
    assert dict(report.drops) == {
        "fewer than 2 messages": 1,
        "not (system,) user, assistant": 5,
        "null message content": 2,
    }


def test_null_messages_names_the_row(tmp_path: Path) -> None:
    train = [*TRAIN[:2], {**TRAIN[0], "messages": None}]
    out = tmp_path / "out.jsonl"
    with pytest.raises(InputError) as caught:
        CLEANER.run(_copy(tmp_path / "copy", train, TEST), out, progress=False)
    message = str(caught.value)
    assert "cannot clean" in message and "default/train row 2" in message
    assert "TypeError" in message
    assert not out.exists()


def test_module_without_network_or_copy_says_what_to_download(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "pipe.clean_no_robots"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert (
        "hf download HuggingFaceH4/no_robots --repo-type dataset "
        "--local-dir raw_data/hub/HuggingFaceH4/no_robots"
    ) in done.stderr
    assert not (tmp_path / "data").exists()
