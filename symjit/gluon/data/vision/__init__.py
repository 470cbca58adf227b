"""symjit.gluon.data.vision: image transforms (datasets that need image decoding or downloads
are not provided)."""
from . import transforms  # noqa: F401
