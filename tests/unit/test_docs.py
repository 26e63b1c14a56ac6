"""The docs stay true: every `lahar ...` command line in README.md and docs/*.md names a real sub-command and real
flags, configuration.md matches the code (settings, scheduler actions, plugins and switches, every AdmissionConfig
field with its default, the annotation keys lahar uses), and every relative link resolves.

Reads the Markdown files and imports the code; no network. The overlay render needs `kubectl` (skipped without it).
"""

from __future__ import annotations

import enum
import functools
import json
import re
import shlex
import shutil
import subprocess
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined
from typer.testing import CliRunner

from lahar.cli import app
from lahar.policies.admission import AdmissionConfig
from lahar.scheduler.framework import conf as confs
from lahar.scheduler.registry import in_tree_registry
from lahar.settings import Settings

REPO = Path(__file__).resolve().parents[2]
DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
CONFIGURATION = REPO / "docs" / "configuration.md"
INSTALL = REPO / "docs" / "install.md"


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO))


# --- Markdown reading -----------------------------------------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")
_SPAN = re.compile(r"`([^`\n]+)`")


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    line: int  # first line of the content


def split(text: str) -> tuple[list[Block], list[tuple[int, str]]]:
    """Fenced code blocks, and the prose lines (number, text) outside them."""
    blocks: list[Block] = []
    prose: list[tuple[int, str]] = []
    fence, lang, start, body = "", "", 0, []
    for no, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if fence:
            if m and m.group(1) == fence and not line.strip()[3:].strip():
                blocks.append(Block(lang, "\n".join(body), start))
                fence = ""
            else:
                body.append(line)
        elif m:
            fence, lang, start, body = m.group(1), line.strip()[3:].strip(), no + 1, []
        else:
            prose.append((no, line))
    return blocks, prose


def sections(text: str) -> dict[str, str]:
    """Heading text (without #'s) → the text up to the next heading of any level."""
    out: dict[str, str] = {}
    current, lines = "", []
    for line in text.splitlines():
        m = re.match(r"^#{1,6}\s+(.*)$", line)
        if m:
            out[current] = "\n".join(lines)
            current, lines = m.group(1).strip(), []
        else:
            lines.append(line)
    out[current] = "\n".join(lines)
    return out


def table_rows(text: str) -> list[list[str]]:
    """The body rows of every Markdown table in `text`, cells stripped (header and separator rows dropped)."""
    rows: list[list[str]] = []
    group: list[str] = []
    for line in [*text.splitlines(), ""]:
        if line.strip().startswith("|"):
            group.append(line.strip())
            continue
        if len(group) >= 2 and re.fullmatch(r"\|[\s:|-]+\|", group[1]):
            rows += [[c.strip() for c in row.strip("|").split("|")] for row in group[2:]]
        group = []
    return rows


def first_code(cell: str) -> str | None:
    m = _SPAN.match(cell.strip())
    return m.group(1) if m else None


# --- 1. command lines -----------------------------------------------------------------------------------------------

_STOP = {"&", "&&", "|", "||", ";", ">", ">>", "<", "(", ")", ";;"}
_PLACEHOLDER = re.compile(r"[<>…{}]|\.\.\.|^[A-Z][A-Z_/-]*$")


@dataclass(frozen=True)
class Invocation:
    where: str
    text: str
    tokens: tuple[str, ...]


def _tokens(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes in an illustrative line: plain words are enough here
        return line.split("#", 1)[0].split()


def _is_lahar(token: str) -> bool:
    return token == "lahar" or token.endswith("/bin/lahar")


def invocations_in_code(line: str) -> Iterator[list[str]]:
    """Each `lahar ...` in command position of a shell line, up to the next shell operator."""
    toks = _tokens(line)
    command_position = True
    for i, tok in enumerate(toks):
        if tok in _STOP:
            command_position = True
            continue
        if command_position and _is_lahar(tok):
            rest = []
            for t in toks[i + 1:]:
                if t in _STOP:
                    break
                rest.append(t)
            yield rest
        command_position = command_position and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", tok) is not None


def collect_invocations() -> list[Invocation]:
    found: list[Invocation] = []
    for path in DOCS:
        blocks, prose = split(path.read_text())
        for b in blocks:
            if b.lang not in ("", "sh", "bash", "console", "shell"):
                continue
            lines = b.text.replace("\\\n", " ").splitlines()
            for k, line in enumerate(lines):
                for rest in invocations_in_code(line):
                    found.append(Invocation(f"{_rel(path)}:{b.line + k}", line.strip(), tuple(rest)))
        for no, line in prose:
            for span in _SPAN.findall(line):
                if re.match(r"^(?:\S*/bin/)?lahar\s", span):
                    for rest in invocations_in_code(span):
                        found.append(Invocation(f"{_rel(path)}:{no}", span, tuple(rest)))
    return found


@functools.cache
def _root() -> Any:
    """The click command tree Typer builds (typer vendors its own click, so groups are told by `.commands`)."""
    cmd = typer.main.get_command(app)
    assert _is_group(cmd)
    return cmd


def _is_group(cmd: Any) -> bool:
    return isinstance(getattr(cmd, "commands", None), dict)


def resolve(tokens: tuple[str, ...]) -> tuple[list[str], Any, list[str]] | None:
    """(sub-command path, the command, option names used); None when the line names a placeholder command."""
    cmd = _root()
    path: list[str] = []
    options: list[str] = []
    for raw in tokens:
        tok = raw.strip("[]")
        if not tok:
            continue
        if tok.startswith("-"):
            if tok != "-":  # `-f -` (stdin)
                options.append(tok.split("=", 1)[0])
            continue
        if _is_group(cmd):
            if _PLACEHOLDER.search(tok):
                return None
            sub = cmd.commands.get(tok)
            if sub is None:
                raise AssertionError(f"`{' '.join(['lahar', *path, tok])}`: no sub-command {tok!r}; "
                                     f"known: {', '.join(sorted(cmd.commands))}")
            cmd = sub
            path.append(tok)
    return path, cmd, options


def unknown_options(cmd: Any, options: list[str]) -> list[str]:
    known = {"--help"} | {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
    return [o for o in options if o not in known]


INVOCATIONS = collect_invocations()


def test_the_docs_show_commands() -> None:
    assert len(INVOCATIONS) >= 20, INVOCATIONS
    assert {inv.tokens[0] for inv in INVOCATIONS if inv.tokens} >= {"up", "webhook", "certs", "worker", "explain"}


@functools.cache
def _help(path: tuple[str, ...]) -> tuple[int, str]:
    result = CliRunner().invoke(app, [*path, "--help"])
    return result.exit_code, result.output


@pytest.mark.parametrize("inv", INVOCATIONS, ids=[f"{i.where} {i.text}"[:100] for i in INVOCATIONS])
def test_command_lines_name_real_commands_and_flags(inv: Invocation) -> None:
    got = resolve(inv.tokens)
    if got is None:
        pytest.skip("placeholder command")
    path, cmd, options = got
    code, output = _help(tuple(path))
    assert code == 0, f"{inv.where}: `lahar {' '.join(path)} --help` exited {code}: {output}"
    unknown = unknown_options(cmd, options)
    assert not unknown, f"{inv.where}: `{inv.text}`: `lahar {' '.join(path)}` has no option {unknown}"


@pytest.mark.parametrize(("line", "want"), [
    ("lahar up --demo", [["up", "--demo"]]),
    ("export A=1 B=2; lahar worker -c 4 &", [["worker", "-c", "4"]]),
    ("REDIS_URL=x lahar beat", [["beat"]]),
    ("kubectl apply -f x | lahar admit -f -   # comment", [["admit", "-f", "-"]]),
    (".venv/bin/lahar devcluster --profile dgx-h100", [["devcluster", "--profile", "dgx-h100"]]),
    ("docker build -t registry.example.com/lahar:0.1.0 .", []),
    ("kubectl -n lahar-system logs deploy/lahar-worker", []),
    ("echo lahar up", []),
], ids=["plain", "after-export", "env-prefix", "pipe-and-comment", "venv-path", "image-name", "deploy-name",
        "argument"])
def test_invocations_in_code(line: str, want: list[list[str]]) -> None:
    assert list(invocations_in_code(line)) == want


@pytest.mark.parametrize(("tokens", "want"), [
    (("certs", "ensure", "--out", "d"), (["certs", "ensure"], ["--out"])),
    (("admit", "-f", "job.yaml", "[--state", "objects.yaml]"), (["admit"], ["-f", "--state"])),
    (("queue",), (["queue"], [])),
    (("<command>",), None),
], ids=["nested", "brackets", "group", "placeholder"])
def test_resolve(tokens: tuple[str, ...], want: tuple[list[str], list[str]] | None) -> None:
    got = resolve(tokens)
    assert (None if got is None else (got[0], got[2])) == want


def test_resolve_names_an_unknown_sub_command() -> None:
    with pytest.raises(AssertionError, match="no sub-command 'bogus'"):
        resolve(("certs", "bogus"))


def test_unknown_options_are_found() -> None:
    got = resolve(("worker", "-c", "4", "--bogus", "--log-level=debug", "--no-once"))
    assert got is not None
    assert unknown_options(got[1], got[2]) == ["--bogus", "--no-once"]
    scheduler = resolve(("scheduler", "--no-once"))
    assert scheduler is not None and unknown_options(scheduler[1], scheduler[2]) == []


# --- 2. configuration.md against the code ---------------------------------------------------------------------------


@functools.cache
def configuration() -> tuple[str, dict[str, str]]:
    text = CONFIGURATION.read_text()
    return text, sections(text)


def _names_in_first_column(section: str) -> set[str]:
    return {n for row in table_rows(configuration()[1][section]) if (n := first_code(row[0]))}


def test_every_plugin_and_action_is_documented_and_registered() -> None:
    registry = in_tree_registry()
    assert _names_in_first_column("Plugins") == set(registry.plugin_names)
    assert _names_in_first_column("Actions") == set(registry.action_names)


def test_every_switch_is_documented() -> None:
    text, _ = configuration()
    missing = [s for s in confs.SWITCHES if f"`{s}`" not in text]
    assert not missing


def test_scheduler_conf_examples_load() -> None:
    """Every volcano-scheduler.conf shown in configuration.md and install.md parses against the registry."""
    registry = in_tree_registry()
    shown = 0
    for path in (CONFIGURATION, INSTALL):
        for b in split(path.read_text())[0]:
            doc = yaml.safe_load(b.text) if b.lang == "yaml" else None
            if isinstance(doc, dict) and "actions" in doc:
                confs.load(b.text, actions=registry.action_names, plugins=registry.plugin_names)
                shown += 1
    assert shown >= 2


def test_the_default_conf_shown_is_the_default() -> None:
    blocks = [b for b in split(configuration()[1]["Scheduler: `lahar-scheduler-configmap`"])[0] if b.lang == "yaml"]
    assert confs.load(blocks[0].text) == confs.load(confs.DEFAULT_CONF)


# settings


def _setting_rows() -> dict[str, str]:
    return {name: row[1] for row in table_rows(configuration()[1]["Process settings"])
            if (name := first_code(row[0]))}


def _env_name(field: str, info: Any) -> str:
    alias = info.validation_alias
    return alias if isinstance(alias, str) else "LAHAR_" + field.upper()


def _setting_default(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, tuple):
        return f"`{json.dumps(list(value))}`"
    return f"`{value}`"


def test_every_setting_is_documented_with_its_default() -> None:
    rows = _setting_rows()
    want = {_env_name(f, info): _setting_default(info.default) for f, info in Settings.model_fields.items()}
    assert set(rows) == set(want)
    assert {k: rows[k] for k in want} == want


# admission config


def _model_of(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model class of a field (itself, or the items of a tuple) and whether it is a list of them."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    if typing.get_origin(annotation) is tuple:
        args = [a for a in typing.get_args(annotation) if a is not Ellipsis]
        if len(args) == 1 and isinstance(args[0], type) and issubclass(args[0], BaseModel):
            return args[0], True
    return None, False


def admission_fields(model: type[BaseModel] = AdmissionConfig, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(documented path in camelCase, default) of every field, nested models flattened, lists of models as `[]`."""
    for name, info in model.model_fields.items():
        path = prefix + (info.alias or name)
        sub, many = _model_of(info.annotation)
        default = info.get_default(call_default_factory=True)
        if sub is not None and not many:
            yield from admission_fields(sub, path + ".")
            continue
        yield path, default
        if sub is not None:
            yield from admission_fields(sub, path + "[].")


def admission_default(value: Any) -> str | None:
    """How the table shows a default: required, or the JSON value in backticks; None for lists of models."""
    if value is PydanticUndefined:
        return "required"
    if isinstance(value, tuple) and value and isinstance(value[0], BaseModel):
        return None
    if isinstance(value, enum.Enum):
        value = value.value
    return f"`{json.dumps(list(value) if isinstance(value, tuple) else value)}`"


def test_every_admission_field_is_documented_with_its_default() -> None:
    rows = {name: row[1] for row in table_rows(configuration()[1]["Admission: `lahar-admission-config`"])
            if (name := first_code(row[0])) and len(row) == 3}
    fields = dict(admission_fields())
    assert set(rows) == set(fields)
    for path, default in fields.items():
        want = admission_default(default)
        if want is not None:
            assert rows[path] == want, path


def test_admission_fields_walk() -> None:
    paths = [p for p, _ in admission_fields()]
    assert "devices.rdma.allocateVf" in paths and "resourceGroups[].object.key" in paths
    assert "devices.mig.models[].profiles[].memoryMib" in paths and "devices" not in paths


def test_default_vocabularies_are_shown() -> None:
    text, _ = configuration()
    for v in AdmissionConfig().devices.vgpu.vocabularies:
        row = next(r for r in table_rows(text) if r and r[0] == f"`{v.vendor}`")
        for name in v.names():
            assert f"`{name}`" in row, (v.vendor, name)


# annotations

_KEY = re.compile(r"""["']((?:lahar\.sh|hami\.io|scheduling\.koordinator\.sh)/[A-Za-z0-9._-]+)["']""")
_PACKAGES = ("lahar", "kube", "certs", "policies", "scheduler", "webhooks", "controllers", "devcluster")


def annotation_keys() -> set[str]:
    keys: set[str] = set()
    for pkg in _PACKAGES:
        for f in (REPO / pkg).rglob("*.py"):
            keys.update(_KEY.findall(f.read_text()))
    return {k for k in keys if not re.search(r"/v\d+(alpha|beta)?\d*$", k)}


def test_every_lahar_hami_and_koordinator_key_in_the_code_is_documented() -> None:
    text, _ = configuration()
    keys = annotation_keys()
    assert "lahar.sh/rdma-pairing" in keys
    missing = sorted(k for k in keys if f"`{k}`" not in text)
    assert not missing


# --- 3. links --------------------------------------------------------------------------------------------------------

_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def slugs(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file."""
    out: set[str] = set()
    seen: dict[str, int] = {}
    for line in split(path.read_text())[1]:
        m = re.match(r"^#{1,6}\s+(.*)$", line[1])
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links() -> list[tuple[str, Path, str]]:
    out = []
    for path in DOCS:
        for no, line in split(path.read_text())[1]:
            for target in _LINK.findall(_SPAN.sub("", line)):
                out.append((f"{_rel(path)}:{no}", path, target))
    return out


LINKS = links()


@pytest.mark.parametrize(("where", "source", "target"), LINKS, ids=[f"{w} {t}" for w, _, t in LINKS])
def test_relative_links_resolve(where: str, source: Path, target: str) -> None:
    if re.match(r"^[a-z][a-z0-9+.-]*:", target):
        pytest.skip("absolute URL")
    file_part, _, anchor = target.partition("#")
    dest = (source.parent / file_part).resolve() if file_part else source
    assert dest.exists(), f"{where}: {target} → {dest} does not exist"
    if anchor and dest.suffix == ".md":
        assert anchor in slugs(dest), f"{where}: no heading #{anchor} in {dest.name}"


@pytest.mark.parametrize(("heading", "slug"), [
    ("Scheduler: `lahar-scheduler-configmap`", "scheduler-lahar-scheduler-configmap"),
    ("6. Redis is down", "6-redis-is-down"),
    ("Why is my job pending?", "why-is-my-job-pending"),
], ids=["code-and-colon", "number", "question"])
def test_slugs(tmp_path: Path, heading: str, slug: str) -> None:
    f = tmp_path / "x.md"
    f.write_text(f"# {heading}\n")
    assert slugs(f) == {slug}


# --- 4. install.md's overlay renders ----------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not on PATH")
def test_install_overlay_renders(tmp_path: Path) -> None:
    """The overlay of install.md (with its external-Redis patches) renders against deploy/ with `kubectl kustomize`."""
    blocks = [b for b in split(INSTALL.read_text())[0] if b.lang == "yaml"]
    base = next(b for b in blocks if b.text.startswith("# lahar-prod/kustomization.yaml"))
    extra = next(b for b in blocks if b.text.startswith("# in lahar-prod/kustomization.yaml"))
    kustomization = {**yaml.safe_load(base.text), **yaml.safe_load(extra.text)}
    (tmp_path / "lahar").symlink_to(REPO)
    (tmp_path / "lahar-prod").mkdir()
    (tmp_path / "lahar-prod" / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    out = subprocess.run(["kubectl", "kustomize", str(tmp_path / "lahar-prod")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    objs = [d for d in yaml.safe_load_all(out.stdout) if d]
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objs}
    assert ("StatefulSet", "lahar-redis") not in kinds and ("Deployment", "lahar-webhook") in kinds
    env = next(o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "lahar-env")
    assert env["data"]["REDIS_ADDRESS"] == "redis.example.com:6379/0"  # REDIS_URL is built from it per container
    images = {c["image"] for o in objs if o["kind"] == "Deployment" for c in o["spec"]["template"]["spec"]["containers"]}
    assert images == {"registry.example.com/lahar:0.1.0"}
