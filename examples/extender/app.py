"""An example scheduler extender for lahar's (and Volcano's) `extender` plugin: a small FastAPI app.

Run it with `uvicorn app:app --port 8888` beside this file and point the plugin at it (`conf.yaml` here). It refuses
nodes labelled `example.extender/refuse: "true"`, scores nodes by their `example.extender/score` label, allows every
preemption / reclaim victim, holds PodGroups annotated `example.extender/hold`, never calls a queue overused, and
counts what it was asked on `GET /stats`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from fastapi import FastAPI

REFUSE = "example.extender/refuse"
SCORE = "example.extender/score"
HOLD = "example.extender/hold"


def _labels(node_info: dict[str, Any]) -> dict[str, str]:
    return ((node_info.get("Node") or {}).get("metadata") or {}).get("labels") or {}


def create_app() -> FastAPI:
    app = FastAPI(title="example scheduler extender")
    seen: Counter[str] = Counter()

    @app.post("/onSessionOpen")
    def session_open(body: dict[str, Any]) -> dict[str, Any]:
        seen["onSessionOpen"] += 1
        seen["nodes"] = len(body.get("NodeList") or [])
        return {}

    @app.post("/onSessionClose")
    def session_close() -> dict[str, Any]:
        seen["onSessionClose"] += 1
        return {}

    @app.post("/predicate")
    def predicate(body: dict[str, Any]) -> dict[str, Any]:
        seen["predicate"] += 1
        node = body.get("node") or {}
        if _labels(node).get(REFUSE) == "true":
            return {"status": f"node {node.get('Name')} refused by the example extender", "code": 2}
        return {"status": "", "code": 0}

    @app.post("/prioritize")
    def prioritize(body: dict[str, Any]) -> dict[str, Any]:
        seen["prioritize"] += 1
        scores = {}
        for n in body.get("nodes") or []:
            try:
                scores[n["Name"]] = float(_labels(n).get(SCORE, "0"))
            except ValueError:
                scores[n["Name"]] = 0.0
        return {"nodeScore": scores, "errorMessage": ""}

    def victims(body: dict[str, Any]) -> dict[str, Any]:
        return {"status": 1, "victims": [t for t in body.get("evictees") or [] if t.get("Preemptable", True)]}

    @app.post("/preemptable")
    def preemptable(body: dict[str, Any]) -> dict[str, Any]:
        seen["preemptable"] += 1
        return victims(body)

    @app.post("/reclaimable")
    def reclaimable(body: dict[str, Any]) -> dict[str, Any]:
        seen["reclaimable"] += 1
        return victims(body)

    @app.post("/jobEnqueueable")
    def job_enqueueable(body: dict[str, Any]) -> dict[str, Any]:
        seen["jobEnqueueable"] += 1
        pg = (body.get("job") or {}).get("PodGroup") or {}
        held = HOLD in ((pg.get("metadata") or {}).get("annotations") or {})
        return {"status": -1 if held else 1}

    @app.post("/queueOverused")
    def queue_overused() -> dict[str, Any]:
        seen["queueOverused"] += 1
        return {"overused": False}

    @app.get("/stats")
    def stats() -> dict[str, int]:
        return dict(seen)

    return app


app = create_app()
