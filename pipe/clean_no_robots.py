"""No Robots -> ``data/no_robots.jsonl`` (cleaners.md §3.5).

Source: Hub ``HuggingFaceH4/no_robots``, every split in the dataset's order (``train``, then
``test``), or its local copy (``--source`` / ``raw_data/hub/HuggingFaceH4/no_robots``). Field
``messages``: a list of ``{"role", "content"}``; ``prompt``, ``prompt_id`` and ``category`` are
not used.

One ``cot`` row per conversation, from its first exchange only: when the first message is a
``system`` one, its content plus ``\\n\\n`` is put before the user's; then the next message must
be ``user`` and the one after it ``assistant``. Instruction = (system content + ``\\n\\n``) +
user content; response = assistant content; nothing is stripped. Later turns are ignored.

Dropped and counted: conversations with fewer than 2 messages ("fewer than 2 messages") and
those whose first messages are not shaped (system,) user, assistant ("not (system,) user,
assistant"), which includes a system message followed by only one more message. A null
content in the messages used is dropped and counted too ("null message content").

Quirks, decided:
- kept: both splits are used, ``test`` included: No Robots is an instruction set, not a
  benchmark, and the original takes all of it.
- kept: only the first exchange of a multi-turn conversation is used (the rest has no
  single-turn form); no stripping, as in the original.
- decided: a system message followed by a single message has no exchange (cleaners.md does not
  say what the original did with it); it is a counted drop like any misshaped conversation, and
  so is a null content in the messages used.
"""

from collections.abc import Iterator

from data_io.cleaning import Cleaner, Drop, HubDataset, Record, Row, jsonl_file


def clean(record: Record) -> Iterator[Row | Drop]:
    messages = record["messages"]
    if len(messages) < 2:
        yield Drop("fewer than 2 messages")
        return
    prefix = ""
    first = 0
    if messages[0]["role"] == "system":
        prefix = f"{messages[0]['content']}\n\n"  # a null content is dropped below
        first = 1
    if (
        first + 1 >= len(messages)
        or messages[first]["role"] != "user"
        or messages[first + 1]["role"] != "assistant"
    ):
        yield Drop("not (system,) user, assistant")
        return
    used = [message["content"] for message in messages[: first + 2]]
    if None in used:
        yield Drop("null message content")
        return
    yield Row("cot", prefix + used[first], used[first + 1])


CLEANER = Cleaner(
    name="no_robots",
    source=HubDataset("HuggingFaceH4/no_robots", splits=None),
    output=jsonl_file("data/no_robots.jsonl"),
    clean=clean,
    description="No Robots, all splits: first (system +) user turn -> assistant turn (cot).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
