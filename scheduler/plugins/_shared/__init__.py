"""Helpers the scheduler plugins share (exempt from the plugins' independence contract): the NUMA topology
emulation and per-session placement (numa-aware, deviceshare) and the static node matchers (predicates, nodeorder).
"""
