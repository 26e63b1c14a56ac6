"""Helpers the scheduler plugins share (exempt from the plugins' independence contract): the static node matchers
of predicates and nodeorder. The placement numa-aware and deviceshare share is its own package, `scheduler.placement`.
"""
