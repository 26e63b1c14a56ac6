"""Unit tests of lahar's entry points: lahar/commands, up, worker, supervisor, dispatcher, logs, credentials, settings."""
