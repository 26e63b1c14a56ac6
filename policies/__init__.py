"""policies: configuration as data (admission configuration; scheduler conf and user CEL policies come later)."""

from lahar.policies.admission import AdmissionConfig

__all__ = ["AdmissionConfig"]
