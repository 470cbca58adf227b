"""symjit.contrib.amp (`mx.contrib.amp`): dynamic loss scaling for mixed-precision training."""
from .amp import init_trainer, scale_loss, unscale  # noqa: F401
from .loss_scaler import LossScaler  # noqa: F401
from . import amp  # noqa: F401
