"""The config's checks, as a user of each seed meets them: every message names the file and
the key, and a KempnerForge or xorl file means here what it means to its own tool."""

from __future__ import annotations

from pathlib import Path

import pytest

from data_io.errors import ConfigError
from data_io.load import load_config


def test_a_value_check_names_the_file_it_read(tmp_path: Path) -> None:
    # The value checks name the key; the file too, as the type checks do (a job reads several).
    path = tmp_path / "job.toml"
    path.write_text("[train]\nbatch_size = 0\n")
    with pytest.raises(ConfigError, match=r"job\.toml: train\.batch_size must be >= 1, got 0"):
        load_config(path)
    path.write_text("[data]\ndatasets = [{path = 'a', wieght = 2}]\n")
    with pytest.raises(ConfigError, match=r"job\.toml: data\.datasets\[0\]: unknown key"):
        load_config(path)
    path.write_text("[data]\nnum_workers = 0\n")
    with pytest.raises(ConfigError, match=r"job\.toml with overrides: data\.num_workers must"):
        load_config(path, ["data.num_workers=-1"])
