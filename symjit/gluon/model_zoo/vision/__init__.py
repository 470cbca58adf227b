"""symjit.gluon.model_zoo.vision: MXNet 1.x's vision networks (AlexNet, DenseNet, Inception V3,
MobileNet V1/V2, ResNet V1/V2, SqueezeNet, VGG) and `get_model` by MXNet's model names."""
from ....base import MXNetValueError
from .alexnet import *  # noqa: F401,F403
from .densenet import *  # noqa: F401,F403
from .inception import *  # noqa: F401,F403
from .mobilenet import *  # noqa: F401,F403
from .resnet import *  # noqa: F401,F403
from .squeezenet import *  # noqa: F401,F403
from .vgg import *  # noqa: F401,F403
import sys as _sys  # noqa: E402

# (`from .alexnet import *` rebinds the name `alexnet` to the function, so modules by sys.modules)
__all__ = [n for m in ("alexnet", "densenet", "inception", "mobilenet", "resnet", "squeezenet", "vgg")
           for n in _sys.modules[f"{__name__}.{m}"].__all__] + ["get_model"]

#: MXNet's model names (those of the model store) -> constructors
_models = {
    **{"resnet%d_v%d" % (d, v): globals()["resnet%d_v%d" % (d, v)] for v in (1, 2) for d in (18, 34, 50, 101, 152)},
    **{"vgg%d%s" % (d, bn): globals()["vgg%d%s" % (d, bn)] for d in (11, 13, 16, 19) for bn in ("", "_bn")},
    "alexnet": alexnet,
    **{"densenet%d" % d: globals()["densenet%d" % d] for d in (121, 161, 169, 201)},
    "squeezenet1.0": squeezenet1_0, "squeezenet1.1": squeezenet1_1,  # noqa: F405
    "inceptionv3": inception_v3,  # noqa: F405
    "mobilenet1.0": mobilenet1_0, "mobilenet0.75": mobilenet0_75,  # noqa: F405
    "mobilenet0.5": mobilenet0_5, "mobilenet0.25": mobilenet0_25,  # noqa: F405
    "mobilenetv2_1.0": mobilenet_v2_1_0, "mobilenetv2_0.75": mobilenet_v2_0_75,  # noqa: F405
    "mobilenetv2_0.5": mobilenet_v2_0_5, "mobilenetv2_0.25": mobilenet_v2_0_25,  # noqa: F405
}


def get_model(name, **kwargs):
    """A predefined network by MXNet's name ('resnet18_v1', 'mobilenet1.0', 'inceptionv3', ...);
    kwargs go to its constructor (`classes`, `pretrained`, `ctx`, `root`, `prefix`, ...)."""
    name = name.lower()
    if name not in _models:
        raise MXNetValueError("Model %s is not supported. Available options are\n\t%s"
                              % (name, "\n\t".join(sorted(_models))))
    return _models[name](**kwargs)
