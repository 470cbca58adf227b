"""symjit.optimizer (`mx.optimizer`): MXNet 1.x optimizers over the registered update ops."""
from .optimizer import (DCASGD, FTML, LAMB, NAG, SGD, SGLD, AdaDelta, AdaGrad, Adam, Adamax,  # noqa: F401
                        AdamW, Ftrl, Nadam, Optimizer, RMSProp, SignSGD, Signum, Updater, create,
                        get_updater, register)
from .large_batch import LARS, LBSGD  # noqa: F401
from .. import lr_scheduler  # noqa: F401
