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
