"""Unit tests of deploy/: the CRDs, the kustomize base, the Helm chart and the dashboard."""
