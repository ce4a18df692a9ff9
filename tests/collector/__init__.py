"""Tests of deniable.collector against real servers and databases: API, storage, operations."""
