"""symjit.gluon.data.vision: image transforms and datasets stored in simple binary formats
(datasets of encoded images, which need an image decoder, are not provided)."""
from . import transforms  # noqa: F401
from .datasets import *  # noqa: F401,F403
