"""The tests' own structure: tests/unit/ by package, Kubernetes objects built in tests/builders only, and no global
patched by assignment (process-wide state changes go through `monkeypatch` or a restoring fixture)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
UNIT = TESTS / "unit"
PACKAGES = {"certs", "cli", "controllers", "deploy", "devcluster", "kube", "policies", "scheduler", "webhooks"}
REPOSITORY_WIDE = {"test_docs.py", "test_layers.py", "test_peers_build.py", "test_bench_versus.py", "test_bench_quick.py",
                    "test_tests_layout.py"}


def _sources() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if ".venv" not in p.parts)


def test_unit_tests_sit_in_one_folder_per_package() -> None:
    folders = {p.name for p in UNIT.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders == PACKAGES
    assert all((UNIT / f / "__init__.py").is_file() for f in folders)
    flat = {p.name for p in UNIT.glob("*.py")} - {"__init__.py"}
    assert flat == REPOSITORY_WIDE, f"unit tests belong in their package's folder: {sorted(flat - REPOSITORY_WIDE)}"


def _module_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names}
    return names


def global_assignments(source: str) -> list[str]:
    """`module.ATTR = value` (or `del module.ATTR`, `setattr(module, ...)`) on a name the file imported."""
    tree = ast.parse(source)
    imported = _module_names(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for target in targets:
                for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in imported:
                        found.append(f"{node.lineno}: {ast.unparse(t)}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr")
              and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in imported):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize(("source", "found"), [
    ("from lahar import controllers\ncontrollers.RECONCILERS = {}\n", ["2: controllers.RECONCILERS"]),
    ("import lahar.worker as w\nw.TASKS, x = {}, 1\n", ["2: w.TASKS"]),
    ("from lahar.kube import store\nsetattr(store, 'HISTORY', 5)\n", ["2: setattr(store, 'HISTORY', 5)"]),
    ("from lahar.kube import store\ndel store.HISTORY\n", ["2: store.HISTORY"]),
    ("def t(monkeypatch):\n    from lahar.kube import store\n    monkeypatch.setattr(store, 'HISTORY', 5)\n", []),
    ("class A:\n    pass\na = A()\na.x = 1\n", []),
    ("import os\nenv = dict(os.environ)\n", []),
], ids=["assign", "tuple-target", "setattr", "del", "monkeypatch", "instance", "read"])
def test_global_assignments_finds_patches_by_assignment(source: str, found: list[str]) -> None:
    assert global_assignments(source) == found


def test_no_test_patches_a_global_by_assignment() -> None:
    offenders = {str(p.relative_to(TESTS)): hits for p in _sources() if (hits := global_assignments(p.read_text()))}
    assert offenders == {}, "use monkeypatch or a fixture that restores it"


def _volcano_job_literals(source: str) -> list[str]:
    """Module-level helper functions (not tests) that spell a whole Volcano Job dict themselves."""
    out = []
    for fn in ast.parse(source).body:
        if not isinstance(fn, ast.FunctionDef) or fn.name.startswith("test_"):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Dict):
                keys = {k.value: v for k, v in zip(node.keys, node.values, strict=True) if isinstance(k, ast.Constant)}
                api, kind = keys.get("apiVersion"), keys.get("kind")
                if ("metadata" in keys and isinstance(api, ast.Constant) and api.value == "batch.volcano.sh/v1alpha1"
                        and isinstance(kind, ast.Constant) and kind.value == "Job"):
                    out.append(fn.name)
    return out


def test_volcano_jobs_are_built_by_tests_builders() -> None:
    offenders = {str(p.relative_to(TESTS)): names for p in _sources()
                 if "builders" not in p.parts and (names := _volcano_job_literals(p.read_text()))}
    assert offenders == {}, "build Volcano Jobs with tests.builders.vcjob"
