"""Device choices for the scheduler: which concrete GPUs (and later slices, MIG instances, VFs) a task gets.

Pure decision cores used by the deviceshare plugin; `gpu` holds go-gpuallocator's link-aware selection.
"""

__all__: list[str] = []
