"""Recorded API answers: a fixed collector state, the reads asked of it, and a replay test
that holds every answer byte for byte (issue 39's guard against behaviour changes)."""
