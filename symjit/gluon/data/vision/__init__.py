"""symjit.gluon.data.vision: image transforms and vision datasets (MNIST, CIFAR, record files,
image folders and lists)."""
from . import transforms  # noqa: F401
from .datasets import *  # noqa: F401,F403
