"""lahar: a batch scheduler for Kubernetes that speaks Volcano's language.

This package holds the entry points (the `lahar` CLI) and process-wide settings; the layers below it are
`kube`, `policies`, and then `scheduler`, `webhooks`, `controllers`.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
