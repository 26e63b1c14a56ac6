"""Package data: the Volcano-style manifests `lahar up --demo` applies (`lahar.examples` when installed).

Read through `lahar.data`; `kubectl apply -f examples/` reads only the YAML files beside this one.
"""
