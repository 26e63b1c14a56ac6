"""Unit tests, one folder per package (kube, scheduler, webhooks, ...); repository-wide checks sit here at the top."""
