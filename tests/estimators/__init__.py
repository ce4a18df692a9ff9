"""Tests of deniable.estimators: exact and simulated moments and coverage, methods, pooling, edges."""
