"""The test suite, a package so tests import their shared infrastructure as ``testkit``."""
