"""``LoaderConfig``: the three sections together, validated as a whole (``checks``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from data_io.load.config.checks import validate as validate_sections
from data_io.load.config.sections import DataConfig, EvalConfig, TrainSection


@dataclass
class LoaderConfig:
    data: DataConfig = field(default_factory=DataConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    train: TrainSection = field(default_factory=TrainSection)

    def validate(self) -> LoaderConfig:
        validate_sections(self.data, self.eval, self.train)
        return self


def data_seed(config: LoaderConfig) -> int:
    """The seed of the data order: ``data.seed`` when set, else ``train.seed``."""
    return config.train.seed if config.data.seed is None else config.data.seed
