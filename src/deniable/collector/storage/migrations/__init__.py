"""Alembic migration environment and revisions of the collector schema."""
