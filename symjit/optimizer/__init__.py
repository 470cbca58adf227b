"""symjit.optimizer (`mx.optimizer`): MXNet 1.x optimizers over the registered update ops."""
from .optimizer import (LAMB, NAG, SGD, AdaDelta, AdaGrad, Adam, AdamW, Ftrl, Optimizer,  # noqa: F401
                        RMSProp, SignSGD, Signum, Updater, create, get_updater, register)
from .. import lr_scheduler  # noqa: F401
