"""HTTP routes of the collector, one module per concern."""
