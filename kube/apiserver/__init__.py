"""kube.apiserver: the API-server engine — kube-apiserver's object rules over plain dicts, apart from the client side.

devcluster's REST server and the in-memory cluster (`memory.MemoryClient`) sit on `store.Store`; the client side of
kube (client port, REST client, kubeconfig, informers) never imports this package (an import-linter contract).
`Store` is one class assembled from a module per concern:

    store        the write path (create, update, patch, server-side apply), resourceVersions, persistence
    indexes      objects by type, namespace, uid and owner; label and field equality indexes; field selectors
    watch        watchers, the event history a watch resumes from, fan-out, bookmarks
    gc           deletion: finalizers, grace, ownerReference cascading, namespace lifecycle
    crds         CustomResourceDefinitions: validation, status, serving their versions and schemas
    pods         the pods/binding and pods/eviction subresources
    decoding     body checks, typed decoding, custom-resource pruning, defaulting and schema validation (pure)
    defaulting   pod defaults and status (QoS from kube.podspec), Secret stringData, PrepareForCreate (pure)
    updates      what an update may change and what it may not (pure)
    names        object-name rules and generateName (pure)
    objects      storage keys, copies, timestamps, kube's error texts (pure)
    ports        Request, the admission port and the persistence backend
    memory       `kube.client.ClusterClient` over a Store, for unit tests and simulation

Submodules are imported as modules (`from lahar.kube.apiserver import store`); nothing is re-exported here, so
importing the package loads no engine.
"""
