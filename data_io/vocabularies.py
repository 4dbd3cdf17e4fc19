"""Compat: ``python -m data_io.vocabularies`` and its names live in
:mod:`data_io.tokenizer.vocabularies`."""

import sys

from data_io.tokenizer.vocabularies import *  # noqa: F403
from data_io.tokenizer.vocabularies import main

if __name__ == "__main__":
    sys.exit(main())
