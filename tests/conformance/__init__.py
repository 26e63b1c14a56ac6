"""Client conformance: one suite (`suite.py`) run on MemoryClient and on RestClient against devcluster."""
