"""Tests of the load stage (data_io.load), mirroring its modules."""
