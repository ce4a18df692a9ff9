"""Tests of the architecture: the distribution's shape, import boundaries, and DESIGN.md's module sketch."""
