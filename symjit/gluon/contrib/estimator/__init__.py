"""symjit.gluon.contrib.estimator (`mx.gluon.contrib.estimator`): MXNet 1.9.1's Estimator,
its event handlers and BatchProcessor."""
from .batch_processor import *  # noqa: F401,F403
from .estimator import *  # noqa: F401,F403
from .event_handler import *  # noqa: F401,F403
from . import batch_processor, estimator, event_handler

__all__ = batch_processor.__all__ + estimator.__all__ + event_handler.__all__
