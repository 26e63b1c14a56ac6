"""devcluster: an embedded Kubernetes-compatible API server for single-machine use, demos and tests.

`DevCluster(data_dir).start()` serves kube-apiserver's REST protocol over HTTPS (the real kubectl and the official
client use it as a cluster) on top of `kube.apiserver`; state in SQLite under the data directory. Only `lahar` and
tests import it.
"""

from lahar.devcluster.server import ApiServer, DevCluster

__all__ = ["ApiServer", "DevCluster"]
