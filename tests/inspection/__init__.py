"""Tests of ``data_io.inspect`` (named ``inspection``: a ``tests/inspect`` package would shadow the
standard library's ``inspect`` under pytest's rootdir imports)."""
