"""End-to-end tests across packages: SDK devices or the real mechanisms through a real collector to its estimates."""
