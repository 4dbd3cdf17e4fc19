"""Cleaners of the Platypus collection (``data/Platypus/*.jsonl``)."""
