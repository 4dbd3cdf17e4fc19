"""Compat: ``data_io.train_tokenizer`` lives in :mod:`data_io.tokenizer.train` (the API) and
:mod:`data_io.tokenizer.cli` (the ``data_io train-tokenizer`` command)."""

from data_io.tokenizer.train import TrainFileResult, TrainResult, train_tokenizer

__all__ = ["TrainFileResult", "TrainResult", "train_tokenizer"]
