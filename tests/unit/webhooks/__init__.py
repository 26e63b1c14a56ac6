"""Unit tests of lahar.webhooks: the admission app, reviews, lookups and the per-kind admission rules."""
