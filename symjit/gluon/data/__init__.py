"""symjit.gluon.data (`mx.gluon.data`): datasets, samplers and the DataLoader."""
from .dataset import *  # noqa: F401,F403
from .sampler import *  # noqa: F401,F403
from .dataloader import *  # noqa: F401,F403
from . import vision  # noqa: F401
