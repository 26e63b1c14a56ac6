"""Run every benchmark of bench/ once at a small size and append one dated row per bench to bench/RESULTS.md.

    .venv/bin/python bench/quick.py                 # what `make bench` runs (about 10 minutes on 2 cores)
    .venv/bin/python bench/quick.py --only e2e,admission --no-record

Each bench runs as its own process with its quick size (its `--quick`, or small sizes where it has none); the headline is picked
from its output and printed beside the bench's target, then written to the "## quick runs" table of RESULTS.md
(date, bench, headline measure, target). A bench that fails, times out or lacks what it needs gets a row saying so.
Quick sizes are for trends and regressions, not for the full-size figures further up in RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "RESULTS.md"
SECTION = "## quick runs"
HEADER = "| date | bench | headline (quick size) | target |\n|---|---|---|---|\n"


@dataclass(frozen=True)
class Bench:
    name: str
    args: tuple[str, ...]
    target: str
    pattern: str = ""                   # regex: the matching output lines are the headline (default: the last line)
    json_keys: tuple[str, ...] = ()     # or: these keys of the JSON object the bench prints
    requires: tuple[str, ...] = ()      # executables it needs: on PATH, or peers built by `make peers`
    timeout: float = 240.0


BENCHES = (
    Bench("admission", ("--quick",),
          "every path ≥ 90 % of bare; 20 policies: p99 at 250/s within 2 ms of none",
          pattern=r"of bare|p99 difference"),
    Bench("admission_burst", ("--quick",), "0 timeouts, 0 failed, p99 ≤ 1000 ms", pattern=r"webhook up"),
    Bench("all_plugins", ("--nodes", "200", "--pods", "2000", "--repeat", "1"),
          "every plugin on: session within the printed ratio of the default conf", pattern=r"ratio all/default"),
    Bench("controllers", ("--quick",), "≥ 100 reconciles/s, ≤ 3 Job reconciles per job",
          pattern=r"reconciles/s|per job"),
    Bench("dashboard", ("--quick",), "pages render in well under 1 s",
          pattern=r"median"),
    Bench("dashboard_live", ("--quick",), "≤ the printed % of a core for one browser",
          pattern=r"burst:", requires=("chromium", "chromedriver")),
    Bench("devcluster", ("--quick",), "no lost or reordered watch events",
          json_keys=("writes_per_s", "watch_events_per_s", "lost_events", "reordered_events")),
    Bench("e2e", ("--quick",), "100 × 8 pods Running ≤ 10 s at full size", pattern=r"target"),
    Bench("managed_fields", (), "tracking costs a small share of a write"),
    Bench("network_topology", ("--quick",),
          "topology-aware session near the plain one", pattern=r"gangs"),
    Bench("policy_stage", ("--quick",), "20 policies: well under 1 ms CPU/review", pattern=r"policies"),
    Bench("restart", ("--quick",), "first bind after restart in seconds, not minutes",
          pattern=r"→ first bind"),
    Bench("scheduler", (), "10,000 pods/s at 5,000 nodes × 50,000 pods (full size)", pattern=r"pods/s|session"),
    Bench("status_writes", ("--quick",), "steady ≤ 5 writes/s, 0 on idle ticks",
          pattern=r"^\|"),
    Bench("topology", ("--quick", "--session-nodes", "200"), "topology-aware session ≤ the printed ratio",
          pattern=r"PASS|FAIL"),
    Bench("topology_trace", ("--quick",), "less fragmentation with topology", pattern=r"gang wait|replay CPU"),
    Bench("versus", ("--nodes", "50", "--pods", "400"), "lahar ≥ Volcano on the same cluster",
          pattern=r"every pod bound|scheduler CPU|controllers CPU",
          requires=("etcd", "kube-apiserver", "kwok"), timeout=600.0),
)


def headline(bench: Bench, stdout: str) -> str:
    """The measure to record, from a bench's output: its JSON keys, its lines matching the pattern, or its last
    line; one line, at most 300 characters."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    if bench.json_keys:
        start = stdout.find("{")
        try:
            data = json.loads(stdout[start:]) if start >= 0 else {}
        except ValueError:
            data = {}
        if isinstance(data, dict) and data:
            return ", ".join(f"{k} {data.get(k)}" for k in bench.json_keys)
    if bench.pattern:
        picked = [ln for ln in lines if re.search(bench.pattern, ln)]
        if picked:
            lines = picked[-4:]
            return _one_line("; ".join(lines))
    return _one_line(lines[-1] if lines else "(no output)")


def _one_line(text: str) -> str:
    text = re.sub(r"\s+", " ", text.replace("|", "/")).strip()
    return text if len(text) <= 300 else text[:297] + "..."


def append_rows(results_md: str, rows: list[tuple[str, str, str, str]]) -> str:
    """RESULTS.md with the rows appended to its "## quick runs" table (the section added at the end if missing)."""
    body = "".join(f"| {date} | `{name}` | {head} | {target} |\n" for date, name, head, target in rows)
    if SECTION not in results_md:
        sep = "" if results_md.endswith("\n\n") else ("\n" if results_md.endswith("\n") else "\n\n")
        return (f"{results_md}{sep}{SECTION}\n\n`make bench` (bench/quick.py): every bench at its quick size, one "
                f"row per bench and run.\n\n{HEADER}{body}")
    head, _, tail = results_md.partition(SECTION)
    nxt = tail.find("\n## ")
    section, rest = (tail, "") if nxt < 0 else (tail[:nxt + 1], tail[nxt + 1:])
    return f"{head}{SECTION}{section.rstrip()}\n{body}" + (f"\n{rest}" if rest else "")


def _have(exe: str) -> bool:
    """On PATH, or a peer in the cache `make peers` builds into (kube-apiserver, etcd, kwok, Volcano's)."""
    if shutil.which(exe) is not None:
        return True
    sys.path.insert(0, str(ROOT))
    try:
        from tests.peers import build as peers
    except ImportError:
        return False
    finally:
        sys.path.remove(str(ROOT))
    return any(p.name == exe for p in peers.PEERS) and peers.binary(exe) is not None


def run(bench: Bench) -> tuple[str, float]:
    if not (ROOT / "bench" / f"{bench.name}.py").exists():
        return "skipped: no such bench in this checkout", 0.0
    missing = [exe for exe in bench.requires if not _have(exe)]
    if missing:
        return f"skipped: needs {', '.join(missing)}", 0.0
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, str(ROOT / "bench" / f"{bench.name}.py"), *bench.args], cwd=ROOT,
                              capture_output=True, text=True, timeout=bench.timeout, check=False)
    except subprocess.TimeoutExpired:
        return f"timed out after {bench.timeout:.0f} s", time.perf_counter() - t0
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        # a bench that measured but missed its target exits non-zero too: keep its headline
        err = (proc.stderr.strip().splitlines() or ["?"])[-1]
        said = headline(bench, proc.stdout) if proc.stdout.strip() else err
        return _one_line(f"exit {proc.returncode}: {said}"), wall
    return headline(bench, proc.stdout), wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated bench names")
    ap.add_argument("--no-record", action="store_true", help="print only, leave RESULTS.md alone")
    ap.add_argument("--budget", type=float, default=900.0, help="seconds; the benches left after it get a row "
                    "saying they were skipped")
    args = ap.parse_args()
    chosen = [b for b in BENCHES if not args.only or b.name in args.only.split(",")]
    rows = []
    t_all = time.perf_counter()
    for bench in chosen:
        print(f"{bench.name} ...", flush=True)
        if time.perf_counter() - t_all > args.budget:
            head, wall = f"skipped: over the {args.budget:.0f} s budget of the run", 0.0
        else:
            head, wall = run(bench)
        print(f"  {head}\n  target: {bench.target}  ({wall:.0f} s)", flush=True)
        rows.append((dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M"), bench.name, head, bench.target))
    print(f"all quick benches: {time.perf_counter() - t_all:.0f} s")
    if not args.no_record:
        RESULTS.write_text(append_rows(RESULTS.read_text(), rows))
        print(f"appended {len(rows)} rows to {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
