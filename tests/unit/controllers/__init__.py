"""Unit tests of lahar.controllers: the reconcilers, dispatch and the work queue."""
