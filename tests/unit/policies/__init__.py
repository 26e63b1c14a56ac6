"""Unit tests of lahar.policies: CEL, admission configuration and users' AdmissionPolicies."""
