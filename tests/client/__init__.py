"""Tests of deniable.client: specs, mechanisms, the ledger, the outbox, transport and delivery."""
