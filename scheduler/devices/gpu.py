"""Link-aware whole-GPU selection: go-gpuallocator's best-effort policy, its link scores, devcluster's link matrix.

The deviceshare plugin calls `allocate(available, required, size, scores)` per (task, node) with the scores of
`pair_scores(links)`; the links come from the node annotation `lahar.sh/gpu-topology` (`links_from_annotation`).
Semantics: spec/topology.md §8.2–8.3 (NVIDIA/go-gpuallocator `gpuallocator/besteffort_policy.go`).

Link words are nvidia-smi `topo -m` words: `SYS` (across CPU sockets), `NODE` (same NUMA node, across host
bridges), `PHB` (one PCIe host bridge), `PXB` (several PCIe switches), `PIX` (one PCIe switch), `BOARD` (same
board) and `NV<n>` (n NVLinks); go-gpuallocator's names (`CrossCPU`, `SameCPU`, `HostBridge`, `MultiSwitch`,
`SingleSwitch`, `SameBoard`, `SingleNVLINKLink`, `TwoNVLINKLinks`, ...) are accepted too. Unknown words score 0, as upstream's `P2PLinkUnknown`.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

__all__ = [
    "LINK_SCORES",
    "allocate",
    "link_score",
    "links_from_annotation",
    "pair_scores",
    "partition_score",
    "set_score",
]

LINK_SCORES: dict[str, int] = {"SYS": 10, "NODE": 20, "PHB": 30, "PXB": 40, "PIX": 50, "BOARD": 60}
_ALIASES = {
    "crosscpu": "SYS", "samecpu": "NODE", "hostbridge": "PHB", "multiswitch": "PXB", "singleswitch": "PIX",
    "sameboard": "BOARD",
}
_NUMBERS = ("single", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
            "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen")
_ALIASES.update({f"{word}nvlinklink{'s' if n > 1 else ''}": f"NV{n}" for n, word in enumerate(_NUMBERS, start=1)})
_NVLINK = re.compile(r"^NV(\d+)$", re.IGNORECASE)
_MAX_NVLINKS = 18

Scores = Mapping[tuple[int, int], int]


def _canonical(word: str) -> str:
    word = word.strip()
    return _ALIASES.get(word.replace(" ", "").replace("_", "").lower(), word.upper())


def link_score(word: str) -> int:
    """`calculateGPUPairScore` for one link: PCIe levels 10..60, n NVLinks 100·n (n <= 18), unknown 0."""
    word = _canonical(word)
    nv = _NVLINK.match(word)
    if nv:
        n = int(nv.group(1))
        return 100 * n if 1 <= n <= _MAX_NVLINKS else 0
    return LINK_SCORES.get(word, 0)


def pair_scores(links: Mapping[tuple[int, int], Sequence[str]]) -> dict[tuple[int, int], int]:
    """The symmetric pair-score table `{(i, j): score}` (both orders) from links listed per ordered pair.

    A pair's score is the sum over the links listed from the lower index to the higher (upstream scores from the
    set's first GPU, which is the lower index). Both directions must list as many links, else `ValueError`
    (upstream panics: "all P2PLinks between 2 GPUs should be bidirectional").
    """
    out: dict[tuple[int, int], int] = {}
    for i, j in {(min(a, b), max(a, b)) for a, b in links if a != b}:
        forward, backward = links.get((i, j), ()), links.get((j, i), ())
        if len(forward) != len(backward):
            raise ValueError(f"all P2PLinks between 2 GPUs should be bidirectional: GPU {i} lists {len(forward)} "
                             f"link(s) to GPU {j}, GPU {j} lists {len(backward)} back")
        score = sum(link_score(w) for w in (forward or backward))
        out[(i, j)] = out[(j, i)] = score
    return out


def links_from_annotation(annotation: str | Mapping[str, Any]) -> dict[tuple[int, int], list[str]]:
    """devcluster's `lahar.sh/gpu-topology` node annotation (JSON: `gpus[k].index`, `links[a][b]` words, "X" on
    the diagonal) → links per ordered pair of GPU indices. A cell may also hold several words, as a list or
    joined with "+" (e.g. "NV2+PIX", what go-gpuallocator would see: NVLinks and the PCIe level)."""
    data = json.loads(annotation) if isinstance(annotation, str) else annotation
    indices = [int(g["index"]) for g in data.get("gpus", [])]
    rows = data.get("links", [])
    if len(rows) != len(indices) or any(len(row) != len(indices) for row in rows):
        raise ValueError("gpu-topology: links must be a square matrix over the listed GPUs")
    out: dict[tuple[int, int], list[str]] = {}
    for a, row in zip(indices, rows, strict=True):
        for b, cell in zip(indices, row, strict=True):
            if a == b:
                continue
            words = cell if isinstance(cell, list) else str(cell).split("+")
            out[(a, b)] = [w.strip() for w in words if w.strip() and w.strip().upper() != "X"]
    return out


def _pair(scores: Scores, a: int | None, b: int | None) -> int:
    if a is None or b is None or a == b:
        return 0
    return scores.get((a, b), scores.get((b, a), 0))


def set_score(gpus: Sequence[int | None], scores: Scores) -> int:
    """`calculateGPUSetScore`: the sum of pair scores over every pair of the set (padding scores 0)."""
    return sum(_pair(scores, a, b) for a, b in itertools.combinations(gpus, 2))


def partition_score(partition: Sequence[Sequence[int | None]], scores: Scores) -> int:
    return sum(set_score(s, scores) for s in partition)


def allocate(available: Sequence[int], required: Sequence[int], size: int, scores: Scores) -> list[int]:
    """go-gpuallocator's best-effort policy: `size` GPUs from `available` including every `required` one, or [].

    Not greedy: among all partitions of the available GPUs into groups of `size` (padded), take the first one
    with the highest total score that has a group holding every required GPU, and return that partition's best
    group holding them. The search is memoised over the remaining GPUs (same result and tie-breaking as upstream's
    enumeration, spec §8.3, without visiting every partition). Deliberate fix: a padded group (fewer than `size`
    GPUs) is never returned; upstream could return one with nil slots when it scored highest.
    """
    available = list(available)
    required = list(required)
    if size <= 0 or len(available) < size or len(required) > size or len(required) > len(available):
        return []
    if size == 1:
        for gpu in available:  # upstream's size-1 shortcut: singleton "partitions" in order, all scoring 0
            if all(r == gpu for r in required):
                return [gpu]
        return []
    padded: list[int | None] = [*available, *([None] * (-len(available) % size))]
    slots = len(padded)
    pads = sum(1 for g in padded if g is None)
    pad_bits = sum(1 << p for p, g in enumerate(padded) if g is None)
    if required and not set(required) <= set(available):
        return []
    req_bits = sum(1 << padded.index(r) for r in set(required))
    anchor_bit = 1 << padded.index(required[0]) if required else 0
    matrix = [[_pair(scores, a, b) for b in padded] for a in padded]
    groups: dict[tuple[int, tuple[int, ...]], tuple[int, int, int]] = {}  # (first, rest) -> bits, score, pads

    def group(first: int, rest: tuple[int, ...]) -> tuple[int, int, int]:
        info = groups.get((first, rest))
        if info is None:
            members = (first, *rest)
            bits = sum(1 << p for p in members)
            score = sum(matrix[a][b] for a, b in itertools.combinations(members, 2))
            info = groups[(first, rest)] = (bits, score, (bits & pad_bits).bit_count())
        return info

    def valid(bits: int) -> bool:
        """The partition needs one pad-free group holding every required GPU: the group of required[0]."""
        if bits & anchor_bit:
            return not bits & pad_bits and bits & req_bits == req_bits
        return not bits & req_bits

    @cache
    def best(remaining: int) -> tuple[int, tuple[int, ...]] | None:
        """(score, group bitmasks in upstream's enumeration order) of the first best partition of `remaining`."""
        positions = [p for p in range(slots) if remaining >> p & 1]
        if len(positions) == size:
            if not valid(remaining):
                return None
            return group(positions[0], tuple(positions[1:]))[1], (remaining,)
        first, rest = positions[0], positions[1:]
        found: tuple[int, tuple[int, ...]] | None = None
        for combo in itertools.combinations(rest, size - 1):
            bits, score, in_pads = group(first, combo)
            if (in_pads and in_pads != pads) or not valid(bits):
                continue
            sub = best(remaining & ~(bits | (pad_bits if in_pads else 0)))
            if sub is not None and (found is None or score + sub[0] > found[0]):
                found = (score + sub[0], (bits, *sub[1]))
        return found

    chosen = best((1 << slots) - 1)
    best.cache_clear()
    if chosen is None:
        return []
    candidates = [[padded[p] for p in range(slots) if bits >> p & 1] for bits in chosen[1]]
    candidates = [g for g in candidates if None not in g and set(required) <= set(g)]
    if not candidates:
        return []
    top = max(candidates, key=lambda g: set_score(g, scores))  # max() keeps the first of equal scores
    return [g for g in top if g is not None]
