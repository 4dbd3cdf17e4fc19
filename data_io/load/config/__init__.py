"""The loader's typed configuration: KempnerForge's ``[data]``/``[eval]``, xorl's ``datasets:``.

``LoaderConfig`` holds ``data`` (``DataConfig``), ``eval`` (``EvalConfig``) and ``train``
(``TrainSection``: the ``[train]`` fields a loader needs: ``batch_size``, ``seq_len``,
``seed``, and xorl's ``ringattn_parallel_size``/``ulysses_parallel_size``). Field names and
defaults are the seeds'; data_io's additions are marked in ``sections``.
``load_config`` reads TOML or YAML and applies OmegaConf dotlist overrides
(``data.datasets.0.weight=2``). Inside ``data``/``eval`` an unknown key or a value of the wrong
type is an error naming the key; other sections of a job file (``[model]``, ``[optimizer]``...)
and the trainer's other ``[train]`` keys belong to the trainer and are ignored.

The rooms: ``sections`` (the dataclasses), ``checks`` (the whole config's rules),
``loader_config`` (the sections together), ``reading`` (a file or dict read), ``xorl_sources``
(xorl's shorthand for sources), ``overrides`` (``key=value`` applied), ``trainer_keys`` (what
is the trainer's), ``messages`` (errors that name the file and key).
"""

from data_io.load.config.checks import mixture_phases
from data_io.load.config.loader_config import LoaderConfig, data_seed
from data_io.load.config.messages import from_job_file
from data_io.load.config.overrides import apply_overrides
from data_io.load.config.reading import as_loader_config, config_from_dict, load_config
from data_io.load.config.sections import (
    EVAL_MAIN_SET,
    PACKING_METHODS,
    DataConfig,
    DatasetSource,
    EvalConfig,
    EvalSet,
    TrainingPhase,
    TrainSection,
    overridden_sources,
    phase_dicts,
    ring_multiple,
    source_name,
)
from data_io.load.config.trainer_keys import trainer_overrides

__all__ = [
    "EVAL_MAIN_SET",
    "PACKING_METHODS",
    "DataConfig",
    "DatasetSource",
    "EvalConfig",
    "EvalSet",
    "LoaderConfig",
    "TrainSection",
    "TrainingPhase",
    "apply_overrides",
    "as_loader_config",
    "config_from_dict",
    "data_seed",
    "from_job_file",
    "load_config",
    "mixture_phases",
    "overridden_sources",
    "phase_dicts",
    "ring_multiple",
    "source_name",
    "trainer_overrides",
]
