"""Unit tests of lahar.certs: serving certificates and their rotation."""
