"""Unit tests of lahar.devcluster: the development cluster's kubelets, workloads, admission chain, profiles and storage."""
