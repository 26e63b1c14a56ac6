"""Package data: Volcano's CRDs, lahar's webhook configurations and the kustomize base (`lahar.deploy` when installed).

Read through `lahar.data`, never through a path relative to a source file.
"""
