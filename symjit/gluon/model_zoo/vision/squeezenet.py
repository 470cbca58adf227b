"""SqueezeNet 1.0 and 1.1 (Iandola et al.), built as MXNet 1.x's model zoo builds them: fire
modules are a 1x1 squeeze then HybridConcurrent 1x1 and 3x3 expansions; 13x13 average pooling
at the end (input about 224x224)."""
from __future__ import annotations

from ....context import cpu
from ...block import HybridBlock
from ... import nn
from ...nn import HybridConcurrent
from ..model_store import get_model_file

__all__ = ["SqueezeNet", "squeezenet1_0", "squeezenet1_1", "get_squeezenet"]


def _make_fire(squeeze_channels, expand1x1_channels, expand3x3_channels):
    out = nn.HybridSequential(prefix="")
    out.add(_make_fire_conv(squeeze_channels, 1))
    paths = HybridConcurrent(axis=1, prefix="")
    paths.add(_make_fire_conv(expand1x1_channels, 1))
    paths.add(_make_fire_conv(expand3x3_channels, 3, 1))
    out.add(paths)
    return out


def _make_fire_conv(channels, kernel_size, padding=0):
    out = nn.HybridSequential(prefix="")
    out.add(nn.Conv2D(channels, kernel_size, padding=padding))
    out.add(nn.Activation("relu"))
    return out


#: version -> (stem channels, stem kernel, then "pool" (3x3/2 max pooling, ceil mode) or a fire
#: module's (squeeze, expand 1x1, expand 3x3) channels, in order)
_SPECS = {
    "1.0": (96, 7, ["pool", (16, 64, 64), (16, 64, 64), (32, 128, 128), "pool", (32, 128, 128),
                    (48, 192, 192), (48, 192, 192), (64, 256, 256), "pool", (64, 256, 256)]),
    "1.1": (64, 3, ["pool", (16, 64, 64), (16, 64, 64), "pool", (32, 128, 128), (32, 128, 128), "pool",
                    (48, 192, 192), (48, 192, 192), (64, 256, 256), (64, 256, 256)]),
}


class SqueezeNet(HybridBlock):
    """SqueezeNet `version` '1.0' or '1.1' with `classes` outputs."""

    def __init__(self, version, classes=1000, **kwargs):
        super().__init__(**kwargs)
        if version not in ("1.0", "1.1"):
            raise ValueError("Unsupported SqueezeNet version {version}:1.0 or 1.1 expected".format(version=version))
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            stem_channels, stem_kernel, fire_specs = _SPECS[version]
            self.features.add(nn.Conv2D(stem_channels, kernel_size=stem_kernel, strides=2))
            self.features.add(nn.Activation("relu"))
            for spec in fire_specs:
                if spec == "pool":
                    self.features.add(nn.MaxPool2D(pool_size=3, strides=2, ceil_mode=True))
                else:
                    self.features.add(_make_fire(*spec))
            self.features.add(nn.Dropout(0.5))
            self.output = nn.HybridSequential(prefix="")
            self.output.add(nn.Conv2D(classes, kernel_size=1))
            self.output.add(nn.Activation("relu"))
            self.output.add(nn.AvgPool2D(13))
            self.output.add(nn.Flatten())

    def hybrid_forward(self, F, x):
        x = self.features(x)
        return self.output(x)


def get_squeezenet(version, pretrained=False, ctx=cpu(), root=None, **kwargs):
    """SqueezeNet `version` ('1.0' or '1.1'); `pretrained` loads `squeezenetVERSION-HASH.params`."""
    net = SqueezeNet(version, **kwargs)
    if pretrained:
        net.load_parameters(get_model_file("squeezenet%s" % version, root=root), ctx=ctx)
    return net


def squeezenet1_0(**kwargs):
    """SqueezeNet 1.0 (see `get_squeezenet`)."""
    return get_squeezenet("1.0", **kwargs)


def squeezenet1_1(**kwargs):
    """SqueezeNet 1.1 (see `get_squeezenet`)."""
    return get_squeezenet("1.1", **kwargs)
