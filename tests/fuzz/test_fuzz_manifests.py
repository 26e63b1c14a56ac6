"""Fuzz of the YAML and manifest loaders: `kube.limits.safe_load[_all]`, the policy / admission ConfigMap keys,
the scheduler conf and devcluster's cluster profiles. Invariant: each returns or raises its documented error,
never anything else, and never expands or recurses past the bounds (the alias bomb is refused in milliseconds).
"""

from __future__ import annotations

import contextlib

import yaml
from hypothesis import given, settings

from lahar.devcluster import profiles
from lahar.kube import limits
from lahar.policies import loading
from lahar.policies.errors import ConfigError
from lahar.scheduler.framework import conf

from ._strategies import SETTINGS, yaml_texts


@settings(max_examples=120, **SETTINGS)
@given(yaml_texts)
def test_bounded_yaml_loader(text: str) -> None:
    try:
        docs = limits.safe_load_all(text)
    except (yaml.YAMLError, limits.LimitError):
        return
    for doc in docs:
        assert limits.depth(doc) <= limits.MAX_DEPTH


@settings(max_examples=60, **SETTINGS)
@given(yaml_texts)
def test_configmap_yaml_keys(text: str) -> None:
    cm = {"metadata": {"name": "c", "namespace": "lahar-system"}, "data": {"k": text}}
    for every in (False, True):
        with contextlib.suppress(ConfigError):
            loading.yaml_key(cm, "k", all_documents=every)


@settings(max_examples=60, **SETTINGS)
@given(yaml_texts)
def test_scheduler_conf(text: str) -> None:
    with contextlib.suppress(conf.ConfError):
        conf.load(text)


@settings(max_examples=40, **SETTINGS)
@given(yaml_texts)
def test_cluster_profiles(tmp_path_factory, text: str) -> None:  # noqa: ANN001 - pytest fixture
    path = tmp_path_factory.mktemp("profile") / "p.yaml"
    path.write_text(text)
    with contextlib.suppress(profiles.ProfileError):
        profiles.load(str(path))
