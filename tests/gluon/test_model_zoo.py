"""gluon.model_zoo.vision (ResNet V1/V2 as MXNet builds them) and gluon.contrib.nn."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

import symjit as mx
from symjit import gluon, nd
from symjit.base import MXNetError


def test_resnet18_v1_names_shapes_and_hybridized_equals_imperative():
    net = gluon.model_zoo.vision.resnet18_v1(classes=10)
    params = net.collect_params()
    names = list(params.keys())
    prefix = net.prefix
    assert names[0] == prefix + "conv0_weight"
    assert prefix + "stage1_conv0_weight" in names and prefix + "stage4_batchnorm4_running_var" in names
    assert prefix + "dense0_weight" in names
    # 21 weights of convolutions + dense in ResNet-18 (plus 3 downsample convolutions)
    assert sum(n.endswith("_weight") and "conv" in n for n in names) == 20
    net.initialize(mx.init.Xavier())
    x = nd.array(np.random.default_rng(0).standard_normal((2, 3, 32, 32)))
    y = net(x)
    assert y.shape == (2, 10)
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), y.asnumpy(), rtol=1e-4, atol=1e-4)
    internals = net(mx.sym.var("data")).get_internals().list_outputs()
    assert prefix + "stage1_activation0_output" in internals


@pytest.mark.parametrize("version,depth", [(2, 18), (1, 50)])
def test_resnet_versions_build_and_run(version, depth):
    net = gluon.model_zoo.vision.get_resnet(version, depth, classes=4, thumbnail=True)
    net.initialize()
    assert net(nd.ones((1, 3, 8, 8))).shape == (1, 4)


def test_get_model_and_offline_pretrained(tmp_path, monkeypatch):
    assert isinstance(gluon.model_zoo.vision.get_model("resnet34_v2"), gluon.model_zoo.vision.ResNetV2)
    with pytest.raises(MXNetError, match="not supported"):
        gluon.model_zoo.vision.get_model("nosuchnet")
    with pytest.raises(MXNetError, match="resnet18_v1"):
        gluon.model_zoo.vision.resnet18_v1(pretrained=True, root=str(tmp_path))
    src = gluon.model_zoo.vision.resnet18_v1(prefix="resnetv10_")
    src.initialize()
    src(nd.ones((1, 3, 32, 32)))   # finish the deferred initialization
    saved = tmp_path / "saved.params"
    src.save_parameters(str(saved))
    sha1 = hashlib.sha1(saved.read_bytes()).hexdigest()   # the store finds NAME-HASH.params by its SHA-1
    monkeypatch.setitem(gluon.model_zoo.model_store._model_sha1, "resnet18_v1", sha1)
    saved.rename(tmp_path / f"resnet18_v1-{sha1[:8]}.params")
    net = gluon.model_zoo.vision.resnet18_v1(pretrained=True, root=str(tmp_path))
    np.testing.assert_array_equal(net.output.weight.data().asnumpy(), src.output.weight.data().asnumpy())


def test_sync_batchnorm_is_batchnorm_on_one_device():
    x = nd.array(np.random.default_rng(1).standard_normal((4, 3, 5, 5)))
    a, b = gluon.nn.BatchNorm(in_channels=3), gluon.contrib.nn.SyncBatchNorm(in_channels=3)
    a.initialize()
    b.initialize()
    with mx.autograd.record():
        ya, yb = a(x), b(x)
    np.testing.assert_allclose(yb.asnumpy(), ya.asnumpy(), rtol=1e-6)
    assert issubclass(gluon.contrib.nn.HybridConcurrent, gluon.nn.HybridConcatenate)
