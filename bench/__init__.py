"""Benchmarks that print tables; run each from the repository root as ``python -m bench.<name>``
(they share the test infrastructure in ``testkit``)."""
