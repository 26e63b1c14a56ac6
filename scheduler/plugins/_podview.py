"""The pods on nodes as one session sees them, indexed for predicates and nodeorder: per-pod profiles (parsed
affinity terms, spread constraints, host ports, images), node label columns, and lazily built indexes.

Shared by `plugins/predicates.py` and `plugins/nodeorder.py` through `view_of(ssn)` (per-session `ssn.state`);
kept current by the session's allocate/deallocate events (pods placed earlier in the session count; pods evicted
in it do not). Indexes are built only when a pending pod needs them, so sessions without inter-pod rules or host
ports pay nothing.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lahar.kube.selectors import LabelSelector, Requirement, SelectorError, from_label_selector
from lahar.scheduler.framework.session import Session
from lahar.scheduler.framework.snapshot import Task, TaskStatus

__all__ = [
    "AffinityTerm",
    "LabelGroup",
    "PodProfile",
    "PodView",
    "SpreadConstraint",
    "TermGroup",
    "narrowing",
    "normalized_image",
    "profile_of",
    "view_of",
]

HOSTNAME = "kubernetes.io/hostname"
NS_NAME_LABEL = "kubernetes.io/metadata.name"
_INT = re.compile(r"^[+-]?\d+$")


# --- parsed pod rules --------------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A PodAffinityTerm as kube-scheduler's framework.AffinityTerm: namespaces (listed, or the pod's own when
    neither list nor selector is given), namespace selector, label selector (with match/mismatchLabelKeys merged),
    topology key; `weight` for preferred terms (1 for required ones)."""

    namespaces: frozenset[str]
    ns_selector: LabelSelector | None
    selector: LabelSelector
    topology_key: str
    weight: int
    key: str  # canonical text, for grouping equal terms of different pods

    def matches_ns(self, namespace: str, ns_labels: Mapping[str, str]) -> bool:
        return namespace in self.namespaces or (self.ns_selector is not None and self.ns_selector.matches(ns_labels))

    def matches(self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str]) -> bool:
        return self.matches_ns(namespace, ns_labels) and self.selector.matches(labels)


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A TopologySpreadConstraint with kube-scheduler's defaults: minDomains 1, nodeAffinityPolicy Honor,
    nodeTaintsPolicy Ignore; matchLabelKeys merged into the selector."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int
    honor_affinity: bool
    honor_taints: bool


def _selector(sel: Mapping[str, Any] | None, labels: Mapping[str, str], match_keys: Any = (),
              mismatch_keys: Any = ()) -> LabelSelector:
    try:
        s = from_label_selector(sel)
    except SelectorError:
        return LabelSelector(None)
    extra = [Requirement(k, "in", (labels[k],)) for k in match_keys or () if k in labels]
    extra += [Requirement(k, "notin", (labels[k],)) for k in mismatch_keys or () if k in labels]
    if extra and s.requirements is not None:
        s = LabelSelector(tuple(sorted((*s.requirements, *extra), key=lambda r: r.key)))
    return s


def _term(term: Mapping[str, Any], namespace: str, labels: Mapping[str, str], weight: int) -> AffinityTerm:
    listed = term.get("namespaces") or []
    ns_sel_obj = term.get("namespaceSelector")
    namespaces = frozenset(listed) if (listed or ns_sel_obj is not None) else frozenset((namespace,))
    ns_selector = None
    if ns_sel_obj is not None:
        try:
            ns_selector = from_label_selector(ns_sel_obj)
        except SelectorError:
            ns_selector = None
    selector = _selector(term.get("labelSelector"), labels, term.get("matchLabelKeys"),
                         term.get("mismatchLabelKeys"))
    key = json.dumps([sorted(namespaces), str(ns_selector) if ns_selector is not None else None,
                      None if selector.requirements is None else str(selector), term.get("topologyKey") or "",
                      weight])
    return AffinityTerm(namespaces, ns_selector, selector, term.get("topologyKey") or "", weight, key)


def normalized_image(name: str) -> str:
    """kube-scheduler's imagelocality normalizedImageName: a name without a tag gets `:latest`."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


class PodProfile:
    """What the node plugins need to know about one pod, computed once per task (cached in `Task.signature`)."""

    __slots__ = ("namespace", "labels", "label_key", "terminating", "spec", "node_selector", "required_terms",
                 "preferred_terms", "tolerations", "aff_req", "anti_req", "aff_pref", "anti_pref", "spread_hard",
                 "spread_soft", "ports", "images", "_static_key", "_score_key")

    def __init__(self, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        self.spec = spec
        self.namespace: str = meta.get("namespace") or "default"
        self.labels: dict[str, str] = meta.get("labels") or {}
        self.label_key: Hashable = (self.namespace, frozenset(self.labels.items()))
        self.terminating = bool(meta.get("deletionTimestamp"))
        self.node_selector: Mapping[str, str] = spec.get("nodeSelector") or {}
        affinity = spec.get("affinity") or {}
        na = affinity.get("nodeAffinity") or {}
        req = na.get("requiredDuringSchedulingIgnoredDuringExecution")
        self.required_terms: list[Mapping[str, Any]] | None = (
            None if req is None else list((req or {}).get("nodeSelectorTerms") or []))
        self.preferred_terms: list[Mapping[str, Any]] = list(na.get("preferredDuringSchedulingIgnoredDuringExecution")
                                                             or [])
        self.tolerations: list[Mapping[str, Any]] = spec.get("tolerations") or []
        self.aff_req: tuple[AffinityTerm, ...] = ()
        self.anti_req: tuple[AffinityTerm, ...] = ()
        self.aff_pref: tuple[AffinityTerm, ...] = ()
        self.anti_pref: tuple[AffinityTerm, ...] = ()
        pa, paa = affinity.get("podAffinity"), affinity.get("podAntiAffinity")
        if pa or paa:
            ns, lb = self.namespace, self.labels
            pa, paa = pa or {}, paa or {}
            self.aff_req = tuple(_term(t, ns, lb, 1) for t in pa.get("requiredDuringSchedulingIgnoredDuringExecution")
                                 or [])
            self.anti_req = tuple(_term(t, ns, lb, 1) for t in
                                  paa.get("requiredDuringSchedulingIgnoredDuringExecution") or [])
            self.aff_pref = tuple(_term(w.get("podAffinityTerm") or {}, ns, lb, int(w.get("weight") or 0))
                                  for w in pa.get("preferredDuringSchedulingIgnoredDuringExecution") or [])
            self.anti_pref = tuple(_term(w.get("podAffinityTerm") or {}, ns, lb, int(w.get("weight") or 0))
                                   for w in paa.get("preferredDuringSchedulingIgnoredDuringExecution") or [])
        hard, soft = [], []
        for c in spec.get("topologySpreadConstraints") or []:
            sc = SpreadConstraint(
                max_skew=int(c.get("maxSkew") or 1), topology_key=c.get("topologyKey") or "",
                selector=_selector(c.get("labelSelector"), self.labels, c.get("matchLabelKeys")),
                min_domains=int(c.get("minDomains") or 1),
                honor_affinity=(c.get("nodeAffinityPolicy") or "Honor") == "Honor",
                honor_taints=(c.get("nodeTaintsPolicy") or "Ignore") == "Honor")
            (soft if c.get("whenUnsatisfiable") == "ScheduleAnyway" else hard).append(sc)
        self.spread_hard: tuple[SpreadConstraint, ...] = tuple(hard)
        self.spread_soft: tuple[SpreadConstraint, ...] = tuple(soft)
        ports: list[tuple[str, str, int]] = []
        images: list[str] = []
        for c in (*(spec.get("initContainers") or ()), *(spec.get("containers") or ())):
            if c.get("image"):
                images.append(normalized_image(c["image"]))
        for c in spec.get("containers") or ():
            for p in c.get("ports") or ():
                hp = int(p.get("hostPort") or 0)
                if hp > 0:
                    ports.append((p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", hp))
        self.ports: tuple[tuple[str, str, int], ...] = tuple(ports)
        self.images: tuple[str, ...] = tuple(images)
        self._static_key: str | None = None
        self._score_key: str | None = None

    @property
    def has_pod_terms(self) -> bool:
        return bool(self.aff_req or self.anti_req or self.aff_pref or self.anti_pref)

    @property
    def static_key(self) -> str:
        """Node selector, required node affinity and tolerations: what the static filters depend on."""
        if self._static_key is None:
            if not self.node_selector and self.required_terms is None and not self.tolerations:
                self._static_key = _NO_STATIC_RULES  # most pods: the same text json.dumps gives, without it
            else:
                self._static_key = json.dumps([self.node_selector, self.required_terms, self.tolerations],
                                              sort_keys=True, separators=(",", ":"))
        return self._static_key

    @property
    def score_key(self) -> str:
        """Preferred node affinity, tolerations and images: what the per-node static scores depend on."""
        if self._score_key is None:
            if not self.preferred_terms and not self.tolerations:  # most pods: keyed by their images alone
                key = _IMAGES_ONLY.get(self.images)
                if key is None:
                    key = _IMAGES_ONLY[self.images] = json.dumps([[], [], self.images], separators=(",", ":"))
                    if len(_IMAGES_ONLY) > 4096:
                        _IMAGES_ONLY.clear()
                self._score_key = key
            else:
                self._score_key = json.dumps([self.preferred_terms, self.tolerations, self.images], sort_keys=True,
                                             separators=(",", ":"))
        return self._score_key


# `static_key` of a pod without node selector, required node affinity or tolerations, and the `score_key`s of pods
# without preferred node affinity or tolerations by their images: the texts json.dumps gives, computed once
_NO_STATIC_RULES = json.dumps([{}, None, []], sort_keys=True, separators=(",", ":"))
_IMAGES_ONLY: dict[tuple[str, ...], str] = {}


def profile_of(task: Task) -> PodProfile:
    prof = task.signature
    if not isinstance(prof, PodProfile):
        prof = PodProfile(task.pod)
        task.signature = prof
    return prof


# --- indexes -----------------------------------------------------------------------------------------------------

class LabelGroup:
    """Pods sharing namespace and labels: how many sit on each node (`live` leaves out terminating ones)."""

    __slots__ = ("namespace", "labels", "nodes", "live")

    def __init__(self, namespace: str, labels: Mapping[str, str]) -> None:
        self.namespace = namespace
        self.labels = labels
        self.nodes: Counter[int] = Counter()
        self.live: Counter[int] = Counter()


class TermGroup:
    """Equal pod-affinity terms of placed pods (kind: aff-req, anti-req, aff-pref, anti-pref): count per node."""

    __slots__ = ("kind", "term", "nodes")

    def __init__(self, kind: str, term: AffinityTerm) -> None:
        self.kind = kind
        self.term = term
        self.nodes: Counter[int] = Counter()


_KINDS = ("aff_req", "anti_req", "aff_pref", "anti_pref")


class PodView:
    """Per session: node label columns, the pods on each node by label group, the placed pods' affinity terms, and
    the host ports in use — each built on first need, then kept current by `on_allocate` / `on_deallocate`."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.nodes = ssn.nodes
        self.n = len(ssn.nodes)
        self.owner: object | None = None
        self.evicted: set[str] = set()
        self.where: dict[str, int] = {}
        self._columns: dict[str, tuple[np.ndarray, dict[str, int]]] = {}
        self._numeric: dict[str, np.ndarray] = {}
        self.groups: dict[Hashable, LabelGroup] | None = None
        self.group_list: list[LabelGroup] = []  # append-only: cached matches extend over the new ones only
        self.terms: dict[tuple[str, str, str], TermGroup] | None = None
        self.term_list: list[TermGroup] = []
        # inverted indexes: a selector with an equality requirement only looks at the groups carrying that label
        self.group_pairs: dict[tuple[str, str], list[LabelGroup]] = {}
        self.term_pairs: dict[tuple[str, str], list[TermGroup]] = {}
        self.term_wild: list[TermGroup] = []
        self.ports: dict[int, Counter[tuple[str, str, int]]] | None = None
        self._cache: dict[Hashable, tuple[int, Any]] = {}
        namespaces = (getattr(ssn.snapshot, "extras", None) or {}).get("namespaces") or {}
        self._ns_labels: dict[str, dict[str, str]] = {
            name: dict((o.get("metadata") or {}).get("labels") or {}) for name, o in namespaces.items()}

    # --- node label columns ------------------------------------------------------------------------------------

    def column(self, key: str) -> tuple[np.ndarray, dict[str, int]]:
        """Per node, a code for the value of label `key` (-1 where absent), and value → code."""
        hit = self._columns.get(key)
        if hit is None:
            index: dict[str, int] = {}
            codes = np.fromiter((index.setdefault(v, len(index)) if (v := n.labels.get(key)) is not None else -1
                                 for n in self.nodes), dtype=np.int64, count=self.n)
            hit = self._columns[key] = (codes, index)
        return hit

    def numeric(self, key: str) -> np.ndarray:
        """Per node, label `key` as an integer (NaN where absent or not an integer), for Gt / Lt."""
        hit = self._numeric.get(key)
        if hit is None:
            vals = [n.labels.get(key) for n in self.nodes]
            hit = self._numeric[key] = np.array(
                [float(int(v)) if v is not None and _INT.match(v) else np.nan for v in vals], dtype=np.float64)
        return hit

    def domain_sum(self, key: str, per_node: np.ndarray, *, where: np.ndarray | None = None) -> np.ndarray:
        """Per node, the sum of `per_node` over the nodes sharing its value of label `key` (0 where absent);
        `where` limits which nodes contribute."""
        codes, index = self.column(key)
        has = codes >= 0
        contrib = has if where is None else (has & where)
        sums = np.bincount(codes[contrib], weights=per_node[contrib], minlength=len(index))
        return np.where(has, sums[np.maximum(codes, 0)] if len(index) else 0.0, 0.0)

    def ns_labels(self, namespace: str) -> dict[str, str]:
        labels = self._ns_labels.get(namespace)
        if labels is None:
            labels = self._ns_labels[namespace] = {}
        labels.setdefault(NS_NAME_LABEL, namespace)
        return labels

    # --- the pods the session has on nodes -------------------------------------------------------------------

    def placed(self) -> Iterator[tuple[int, Task]]:
        evicted = self.evicted
        for node in self.nodes:
            i = node.index
            for t in node.tasks.values():
                if t.uid not in evicted:
                    yield i, t
            for t in node.others:
                yield i, t

    def on_allocate(self, task: Task) -> None:
        self.evicted.discard(task.uid)
        node = task.node
        if node < 0:
            return
        self.where[task.uid] = node
        self._add(profile_of(task), node, 1)

    def on_deallocate(self, task: Task) -> None:
        node = task.node if task.node >= 0 else self.where.get(task.uid, -1)
        self.where.pop(task.uid, None)
        if task.status is TaskStatus.RELEASING:
            self.evicted.add(task.uid)
        if node >= 0:
            self._add(profile_of(task), node, -1)

    def _add(self, prof: PodProfile, node: int, delta: int) -> None:
        if self.groups is not None:
            self._add_labels(prof, node, delta)
        if self.terms is not None and prof.has_pod_terms:
            self._add_terms(prof, node, delta)
        if self.ports is not None and prof.ports:
            c = self.ports.setdefault(node, Counter())
            for p in prof.ports:
                c[p] += delta
                if c[p] <= 0:
                    del c[p]

    def _add_labels(self, prof: PodProfile, node: int, delta: int) -> None:
        assert self.groups is not None
        g = self.groups.get((prof.label_key, prof.terminating))
        if g is None:
            g = self.groups[(prof.label_key, prof.terminating)] = LabelGroup(prof.namespace, prof.labels)
            self.group_list.append(g)
            for pair in prof.labels.items():
                self.group_pairs.setdefault(pair, []).append(g)
        g.nodes[node] += delta
        if not prof.terminating:
            g.live[node] += delta

    def _add_terms(self, prof: PodProfile, node: int, delta: int) -> None:
        assert self.terms is not None
        for kind in _KINDS:
            for term in getattr(prof, kind):
                key = (prof.namespace, kind, term.key)
                g = self.terms.get(key)
                if g is None:
                    g = self.terms[key] = TermGroup(kind, term)
                    self.term_list.append(g)
                    narrow = narrowing(term.selector)
                    if narrow is None:
                        self.term_wild.append(g)
                    else:
                        for v in narrow[1]:
                            self.term_pairs.setdefault((narrow[0], v), []).append(g)
                g.nodes[node] += delta

    # --- lazily built indexes --------------------------------------------------------------------------------

    def label_groups(self) -> dict[Hashable, LabelGroup]:
        if self.groups is None:
            self.groups = {}
            for i, t in self.placed():
                self._add_labels(profile_of(t), i, 1)
        return self.groups

    def term_groups(self) -> dict[tuple[str, str, str], TermGroup]:
        if self.terms is None:
            self.terms = {}
            for i, t in self.placed():
                aff = (t.pod.get("spec") or {}).get("affinity")
                if aff and (aff.get("podAffinity") or aff.get("podAntiAffinity")):
                    self._add_terms(profile_of(t), i, 1)
        return self.terms

    def port_index(self) -> dict[int, Counter[tuple[str, str, int]]]:
        if self.ports is None:
            self.ports = {}
            for i, t in self.placed():
                for c in (t.pod.get("spec") or {}).get("containers") or ():
                    if c.get("ports"):
                        prof = profile_of(t)
                        if prof.ports:
                            cnt = self.ports.setdefault(i, Counter())
                            for p in prof.ports:
                                cnt[p] += 1
                        break
        return self.ports

    # --- queries ---------------------------------------------------------------------------------------------

    def count_matching(self, key: Hashable, match: Callable[[LabelGroup], bool], *, live: bool = False,
                       selector: LabelSelector | None = None) -> np.ndarray:
        """Per node, the placed pods whose label group satisfies `match` (terminating ones left out if `live`).
        With a `selector` that has an equality requirement, only the groups carrying that label are tried;
        otherwise the groups matching `key` are cached and label groups created since are checked next time."""
        self.label_groups()
        narrow = narrowing(selector) if selector is not None else None
        if narrow is not None:
            matching = [g for v in narrow[1] for g in self.group_pairs.get((narrow[0], v), ()) if match(g)]
        else:
            matching = self._extend(("groups", key), self.group_list, match)
        out = np.zeros(self.n, dtype=np.float64)
        for g in matching:
            c = g.live if live else g.nodes
            if c:
                idx = np.fromiter(c.keys(), dtype=np.int64, count=len(c))
                out[idx] += np.fromiter(c.values(), dtype=np.float64, count=len(c))
        return out

    def terms_matching(self, prof: PodProfile) -> list[TermGroup]:
        """Placed pods' affinity term groups whose term selects the pod of `prof` (cached per label set)."""
        self.term_groups()
        ns, labels, ns_labels = prof.namespace, prof.labels, self.ns_labels(prof.namespace)
        out = []
        for candidates in (self.term_wild, *(self.term_pairs.get(pair, ()) for pair in labels.items())):
            for g in candidates:
                if g.term.matches(ns, labels, ns_labels) and any(v > 0 for v in g.nodes.values()):
                    out.append(g)
        return out

    def _extend(self, key: Hashable, items: list[Any], match: Callable[[Any], bool]) -> list[Any]:
        hit = self._cache.get(key)
        seen, found = hit if hit is not None else (0, [])
        if seen < len(items):
            found = found + [g for g in items[seen:] if match(g)]
            self._cache[key] = (len(items), found)
        return found

    def counts_vector(self, nodes: Counter[int]) -> np.ndarray:
        out = np.zeros(self.n, dtype=np.float64)
        if nodes:
            idx = np.fromiter(nodes.keys(), dtype=np.int64, count=len(nodes))
            out[idx] += np.fromiter(nodes.values(), dtype=np.float64, count=len(nodes))
        return out


def narrowing(selector: LabelSelector) -> tuple[str, tuple[str, ...]] | None:
    """The first equality / `in` requirement of a selector: a pod it selects carries one of those labels."""
    for r in selector.requirements or ():
        if r.op in ("=", "==", "in"):
            return r.key, r.values
    return None


def view_of(ssn: Session, plugin: object) -> PodView:
    """The session's pod view (`ssn.state`, dropped with the session); the first plugin to ask owns it and forwards
    the session's events to it."""
    view = ssn.state(PodView, lambda: PodView(ssn))
    if view.owner is None:
        view.owner = plugin
    return view
