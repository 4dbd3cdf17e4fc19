"""Tests of data_io prepare (data_io.prepare), mirroring its modules."""
