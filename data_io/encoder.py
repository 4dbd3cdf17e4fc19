"""Compat: ``data_io.encoder.TextEncoder`` lives in :mod:`data_io.tokenizer.encoder`."""

from data_io.tokenizer.encoder import EncodedBatch, TextEncoder

__all__ = ["EncodedBatch", "TextEncoder"]
