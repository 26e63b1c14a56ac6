"""The dashboard's HTML: each page rendered server-side from the view models (`views`, `nodes`), every value from
the cluster escaped with `html.escape`. Works without JavaScript; `static/dashboard.js` only swaps `<main>` when
the server says something changed.

Part of `lahar.dashboard`; `app` serves these strings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from lahar.dashboard.gpus import CardRow, GPUNodeRow
from lahar.dashboard.nodes import Cell, HyperNodeRow, NodeRow
from lahar.dashboard.views import Bar, JobRow, PolicyCounter, PolicyEvent, PolicyRow, QueueRow, jobs_by_phase

__all__ = ["PAGES", "jobs_page", "layout", "nodes_page", "policies_page", "queues_page"]

PAGES = (("queues", "Queues"), ("jobs", "Jobs"), ("nodes", "Nodes"), ("policies", "Policies"))


def e(value: object) -> str:
    return escape(str(value), quote=True)


def layout(*, title: str, active: str, main: str, live: bool = True) -> str:
    """The whole document: header with the page links, `<main>` and the live-update script."""
    nav = "".join(f'<li><a href="/{slug}"{" aria-current=page" if slug == active else ""}>{label}</a></li>'
                  for slug, label in PAGES)
    script = '<script src="/static/dashboard.js" defer></script>' if live else ""
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{e(title)} · lahar</title>"
            f'<link rel="stylesheet" href="/static/dashboard.css">{script}</head>'
            f'<body><header><a class="brand" href="/">lahar</a><nav aria-label="pages"><ul>{nav}</ul></nav>'
            f'<span id="live" class="live" role="status" aria-live="polite"></span></header>'
            f'<main id="main" data-page="{e(active)}">{main}</main></body></html>')


def _amount(value: float | None, resource: str) -> str:
    if value is None:
        return "–"
    if resource == "memory" or resource.endswith("memory"):
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= size:
                return f"{value / size:.3g}{unit}"
        return f"{value:.0f}"
    return f"{value:.3g}"


def _bar(bar: Bar) -> str:
    r = bar.resource
    marks = "".join(f'<span class="mark {cls}" style="left:{bar.percent(v)}%" title="{label} {e(_amount(v, r))}">'
                    f"</span>" for cls, label, v in (("deserved", "deserved", bar.deserved),
                                                     ("capability", "capability", bar.capability),
                                                     ("guarantee", "guarantee", bar.guarantee)) if v)
    text = (f"allocated {_amount(bar.allocated, r)} · deserved {_amount(bar.deserved, r)} · capability "
            f"{_amount(bar.capability, r)} · guarantee {_amount(bar.guarantee, r)}")
    return (f'<div class="bar"><span class="res">{e(r)}</span>'
            f'<span class="track" role="img" aria-label="{e(r)}: {e(text)}">'
            f'<span class="fill" style="width:{min(100.0, bar.percent(bar.allocated))}%"></span>{marks}</span>'
            f'<span class="nums">{e(text)}</span></div>')


def sparkline(values: Sequence[float], *, width: int = 120, height: int = 24) -> str:
    """An inline SVG polyline of shares (0..1, oldest first); a dash when there are fewer than two points."""
    if len(values) < 2:
        return "–"
    step = width / (len(values) - 1)
    points = " ".join(f"{i * step:.1f},{height - max(0.0, min(1.0, v)) * height:.1f}" for i, v in enumerate(values))
    return (f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'aria-label="share from {values[0]:.0%} to {values[-1]:.0%}"><polyline fill="none" stroke="currentColor"'
            f' stroke-width="1.5" points="{points}"/></svg> {values[-1]:.0%}')


def queues_page(rows: Sequence[QueueRow], history: Sequence[tuple[float, Mapping[str, float]]] = ()) -> str:
    """The queue tree; `history` is (time, {queue: share}) samples, oldest first, drawn per queue."""
    if not rows:
        return "<h1>Queues</h1><p>No queues yet.</p>"
    body = []
    for q in rows:
        counts = " ".join(f'<span class="pill {e(p.lower())}">{e(p)} {n}</span>'
                          for p, n in sorted(q.podgroups.items(), key=lambda kv: ("Pending", "Inqueue", "Running")
                                             .index(kv[0]) if kv[0] in ("Pending", "Inqueue", "Running") else 3))
        body.append(f'<tr data-queue="{e(q.name)}"><th scope="row" style="padding-left:{0.5 + 1.25 * q.depth}rem">'
                    f'{"└ " if q.depth else ""}{e(q.name)}</th><td>{q.weight}</td><td>{e(q.state)}</td>'
                    f'<td class="bars">{"".join(_bar(b) for b in q.bars)}</td><td>{counts or "–"}</td>'
                    f'<td class="share">{sparkline([s.get(q.name, 0.0) for _, s in history])}</td></tr>')
    return ('<h1>Queues</h1><p class="legend">Bars: allocated (filled) out of the cluster, with marks for deserved '
            '(blue), capability (red) and guarantee (green).</p><div class="scroll"><table class="queues"><thead><tr>'
            '<th scope="col">queue</th><th scope="col">weight</th><th scope="col">state</th>'
            '<th scope="col">resources</th><th scope="col">PodGroups</th><th scope="col">share, last hour</th>'
            '</tr></thead><tbody>'
            + "".join(body) + "</tbody></table></div>")


def _placements(job: JobRow) -> str:
    if not job.placements:
        return ""
    rows = []
    for p in job.placements:
        pairs = ", ".join(f"GPU {e(g)} ↔ VF {e(v)}" for g, v in p.pairs)
        gpus = ", ".join(e(g) for g in p.gpus)
        vfs = "" if p.pairs else ", ".join(e(v) for v in p.vfs)
        rows.append(f'<tr><td>{e(p.pod)}</td><td>{e(p.node)}</td><td>{", ".join(e(n) for n in p.numa) or "–"}</td>'
                    f'<td>{gpus or "–"}</td><td class="pairs">{pairs or vfs or "–"}</td></tr>')
    tier = (f'<p class="hypernode">HyperNode: <strong>{e(job.hypernode)}</strong>'
            + (f' <span class="tier">tier {job.tier}</span>' if job.tier is not None else "") + "</p>"
            if job.hypernode else "")
    return (f'{tier}<table class="placements"><caption>where the pods landed</caption><thead><tr>'
            '<th scope="col">pod</th><th scope="col">node</th><th scope="col">NUMA</th><th scope="col">GPUs</th>'
            '<th scope="col">GPU ↔ RDMA VF</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>")


def _job(job: JobRow) -> str:
    why = ("<ul class=why>" + "".join(f"<li>{e(w)}</li>" for w in job.why) + "</ul>") if job.why else ""
    gang = (f'<span class="gang" title="minAvailable / running / pending">minAvailable {job.min_available} · '
            f'running {job.running} · pending {job.pending}'
            + (f" · succeeded {job.succeeded}" if job.succeeded else "")
            + (f" · failed {job.failed}" if job.failed else "") + "</span>")
    details = why + _placements(job)
    summary = (f'<span class="job-name">{e(job.namespace)}/{e(job.name)}</span> <span class="queue">queue '
               f'{e(job.queue)}</span> {gang}')
    key = f"{job.namespace}/{job.name}"
    if not details:
        return f'<li class="job" data-job="{e(key)}" data-phase="{e(job.phase)}">{summary}</li>'
    return (f'<li class="job" data-job="{e(key)}" data-phase="{e(job.phase)}"><details'
            f'{" open" if job.why else ""}><summary>{summary}</summary>{details}</details></li>')


def jobs_page(rows: Sequence[JobRow], *, limit: int = 200) -> str:
    """The jobs by phase; each phase shows at most `limit` jobs (the rest counted)."""
    if not rows:
        return "<h1>Jobs</h1><p>No Volcano Jobs yet.</p>"
    sections = []
    for phase, jobs in jobs_by_phase(rows):
        more = f'<p class="more">… and {len(jobs) - limit} more</p>' if len(jobs) > limit else ""
        sections.append(f'<section class="phase" data-phase="{e(phase)}"><h2>{e(phase)} <span class="count">'
                        f'{len(jobs)}</span></h2><ul class="jobs">{"".join(_job(j) for j in jobs[:limit])}</ul>'
                        f"{more}</section>")
    return "<h1>Jobs</h1>" + "".join(sections)


def _cell(c: Cell, resource: str, label: str | None = None) -> str:
    """One heatmap cell; `label` is `resource` already escaped (the numbers are formatted here: nothing to escape)."""
    if not c.total:
        return '<td class="heat none">–</td>'
    percent = 100.0 * c.used / c.total  # Cell.percent and .level, inline: this runs once per node and resource
    return (f'<td class="heat h{min(10, int(percent // 10))}" title="{label if label is not None else e(resource)} '
            f'{_amount(c.used, resource)} of {_amount(c.total, resource)}">{percent:.0f}%</td>')


def _mib(value: float) -> str:
    return _amount(value * 2**20, "memory")


def _card(card: CardRow) -> str:
    """One card of the per-card heatmap: shaded by what is held (device memory, or MIG instances), with who holds
    it written out (a MIG card lists its profiles, taken / total)."""
    c = card.cell
    shade = f"h{c.level}" if c.total else "none"
    if card.kind == "mig":
        lines = [f'<li>{e(p.profile)} {p.used}/{p.total or "–"}'
                 + "".join(f' <span class="holder">{e(h.pod)} <small>{e(h.instance)}</small></span>'
                           for h in p.holders) + "</li>" for p in card.profiles]
        head = f"MIG · {c.used:.0f}/{c.total:.0f} instances" if c.total else "MIG"
    else:
        lines = [f'<li><span class="holder">{e(h.pod)}</span> {_mib(h.memory_mib)} · {h.cores}% cores</li>'
                 for h in card.holders]
        head = (f"vGPU · {_mib(card.used_memory_mib)}/{_mib(card.memory_mib)} · {card.used_cores}/{card.cores}% "
                f"cores · {len(card.holders)}/{card.slots} slots")
    title = f"GPU {card.index} {card.model} {card.uuid}".strip()
    return (f'<td class="heat card {shade}" data-card="{e(card.uuid or card.index)}" title="{e(title)}">'
            f'<strong>GPU {card.index}</strong> {c.percent:.0f}%<br><small>{e(head)}</small>'
            + (f'<ul class="holders">{"".join(lines)}</ul>' if lines else "") + "</td>")


def cards_table(rows: Sequence[GPUNodeRow]) -> str:
    """The per-card heatmap: one row per node that shares or splits its GPUs, one cell per card."""
    if not rows:
        return ""
    body = "".join(f'<tr data-gpu-node="{e(r.node)}"><th scope="row">{e(r.node)}'
                   + "".join(f' <small class="unrecorded">{n}× {e(p)} held, instance not recorded</small>'
                             for p, n in r.unrecorded.items())
                   + "</th>" + "".join(_card(c) for c in r.cards) + "</tr>" for r in rows)
    return ('<h2>GPUs per card</h2><p class="legend">vGPU cards: device memory held, and by whom (memory · cores); '
            'MIG cards: instances taken per profile. Darker is fuller.</p><div class="scroll"><table '
            f'class="heatmap cards"><thead><tr><th scope="col">node</th><th scope="col" colspan="{max(len(r.cards) for r in rows)}">'
            f'cards</th></tr></thead><tbody>{body}</tbody></table></div>')


def nodes_page(cols: Sequence[str], rows: Sequence[NodeRow], hypernodes: Sequence[HyperNodeRow],
               cards: Sequence[GPUNodeRow] = ()) -> str:
    if not rows:
        return "<h1>Nodes</h1><p>No nodes.</p>"
    head = "".join(f'<th scope="col">{e(c).replace("/", "/<wbr>")}</th>' for c in cols)  # long names wrap at /
    labels = [(c, e(c)) for c in cols]
    body = "".join(f'<tr><th scope="row">{e(r.name)}{"" if r.ready else " <small>(NotReady)</small>"}'
                   f'{" <small>(cordoned)</small>" if r.unschedulable else ""}</th><td>{r.pods}</td>'
                   + "".join(_cell(r.cells[c], c, label) for c, label in labels) + "</tr>" for r in rows)
    out = (f'<h1>Nodes <span class="count">{len(rows)}</span></h1><p class="legend">Requests of the bound pods '
           'against allocatable; darker is fuller.</p><div class="scroll"><table class="heatmap"><thead><tr>'
           f'<th scope="col">node</th><th scope="col">pods</th>{head}</tr></thead><tbody>{body}</tbody></table></div>')
    if hypernodes:
        hcols = [c for c in cols if any(c in h.cells and h.cells[c].total for h in hypernodes)]
        hbody = "".join(f'<tr data-hypernode="{e(h.name)}"><th scope="row" style="padding-left:'
                        f'{0.5 + 1.25 * h.depth}rem">{e(h.name)}</th><td>{h.tier}</td><td>{h.nodes}</td>'
                        + "".join(_cell(h.cells.get(c, Cell(0, 0)), c) for c in hcols) + "</tr>" for h in hypernodes)
        out += ('<h2>HyperNodes</h2><div class="scroll"><table class="heatmap hypernodes"><thead><tr>'
                '<th scope="col">HyperNode</th><th scope="col">tier</th><th scope="col">nodes</th>'
                + "".join(f'<th scope="col">{e(c)}</th>' for c in hcols) + f"</tr></thead><tbody>{hbody}</tbody>"
                "</table></div>")
    return out + cards_table(cards)


def _counters(counters: Sequence[PolicyCounter] | None, missing: str) -> str:
    """The webhook's policy counters; without them, why (not configured, or the last scrape's error)."""
    head = "<h2>The webhook's counters</h2>"
    if counters is None:
        reason = (f"the last scrape of the webhook's metrics failed: {e(missing)}" if missing else
                  "the dashboard was not given the webhook's metrics address (<code>--webhook-metrics</code>; "
                  "<code>lahar up</code> passes it)")
        return f'{head}<p class="legend">Not shown: {reason}.</p>'
    if not counters:
        return f"{head}<p>No policy decisions or audits since the webhook started.</p>"
    body = "".join(f'<tr><th scope="row">{e(c.policy)}</th><td>{e(c.action)}</td><td>{c.count}</td></tr>'
                   for c in counters)
    return (f'{head}<p class="legend">Since the webhook started (<code>lahar_policy_decisions_total</code>, '
            '<code>lahar_policy_audit_total</code>).</p><div class="scroll"><table class="counters"><thead><tr>'
            '<th scope="col">AdmissionPolicy</th><th scope="col">action</th><th scope="col">count</th></tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


def policies_page(rows: Sequence[PolicyRow], events: Sequence[PolicyEvent], *,
                  counters: Sequence[PolicyCounter] | None = None, counters_missing: str = "") -> str:
    if rows:
        body = "".join(f'<tr><th scope="row">{e(p.name)}</th><td>{e(p.source)}</td>'
                       f'<td>{e(", ".join(p.actions)) or "–"}</td><td>{e(", ".join(p.resources)) or "–"}</td>'
                       f'<td>{p.violations}</td><td>{e(p.error) or ""}</td></tr>' for p in rows)
        table = ('<div class="scroll"><table><thead><tr><th scope="col">AdmissionPolicy</th><th scope="col">from'
                 '</th><th scope="col">actions</th><th scope="col">resources</th><th scope="col">violations</th>'
                 f'<th scope="col">error</th></tr></thead><tbody>{body}</tbody></table></div>')
    else:
        table = '<p>No AdmissionPolicies loaded (ConfigMaps labelled <code>lahar.sh/policy: "true"</code>).</p>'
    if events:
        ev = "".join(f'<tr><td>{e(x.last)}</td><td>{e(x.namespace)}</td><td>{e(x.object)}</td><td>{e(x.type)}</td>'
                     f'<td>{e(x.reason)}</td><td>{e(x.message)}</td><td>{x.count}</td></tr>' for x in events)
        recent = ('<h2>Recent denials, warnings and audits</h2><div class="scroll"><table><thead><tr>'
                  '<th scope="col">last</th><th scope="col">namespace</th><th scope="col">object</th>'
                  '<th scope="col">type</th><th scope="col">reason</th><th scope="col">message</th>'
                  f'<th scope="col">count</th></tr></thead><tbody>{ev}</tbody></table></div>')
    else:
        recent = "<h2>Recent denials, warnings and audits</h2><p>None.</p>"
    return "<h1>Policies</h1>" + table + recent + _counters(counters, counters_missing)


def error_page(status: int, message: str) -> str:
    return layout(title=str(status), active="", main=f"<h1>{status}</h1><p>{e(message)}</p>", live=False)


def counts_line(counts: Mapping[str, int]) -> str:
    return " · ".join(f"{e(k)} {v}" for k, v in sorted(counts.items()))
