"""MATH (Hendrycks) train -> ``data/math_train.jsonl`` (cleaners.md §3.3).

Source: Hub ``EleutherAI/hendrycks_math``, every config (the subjects, listed at run time, in the
dataset's order), split ``train`` of each; or its local copy (``--source`` /
``raw_data/hub/EleutherAI/hendrycks_math``). Fields ``problem`` and ``solution``.

Two rows per problem, in this order:
1. ``cot``: problem as-is -> solution, stripped.
2. ``direct``: problem as-is -> the final boxed answer, stripped; only when one can be extracted
   and is not empty. The answer is the argument of the last ``\\boxed`` (or, when there is none,
   of the last ``\\fbox``): the text between its ``{`` and the matching ``}``.

Quirks, decided:
- kept: the problem is written as-is while the solution and answer are stripped (cleaners.md
  §7.2), and every subject config is read, in the dataset's order.
- fixed: when the last ``\\boxed``/``\\fbox`` has no brace argument (``\\boxed 5``), the original
  scanned on to the next ``{`` anywhere later in the solution and took that unrelated group as
  the answer (or found nothing). Here the argument must start right after the command (spaces
  allowed), otherwise no direct row is written. A wrong "final answer" is a defect, not a
  corpus choice; such solutions are rare and still give their ``cot`` row.
- counted: a problem without a direct row adds one to a "no direct row: ..." reason in the
  summary (its ``cot`` row is still written), so the two row kinds can be reconciled.
- fixed: a null ``problem`` or ``solution`` is dropped and counted ("null problem or solution")
  instead of stopping the run.
"""

from collections.abc import Iterator

from data_io.cleaning import Cleaner, Drop, HubDataset, Record, Row, jsonl_file

BOXED = "\\boxed"
FBOX = "\\fbox"


def boxed_answer(solution: str) -> str | None:
    """The argument of the last ``\\boxed{...}`` (else of the last ``\\fbox{...}``), or ``None``
    when there is no such command, it has no brace argument, or its braces never balance."""
    start = solution.rfind(BOXED)
    command = BOXED
    if start < 0:
        start = solution.rfind(FBOX)
        command = FBOX
        if start < 0:
            return None
    opening = start + len(command)
    while opening < len(solution) and solution[opening].isspace():
        opening += 1
    if opening >= len(solution) or solution[opening] != "{":
        return None
    depth = 0
    for position in range(opening, len(solution)):
        char = solution[position]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return solution[opening + 1 : position]
    return None


def clean(record: Record) -> Iterator[Row | Drop]:
    problem, solution = record["problem"], record["solution"]
    if problem is None or solution is None:
        yield Drop("null problem or solution")
        return
    yield Row("cot", problem, solution.strip())
    answer = boxed_answer(solution)
    if answer is None:
        yield Drop("no direct row: no \\boxed{...} or \\fbox{...} answer")
        return
    answer = answer.strip()
    if not answer:
        yield Drop("no direct row: empty boxed answer")
        return
    yield Row("direct", problem, answer)


CLEANER = Cleaner(
    name="math_train",
    source=HubDataset("EleutherAI/hendrycks_math", splits=("train",), all_configs=True),
    output=jsonl_file("data/math_train.jsonl"),
    clean=clean,
    description="MATH train, all subjects: problem -> solution (cot) and -> boxed answer (direct).",
)

if __name__ == "__main__":
    raise SystemExit(CLEANER.main())
