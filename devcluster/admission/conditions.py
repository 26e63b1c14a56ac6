"""CEL matchConditions of admission webhooks: `match_conditions` evaluates a webhook's conditions over the request,
the common shapes natively (`cel_shapes`), the rest with cel-python (`celpy`), compiled programs cached, each
expression given only the variables it names (`to_cel`).

Part of `devcluster.admission`, over `matching.AdmissionCall`; called by `chain.WebhookAdmission`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from typing import Any

from lahar.devcluster.admission.cel_shapes import Fallback, Shape, compile_shape
from lahar.devcluster.admission.matching import AdmissionCall, Obj
from lahar.kube import errors


class CelUnavailable(RuntimeError):
    """A matchCondition could not be evaluated because no CEL implementation is installed."""


# ---------------------------------------------------------------------------------------------------------------
# CEL matchConditions


_IDENTIFIER = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")


class _Cel:
    """Compiled-program cache over cel-python (`celpy`); each expression gets only the variables it names."""

    def __init__(self) -> None:
        self._programs: dict[str, tuple[Any, frozenset[str], Shape | None]] = {}
        self._lock = threading.Lock()
        self._env: Any = None
        try:
            import celpy  # noqa: PLC0415 — optional at import time, required only when a webhook uses CEL
        except ImportError:  # pragma: no cover - cel-python is a dependency
            self._celpy = None
        else:
            self._celpy = celpy

    def _compile(self, expression: str) -> tuple[Any, frozenset[str], Shape | None]:
        """(celpy program, or None when the native shape answers or without celpy; the names it reads; the native
        shape or None); cached. An expression with a native shape is valid CEL (the shapes are a subset), so its
        celpy program is only built once a Fallback asks for it: building celpy's parser costs about a third of a
        second of CPU, which the first review of every webhook paid inside the request."""
        with self._lock:
            entry = self._programs.get(expression)
            if entry is None:
                shape = compile_shape(expression)
                program = None if shape is not None else self._program(expression)  # a syntax error raises here
                # a CEL expression can only reach a variable by writing its name (an identifier in a string literal
                # just adds an unused variable): the others need no conversion
                entry = (program, frozenset(_IDENTIFIER.findall(expression)), shape)
                self._programs[expression] = entry
        return entry

    def _program(self, expression: str) -> Any:
        """celpy's program for `expression` (one Environment, and so one parser, for every expression)."""
        if self._celpy is None:
            return None
        if self._env is None:
            self._env = self._celpy.Environment()
        return self._env.program(self._env.compile(expression))

    def _fallback_program(self, expression: str) -> Any:
        with self._lock:
            program, names, shape = self._programs[expression]
            if program is None:
                program = self._program(expression)
                self._programs[expression] = (program, names, shape)
        return program

    def evaluate(self, expression: str, activation: Mapping[str, Any | Callable[[], Any]]) -> Any:
        entry = self._programs.get(expression)
        if entry is None:
            entry = self._compile(expression)
        program, names, shape = entry
        if shape is not None:
            try:
                return shape(activation)
            except Fallback:
                pass  # a case only CEL can answer (a missing field, another type): ask it
        if program is None:
            program = self._fallback_program(expression)
        if program is None:
            raise CelUnavailable(f"CEL is not available to evaluate {expression!r}: install cel-python")
        result = program.evaluate({k: to_cel(v() if callable(v) else v) for k, v in activation.items() if k in names})
        if isinstance(result, Exception):
            raise result
        return result


def to_cel(value: Any) -> Any:
    """`celpy.adapter.json_to_cel`, the same CEL values, dispatching on the exact type of plain JSON data (celpy's
    checks against typing generics cost most of a conversion); anything else goes to celpy."""
    from celpy import celtypes  # noqa: PLC0415 — loaded with celpy, only when a webhook uses CEL

    def convert(v: Any) -> Any:
        t = type(v)
        if t is str:
            return celtypes.StringType(v)
        if t is dict:
            return celtypes.MapType({convert(k): convert(x) for k, x in v.items()})
        if t is list:
            return celtypes.ListType([convert(x) for x in v])
        if t is bool:
            return celtypes.BoolType(v)
        if t is int:
            return celtypes.IntType(v)
        if t is float:
            return celtypes.DoubleType(v)
        if v is None:
            return None
        from celpy.adapter import json_to_cel  # noqa: PLC0415

        return json_to_cel(v)

    return convert(value)


_CEL = _Cel()


def match_conditions(webhook: Mapping[str, Any], call: AdmissionCall, request: Obj | Callable[[], Obj]) -> bool:
    """kube's matchconditions.Matcher: any false → skip; errors → Ignore skips, Fail raises Forbidden.

    `request` may be a callable building the AdmissionReview's request: it is called only by an expression that
    names `request`, so a webhook whose conditions read only `object` is skipped without building a review."""
    conditions = webhook.get("matchConditions") or []
    if not conditions:
        return True
    activation = {"object": call.obj, "oldObject": call.old_obj, "request": request}
    failures: list[str] = []
    for cond in conditions:
        expr = cond.get("expression", "")
        try:
            value = _CEL.evaluate(expr, activation)
        except Exception as exc:  # celpy raises its own parse/eval errors
            failures.append(f"expression '{expr}' resulted in error: {_cel_error_text(exc)}")
            continue
        if not isinstance(value, bool) and type(value).__name__ != "BoolType":
            failures.append(f"expression '{expr}' resulted in error: no such overload")
            continue
        if not bool(value):
            return False
    if failures:
        if (webhook.get("failurePolicy") or "Fail") == "Ignore":
            return False
        group_res = call.resource + (f".{call.group}" if call.group else "")
        text = failures[0] if len(failures) == 1 else "[" + ", ".join(failures) + "]"
        raise errors.Forbidden(f'{group_res} "{call.name}" is forbidden: {text}',
                               details={"name": call.name, "group": call.group, "kind": call.resource})
    return True


def _cel_error_text(exc: Exception) -> str:
    if exc.args and isinstance(exc.args[0], str):
        return exc.args[0].splitlines()[0]
    return str(exc) or type(exc).__name__
