"""symjit.gluon.model_zoo.vision: MXNet 1.x's vision networks (the ResNet family)."""
from ....base import MXNetError
from .resnet import *  # noqa: F401,F403
from .resnet import __all__ as _resnet_all

__all__ = list(_resnet_all) + ["get_model"]

_models = {name: globals()[name] for name in _resnet_all if name.startswith("resnet")}


def get_model(name, **kwargs):
    """A predefined network by name ('resnet18_v1', 'resnet50_v2', ...); kwargs go to its
    constructor (`classes`, `pretrained`, `ctx`, `root`, `prefix`, ...)."""
    name = name.lower()
    if name not in _models:
        raise MXNetError(f"Model {name} is not supported. Available options are\n\t" + "\n\t".join(sorted(_models)))
    return _models[name](**kwargs)
