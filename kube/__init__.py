"""kube: the bottom layer of lahar — quantities, Volcano models, the resource registry, the cluster client port.

Everything else builds on it; it imports nothing else of lahar. Submodules are imported as modules
(`from kube import quantity`, `from kube import models`); only the quantity value type is re-exported here.
"""

from lahar.kube.quantity import Quantity, QuantityError

__all__ = ["Quantity", "QuantityError"]
