"""Tests of the `deniable` command (deniable.cli), offline and against a real collector."""
