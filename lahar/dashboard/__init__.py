"""`lahar dashboard`: a read-only web view of the cluster as the scheduler sees it — queues, jobs and why they wait,
nodes and HyperNodes, policies — rendered server-side and kept live over server-sent events.

Part of lahar's top layer (beside `lahar.up`, which starts it): `views` and `nodes` are the pure view models,
`pages` the HTML, `live` the shared informers and the fan-out, `app` the FastAPI app and its access rules.
"""

from __future__ import annotations

__all__ = ["app", "live", "nodes", "pages", "views"]
