"""Unit tests of lahar.kube: the API-server engine, the client port, quantities, patches, selectors, informers."""
