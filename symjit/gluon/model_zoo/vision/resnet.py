"""ResNet V1 (He et al., "Deep Residual Learning for Image Recognition") and V2 ("Identity
Mappings in Deep Residual Networks"), built block for block as MXNet 1.x's model zoo, so that
parameter and node names (e.g. `resnetv10_stage1_activation0`) are MXNet's."""
from __future__ import annotations

from ....context import cpu
from ...block import HybridBlock
from ... import nn
from ..model_store import get_model_file

__all__ = ["ResNetV1", "ResNetV2", "BasicBlockV1", "BasicBlockV2", "BottleneckV1", "BottleneckV2",
           "resnet18_v1", "resnet34_v1", "resnet50_v1", "resnet101_v1", "resnet152_v1",
           "resnet18_v2", "resnet34_v2", "resnet50_v2", "resnet101_v2", "resnet152_v2", "get_resnet"]


def _conv3x3(channels, stride, in_channels):
    return nn.Conv2D(channels, kernel_size=3, strides=stride, padding=1, use_bias=False,
                     in_channels=in_channels)


def _downsample_v1(channels, stride, in_channels):
    """The V1 blocks' shortcut when the shape changes: strided 1x1 convolution + batch norm."""
    ds = nn.HybridSequential(prefix="")
    ds.add(nn.Conv2D(channels, kernel_size=1, strides=stride, use_bias=False, in_channels=in_channels))
    ds.add(nn.BatchNorm())
    return ds


class _ResidualV1(HybridBlock):
    """V1 blocks: relu(body(x) + shortcut(x))."""

    def hybrid_forward(self, F, x):
        residual = x
        x = self.body(x)
        if self.downsample:
            residual = self.downsample(residual)
        return F.Activation(residual + x, act_type="relu")


class BasicBlockV1(_ResidualV1):
    """Two 3x3 convolutions with batch norm, added to the (downsampled) input, then relu."""

    def __init__(self, channels, stride, downsample=False, in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self.body = nn.HybridSequential(prefix="")
        self.body.add(_conv3x3(channels, stride, in_channels))
        self.body.add(nn.BatchNorm())
        self.body.add(nn.Activation("relu"))
        self.body.add(_conv3x3(channels, 1, channels))
        self.body.add(nn.BatchNorm())
        self.downsample = _downsample_v1(channels, stride, in_channels) if downsample else None


class BottleneckV1(_ResidualV1):
    """1x1 (channels/4), 3x3, 1x1 (channels) convolutions with batch norm, plus the input."""

    def __init__(self, channels, stride, downsample=False, in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self.body = nn.HybridSequential(prefix="")
        self.body.add(nn.Conv2D(channels // 4, kernel_size=1, strides=stride))
        self.body.add(nn.BatchNorm())
        self.body.add(nn.Activation("relu"))
        self.body.add(_conv3x3(channels // 4, 1, channels // 4))
        self.body.add(nn.BatchNorm())
        self.body.add(nn.Activation("relu"))
        self.body.add(nn.Conv2D(channels, kernel_size=1, strides=1))
        self.body.add(nn.BatchNorm())
        self.downsample = _downsample_v1(channels, stride, in_channels) if downsample else None


class _PreActivationBlock(HybridBlock):
    """Pre-activation residual block: (bn_i, relu, conv_i) for i = 1..n, plus the input; the
    first relu's output also feeds the strided 1x1 `downsample` convolution when there is one."""

    def _set_downsample(self, downsample, channels, stride, in_channels):
        if downsample:
            self.downsample = nn.Conv2D(channels, 1, stride, use_bias=False, in_channels=in_channels)
        else:
            self.downsample = None

    def hybrid_forward(self, F, x):
        residual = x
        i = 1
        while hasattr(self, f"conv{i}"):
            x = F.Activation(getattr(self, f"bn{i}")(x), act_type="relu")
            if i == 1 and self.downsample:
                residual = self.downsample(x)
            x = getattr(self, f"conv{i}")(x)
            i += 1
        return x + residual


class BasicBlockV2(_PreActivationBlock):
    """Pre-activation basic block: bn, relu, 3x3 conv, bn, relu, 3x3 conv, plus the input."""

    def __init__(self, channels, stride, downsample=False, in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self.bn1 = nn.BatchNorm()
        self.conv1 = _conv3x3(channels, stride, in_channels)
        self.bn2 = nn.BatchNorm()
        self.conv2 = _conv3x3(channels, 1, channels)
        self._set_downsample(downsample, channels, stride, in_channels)


class BottleneckV2(_PreActivationBlock):
    """Pre-activation bottleneck block: 1x1 reduce, 3x3 (strided), 1x1 expand."""

    def __init__(self, channels, stride, downsample=False, in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self.bn1 = nn.BatchNorm()
        self.conv1 = nn.Conv2D(channels // 4, kernel_size=1, strides=1, use_bias=False)
        self.bn2 = nn.BatchNorm()
        self.conv2 = _conv3x3(channels // 4, stride, channels // 4)
        self.bn3 = nn.BatchNorm()
        self.conv3 = nn.Conv2D(channels, kernel_size=1, strides=1, use_bias=False)
        self._set_downsample(downsample, channels, stride, in_channels)


def _add_stem(features, channels, thumbnail):
    """The entry layers: a 3x3 convolution for small images (thumbnail), else a 7x7 stride-2
    convolution, batch norm, relu and 3x3 stride-2 max pooling."""
    if thumbnail:
        features.add(_conv3x3(channels, 1, 0))
    else:
        features.add(nn.Conv2D(channels, 7, 2, 3, use_bias=False))
        features.add(nn.BatchNorm())
        features.add(nn.Activation("relu"))
        features.add(nn.MaxPool2D(3, 2, 1))


class ResNetV1(HybridBlock):
    """ResNet V1: `layers[i]` blocks of `channels[i+1]` channels per stage; `thumbnail` uses a
    3x3 entry convolution (small images) instead of 7x7 + max pooling."""

    def __init__(self, block, layers, channels, classes=1000, thumbnail=False, **kwargs):
        super().__init__(**kwargs)
        assert len(layers) == len(channels) - 1
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            _add_stem(self.features, channels[0], thumbnail)
            for i, num_layer in enumerate(layers):
                stride = 1 if i == 0 else 2
                self.features.add(self._make_layer(block, num_layer, channels[i + 1], stride, i + 1,
                                                   in_channels=channels[i]))
            self.features.add(nn.GlobalAvgPool2D())
            self.output = nn.Dense(classes, in_units=channels[-1])

    def _make_layer(self, block, layers, channels, stride, stage_index, in_channels=0):
        layer = nn.HybridSequential(prefix="stage%d_" % stage_index)
        with layer.name_scope():
            layer.add(block(channels, stride, channels != in_channels, in_channels=in_channels, prefix=""))
            for _ in range(layers - 1):
                layer.add(block(channels, 1, False, in_channels=channels, prefix=""))
        return layer

    def hybrid_forward(self, F, x):
        x = self.features(x)
        return self.output(x)


class ResNetV2(HybridBlock):
    """ResNet V2 (pre-activation)."""

    def __init__(self, block, layers, channels, classes=1000, thumbnail=False, **kwargs):
        super().__init__(**kwargs)
        assert len(layers) == len(channels) - 1
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(nn.BatchNorm(scale=False, center=False))
            _add_stem(self.features, channels[0], thumbnail)
            in_channels = channels[0]
            for i, num_layer in enumerate(layers):
                stride = 1 if i == 0 else 2
                self.features.add(self._make_layer(block, num_layer, channels[i + 1], stride, i + 1,
                                                   in_channels=in_channels))
                in_channels = channels[i + 1]
            self.features.add(nn.BatchNorm())
            self.features.add(nn.Activation("relu"))
            self.features.add(nn.GlobalAvgPool2D())
            self.features.add(nn.Flatten())
            self.output = nn.Dense(classes, in_units=in_channels)

    _make_layer = ResNetV1._make_layer

    def hybrid_forward(self, F, x):
        x = self.features(x)
        return self.output(x)


#: depth -> (block type, blocks per stage, channels of the entry and of each stage)
resnet_spec = {18: ("basic_block", [2, 2, 2, 2], [64, 64, 128, 256, 512]),
               34: ("basic_block", [3, 4, 6, 3], [64, 64, 128, 256, 512]),
               50: ("bottle_neck", [3, 4, 6, 3], [64, 256, 512, 1024, 2048]),
               101: ("bottle_neck", [3, 4, 23, 3], [64, 256, 512, 1024, 2048]),
               152: ("bottle_neck", [3, 8, 36, 3], [64, 256, 512, 1024, 2048])}
resnet_net_versions = [ResNetV1, ResNetV2]
resnet_block_versions = [{"basic_block": BasicBlockV1, "bottle_neck": BottleneckV1},
                         {"basic_block": BasicBlockV2, "bottle_neck": BottleneckV2}]


def get_resnet(version, num_layers, pretrained=False, ctx=cpu(), root=None, **kwargs):
    """ResNet `version` (1 or 2) of depth `num_layers` (18, 34, 50, 101, 152)."""
    assert num_layers in resnet_spec, \
        "Invalid number of layers: %d. Options are %s" % (num_layers, str(resnet_spec.keys()))
    block_type, layers, channels = resnet_spec[num_layers]
    assert 1 <= version <= 2, "Invalid resnet version: %d. Options are 1 and 2." % version
    net = resnet_net_versions[version - 1](resnet_block_versions[version - 1][block_type], layers, channels,
                                           **kwargs)
    if pretrained:
        net.load_parameters(get_model_file("resnet%d_v%d" % (num_layers, version), root=root),
                            ctx=ctx)
    return net


def _factory(version, depth):
    def make(**kwargs):
        return get_resnet(version, depth, **kwargs)
    make.__name__ = "resnet%d_v%d" % (depth, version)
    make.__doc__ = "ResNet-%d V%d (see `get_resnet`)." % (depth, version)
    return make


resnet18_v1, resnet34_v1, resnet50_v1, resnet101_v1, resnet152_v1 = (_factory(1, d) for d in (18, 34, 50, 101, 152))
resnet18_v2, resnet34_v2, resnet50_v2, resnet101_v2, resnet152_v2 = (_factory(2, d) for d in (18, 34, 50, 101, 152))
