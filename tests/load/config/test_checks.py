"""The config's checks, as a user of each seed meets them: every message names the file and
the key, and a KempnerForge or xorl file means here what it means to its own tool."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from data_io.errors import ConfigError, InputError
from data_io.load import build_dataloader, build_eval_loaders, load_config


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


def test_a_yaml_key_given_twice_is_refused_naming_both_lines(tmp_path: Path) -> None:
    # PyYAML keeps the last silently: the first list's sources would be dropped unseen.
    path = tmp_path / "xorl.yaml"
    path.write_text(
        "data:\n  datasets:\n    - path: a.jsonl\n  sample_packing_method: sequential\n"
        "  datasets:\n    - path: b.jsonl\n"
    )
    with pytest.raises(
        ConfigError, match=r"xorl\.yaml: .*'datasets' given twice \(lines 2 and 5\)"
    ):
        load_config(path)
    # A merge key's values may still be overridden, as YAML means them to be.
    path.write_text(
        "base: &src {path: a.jsonl, split: dev}\ndata:\n  datasets:\n    - <<: *src\n"
        "      split: train\n"
    )
    (source,) = load_config(path).data.datasets
    assert (source.path, source.split) == ("a.jsonl", "train")


def test_a_weight_on_a_tokenized_source_is_refused_not_left_unread(tmp_path: Path) -> None:
    # Tokenized rows are concatenated (xorl); a weight there would change nothing, unseen.
    path = tmp_path / "xorl.yaml"
    path.write_text(
        "data:\n  datasets:\n    - path: a.jsonl\n      weight: 3\n    - path: b.jsonl\n"
    )
    with pytest.raises(ConfigError, match=r"data\.datasets\[0\]: weight belong.*concatenated"):
        load_config(path)
    path.write_text("data:\n  datasets:\n    - path: a.jsonl\n      weight: 1\n")
    assert load_config(path).data.datasets[0].type == "tokenized"  # the default is no weight


def test_data_files_and_select_columns_take_one_name_as_xorl_does(tmp_path: Path) -> None:
    # xorl hands these to datasets.load_dataset and select_columns, which take a str too.
    path = tmp_path / "xorl.yaml"
    path.write_text(
        "data:\n  select_columns: input_ids\n  datasets:\n    - path: shards/\n"
        "      data_files: shard_00.parquet\n      select_columns: labels\n"
    )
    data = load_config(path).data
    assert data.select_columns == ["input_ids"]
    (source,) = data.datasets
    assert source.type == "tokenized" and source.data_files == ["shard_00.parquet"]
    assert source.select_columns == ["labels"]


def test_a_misspelt_section_of_a_kempnerforge_job_is_named(tmp_path: Path) -> None:
    # KempnerForge refuses a section its JobConfig lacks; skipped, [evl] would turn eval off.
    path = tmp_path / "job.toml"
    path.write_text('[data]\ndataset_path = "shards"\n\n[evl]\nenabled = true\n')
    with pytest.raises(ConfigError, match=r"job\.toml: section \[evl\] .* close to \[eval\]"):
        load_config(path)
    path.write_text('[Data]\ndataset_path = "shards"\n')
    with pytest.raises(ConfigError, match=r"section \[Data\] .* rename it \[data\]"):
        load_config(path)
    # The trainer's sections are still the trainer's.
    path.write_text('[model]\ndim = 8\n[metrics]\nlog_interval = 1\n[data]\ndataset_path = "s"\n')
    assert load_config(path).data.dataset_path == "s"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[data]\ndatasets = [{path = 'a'}, {path = 'b', weight = 'heavy'}]\n",
            r"job\.toml: .*\(key data\.datasets\[1\]\.weight\); .* takes float",
        ),
        (
            "[data]\ndatasets = [{path = 'a', data_files = 3}]\n",
            r"job\.toml: .*\(key data\.datasets\[0\]\.data_files\); .* takes list\[str\]",
        ),
        (
            "[data]\ndatasets = [{path = 'a', name = 'a'}]\n"
            "phases = [{start_step = 0}, {start_stpe = 5}]\n",
            r"job\.toml: .*Did you mean: 'start_step'\? \(key data\.phases\[1\]\.start_stpe\)",
        ),
        (
            "[data]\ndatasets = [{path = 'a', name = 'a'}]\n"
            "phases = [{start_step = 0, dataset_weights = {a = 'x'}}]\n",
            r"job\.toml: .*\(key data\.phases\[0\]\.dataset_weights\.a\)",
        ),
    ],
)
def test_a_wrong_type_in_a_source_or_phase_names_its_place(
    tmp_path: Path, text: str, message: str
) -> None:
    # OmegaConf names a key of a list's table without the list and position (`key weight`).
    path = tmp_path / "job.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_an_override_of_a_source_names_the_unknown_key_or_the_position_past_the_end(
    tmp_path: Path,
) -> None:
    # OmegaConf said "see the keys of that table", or "dict is not a subclass of
    # DatasetSource. value: {}", naming neither the typo nor how many sources there are.
    path = tmp_path / "job.toml"
    path.write_text(
        "[data]\ndatasets = [{path = 'a', name = 'a'}, {path = 'b', name = 'b'}]\n"
        "phases = [{start_step = 0}]\n"
    )
    with pytest.raises(
        ConfigError,
        match=r"job\.toml with overrides: override 'data\.datasets\.0\.wieght=2': "
        r"data\.datasets\[0\] has no key 'wieght' \(close to 'weight': a typo\?\); its keys",
    ):
        load_config(path, ["data.datasets.0.wieght=2"])
    with pytest.raises(
        ConfigError,
        match=r"override 'data\.datasets\.5\.weight=2': position 5 is past the end of "
        r"data\.datasets: data\.datasets has 2 sources \(positions 0 to 1\)\. .*add the source",
    ):
        load_config(path, ["data.datasets.5.weight=2"])
    with pytest.raises(
        ConfigError, match=r"'x' is not a position in it.*data\.datasets\.0\.weight"
    ):
        load_config(path, ["data.datasets.x.weight=2"])  # was a bare TypeError
    with pytest.raises(ConfigError, match=r"data\.phases has 1 phase \(position 0\)"):
        load_config(path, ["data.phases.3.start_step=2"])
    with pytest.raises(ConfigError, match=r"data\.phases\[0\] has no key 'start_stpe' \(close to"):
        load_config(path, ["data.phases.0.start_stpe=2"])
    with pytest.raises(ConfigError, match=r"eval\.sets\.g has no key 'dataset_pth' \(close to"):
        load_config(path, ["eval.sets.g.dataset_pth=x"])
    path.write_text("[data]\nnum_workers = 0\n")
    with pytest.raises(ConfigError, match=r"position 0 is past the end of data\.datasets: .*empty"):
        load_config(path, ["data.datasets.0.weight=2"])
    # What an override may do is unchanged: a key of a source, a phase's new weight, a new
    # eval set, the whole list.
    path.write_text("[data]\ndatasets = [{path = 'a', name = 'a'}]\nphases = [{start_step = 0}]\n")
    config = load_config(
        path,
        [
            "data.datasets.0.weight=3",
            "data.phases.0.dataset_weights.a=2",
            "eval.sets.g.dataset_path=x",
            "data.datasets=[{path: a, name: a}, {path: b, name: b}]",
        ],
    )
    assert [s.path for s in config.data.datasets] == ["a", "b"]
    assert config.data.phases[0].dataset_weights == {"a": 2.0}
    assert config.eval.sets["g"].dataset_path == "x"


def test_an_eos_id_not_below_the_vocab_size_is_refused_naming_both_keys(tmp_path: Path) -> None:
    # Such an EOS is never in shards whose ids pass the vocab check (packing would find no
    # boundary), and where it is, the read failed blaming the shard, not the config.
    path = tmp_path / "job.toml"
    path.write_text("[data]\neos_token_id = 50000\nvocab_size = 50000\npack_sequences = true\n")
    with pytest.raises(
        ConfigError,
        match=r"job\.toml: data\.eos_token_id=50000 is not below data\.vocab_size=50000: .*"
        r"set data\.eos_token_id to the tokenizer's EOS id",
    ):
        load_config(path)
    with pytest.raises(ConfigError, match=r"with overrides: data\.eos_token_id=7 is not below"):
        load_config(None, ["data.vocab_size=5", "data.eos_token_id=7"])
    path.write_text("[data]\neos_token_id = 49999\nvocab_size = 50000\n")
    assert load_config(path).data.eos_token_id == 49999


def test_a_shard_folder_message_names_the_key_the_user_wrote(tmp_path: Path) -> None:
    # It said "pass data_dir=prep/train" (MemoryMappedDataset's parameter, which no job file
    # has), and named a missing folder only by its path.
    (tmp_path / "prep" / "train").mkdir(parents=True)
    (tmp_path / "prep" / "val").mkdir()
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "good").mkdir()
    np.save(tmp_path / "good" / "shard_0.npy", np.arange(40, dtype=np.uint32))
    path = tmp_path / "job.toml"
    base = "[train]\nseq_len = 4\n[data]\nnum_workers = 0\n"
    cases = [
        (
            f"dataset_path = '{tmp_path}/prep'\n",
            r"split folders: pass data\.dataset_path=.*prep/train",
        ),
        (
            f"dataset_path = '{tmp_path}/nowhere'\n",
            r"does not exist, given as data\.dataset_path; point",
        ),
        (
            f"datasets = [{{path = '{tmp_path}/good'}}, {{path = '{tmp_path}/a_file'}}]\n",
            r"a_file: shard folder is not a directory \(a file\), given as data\.datasets\[1\]\.path",
        ),
        (
            f"datasets = [{{path = '{tmp_path}/prep'}}]\n",
            r"pass data\.datasets\[0\]\.path=.*prep/train",
        ),
    ]
    for text, message in cases:
        path.write_text(base + text)
        with pytest.raises(InputError, match=message):
            build_dataloader(path, rank=0, world_size=1)
    # An eval set's folder is named by its own key.
    path.write_text(
        base
        + f"[eval]\nenabled = true\nsets = {{general = {{dataset_path = '{tmp_path}/prep'}}}}\n"
    )
    with pytest.raises(InputError, match=r"pass eval\.sets\.general\.dataset_path=.*prep/train"):
        build_eval_loaders(path, rank=0, world_size=1)


def test_kempnerforge_vlm_keys_are_read_as_its_text_runs_read_them_and_masked_sft_is_refused(
    tmp_path: Path,
) -> None:
    # KempnerForge's DataConfig holds them (VLM only: a text model never reads them); a text
    # job that lists them was refused as unknown keys.
    path = tmp_path / "job.toml"
    path.write_text(
        "[data]\ndataset_path = 'shards'\nhf_dataset_image_field = 'img'\n"
        "hf_dataset_prompt_field = 'q'\nhf_image_size = 336\nmasked_sft = false\n"
    )
    data = load_config(path).data
    assert (data.hf_dataset_image_field, data.hf_image_size, data.masked_sft) == ("img", 336, False)
    with pytest.raises(
        ConfigError, match=r"job\.toml with overrides: data\.masked_sft = true .*not served"
    ):
        load_config(path, ["data.masked_sft=true"])


def test_an_eos_id_past_the_tokenizer_s_vocabulary_is_refused_naming_where_each_came_from(
    tmp_path: Path, small_tokenizer: Path
) -> None:
    # With one of the two from the tokenizer the config check could not see it: every id was
    # checked below the vocabulary, the EOS never found, each window packed as one document.
    (tmp_path / "s").mkdir()
    np.save(tmp_path / "s" / "shard_0.npy", np.arange(40, dtype=np.uint32) % 500)
    path = tmp_path / "job.toml"
    base = f"[train]\nseq_len = 4\n[data]\nnum_workers = 0\ndataset_path = '{tmp_path}/s'\n"
    path.write_text(base + f"tokenizer_path = '{small_tokenizer}'\npack_sequences = true\n")
    with pytest.raises(ConfigError, match=r"EOS id 700 \(data\.eos_token_id\) is not below the "
                       r"vocabulary size 600 \(data\.tokenizer_path \(.*tokenizer\.json\)\)"):  # fmt: skip
        build_dataloader(path, rank=0, world_size=1, overrides=["data.eos_token_id=700"])
    # The tokenizer's own EOS, against a smaller data.vocab_size.
    with pytest.raises(ConfigError, match=r"\(data\.tokenizer_path .*\) is not below the "
                       r"vocabulary size 10 \(data\.vocab_size\)"):  # fmt: skip
        build_dataloader(path, rank=0, world_size=1, overrides=["data.vocab_size=10"])
    # Without packing the EOS is not read: nothing to refuse.
    path.write_text(base + f"tokenizer_path = '{small_tokenizer}'\neos_token_id = 700\n")
    assert next(iter(build_dataloader(path, rank=0, world_size=1))) is not None


def test_data_files_as_a_table_of_splits_reads_the_source_s_split(tmp_path: Path) -> None:
    # datasets.load_dataset takes data_files = {split: files}; it was refused with OmegaConf's
    # "Cannot merge incompatible container types", and a list of tables passed the config.
    from tests.load.rows_fixture import random_rows, write_rows

    rows = random_rows(5, 20, longest=8)
    write_rows(tmp_path / "rows" / "a.jsonl", rows[:12])
    write_rows(tmp_path / "rows" / "b.jsonl", rows[12:])
    path = tmp_path / "xorl.yaml"
    head = f"train: {{batch_size: 1, seed: 1, seq_len: 16}}\ndata:\n  num_workers: 0\n  dataset_prepared_path: {tmp_path / 'prep'}\n  sample_packing_method: sequential\n  sample_packing_sequence_len: 16\n  datasets:\n"  # fmt: skip
    table = (
        f"    - path: {tmp_path / 'rows'}\n      data_files: {{train: a.jsonl, test: [b.jsonl]}}\n"
    )
    for split, expected in (("", rows[:12]), ("      split: test\n", rows[12:])):
        path.write_text(head + table + split)
        (source,) = load_config(path).data.datasets
        assert source.data_files == (["a.jsonl"] if not split else ["b.jsonl"])
        batches = list(build_dataloader(path, rank=0, world_size=1))
        heads = [int(t) for b in batches for t in b["input_ids"].flatten() if t >= 10_000]
        assert sorted(heads) == sorted(r["input_ids"][0] for r in expected)
    # The split given as an override picks its files too: the table was resolved before the
    # overrides, so split=test read the train files as the split 'test' (refused for files).
    path.write_text(head + table)
    overrides = ["data.datasets.0.split=test"]
    (source,) = load_config(path, overrides).data.datasets
    assert (source.split, source.data_files) == ("test", ["b.jsonl"])
    batches = list(build_dataloader(path, rank=0, world_size=1, overrides=overrides))
    heads = [int(t) for b in batches for t in b["input_ids"].flatten() if t >= 10_000]
    assert sorted(heads) == sorted(r["input_ids"][0] for r in rows[12:])
    with pytest.raises(ConfigError, match=r"with overrides: .*names the splits 'train', 'test', "
                       r"not this source's split 'dev'"):  # fmt: skip
        load_config(path, ["data.datasets.0.split=dev"])
    # data_files given as an override replace the table.
    (source,) = load_config(path, ["data.datasets.0.data_files=[b.jsonl]"]).data.datasets
    assert (source.split, source.data_files, source.split_files) == ("train", ["b.jsonl"], None)
    path.write_text(head + table + "      split: dev\n")
    with pytest.raises(ConfigError, match=r"names the splits 'train', 'test', not .* 'dev'"):
        load_config(path)
    path.write_text(
        head + f"    - path: {tmp_path / 'rows'}\n      data_files: [{{train: a.jsonl}}]\n"
    )
    with pytest.raises(ConfigError, match=r"data\.datasets\[0\]\.data_files must list file names"):
        load_config(path)
    # A split's entry that is not file names is named by the key the user wrote.
    path.write_text(head + f"    - path: {tmp_path / 'rows'}\n      data_files: {{train: 3}}\n")
    with pytest.raises(ConfigError, match=r"data\.datasets\[0\]\.data_files\.train must be a file"):
        load_config(path)
