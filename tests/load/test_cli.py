"""data_io.load.cli: the pack command's messages."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from data_io.cli import main
from tests.load.rows_fixture import random_rows, write_rows


def test_pack_names_the_config_key_dataset_prepared_path_as_the_config_spells_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The list of [data] keys said --dataset-prepared-path (the option's spelling, put there
    by the command line's rewriting of parameter names), a key no config can have."""
    write_rows(tmp_path / "sft.jsonl", random_rows(1, 10, longest=20))
    config = {"data": {"datasets": [{"path": str(tmp_path / "sft.jsonl"), "type": "tokenized"}]}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    code = main(["pack", str(tmp_path / "c.yaml"), "data.nope=1", "--dataset-prepared-path",
                 str(tmp_path / "cache")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1 and "unknown key data.nope" in err
    assert ", dataset_prepared_path," in err and "--dataset-prepared-path" not in err
    code = main(["pack", str(tmp_path / "c.yaml"), "--dataset-prepared-path",
                 str(tmp_path / "cache")])  # fmt: skip
    assert code == 0 and [p.name for p in (tmp_path / "cache").iterdir()]
