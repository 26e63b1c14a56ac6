"""The gang scheduler: Volcano's session model (snapshot → actions over tiered plugins → decisions → commit).

`framework/` (conf, hooks, registry, snapshot, node arrays, session, statement), `actions/`, `plugins/`,
`registry.in_tree_registry()`, `session.run_session` (pure) / `run_once`, `commit.apply`, `cache` (informers and
the hot-reloaded ConfigMap), `tasks` (the Celery task `scheduler.session`), `simulate`, `metrics`; `topology/` and
`devices/` hold the hint merger and device choosers. Start reading at `scheduler/framework/__init__.py`.
"""

__all__: list[str] = []
