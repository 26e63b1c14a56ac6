"""The pure parts of bench/quick.py (`make bench`): the headline it picks from a bench's output and the dated rows
it appends to the "## quick runs" table of bench/RESULTS.md; every bench of bench/ is in its table."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "quick.py"
_spec = importlib.util.spec_from_file_location("bench_quick", _PATH)
assert _spec is not None and _spec.loader is not None
quick = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("bench_quick", quick)
_spec.loader.exec_module(quick)


def test_every_bench_is_run():
    scripts = {p.stem for p in _PATH.parent.glob("*.py") if not p.stem.startswith("_")} - {"quick"}
    assert scripts <= {b.name for b in quick.BENCHES}
    assert len({b.name for b in quick.BENCHES}) == len(quick.BENCHES)


HEADLINES = [
    ("last-line", quick.Bench("b", (), "t"), "a\nb c\n\n", "b c"),
    ("pattern", quick.Bench("b", (), "t", pattern=r"of bare"), "x\n/p  90% of bare\ny\n/q 95% of bare\nz",
     "/p 90% of bare; /q 95% of bare"),
    ("pattern-misses-falls-to-last", quick.Bench("b", (), "t", pattern=r"nope"), "x\ny", "y"),
    ("json", quick.Bench("b", (), "t", json_keys=("a", "c")), 'log\n{\n "a": 1,\n "b": 2,\n "c": 0\n}\n', "a 1, c 0"),
    ("pipes-escaped", quick.Bench("b", (), "t"), "| a | b |", "/ a / b /"),
    ("empty", quick.Bench("b", (), "t"), "", "(no output)"),
]


@pytest.mark.parametrize(("bench", "stdout", "expected"), [h[1:] for h in HEADLINES], ids=[h[0] for h in HEADLINES])
def test_headline(bench, stdout, expected):
    assert quick.headline(bench, stdout) == expected


ROW = [("2026-12-02 04:00", "e2e", "8.1 s", "≤ 10 s")]
LINE = "| 2026-12-02 04:00 | `e2e` | 8.1 s | ≤ 10 s |\n"


def test_append_creates_the_section():
    out = quick.append_rows("# Results\n\ntext\n", ROW)
    assert out.startswith("# Results\n\ntext\n\n## quick runs\n")
    assert out.endswith(quick.HEADER + LINE)


def test_append_adds_to_an_existing_table_before_the_next_section():
    md = quick.append_rows("# R\n", ROW) + "\n## later\n\nmore\n"
    out = quick.append_rows(md, [("2026-12-03 04:00", "e2e", "7.9 s", "≤ 10 s")])
    assert out.count(quick.SECTION) == 1 and out.count(quick.HEADER) == 1
    assert LINE + "| 2026-12-03 04:00 | `e2e` | 7.9 s | ≤ 10 s |\n\n## later\n\nmore\n" in out


@pytest.mark.parametrize("bench", [b for b in quick.BENCHES if "--quick" in b.args], ids=lambda b: b.name)
def test_quick_flag_exists(bench):
    path = _PATH.parent / f"{bench.name}.py"
    if path.exists():
        assert '"--quick"' in path.read_text()
