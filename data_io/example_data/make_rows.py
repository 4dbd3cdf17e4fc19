"""Regenerate the embedded example's cleaned rows (``rows/``): a few hundred rows across JSONL
and Parquet files and every condition tag, with multilingual text, code, and special-token
strings inside the text (which must be tokenized as plain text).

    python -m data_io.example_data.make_rows   # rewrites data_io/example_data/rows/
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

ROWS = Path(__file__).parent / "rows"

PHRASES = {
    "Good morning, how are you?": {
        "French": "Bonjour, comment allez-vous ?",
        "German": "Guten Morgen, wie geht es dir?",
        "Spanish": "Buenos días, ¿cómo estás?",
        "Japanese": "おはようございます、お元気ですか？",
        "Chinese": "早上好，你好吗？",
        "Russian": "Доброе утро, как дела?",
    },
    "The library opens at nine.": {
        "French": "La bibliothèque ouvre à neuf heures.",
        "German": "Die Bibliothek öffnet um neun Uhr.",
        "Spanish": "La biblioteca abre a las nueve.",
        "Japanese": "図書館は九時に開きます。",
        "Chinese": "图书馆九点开门。",
        "Russian": "Библиотека открывается в девять.",
    },
    "Water boils at one hundred degrees.": {
        "French": "L'eau bout à cent degrés.",
        "German": "Wasser kocht bei hundert Grad.",
        "Spanish": "El agua hierve a cien grados.",
        "Japanese": "水は百度で沸騰します。",
        "Chinese": "水在一百度沸腾。",
        "Russian": "Вода кипит при ста градусах.",
    },
    "Thank you for your help.": {
        "French": "Merci pour votre aide.",
        "German": "Danke für deine Hilfe.",
        "Spanish": "Gracias por tu ayuda.",
        "Japanese": "助けてくれてありがとう。",
        "Chinese": "谢谢你的帮助。",
        "Russian": "Спасибо за вашу помощь.",
    },
}

SPECIAL_STRINGS = ["<|im_end|>", "<|im_start|>", "<|box_end|>", "<|endoftext|>", "<think>"]


def arithmetic() -> list[dict[str, str]]:
    rows = []
    for i in range(90):
        a, b = 7 * i + 3, 13 * i % 50 + 2
        if i % 2:
            response = f"We add {a} and {b}: {a} + {b} = {a + b}. The answer is {a + b}."
            rows.append(
                {"condition": "cot", "instruction": f"What is {a} plus {b}?", "response": response}
            )
        else:
            rows.append(
                {
                    "condition": "direct",
                    "instruction": f"Compute {a} * {b}.",
                    "response": str(a * b),
                }
            )
    return rows


def translations() -> list[dict[str, str]]:
    rows = []
    for english, targets in PHRASES.items():
        for language, text in targets.items():
            rows.append(
                {
                    "condition": "direct",
                    "instruction": f"Translate into {language}: {english}",
                    "response": text,
                }
            )
            rows.append(
                {
                    "condition": "noisy,direct",
                    "instruction": f"{text}\n\nWhat does this {language} sentence mean?",
                    "response": english,
                }
            )
    return rows


def code() -> list[dict[str, str]]:
    rows = []
    operations = [("sum", "+", "0"), ("product", "*", "1")]
    for power in range(1, 6):
        for name, op, start in operations:
            function = f"{name}_of_powers_{power}"
            body = (
                f"def {function}(n: int) -> int:\n"
                f"    total = {start}\n"
                f"    for k in range(1, n + 1):\n"
                f"        total = total {op} k ** {power}\n"
                f"    return total\n"
            )
            rows.append(
                {
                    "condition": "cot",
                    "instruction": f"Write a Python function `{function}(n)` returning the "
                    f"{name} of k**{power} for k = 1..n.",
                    "response": f"Loop over k and accumulate:\n\n```python\n{body}```",
                }
            )
            rows.append(
                {
                    "condition": "synth,direct",
                    "instruction": f"What does this function compute?\n\n```python\n{body}```",
                    "response": f"The {name} of the {power}-th powers of 1 to n.",
                }
            )
    return rows


def special_tokens_in_text() -> list[dict[str, str]]:
    rows = []
    for i in range(40):
        token = SPECIAL_STRINGS[i % len(SPECIAL_STRINGS)]
        rows.append(
            {
                "condition": ["direct", "cot", "noisy", "synth"][i % 4],
                "instruction": f"In a chat template, what is the role of the marker {token}?"
                f" (question {i})",
                "response": f"The string {token} is a control marker; inside data it is "
                f"plain text and must never act as one.",
            }
        )
    return rows


def number_facts(start: int) -> list[dict[str, str]]:
    rows = []
    for n in range(start, start + 45):
        divisors = [d for d in range(2, n) if n % d == 0]
        verdict = "prime" if not divisors and n > 1 else "not prime"
        why = (
            f"{n} has no divisor between 2 and {n - 1}."
            if not divisors
            else f"{n} is divisible by {divisors[0]}."
        )
        rows.append(
            {
                "condition": "cot" if n % 3 else "synth,cot",
                "instruction": f"Is {n} a prime number?",
                "response": f"{why} So {n} is {verdict}.",
            }
        )
    return rows


def write_jsonl(path: Path, rows: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )


def write_parquet(path: Path, rows: list[dict[str, str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=32)


def main() -> None:
    write_jsonl(ROWS / "data" / "arithmetic.jsonl", arithmetic())
    write_jsonl(ROWS / "data" / "translations.jsonl", translations())
    write_jsonl(ROWS / "data" / "Platypus" / "code.jsonl", code())
    write_parquet(
        ROWS / "data_clustered" / "chat" / "special_tokens.parquet", special_tokens_in_text()
    )
    write_parquet(ROWS / "data_clustered" / "facts" / "primes_low.parquet", number_facts(2))
    write_parquet(ROWS / "data_clustered" / "facts" / "primes_high.parquet", number_facts(200))


if __name__ == "__main__":
    main()
