"""ConfigMap → typed configuration: validation with field paths, last-good fallback, change detection, hot reload.

Every webhook and scheduler process holds a `Loader` per ConfigMap (and a `PolicyLoader` for the AdmissionPolicy
ConfigMaps) driven by a `ConfigMapWatch` over `kube.informers`, so a change is in force as soon as its watch event
arrives (well within 2 s). A bad value is rejected with its field path and reason and the last good configuration
stays in force; the rejection shows as a Warning Event on the ConfigMap, a log line and the counter
`lahar_config_reload_failures_total{configmap}`. `validate_configmap` is the same check for the validating webhook
that refuses a bad lahar ConfigMap already at `kubectl apply`.

The ConfigMaps:
- `lahar-admission-config`, key `admission.yaml`: an `AdmissionConfig` (camelCase or snake_case keys);
- `lahar-scheduler-configmap`, key `volcano-scheduler.conf`: the scheduler's conf (parser registered by the
  scheduler side with `register_validator`, since `policies` sits below `scheduler`);
- any ConfigMap labelled `lahar.sh/policy: "true"`, key `policy.yaml`: one or more AdmissionPolicy documents.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import orjson
import yaml
from pydantic import ValidationError

from lahar.kube import informers, limits
from lahar.kube.client import ClusterClient
from lahar.policies import events, metrics
from lahar.policies.admission import AdmissionConfig
from lahar.policies.admission_policies import CompiledPolicy, PolicySet, load_documents
from lahar.policies.errors import ConfigError, from_validation_error

__all__ = [
    "ADMISSION_CONFIGMAP",
    "ADMISSION_KEY",
    "POLICY_KEY",
    "POLICY_LABEL",
    "SCHEDULER_CONFIGMAP",
    "SCHEDULER_KEY",
    "ConfigMapWatch",
    "Loader",
    "Outcome",
    "PolicyLoader",
    "digest",
    "is_policy_configmap",
    "key_of",
    "parse_admission_config",
    "parse_policy_configmap",
    "policies_from_documents",
    "register_validator",
    "report_failure",
    "validate_configmap",
    "yaml_key",
]

log = logging.getLogger(__name__)

ADMISSION_CONFIGMAP = "lahar-admission-config"
ADMISSION_KEY = "admission.yaml"
SCHEDULER_CONFIGMAP = "lahar-scheduler-configmap"
SCHEDULER_KEY = "volcano-scheduler.conf"
POLICY_LABEL = "lahar.sh/policy"
POLICY_KEY = "policy.yaml"

T = TypeVar("T")


def key_of(cm: Mapping[str, Any]) -> str:
    meta = cm.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def digest(cm: Mapping[str, Any] | None) -> str:
    """What change detection compares: the ConfigMap's `data` (and `binaryData`), not its metadata."""
    if cm is None:
        return "<absent>"
    body = {"data": cm.get("data") or {}, "binaryData": cm.get("binaryData") or {}}
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


def yaml_key(cm: Mapping[str, Any], key: str, *, all_documents: bool = False) -> Any:
    """The decoded YAML under `data[key]`; `ConfigError` at `data[key]` when missing or not YAML."""
    data = cm.get("data") or {}
    where = f"data[{key}]"
    if key not in data:
        raise ConfigError([(where, "required key is missing")], source=f"ConfigMap {key_of(cm)}")
    try:
        if all_documents:  # bounded: an alias bomb in a ConfigMap must not take the webhook's memory
            return limits.safe_load_all(data[key] or "")
        return limits.safe_load(data[key] or "")
    except (yaml.YAMLError, limits.LimitError) as e:
        raise ConfigError([(where, f"not valid YAML: {' '.join(str(e).split())}")],
                          source=f"ConfigMap {key_of(cm)}") from None


def parse_admission_config(cm: Mapping[str, Any] | None) -> AdmissionConfig:
    """`lahar-admission-config` → `AdmissionConfig`; no ConfigMap (or an empty key) means the built-in defaults."""
    if cm is None:
        return AdmissionConfig()
    doc = yaml_key(cm, ADMISSION_KEY)
    where = f"data[{ADMISSION_KEY}]"
    if doc is None:
        return AdmissionConfig()
    if not isinstance(doc, Mapping):
        raise ConfigError([(where, "must be a mapping")], source=f"ConfigMap {key_of(cm)}")
    try:
        return AdmissionConfig.load(doc)
    except ValidationError as e:
        raise ConfigError(from_validation_error(e, where), source=f"ConfigMap {key_of(cm)}") from None


def is_policy_configmap(cm: Mapping[str, Any] | None) -> bool:
    labels = ((cm or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(POLICY_LABEL) == "true"


def parse_policy_configmap(cm: Mapping[str, Any]) -> list[CompiledPolicy]:
    """A policy ConfigMap's `policy.yaml` → compiled policies (errors at `data[policy.yaml][doc N] <path>`)."""
    source = f"ConfigMap {key_of(cm)}"
    docs = yaml_key(cm, POLICY_KEY, all_documents=True)
    try:
        return load_documents(docs, source=source)
    except ConfigError as e:
        raise ConfigError([(f"data[{POLICY_KEY}]{p}", r) for p, r in e.errors], source=source) from None


_VALIDATORS: dict[str, Callable[[Mapping[str, Any]], Any]] = {ADMISSION_CONFIGMAP: parse_admission_config}


def register_validator(name: str, parse: Callable[[Mapping[str, Any]], Any]) -> None:
    """Check ConfigMaps called `name` with `parse` (raising on a bad value) in `validate_configmap`; the scheduler
    side registers its conf parser for `lahar-scheduler-configmap` this way."""
    _VALIDATORS[name] = parse


def validate_configmap(cm: Mapping[str, Any], *, namespace: str | None = None) -> list[str]:
    """Messages (`path: reason`) refusing a lahar ConfigMap with a bad value; `[]` for a good one or one that is
    not lahar's. `namespace`, when given, is the only namespace lahar's named ConfigMaps are read from."""
    meta = cm.get("metadata") or {}
    parse = _VALIDATORS.get(meta.get("name") or "")
    checks: list[Callable[[Mapping[str, Any]], Any]] = []
    if parse is not None and (namespace is None or meta.get("namespace") in (None, "", namespace)):
        checks.append(parse)
    if is_policy_configmap(cm):
        checks.append(parse_policy_configmap)
    out: list[str] = []
    for check in checks:
        try:
            check(cm)
        except ConfigError as e:
            out.extend(f"{p}: {r}" for p, r in e.errors)
        except Exception as e:  # a registered parser with its own error type
            out.append(str(e))
    return out


# --- one ConfigMap → one typed value -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    changed: bool
    error: ConfigError | None = None


class Loader(Generic[T]):
    """Holds the configuration parsed from one ConfigMap: `apply(cm)` parses a new version (unchanged data is not
    re-parsed), keeps the last good value when it is bad, and calls the `on_change` listeners with a good one."""

    def __init__(self, parse: Callable[[Mapping[str, Any] | None], T], *, default: T, name: str = "") -> None:
        self.name = name
        self._parse = parse
        self._value = default
        self._digest: str | None = None
        self._lock = threading.Lock()
        self._listeners: list[Callable[[T], None]] = []
        self.last_error: ConfigError | None = None

    @property
    def current(self) -> T:
        return self._value

    def on_change(self, fn: Callable[[T], None]) -> None:
        self._listeners.append(fn)

    def apply(self, cm: Mapping[str, Any] | None) -> Outcome:
        d = digest(cm)
        with self._lock:
            if d == self._digest:
                return Outcome(False, self.last_error)
            self._digest = d
            try:
                value = self._parse(cm)
            except ConfigError as e:
                self.last_error = e
                return Outcome(False, e)
            except Exception as e:  # a parser with its own error type: still a rejected value
                self.last_error = ConfigError([("data", str(e))], source=f"ConfigMap {self.name}")
                return Outcome(False, self.last_error)
            self._value, self.last_error = value, None
        for fn in list(self._listeners):
            fn(value)
        return Outcome(True)


# --- all policy ConfigMaps → one PolicySet -------------------------------------------------------------------------


ParamLookup = Callable[[str, str], Mapping[str, Any] | None]


class PolicyLoader:
    """The AdmissionPolicies of every ConfigMap labelled `lahar.sh/policy: "true"`, each ConfigMap with its own
    last good version; `current()` is the PolicySet in force, params resolved through `param_lookup(ns, name)`."""

    def __init__(self, param_lookup: ParamLookup | None = None) -> None:
        self._lookup = param_lookup
        self._lock = threading.Lock()
        self._by_cm: dict[str, tuple[str, list[CompiledPolicy]]] = {}   # key → (digest, policies)
        self._failed: dict[str, str] = {}                                 # key → digest of a rejected version
        self.errors: dict[str, ConfigError] = {}
        self._set: PolicySet | None = None
        self._listeners: list[Callable[[PolicySet], None]] = []

    def on_change(self, fn: Callable[[PolicySet], None]) -> None:
        self._listeners.append(fn)

    def apply(self, cm: Mapping[str, Any]) -> Outcome:
        key, d = key_of(cm), digest(cm)
        with self._lock:
            held = self._by_cm.get(key)
            if (held and held[0] == d) or self._failed.get(key) == d:
                return Outcome(False, self.errors.get(key))
            try:
                compiled = parse_policy_configmap(cm)
                self._check_unique(key, compiled, cm)
            except ConfigError as e:
                self._failed[key], self.errors[key] = d, e
                return Outcome(False, e)
            except Exception as e:  # noqa: BLE001 — a ConfigMap nobody could parse is skipped, never fatal
                log.exception("ConfigMap %s: policies could not be loaded", key)
                err = ConfigError([(f"data[{POLICY_KEY}]", f"could not be loaded ({type(e).__name__}): "
                                    f"{str(e)[:200]}")], source=f"ConfigMap {key}")
                self._failed[key], self.errors[key] = d, err
                return Outcome(False, err)
            self._failed.pop(key, None)
            self.errors.pop(key, None)
            ns = (cm.get("metadata") or {}).get("namespace") or ""
            self._by_cm[key] = (d, [_with_default_ns(p, ns) for p in compiled])
            self._set = None
        self._notify()
        return Outcome(True)

    def _check_unique(self, key: str, compiled: list[CompiledPolicy], cm: Mapping[str, Any]) -> None:
        mine = {p.name for p in compiled}
        clashes = [(n, other) for other, (_, ps) in sorted(self._by_cm.items()) if other != key
                   for n in sorted(mine & {p.name for p in ps})]
        if clashes:
            raise ConfigError([(f"data[{POLICY_KEY}]", f"AdmissionPolicy {n} is already defined in ConfigMap "
                                f"{other}") for n, other in clashes], source=f"ConfigMap {key_of(cm)}")

    def remove(self, cm: Mapping[str, Any]) -> bool:
        key = key_of(cm)
        with self._lock:
            self._failed.pop(key, None)
            self.errors.pop(key, None)
            gone = self._by_cm.pop(key, None) is not None
            if gone:
                self._set = None
        if gone:
            self._notify()
        return gone

    def holds(self, cm: Mapping[str, Any]) -> bool:
        key = key_of(cm)
        return key in self._by_cm or key in self._failed

    def param_refs(self) -> set[str]:
        """`namespace/name` of every ConfigMap a policy takes its params from."""
        with self._lock:
            return {f"{p.spec.param_ref.namespace}/{p.spec.param_ref.name}"
                    for _, ps in self._by_cm.values() for p in ps if p.spec.param_ref is not None}

    def refresh_params(self) -> None:
        with self._lock:
            self._set = None
        self._notify()

    def current(self) -> PolicySet:
        with self._lock:
            if self._set is None:
                self._set = PolicySet.of(self._resolve(p) for _, ps in self._by_cm.values() for p in ps)
            return self._set

    def _resolve(self, p: CompiledPolicy) -> CompiledPolicy:
        ref = p.spec.param_ref
        if ref is None:
            return p
        found = self._lookup(ref.namespace, ref.name) if self._lookup is not None else None
        return p.with_params(dict(found) if found is not None else None)

    def _notify(self) -> None:
        if self._listeners:
            current = self.current()
            for fn in list(self._listeners):
                fn(current)


def _with_default_ns(p: CompiledPolicy, namespace: str) -> CompiledPolicy:
    """A paramRef without a namespace names a ConfigMap next to the policy's own ConfigMap."""
    ref = p.spec.param_ref
    if ref is None or ref.namespace or not namespace:
        return p
    spec = p.spec.model_copy(update={"param_ref": ref.model_copy(update={"namespace": namespace})})
    return CompiledPolicy(policy=p.policy.model_copy(update={"spec": spec}), match_conditions=p.match_conditions,
                          variables=p.variables, validations=p.validations, mutations=p.mutations,
                          params=p.params, source=p.source)


# --- the watch: informer events → loaders, failures → Event + log + counter ----------------------------------------


def report_failure(client: ClusterClient | None, cm: Mapping[str, Any], error: ConfigError, *,
                   component: str = "lahar") -> None:
    """A rejected ConfigMap: a log line, `lahar_config_reload_failures_total{configmap}` + 1, a Warning Event."""
    key = key_of(cm)
    log.warning("ConfigMap %s rejected, the last good configuration stays in force: %s", key,
                "; ".join(f"{p}: {r}" for p, r in error.errors))
    metrics.RELOAD_FAILURES.inc(configmap=key)
    if client is not None:
        message = "configuration rejected, the last good one stays in force: " + \
            "; ".join(f"{p}: {r}" for p, r in error.errors)
        events.record(client, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": cm.get("metadata") or {}},
                      "Warning", "InvalidConfiguration", message, component=component)


class ConfigMapWatch:
    """One ConfigMap informer (cluster-wide unless `namespace`) feeding named `Loader`s and a `PolicyLoader`.

        watch = ConfigMapWatch(client, component="lahar-webhook")
        admission = watch.watch(Loader(parse_admission_config, default=AdmissionConfig()),
                                namespace="lahar-system", name=ADMISSION_CONFIGMAP)
        policies = watch.watch_policies()
        watch.start()            # lists, applies what exists, then follows the watch
        ... admission.current, policies.current() ...
        watch.stop()
    """

    def __init__(self, client: ClusterClient, *, namespace: str | None = None, component: str = "lahar",
                 events: bool = True) -> None:
        self.client = client
        self.component = component
        self._events = events
        rt = client.registry.get("", "v1", "configmaps")
        if rt is None:
            raise ValueError("the cluster client does not serve configmaps")
        self.informer = informers.Informer(client, rt, namespace=namespace)
        self._loaders: dict[str, Loader[Any]] = {}
        self._policies: PolicyLoader | None = None
        self.informer.add_handler(on_add=self._changed, on_update=lambda _old, new: self._changed(new),
                                  on_delete=self._deleted)

    def watch(self, loader: Loader[T], *, namespace: str, name: str) -> Loader[T]:
        loader.name = loader.name or f"{namespace}/{name}"
        self._loaders[f"{namespace}/{name}"] = loader
        return loader

    def watch_policies(self, loader: PolicyLoader | None = None) -> PolicyLoader:
        if loader is None:
            loader = PolicyLoader(param_lookup=lambda ns, name: self.informer.get(ns, name))
        self._policies = loader
        return loader

    def start(self, *, timeout: float | None = 30.0) -> None:
        self.informer.start()
        if not self.informer.wait_for_sync(timeout):
            raise TimeoutError("ConfigMap informer did not sync")
        for key, loader in self._loaders.items():     # an absent ConfigMap means the defaults
            ns, _, name = key.partition("/")
            if self.informer.get(ns, name) is None:
                loader.apply(None)

    def stop(self) -> None:
        self.informer.stop()

    def __enter__(self) -> ConfigMapWatch:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _report(self, cm: Mapping[str, Any], outcome: Outcome) -> None:
        if outcome.error is not None and not outcome.changed:
            report_failure(self.client if self._events else None, cm, outcome.error, component=self.component)

    def _changed(self, cm: dict[str, Any]) -> None:
        key = key_of(cm)
        loader = self._loaders.get(key)
        if loader is not None:
            before = loader.last_error
            outcome = loader.apply(cm)
            if outcome.error is not None and outcome.error is not before:
                self._report(cm, outcome)
        p = self._policies
        if p is None:
            return
        if is_policy_configmap(cm):
            before = p.errors.get(key)
            outcome = p.apply(cm)
            if outcome.error is not None and outcome.error is not before:
                self._report(cm, outcome)
        elif p.holds(cm):
            p.remove(cm)                      # the label was taken off
        if key in p.param_refs():
            p.refresh_params()

    def _deleted(self, cm: dict[str, Any]) -> None:
        key = key_of(cm)
        loader = self._loaders.get(key)
        if loader is not None:
            loader.apply(None)
        p = self._policies
        if p is not None:
            p.remove(cm)
            if key in p.param_refs():
                p.refresh_params()


# --- offline: policies from files (`lahar policy test -p`) ---------------------------------------------------------


def policies_from_documents(docs: list[Mapping[str, Any]], *, source: str = "") -> list[CompiledPolicy]:
    """AdmissionPolicy documents and policy ConfigMaps (labelled `lahar.sh/policy: "true"`, or any ConfigMap with
    a `policy.yaml` key) → compiled policies, their paramRefs resolved against the other ConfigMaps in `docs`.
    Raises `ConfigError` naming the document and field path."""
    configmaps = {(str((d.get("metadata") or {}).get("namespace") or ""), str((d.get("metadata") or {}).get("name")))
                  : d for d in docs if d.get("apiVersion") == "v1" and d.get("kind") == "ConfigMap"}
    loader = PolicyLoader(param_lookup=lambda ns, name: configmaps.get((ns, name)))
    plain: list[Mapping[str, Any]] = []
    errors: list[tuple[str, str]] = []
    for d in docs:
        if d.get("kind") == "AdmissionPolicy":
            plain.append(d)
        elif d.get("kind") == "ConfigMap" and (is_policy_configmap(d) or POLICY_KEY in (d.get("data") or {})):
            outcome = loader.apply(d)
            if outcome.error is not None:
                errors.extend((f"{outcome.error.source} {p}", r) for p, r in outcome.error.errors)
    try:
        inline = load_documents(plain, source=source)
    except ConfigError as e:
        errors.extend(e.errors)
        inline = []
    if errors:
        raise ConfigError(errors, source=source)
    from_cms = list(loader.current())
    names = [p.name for p in (*inline, *from_cms)]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError([(f"AdmissionPolicy {n}", "defined more than once") for n in dupes], source=source)
    return [*(loader._resolve(p) for p in inline), *from_cms]
