"""data_io.prepare.progress: the bar shows bytes (rate, ETA) and tokens per second."""

from __future__ import annotations

import time

import pytest

from data_io.prepare.progress import ProgressBar


def test_bar_reports_bytes_and_tokens(capsys: pytest.CaptureFixture[str]):
    bar = ProgressBar(4 << 20, enabled=True)
    bar.describe("input.txt")
    bar.advance_bytes(1 << 20)
    bar._shown = time.perf_counter() - 1  # let the next token count be shown at once
    bar.advance_tokens(12_345)
    bar.advance_bytes(3 << 20)
    bar.close()
    err = capsys.readouterr().err
    assert "prepare input.txt" in err and "4.00M/4.00M" in err
    assert "12,345 tokens" in err and "tokens/s" in err


def test_disabled_bar_prints_nothing(capsys: pytest.CaptureFixture[str]):
    bar = ProgressBar(100, enabled=False)
    bar.advance_bytes(50)
    bar.advance_tokens(10)
    bar.close()
    assert capsys.readouterr() == ("", "")
