"""Render lahar's Helm chart (deploy/helm/lahar) without the helm binary: `lahar chart render`, and the deploy tests.

A small interpreter for the subset of Go templates (text/template + Sprig) the chart uses, no more: actions with
`{{-`/`-}}` trimming and comments; `if`/`else if`/`else`, `range` (over lists and maps, with `$v` or `$k, $v`),
`with`, `define`/`include`; pipelines with `|`, parentheses, `$` variables, `.Values`/`.Release`/`.Chart`, and the
functions in FUNCTIONS. Anything else is a ChartError naming the file and the construct, never a silent guess.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = ["ChartError", "merge", "render", "render_objects"]


class ChartError(ValueError):
    """A template or value the renderer cannot handle faithfully (file and construct named)."""


# -- parsing ----------------------------------------------------------------------------------------------------

_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.S)


@dataclass
class _Node:
    kind: str                                  # text | action | if | range | with | define
    text: str = ""                             # text, action pipeline, define name
    branches: list[tuple[str, list[_Node]]] = field(default_factory=list)  # if/else-if; range/with: one
    orelse: list[_Node] = field(default_factory=list)


def _lex(src: str, where: str) -> list[tuple[str, str]]:
    """[('text', s) | ('action', body)] with Go's trim markers applied."""
    out: list[tuple[str, str]] = []
    pos = 0
    for m in _ACTION.finditer(src):
        text = src[pos:m.start()]
        if m.group(1):
            text = text.rstrip()
        out.append(("text", text))
        body = m.group(2).strip()
        if not (body.startswith("/*") and body.endswith("*/")):
            out.append(("action", body))
        pos = m.end()
        if m.group(3):
            while pos < len(src) and src[pos].isspace():
                pos += 1
    if "{{" in src[pos:]:
        raise ChartError(f"{where}: unclosed action")
    out.append(("text", src[pos:]))
    return out


def _parse(tokens: list[tuple[str, str]], where: str) -> tuple[list[_Node], dict[str, list[_Node]]]:
    defines: dict[str, list[_Node]] = {}
    root: list[_Node] = []
    stack: list[tuple[_Node | None, list[_Node]]] = [(None, root)]
    for kind, body in tokens:
        node, current = stack[-1]
        if kind == "text":
            if body:
                current.append(_Node("text", body))
            continue
        word = body.split(None, 1)[0] if body else ""
        rest = body[len(word):].strip()
        if word in ("if", "range", "with"):
            new = _Node(word, branches=[(rest, [])])
            current.append(new)
            stack.append((new, new.branches[0][1]))
        elif word == "define":
            name = _literal(rest, where)
            body_list: list[_Node] = []
            defines[name] = body_list
            stack.append((_Node("define", text=name), body_list))
        elif word == "else":
            if node is None or node.kind not in ("if", "range", "with"):
                raise ChartError(f"{where}: else outside if/range/with")
            if rest.startswith("if ") and node.kind == "if":
                node.branches.append((rest[3:].strip(), []))
                stack[-1] = (node, node.branches[-1][1])
            elif rest:
                raise ChartError(f"{where}: unsupported else {rest!r}")
            else:
                stack[-1] = (node, node.orelse)
        elif word == "end":
            if node is None:
                raise ChartError(f"{where}: end without a block")
            stack.pop()
        elif word in ("block", "template", "break", "continue", "tpl"):
            raise ChartError(f"{where}: {word} is not supported by lahar's chart renderer")
        else:
            current.append(_Node("action", body))
    if len(stack) != 1:
        raise ChartError(f"{where}: missing end")
    return root, defines


def _literal(text: str, where: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] == '"':
        return json.loads(text)
    raise ChartError(f"{where}: expected a string literal, got {text!r}")


# -- pipelines --------------------------------------------------------------------------------------------------

_TOKEN = re.compile(r'\s*("(?:[^"\\]|\\.)*"|`[^`]*`|\(|\)|\||:=|-?\d+(?:\.\d+)?|\$[\w]*(?:\.[\w]+)*|\.[\w.]*|[\w]+)')


def _tokens(text: str, where: str) -> list[str]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ChartError(f"{where}: cannot read {text[pos:]!r}")
        out.append(m.group(1))
        pos = m.end()
    return out


def _truthy(v: Any) -> bool:
    return not (v is None or v is False or v == 0 and not isinstance(v, bool) or v in ("", [], {}))


def _to_yaml(v: Any) -> str:
    if v is None:
        return "null"
    return yaml.safe_dump(v, default_flow_style=False, sort_keys=True, width=10_000).rstrip("\n").removesuffix(
        "\n...")


def _indent(n: int, s: str) -> str:
    pad = " " * int(n)
    return "\n".join(pad + line for line in str(s).split("\n"))


def _required(msg: str, v: Any) -> Any:
    if not _truthy(v):
        raise ChartError(f"required value missing: {msg}")
    return v


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "toYaml": _to_yaml,
    "toJson": lambda v: json.dumps(v, separators=(",", ":")),
    "indent": _indent,
    "nindent": lambda n, s: "\n" + _indent(n, s),
    "quote": lambda v: json.dumps("" if v is None else str(v)),
    "default": lambda d, v=None: v if _truthy(v) else d,
    "not": lambda v: not _truthy(v),
    "and": lambda *a: next((x for x in a if not _truthy(x)), a[-1]),
    "or": lambda *a: next((x for x in a if _truthy(x)), a[-1]),
    "eq": lambda a, *b: any(a == x for x in b),
    "ne": lambda a, b: a != b,
    "empty": lambda v: not _truthy(v),
    "b64enc": lambda s: base64.b64encode(str(s).encode()).decode(),
    "required": _required,
    "join": lambda sep, items: str(sep).join(str(i) for i in items),
    "randAlphaNum": lambda n: "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(int(n))),
    "lookup": lambda *a: {},  # as `helm template`: no cluster, so nothing exists yet
}


class _Renderer:
    def __init__(self, defines: dict[str, list[_Node]], root: dict[str, Any]) -> None:
        self.defines = defines
        self.root = root

    def run(self, nodes: list[_Node], dot: Any, scope: dict[str, Any], where: str) -> str:
        out: list[str] = []
        for n in nodes:
            if n.kind == "text":
                out.append(n.text)
            elif n.kind == "action":
                value = self.pipeline(n.text, dot, scope, where)
                if isinstance(value, dict | list):
                    raise ChartError(f"{where}: {{{{ {n.text} }}}} prints a map or list; pipe it to toYaml")
                if value is not _NOTHING:
                    out.append("" if value is None else _format(value))
            elif n.kind == "if":
                for cond, body in n.branches:
                    if _truthy(self.pipeline(cond, dot, scope, where)):
                        out.append(self.run(body, dot, dict(scope), where))
                        break
                else:
                    out.append(self.run(n.orelse, dot, dict(scope), where))
            elif n.kind == "with":
                cond, body = n.branches[0]
                v = self.pipeline(cond, dot, scope, where)
                out.append(self.run(body, v, dict(scope), where) if _truthy(v) else
                           self.run(n.orelse, dot, dict(scope), where))
            elif n.kind == "range":
                out.append(self.range(n, dot, scope, where))
        return "".join(out)

    def range(self, n: _Node, dot: Any, scope: dict[str, Any], where: str) -> str:
        spec, body = n.branches[0]
        names: list[str] = []
        if ":=" in spec:
            left, spec = spec.split(":=", 1)
            names = [x.strip() for x in left.split(",")]
        items = self.pipeline(spec, dot, scope, where)
        pairs = sorted(items.items()) if isinstance(items, dict) else list(enumerate(items or []))
        if not pairs:
            return self.run(n.orelse, dot, dict(scope), where)
        out = []
        for k, v in pairs:
            inner = dict(scope)
            if len(names) == 1:
                inner[names[0]] = v
            elif len(names) == 2:
                inner[names[0]], inner[names[1]] = k, v
            out.append(self.run(body, v, inner, where))
        return "".join(out)

    def pipeline(self, text: str, dot: Any, scope: dict[str, Any], where: str) -> Any:
        toks = _tokens(text, where)
        assign = None
        if len(toks) >= 2 and toks[1] == ":=" and toks[0].startswith("$"):
            assign, toks = toks[0], toks[2:]
        value = self._pipe(toks, dot, scope, where)
        if assign is not None:
            scope[assign] = value
            return _NOTHING
        return value

    def _pipe(self, toks: list[str], dot: Any, scope: dict[str, Any], where: str) -> Any:
        commands: list[list[str]] = [[]]
        depth = 0
        for t in toks:
            depth += t == "("
            depth -= t == ")"
            if t == "|" and depth == 0:
                commands.append([])
            else:
                commands[-1].append(t)
        value: Any = _NOTHING
        for cmd in commands:
            value = self._command(cmd, dot, scope, where, piped=value)
        return value

    def _command(self, toks: list[str], dot: Any, scope: dict[str, Any], where: str, *, piped: Any) -> Any:
        args: list[Any] = []
        i = 0
        while i < len(toks):
            t = toks[i]
            if t == "(":
                depth, j = 1, i + 1
                while depth:
                    if j >= len(toks):
                        raise ChartError(f"{where}: unbalanced parentheses")
                    depth += (toks[j] == "(") - (toks[j] == ")")
                    j += 1
                args.append(_Value(self._pipe(toks[i + 1:j - 1], dot, scope, where)))
                i = j
                continue
            args.append(t)
            i += 1
        if not args:
            raise ChartError(f"{where}: empty command")
        head = args[0]
        if isinstance(head, str) and re.fullmatch(r"[A-Za-z]\w*", head) and head not in ("true", "false", "nil"):
            values = [self._arg(a, dot, scope, where) for a in args[1:]]
            if piped is not _NOTHING:
                values.append(piped)
            if head == "include":
                name, ctx = values
                if name not in self.defines:
                    raise ChartError(f"{where}: include of undefined template {name!r}")
                return self.run(self.defines[name], ctx, {"$": self.root}, where)
            if head not in FUNCTIONS:
                raise ChartError(f"{where}: function {head!r} is not supported by lahar's chart renderer")
            try:
                return FUNCTIONS[head](*values)
            except ChartError:
                raise
            except Exception as e:  # wrong arity or types: name the call
                raise ChartError(f"{where}: {head}: {e}") from e
        if len(args) != 1 or piped is not _NOTHING:
            raise ChartError(f"{where}: cannot apply {args!r}")
        return self._arg(head, dot, scope, where)

    def _arg(self, a: Any, dot: Any, scope: dict[str, Any], where: str) -> Any:
        if isinstance(a, _Value):
            return a.v
        if a.startswith('"'):
            return json.loads(a)
        if a.startswith("`"):
            return a[1:-1]
        if a in ("true", "false"):
            return a == "true"
        if a == "nil":
            return None
        if re.fullmatch(r"-?\d+", a):
            return int(a)
        if re.fullmatch(r"-?\d+\.\d+", a):
            return float(a)
        if a.startswith("$"):
            var, _, path = a.partition(".")
            if var not in scope:
                raise ChartError(f"{where}: undefined variable {var}")
            return _walk(scope[var], path)
        if a.startswith("."):
            return _walk(dot, a[1:])
        raise ChartError(f"{where}: cannot read {a!r}")


class _Value:
    def __init__(self, v: Any) -> None:
        self.v = v


_NOTHING = object()
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: the CRDs are large


def _walk(v: Any, path: str) -> Any:
    for part in [p for p in path.split(".") if p]:
        v = v.get(part) if isinstance(v, dict) else None
    return v


def _format(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


# -- the chart --------------------------------------------------------------------------------------------------


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Helm's value merge: maps merge key by key, anything else replaces."""
    out = dict(base)
    for k, v in override.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def render(chart: Path, *, values: dict[str, Any] | None = None, release: str = "lahar",
           namespace: str = "lahar-system", include_crds: bool = False) -> dict[str, str]:
    """{template path: rendered text} of every template not starting with `_` (and crds/ with include_crds)."""
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    defaults = yaml.safe_load((chart / "values.yaml").read_text()) or {}
    root = {"Values": merge(defaults, values or {}),
            "Release": {"Name": release, "Namespace": namespace, "Service": "Helm", "IsInstall": True},
            "Chart": {"Name": meta["name"], "Version": meta["version"], "AppVersion": meta.get("appVersion", "")}}
    templates = sorted(p for p in (chart / "templates").rglob("*") if p.is_file() and p.suffix in (".yaml", ".tpl"))
    parsed, defines = {}, {}
    for path in templates:
        where = str(path.relative_to(chart))
        nodes, defs = _parse(_lex(path.read_text(), where), where)
        parsed[where], defines = nodes, defines | defs
    renderer = _Renderer(defines, root)
    out = {}
    if include_crds and (chart / "crds").is_dir():
        for path in sorted((chart / "crds").glob("*.yaml")):
            out[str(path.relative_to(chart))] = path.read_text()
    for where, nodes in parsed.items():
        if not Path(where).name.startswith("_"):
            out[where] = renderer.run(nodes, root, {"$": root}, where)
    return out


# kinds in the order `helm install` creates them (its kind sorter, the part lahar uses); other kinds after these
INSTALL_ORDER = ("Namespace", "NetworkPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "ConfigMap",
                 "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Service",
                 "Deployment", "StatefulSet", "Job", "CronJob")
LAST = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def _install_rank(obj: dict) -> int:
    kind = obj.get("kind")
    if kind in INSTALL_ORDER:
        return INSTALL_ORDER.index(kind)
    return len(INSTALL_ORDER) + (1 + LAST.index(kind) if kind in LAST else 0)


def render_objects(chart: Path, *, values: dict[str, Any] | None = None, include_crds: bool = True,
                   **options: Any) -> list[dict]:
    """Every object the chart renders: crds/ first (helm installs them before the templates), then the templates'
    objects in install order, webhook configurations last."""
    crds: list[dict] = []
    objs: list[dict] = []
    for where, text in render(chart, values=values, include_crds=include_crds, **options).items():
        try:
            docs = list(yaml.load_all(text, Loader=_LOADER))
        except yaml.YAMLError as e:
            raise ChartError(f"{where}: rendered YAML does not parse: {e}") from e
        for doc in docs:
            if doc:
                if not isinstance(doc, dict) or "kind" not in doc:
                    raise ChartError(f"{where}: a rendered document is not a Kubernetes object")
                (crds if where.startswith("crds/") else objs).append(doc)
    return crds + sorted(objs, key=_install_rank)
