"""What ``data_io train-tokenizer`` prints of a :class:`TrainResult`: one line, then caveats."""

from __future__ import annotations

from data_io.tokenizer.train import MIN_FREQUENCY, TrainResult


def caveats(result: TrainResult) -> list[str]:
    """What the user asked for and did not get, each on a line of its own."""
    lines = []
    asked = result.requested_vocab_size
    if asked is not None and result.vocab_size < asked:
        lines.append(
            f"note: the vocabulary has {result.vocab_size:,} tokens, not the {asked:,} asked: "
            f"the texts hold no more pairs seen at least {MIN_FREQUENCY} times; train on more "
            "texts (--prefix-config none uses every text) or ask for fewer with --vocab-size"
        )
    if result.missing_roles:
        flags = ", ".join("--" + role.replace("_", "-") for role in result.missing_roles)
        lines.append(
            f"note: tokenizer_config.json names no {', '.join(result.missing_roles)} (the "
            f"pipeline's tokens are not among --special-tokens); set them with {flags} TOKEN"
        )
    return lines


def summary_line(result: TrainResult) -> str:
    """One line: what was written, from how many texts and files."""
    bad = sum(f.bad_rows for f in result.files)
    return (
        f"train-tokenizer -> {result.output} (+ config.json, tokenizer_config.json): "
        f"vocab {result.vocab_size:,}, {result.texts_used:,} texts from {len(result.files)} "
        f"file(s) ({len(result.limited)} limited by max_per_file), {bad} bad row(s) skipped, "
        f"{result.seconds:.1f} s"
    )
