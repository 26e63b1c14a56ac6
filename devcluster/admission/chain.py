"""The shell of devcluster's admission chain: `WebhookAdmission` reads the webhook configurations from the store (a
watch drained on each request), matches them (`matching`, `conditions`), calls them (`client`) and applies the
patches of mutating webhooks or raises the denial of validating ones (`reviews`).

Top of `devcluster.admission`; the store calls `mutate` then `validate` around every write.
"""

from __future__ import annotations

import base64
import concurrent.futures
import copy
import dataclasses
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonpatch
import orjson

from lahar.devcluster.admission import builtin
from lahar.devcluster.admission.client import _CallError, _loads, _Transport, _verify_response
from lahar.devcluster.admission.conditions import match_conditions
from lahar.devcluster.admission.matching import (
    _EXEMPT,
    DEFAULT_TIMEOUT_SECONDS,
    GROUP,
    MUTATING,
    VALIDATING,
    AdmissionCall,
    Obj,
    sorted_webhooks,
    webhook_matches,
)
from lahar.devcluster.admission.reviews import build_review, calling_failed, denied, dry_run_unsupported, service_url
from lahar.kube import errors
from lahar.kube.resources import ResourceType

# ---------------------------------------------------------------------------------------------------------------
# the shell


@dataclass
class _ConfigCache:
    """Webhook configurations of one kind, kept current from a store watch drained on each request."""

    store: Any
    rt: ResourceType
    objects: dict[str, Obj] = field(default_factory=dict)
    hooks: list[tuple[str, Obj]] = field(default_factory=list)
    watch: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def current(self) -> list[tuple[str, Obj]]:
        with self.lock:
            changed = False
            if self.watch is None:
                self.objects.clear()
                self.watch = self.store.watch(self.rt)
                changed = True
            while True:
                event = self.watch.next_event(0)
                if event is None:
                    break
                obj = event["object"]
                name = (obj.get("metadata") or {}).get("name") or ""
                if event["type"] in ("ADDED", "MODIFIED"):
                    self.objects[name] = obj
                    changed = True
                elif event["type"] == "DELETED":
                    self.objects.pop(name, None)
                    changed = True
            if changed:
                self.hooks = sorted_webhooks(self.objects.values())
            return self.hooks

    def reset_locked(self) -> None:
        if self.watch is not None:
            self.watch.stop()
        self.watch = None

    def close(self) -> None:
        with self.lock:
            self.reset_locked()


class WebhookAdmission:
    """The store's AdmissionPort backed by registered Mutating/ValidatingWebhookConfigurations.

    `resolve_service(namespace, name, port, path) -> url | None` may map a `clientConfig.service` to a reachable
    URL (e.g. a local `lahar webhook`); without it, or when it returns None, the in-cluster DNS name is used, which
    does not resolve here, so failurePolicy decides (a missing Service fails as `service "x" not found`).
    """

    def __init__(self, store: Any, *, resolve_service: Callable[[str, str, int, str], str | None] | None = None,
                 max_workers: int = 8) -> None:
        self.store = store
        self.resolve_service = resolve_service
        registry = getattr(store, "registry", None)
        self._mutating = _ConfigCache(store, _rt(registry, "MutatingWebhookConfiguration", MUTATING))
        self._validating = _ConfigCache(store, _rt(registry, "ValidatingWebhookConfiguration", VALIDATING))
        self._transport = _Transport()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers,
                                                           thread_name_prefix="admission-webhook")

    def close(self) -> None:
        self._mutating.close()
        self._validating.close()
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._transport.close()

    # AdmissionPort ------------------------------------------------------------------------------------------

    def mutate(self, attrs: Any) -> Obj | None:
        """Run the built-in plugins (`builtin.admit`), then call matching mutating webhooks in order, applying
        their JSONPatches; the new object or None."""
        if attrs.rt.group == GROUP and attrs.rt.plural in _EXEMPT:
            return None
        admitted = builtin.admit(attrs.operation, attrs.rt.group, attrs.rt.plural, attrs.subresource, attrs.obj)
        if admitted is not None:
            attrs = dataclasses.replace(attrs, obj=admitted)
        hooks = self._mutating.current()
        if not hooks:
            return admitted
        call = AdmissionCall.from_attributes(attrs)
        changed = admitted is not None
        warnings = _warnings_list(attrs)
        for _config, hook in hooks:
            if not self._should_call(hook, call):
                continue
            response = self._call(hook, call, mutating=True, warnings=warnings)
            if response is None:
                continue
            patch = response.get("patch")
            if patch and call.obj is not None:
                try:
                    ops = _loads(base64.b64decode(patch))
                    patched = jsonpatch.JsonPatch(ops).apply(_copy(call.obj), in_place=True)
                except Exception as exc:
                    raise errors.ApiError(f"Internal error occurred: {exc}", code=500, reason="InternalError") from exc
                call = _replace_obj(call, patched)
                changed = True
        return call.obj if changed else None

    def validate(self, attrs: Any) -> None:
        """Call matching validating webhooks in parallel; raise the first denial or failure in configuration order."""
        if attrs.rt.group == GROUP and attrs.rt.plural in _EXEMPT:
            return
        hooks = self._validating.current()
        if not hooks:
            return
        call = AdmissionCall.from_attributes(attrs)
        # matchConditions before any call is started, as kube's validating dispatcher does: a webhook they exclude
        # costs no review, no thread and no connection (a pod of another scheduler never waits on lahar)
        relevant = [(hook, matched) for _config, hook in hooks if self._should_call(hook, call)
                    for matched in [self._conditions_hold(hook, call)] if matched is not False]
        if not relevant:
            return
        warnings = _warnings_list(attrs)
        if len(relevant) == 1:
            self._call(relevant[0][0], call, mutating=False, warnings=warnings, matched=bool(relevant[0][1]))
            return
        per_hook: list[list[str]] = [[] for _ in relevant]
        futures = [self._pool.submit(self._call, hook, call, mutating=False, warnings=w, matched=bool(matched))
                   for (hook, matched), w in zip(relevant, per_hook, strict=True)]
        first: BaseException | None = None
        for future, hook_warnings in zip(futures, per_hook, strict=True):  # configuration order: deterministic
            try:
                future.result()
            except BaseException as exc:  # noqa: BLE001 — re-raised below
                first = first or exc
            if warnings is not None:
                warnings.extend(hook_warnings)
        if first is not None:
            raise first

    # internals ----------------------------------------------------------------------------------------------

    def _should_call(self, hook: Obj, call: AdmissionCall) -> bool:
        return webhook_matches(hook, call, self._namespace_labels)

    @staticmethod
    def _conditions_hold(hook: Obj, call: AdmissionCall) -> bool | None:
        """The webhook's matchConditions: True or False, or None when they failed to evaluate under failurePolicy
        Fail (the call re-evaluates them in its slot, so the error is reported in configuration order)."""
        try:
            return match_conditions(hook, call, _lazy_request(call))
        except errors.ApiError:
            return None

    def _namespace_labels(self, name: str) -> Mapping[str, str]:
        ns_rt = _rt(getattr(self.store, "registry", None), "Namespace", "namespaces", group="")
        peek = getattr(self.store, "peek", None)
        if peek is not None:  # the store's own object, not a copy: labels are only read here
            ns = peek(ns_rt, None, name)
            if ns is None:
                raise errors.NotFound(f'namespaces "{name}" not found')
        else:
            ns = self.store.get(ns_rt, None, name)
        return (ns.get("metadata") or {}).get("labels") or {}

    def _url(self, hook: Obj) -> str:
        cfg = hook.get("clientConfig") or {}
        if cfg.get("url"):
            return str(cfg["url"])
        svc = cfg.get("service") or {}
        if self.resolve_service is not None:
            mapped = self.resolve_service(svc.get("namespace", ""), svc.get("name", ""), int(svc.get("port") or 443),
                                          svc.get("path") or "")
            if mapped:
                return mapped
        return service_url(svc)

    def _service_missing(self, hook: Obj) -> str | None:
        cfg = hook.get("clientConfig") or {}
        svc = cfg.get("service")
        if cfg.get("url") or not svc:
            return None
        svc_rt = _rt(getattr(self.store, "registry", None), "Service", "services", group="")
        try:
            self.store.get(svc_rt, svc.get("namespace"), svc.get("name"))
        except errors.NotFound:
            return f'failed to call webhook: service "{svc.get("name")}" not found'
        except Exception:  # noqa: BLE001 — let the call itself fail
            return None
        return None

    def _call(self, hook: Obj, call: AdmissionCall, *, mutating: bool, warnings: list[str] | None,
              matched: bool = False) -> Obj | None:
        """One webhook call; None when skipped (matchConditions, Ignore on failure), else the verified response.
        `matched`: the matchConditions were already evaluated (and held)."""
        name = hook.get("name", "")
        if not matched and not match_conditions(hook, call, _lazy_request(call)):
            return None
        review = build_review(call)
        if call.dry_run and (hook.get("sideEffects") or "Unknown") not in ("None", "NoneOnDryRun"):
            raise dry_run_unsupported(name)
        ignore = (hook.get("failurePolicy") or "Fail") == "Ignore"
        versions = hook.get("admissionReviewVersions") or ["v1"]
        try:
            if "v1" not in versions:
                raise _CallError(f"failed to call webhook: webhook does not accept v1 AdmissionReview: "
                                 f"{', '.join(versions)}")
            missing = None if self.resolve_service else self._service_missing(hook)
            if missing:
                raise _CallError(missing)
            url = self._url(hook)
            ca = (hook.get("clientConfig") or {}).get("caBundle") or ""
            timeout = hook.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS
            answer = self._transport.post(url, review, ca_bundle=ca, timeout=float(timeout))
            response = _verify_response(answer, review["request"]["uid"], mutating=mutating)
        except _CallError as exc:
            if ignore:
                return None
            raise calling_failed(name, str(exc)) from exc
        if warnings is not None:
            warnings.extend(response.get("warnings") or [])
        if not response.get("allowed"):
            raise denied(name, response.get("status"))
        return response


def _lazy_request(call: AdmissionCall) -> Callable[[], Obj]:
    """The review's request for matchConditions, built on first use only (most conditions read only `object`)."""
    built: list[Obj] = []

    def request() -> Obj:
        if not built:
            built.append(build_review(call)["request"])
        return built[0]
    return request


def _copy(obj: Obj) -> Obj:
    """A deep copy of a JSON object, through orjson (several times faster than `copy.deepcopy`)."""
    try:
        return orjson.loads(orjson.dumps(obj))
    except (TypeError, ValueError):  # not plain JSON (or integers beyond 64 bits)
        return copy.deepcopy(obj)


def _warnings_list(attrs: Any) -> list[str] | None:
    request = getattr(attrs, "request", None)
    if request is None:
        return None
    warnings = getattr(request, "warnings", None)
    return warnings if isinstance(warnings, list) else None


def _replace_obj(call: AdmissionCall, obj: Obj) -> AdmissionCall:
    from dataclasses import replace  # noqa: PLC0415

    return replace(call, obj=obj)


def _rt(registry: Any, kind: str, plural: str, *, group: str = GROUP) -> ResourceType:
    if registry is not None:
        found = registry.get(group, "v1", plural)
        if found is not None:
            return found
    namespaced = plural in ("services",)
    return ResourceType(group=group, version="v1", kind=kind, plural=plural, namespaced=namespaced)
