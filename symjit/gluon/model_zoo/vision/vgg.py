"""VGG 11/13/16/19 with and without batch normalization (Simonyan & Zisserman), built as
MXNet 1.x's model zoo builds them (initializers included)."""
from __future__ import annotations

from ....context import cpu
from ....initializer import Xavier
from ...block import HybridBlock
from ... import nn
from ..model_store import get_model_file

__all__ = ["VGG", "vgg11", "vgg13", "vgg16", "vgg19", "vgg11_bn", "vgg13_bn", "vgg16_bn", "vgg19_bn",
           "get_vgg"]


class VGG(HybridBlock):
    """Stages of `layers[i]` 3x3 convolutions with `filters[i]` channels (each optionally batch
    normalized) and 2x2 max pooling, then two 4096-unit dense layers with dropout."""

    def __init__(self, layers, filters, classes=1000, batch_norm=False, **kwargs):
        super().__init__(**kwargs)
        if len(layers) != len(filters):
            raise ValueError(f"VGG: layers and filters must have the same length, got {layers} and {filters}")
        with self.name_scope():
            self.features = self._make_features(layers, filters, batch_norm)
            self.features.add(nn.Dense(4096, activation="relu", weight_initializer="normal",
                                       bias_initializer="zeros"))
            self.features.add(nn.Dropout(rate=0.5))
            self.features.add(nn.Dense(4096, activation="relu", weight_initializer="normal",
                                       bias_initializer="zeros"))
            self.features.add(nn.Dropout(rate=0.5))
            self.output = nn.Dense(classes, weight_initializer="normal", bias_initializer="zeros")

    @staticmethod
    def _make_features(layers, filters, batch_norm):
        featurizer = nn.HybridSequential(prefix="")
        for i, num in enumerate(layers):
            for _ in range(num):
                featurizer.add(nn.Conv2D(filters[i], kernel_size=3, padding=1,
                                         weight_initializer=Xavier(rnd_type="gaussian", factor_type="out",
                                                                   magnitude=2),
                                         bias_initializer="zeros"))
                if batch_norm:
                    featurizer.add(nn.BatchNorm())
                featurizer.add(nn.Activation("relu"))
            featurizer.add(nn.MaxPool2D(strides=2))
        return featurizer

    def hybrid_forward(self, F, x):
        x = self.features(x)
        return self.output(x)


#: depth -> (convolutions per stage, channels per stage)
vgg_spec = {11: ([1, 1, 2, 2, 2], [64, 128, 256, 512, 512]),
            13: ([2, 2, 2, 2, 2], [64, 128, 256, 512, 512]),
            16: ([2, 2, 3, 3, 3], [64, 128, 256, 512, 512]),
            19: ([2, 2, 4, 4, 4], [64, 128, 256, 512, 512])}


def get_vgg(num_layers, pretrained=False, ctx=cpu(), root=None, **kwargs):
    """VGG of depth `num_layers` (11, 13, 16, 19); `batch_norm=True` adds batch normalization."""
    if num_layers not in vgg_spec:
        raise ValueError("Invalid number of layers: %d. Options are %s" % (num_layers, sorted(vgg_spec)))
    layers, filters = vgg_spec[num_layers]
    net = VGG(layers, filters, **kwargs)
    if pretrained:
        batch_norm_suffix = "_bn" if kwargs.get("batch_norm") else ""
        net.load_parameters(get_model_file("vgg%d%s" % (num_layers, batch_norm_suffix), root=root), ctx=ctx)
    return net


def _factory(depth, batch_norm):
    def make(**kwargs):
        if batch_norm:
            kwargs["batch_norm"] = True
        return get_vgg(depth, **kwargs)
    make.__name__ = "vgg%d%s" % (depth, "_bn" if batch_norm else "")
    make.__doc__ = "VGG-%d%s (see `get_vgg`)." % (depth, " with batch normalization" if batch_norm else "")
    return make


vgg11, vgg13, vgg16, vgg19 = (_factory(d, False) for d in (11, 13, 16, 19))
vgg11_bn, vgg13_bn, vgg16_bn, vgg19_bn = (_factory(d, True) for d in (11, 13, 16, 19))
