"""Which keys of a job file or an override are the trainer's (skipped, as KempnerForge's trainer
reads them) and which are the loader's, a near miss of one of its keys taken for a typo."""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from data_io.errors import ConfigError
from data_io.load.config.sections import TrainSection

# A dotted key: names, and list positions (data.datasets.0.weight); OmegaConf itself fails on
# other text with errors that do not name the override (an IndexError for "[6_m").
OVERRIDE_KEY = re.compile(r"[A-Za-z_]\w*(\.(\w+))+")


# KempnerForge's job-file sections that are the trainer's alone (its JobConfig's other
# sub-configs); the [train] keys other than TrainSection's are the trainer's too.
TRAINER_SECTIONS = (
    "model",
    "optimizer",
    "scheduler",
    "distributed",
    "checkpoint",
    "metrics",
    "profiling",
)


def trainers_key(key: str) -> bool:
    """Whether ``key`` is the trainer's (skipped). A [train] key that is a near miss of one of
    the loader's (``train.batchsize``) is taken for a typo and refused, not skipped."""
    section, _, rest = key.partition(".")
    if section == "train":
        name = rest.split(".")[0]
        ours = list(TrainSection.__dataclass_fields__)
        return name not in ours and not difflib.get_close_matches(name, ours, n=1, cutoff=0.8)
    return section in TRAINER_SECTIONS


def trainer_overrides(overrides: Sequence[str]) -> list[str]:
    """The keys of ``overrides`` that are the trainer's (KempnerForge's full override list,
    ``--train.max_steps=1000 --optimizer.lr=1e-4``, passed on as it is): skipped, as the same
    keys are in a job file; ``loader-check`` names them."""
    if isinstance(overrides, str):
        overrides = [overrides]
    keys = (str(item).partition("=")[0].strip().removeprefix("--") for item in overrides)
    return [key for key in keys if OVERRIDE_KEY.fullmatch(key) and trainers_key(key)]


def near_miss(where: str, key: str) -> ConfigError:
    """A [train] key of the job file that is one letter or so from one the loader reads."""
    ours = list(TrainSection.__dataclass_fields__)
    (close,) = difflib.get_close_matches(key, ours, n=1, cutoff=0.8)
    return ConfigError(
        f"{where}: [train] key {key!r} is not one the loader reads, and is close to {close!r} "
        f"(a typo?); the loader's [train] keys are {', '.join(ours)}"
    )
