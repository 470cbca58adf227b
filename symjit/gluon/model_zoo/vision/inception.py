"""Inception V3 (Szegedy et al., "Rethinking the Inception Architecture for Computer Vision"),
built as MXNet 1.x's model zoo builds it (blocks prefixed `A1_` ... `E2_`; input 299x299)."""
from __future__ import annotations

from ....context import cpu
from ...block import HybridBlock
from ... import nn
from ...nn import HybridConcurrent
from ..model_store import get_model_file

__all__ = ["Inception3", "inception_v3"]

_SETTING_NAMES = ("channels", "kernel_size", "strides", "padding")


def _make_basic_conv(norm_layer=nn.BatchNorm, norm_kwargs=None, **kwargs):
    out = nn.HybridSequential(prefix="")
    out.add(nn.Conv2D(use_bias=False, **kwargs))
    out.add(norm_layer(epsilon=0.001, **({} if norm_kwargs is None else norm_kwargs)))
    out.add(nn.Activation("relu"))
    return out


def _make_branch(use_pool, norm_layer, norm_kwargs, *conv_settings):
    """Optional pooling ('avg' 3x3/1 or 'max' 3x3/2) then one basic convolution per setting
    (channels, kernel_size, strides, padding; None keeps the default)."""
    out = nn.HybridSequential(prefix="")
    if use_pool == "avg":
        out.add(nn.AvgPool2D(pool_size=3, strides=1, padding=1))
    elif use_pool == "max":
        out.add(nn.MaxPool2D(pool_size=3, strides=2))
    for setting in conv_settings:
        kwargs = {name: value for name, value in zip(_SETTING_NAMES, setting) if value is not None}
        out.add(_make_basic_conv(norm_layer, norm_kwargs, **kwargs))
    return out


def _make_A(pool_features, prefix, norm_layer, norm_kwargs):
    out = HybridConcurrent(axis=1, prefix=prefix)
    with out.name_scope():
        out.add(_make_branch(None, norm_layer, norm_kwargs, (64, 1, None, None)))
        out.add(_make_branch(None, norm_layer, norm_kwargs, (48, 1, None, None), (64, 5, None, 2)))
        out.add(_make_branch(None, norm_layer, norm_kwargs, (64, 1, None, None), (96, 3, None, 1),
                             (96, 3, None, 1)))
        out.add(_make_branch("avg", norm_layer, norm_kwargs, (pool_features, 1, None, None)))
    return out


def _make_B(prefix, norm_layer, norm_kwargs):
    out = HybridConcurrent(axis=1, prefix=prefix)
    with out.name_scope():
        out.add(_make_branch(None, norm_layer, norm_kwargs, (384, 3, 2, None)))
        out.add(_make_branch(None, norm_layer, norm_kwargs, (64, 1, None, None), (96, 3, None, 1),
                             (96, 3, 2, None)))
        out.add(_make_branch("max", norm_layer, norm_kwargs))
    return out


def _make_C(channels_7x7, prefix, norm_layer, norm_kwargs):
    out = HybridConcurrent(axis=1, prefix=prefix)
    with out.name_scope():
        out.add(_make_branch(None, norm_layer, norm_kwargs, (192, 1, None, None)))
        out.add(_make_branch(None, norm_layer, norm_kwargs, (channels_7x7, 1, None, None),
                             (channels_7x7, (1, 7), None, (0, 3)), (192, (7, 1), None, (3, 0))))
        out.add(_make_branch(None, norm_layer, norm_kwargs, (channels_7x7, 1, None, None),
                             (channels_7x7, (7, 1), None, (3, 0)), (channels_7x7, (1, 7), None, (0, 3)),
                             (channels_7x7, (7, 1), None, (3, 0)), (192, (1, 7), None, (0, 3))))
        out.add(_make_branch("avg", norm_layer, norm_kwargs, (192, 1, None, None)))
    return out


def _make_D(prefix, norm_layer, norm_kwargs):
    out = HybridConcurrent(axis=1, prefix=prefix)
    with out.name_scope():
        out.add(_make_branch(None, norm_layer, norm_kwargs, (192, 1, None, None), (320, 3, 2, None)))
        out.add(_make_branch(None, norm_layer, norm_kwargs, (192, 1, None, None), (192, (1, 7), None, (0, 3)),
                             (192, (7, 1), None, (3, 0)), (192, 3, 2, None)))
        out.add(_make_branch("max", norm_layer, norm_kwargs))
    return out


def _make_E(prefix, norm_layer, norm_kwargs):
    out = HybridConcurrent(axis=1, prefix=prefix)
    with out.name_scope():
        out.add(_make_branch(None, norm_layer, norm_kwargs, (320, 1, None, None)))

        branch_3x3 = nn.HybridSequential(prefix="")
        out.add(branch_3x3)
        branch_3x3.add(_make_branch(None, norm_layer, norm_kwargs, (384, 1, None, None)))
        branch_3x3_split = HybridConcurrent(axis=1, prefix="")
        branch_3x3_split.add(_make_branch(None, norm_layer, norm_kwargs, (384, (1, 3), None, (0, 1))))
        branch_3x3_split.add(_make_branch(None, norm_layer, norm_kwargs, (384, (3, 1), None, (1, 0))))
        branch_3x3.add(branch_3x3_split)

        branch_3x3dbl = nn.HybridSequential(prefix="")
        out.add(branch_3x3dbl)
        branch_3x3dbl.add(_make_branch(None, norm_layer, norm_kwargs, (448, 1, None, None), (384, 3, None, 1)))
        branch_3x3dbl_split = HybridConcurrent(axis=1, prefix="")
        branch_3x3dbl.add(branch_3x3dbl_split)
        branch_3x3dbl_split.add(_make_branch(None, norm_layer, norm_kwargs, (384, (1, 3), None, (0, 1))))
        branch_3x3dbl_split.add(_make_branch(None, norm_layer, norm_kwargs, (384, (3, 1), None, (1, 0))))

        out.add(_make_branch("avg", norm_layer, norm_kwargs, (192, 1, None, None)))
    return out


class Inception3(HybridBlock):
    """Inception V3 for 299x299 inputs; `norm_layer`/`norm_kwargs` choose the normalization."""

    def __init__(self, classes=1000, norm_layer=nn.BatchNorm, norm_kwargs=None, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(_make_basic_conv(channels=32, kernel_size=3, strides=2,
                                               norm_layer=norm_layer, norm_kwargs=norm_kwargs))
            self.features.add(_make_basic_conv(channels=32, kernel_size=3,
                                               norm_layer=norm_layer, norm_kwargs=norm_kwargs))
            self.features.add(_make_basic_conv(channels=64, kernel_size=3, padding=1,
                                               norm_layer=norm_layer, norm_kwargs=norm_kwargs))
            self.features.add(nn.MaxPool2D(pool_size=3, strides=2))
            self.features.add(_make_basic_conv(channels=80, kernel_size=1,
                                               norm_layer=norm_layer, norm_kwargs=norm_kwargs))
            self.features.add(_make_basic_conv(channels=192, kernel_size=3,
                                               norm_layer=norm_layer, norm_kwargs=norm_kwargs))
            self.features.add(nn.MaxPool2D(pool_size=3, strides=2))
            self.features.add(_make_A(32, "A1_", norm_layer, norm_kwargs))
            self.features.add(_make_A(64, "A2_", norm_layer, norm_kwargs))
            self.features.add(_make_A(64, "A3_", norm_layer, norm_kwargs))
            self.features.add(_make_B("B_", norm_layer, norm_kwargs))
            self.features.add(_make_C(128, "C1_", norm_layer, norm_kwargs))
            self.features.add(_make_C(160, "C2_", norm_layer, norm_kwargs))
            self.features.add(_make_C(160, "C3_", norm_layer, norm_kwargs))
            self.features.add(_make_C(192, "C4_", norm_layer, norm_kwargs))
            self.features.add(_make_D("D_", norm_layer, norm_kwargs))
            self.features.add(_make_E("E1_", norm_layer, norm_kwargs))
            self.features.add(_make_E("E2_", norm_layer, norm_kwargs))
            self.features.add(nn.AvgPool2D(pool_size=8))
            self.features.add(nn.Dropout(0.5))
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        x = self.features(x)
        return self.output(x)


def inception_v3(pretrained=False, ctx=cpu(), root=None, **kwargs):
    """Inception V3; `pretrained` loads `root/inceptionv3-HASH.params` from the local model store."""
    net = Inception3(**kwargs)
    if pretrained:
        net.load_parameters(get_model_file("inceptionv3", root=root), ctx=ctx)
    return net
