"""Process-wide settings from the environment (prefix `LAHAR_`) and flags.

Every `lahar` command reads one `Settings`; Redis comes from `REDIS_URL`, the cluster the way kubectl finds it.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="LAHAR_", frozen=True, extra="ignore")

    data_dir: Path = Path(".lahar")
    kubeconfig: Path | None = Field(default=None, validation_alias="KUBECONFIG")
    redis_url: str | None = Field(default=None, validation_alias="REDIS_URL")
    devcluster_port: int = 6443
    profile: str = "cpu-small"
    nodes: int = 4
    log_level: str = "INFO"
    log_format: str = "text"                  # text or json lines (lahar.logs reads LAHAR_LOG_FORMAT itself)

    # Controllers on Celery (lahar.worker, lahar.dispatcher); every value can be set as LAHAR_<NAME>.
    scheduler_names: tuple[str, ...] = ("volcano",)
    default_queue: str = "default"
    reconcile_soft_time_limit: float = 60.0   # SoftTimeLimitExceeded inside a reconcile → retried with backoff
    reconcile_time_limit: float = 90.0        # the worker child is killed; the per-key lock expires a bit later
    visibility_timeout: float = 300.0         # Redis broker: unacked messages are redelivered after this
    lock_ttl: float = 15.0                    # per-key lock; extended every lock_ttl/3 while a reconcile runs
    max_countdown: float = 60.0               # longer delays go to the durable timers, not Celery countdowns
    max_retries: int = 15                     # unknown errors (Volcano's --max-requeue-num); resync retries later
    resync_interval: float = 30.0             # beat: enqueue every key so a lost event heals
    scheduler_conf_namespaces: str | None = None  # where the scheduler looks for its ConfigMap (unset: everywhere)
    schedule_period: float = 1.0              # beat: scheduler session tick
    dispatch_lease_ttl: float = 15.0          # a standby dispatcher / beat takes over after this
    timer_poll_interval: float = 0.25         # the dispatcher pops due durable timers this often
    pending_ttl: float = 60.0                 # a de-duplication mark never outlives this (a lost message heals)
    pending_grace: float = 5.0                # resync: a mark older than this whose task is not in the broker is
                                              # stale (its message was lost) and is replaced by a new task
    pod_concurrency: int = 16                 # a Job's pod creates/deletes in flight at once, per worker process
    job_cache: bool = True                    # the job reconciler reads Jobs, pods, PodGroups from informers
    flower_port: int = 5555
    flower_basic_auth: str | None = None      # user:password for Flower; unset: generated in <data_dir>/flower-auth
