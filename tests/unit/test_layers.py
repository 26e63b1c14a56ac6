"""The one namespace and its layers: every module of the lahar/ folder is in the top layer of the import-linter
contract, every folder linked into lahar/ is a layer or ruled on, and nothing imports the old top-level names."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LINKED = ("kube", "devcluster", "webhooks", "policies", "scheduler", "controllers", "certs", "deploy", "examples")


def _contracts() -> list[dict]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_the_card_folders_are_linked_into_the_lahar_package() -> None:
    for name in LINKED:
        link = REPO / "lahar" / name
        assert link.is_symlink() and link.resolve() == (REPO / name).resolve(), f"lahar/{name} must link to {name}/"
        assert (REPO / name / "__init__.py").is_file()


def test_top_layer_lists_every_entry_module() -> None:
    layers = next(c for c in _contracts() if c["type"] == "layers")
    top = {m.strip() for m in re.split(r"[:|]", layers["layers"][0])}
    own = {p.stem for p in (REPO / "lahar").iterdir() if not p.is_symlink() and not p.name.startswith("_")
           and (p.suffix == ".py" or (p / "__init__.py").is_file())}
    assert own == top, f"lahar/ modules missing from the top layer: {own - top}; stale: {top - own}"
    below = {m.strip() for layer in layers["layers"][1:] for m in re.split(r"[:|]", layer)}
    assert below == {"scheduler", "webhooks", "controllers", "policies", "certs", "kube"}


_OLD = re.compile(r"^\s*(?:from|import)\s+(kube|devcluster|webhooks|policies|scheduler|controllers|certs)\b", re.M)


def test_nothing_imports_the_old_top_level_names() -> None:
    offenders = []
    for folder in ("lahar", *LINKED[:7], "tests", "bench"):
        for path in (REPO / folder).rglob("*.py"):
            if "lahar" in path.relative_to(REPO).parts[1:2] or path.is_symlink():
                continue
            if _OLD.search(path.read_text()):
                offenders.append(str(path.relative_to(REPO)))
    assert not offenders, offenders


def _plugin_modules() -> set[str]:
    return {p.stem for p in (REPO / "scheduler" / "plugins").glob("*.py") if not p.name.startswith("_")}


def test_the_independence_contract_lists_every_plugin() -> None:
    independent = next(c for c in _contracts() if c["type"] == "independence")
    listed = {m.removeprefix("lahar.scheduler.plugins.") for m in independent["modules"]}
    assert listed == _plugin_modules(), f"missing: {_plugin_modules() - listed}; stale: {listed - _plugin_modules()}"


def test_no_plugin_imports_another_plugin_or_its_private_names() -> None:
    plugins = _plugin_modules()
    pattern = re.compile(r"^\s*from\s+lahar\.scheduler\.plugins(?:\.(\w+))?\s+import\s+([^\n(]+|\([^)]*\))", re.M)
    offenders = []
    for path in sorted((REPO / "scheduler" / "plugins").rglob("*.py")):
        for module, names in pattern.findall(path.read_text()):
            imported = {module} if module else {n.strip() for n in names.strip("()").split(",")}
            if imported & plugins and path.stem != "__init__":
                offenders.append(f"{path.relative_to(REPO)} imports {sorted(imported & plugins)}")
    assert not offenders, offenders


def _kube_modules_outside_the_engine() -> set[str]:
    kube = REPO / "kube"
    return {p.stem if p.is_file() else p.name for p in kube.iterdir()
            if p.name != "apiserver" and not p.name.startswith("_")
            and (p.suffix == ".py" or (p / "__init__.py").is_file())}


def test_the_engine_contract_lists_every_kube_module_outside_kube_apiserver() -> None:
    contract = next(c for c in _contracts() if "kube.apiserver" in " ".join(c.get("forbidden_modules", ())))
    listed = {m.removeprefix("lahar.kube.") for m in contract["source_modules"]}
    want = _kube_modules_outside_the_engine()
    assert listed == want, f"missing: {want - listed}; stale: {listed - want}"
    assert set(contract["forbidden_modules"]) == {"lahar.kube.apiserver", "lahar.devcluster"}


def test_no_kube_module_is_over_700_lines() -> None:
    long = {str(p.relative_to(REPO)): n for p in (REPO / "kube").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 700}
    assert not long, long


def test_every_engine_module_says_what_it_holds() -> None:
    for path in sorted((REPO / "kube" / "apiserver").glob("*.py")):
        text = path.read_text()
        assert text.startswith('"""') and len(text.split('"""')[1].strip()) > 40, f"{path.name} needs a docstring"


MAX_LINES = 700
OVERSIZED: set[str] = set()   # rooms allowed over the limit, each named here with its reason


def _source_files() -> list[Path]:
    out = []
    for folder in ("lahar", *LINKED[:7]):
        for path in (REPO / folder).rglob("*.py"):
            rel = path.relative_to(REPO)
            if not path.is_symlink() and not any((REPO / p).is_symlink() for p in rel.parents if str(p) != "."):
                out.append(path)
    return out


def test_every_source_module_opens_with_a_docstring_and_stays_small() -> None:
    import ast

    missing, large = [], []
    for path in _source_files():
        text = path.read_text()
        rel = str(path.relative_to(REPO))
        if text.strip() and ast.get_docstring(ast.parse(text)) is None:
            missing.append(rel)
        if len(text.splitlines()) > MAX_LINES and rel not in OVERSIZED:
            large.append(rel)
    assert not missing, f"modules without a docstring saying what they hold: {missing}"
    assert not large, f"over {MAX_LINES} lines, split along their seams: {large}"
