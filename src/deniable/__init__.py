"""deniable: local-differential-privacy telemetry (client SDK, estimators, collector, shuffler, CLI)."""
