"""Admission webhooks: Volcano's paths (`/jobs/validate`, `/pods/mutate`, ...) as pure rule handlers behind one
AdmissionReview entry point (`review`), a route table (`routes`), the FastAPI app (`app`) and HTTPS (`server`).

Rule modules (`jobs`, `cronjobs`, `queues`, `podgroups`, `pods`, `devices`) are `handler(request, lookups, config)
-> Verdict` functions; import the submodules you need (`from webhooks import review`).
"""

from lahar.webhooks.review import Request, Verdict

__all__ = ["Request", "Verdict"]
