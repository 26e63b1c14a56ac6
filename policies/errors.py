"""Configuration errors that name the field: `spec.validations[0].expression: undeclared reference to 'x'`.

Raised by every parser in `policies` (admission configuration, AdmissionPolicy documents, ConfigMap loading) and
shown as is by the webhook that guards lahar's ConfigMaps, the reload Event and `lahar policy test`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import ValidationError

__all__ = ["ConfigError", "FieldError", "field_path", "from_validation_error"]

FieldError = tuple[str, str]          # (field path, reason)


def field_path(loc: Sequence[str | int], prefix: str = "") -> str:
    """`("spec", "validations", 0, "expression")` → `spec.validations[0].expression` (after `prefix`)."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "<root>"


def from_validation_error(e: ValidationError, prefix: str = "") -> list[FieldError]:
    errors: list[FieldError] = []
    for err in e.errors(include_url=False):
        loc = [p for p in err["loc"] if not (isinstance(p, str) and p.startswith(("function-", "tagged-union")))]
        msg = err["msg"].removeprefix("Value error, ")
        errors.append((field_path(loc, prefix), msg))
    return errors


class ConfigError(ValueError):
    """One or more field errors; `str()` lists them, one `path: reason` per line, `source` first when known."""

    def __init__(self, errors: Iterable[FieldError], *, source: str = "") -> None:
        self.errors: list[FieldError] = list(errors)
        self.source = source
        head = f"{source}: " if source else ""
        super().__init__(head + "; ".join(f"{p}: {r}" for p, r in self.errors))

    def with_source(self, source: str) -> ConfigError:
        return ConfigError(self.errors, source=source)

    def prefixed(self, prefix: str) -> ConfigError:
        return ConfigError([(f"{prefix}.{p}" if p != "<root>" else prefix, r) for p, r in self.errors],
                           source=self.source)
