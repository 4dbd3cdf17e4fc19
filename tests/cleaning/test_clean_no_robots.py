"""pipe.clean_no_robots on a local copy in the `hf download HuggingFaceH4/no_robots` layout."""

from __future__ import annotations

from pathlib import Path

from pipe.clean_no_robots import CLEANER

from .upstream import (
    assert_offline_run_names_hub_download,
    read_jsonl,
    row,
    write_hub_copy,
)


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
    row("cot", "  Write a haiku about rain. ", "Soft rain on the roof\n"),
    row("cot", "You are Ünï, a terse bot.\n\nHi!", "Hello."),
    row("cot", "\n\nFrom the test split", "Kept."),
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


def test_null_messages_are_dropped_and_counted(tmp_path: Path) -> None:
    """A null ``messages`` field is dropped and counted by field (the README's promise for
    null fields), not a crash; the other records are cleaned as usual."""
    train = [*TRAIN[:2], {**TRAIN[0], "messages": None}]
    out = tmp_path / "out.jsonl"
    report = CLEANER.run(_copy(tmp_path / "copy", train, TEST), out, progress=False)
    reference = CLEANER.run(_copy(tmp_path / "ref", TRAIN[:2], TEST), tmp_path / "ref.jsonl",
                            progress=False)  # fmt: skip
    assert out.read_bytes() == (tmp_path / "ref.jsonl").read_bytes()
    assert report.records == reference.records + 1
    assert dict(report.drops) == {**dict(reference.drops), "null field: messages": 1}


def test_module_without_network_or_copy_says_what_to_download(tmp_path: Path) -> None:
    assert_offline_run_names_hub_download(
        "pipe.clean_no_robots", tmp_path, "HuggingFaceH4/no_robots"
    )
