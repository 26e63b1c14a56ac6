"""controllers: level-based reconcilers for Volcano's kinds, run as Celery tasks by `lahar.worker`.

One module per kind (`jobs`, `podgroups`, `queues`, `cronjobs`, `gc`, `commands`, `jobflows`, `jobtemplates`), each
exposing `reconcile(ctx, namespace, name)`; `reconcilers` holds the kind → reconcile table and routes a key to it.
"""

__all__: list[str] = []
