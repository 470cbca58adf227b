"""gluon.model_zoo.vision: every MXNet 1.9.1 constructor builds and runs, parameters MXNet
exported load by name and reproduce MXNet's outputs, pretrained files come from the local store."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

import symjit as mx
from symjit import gluon, nd
from symjit.base import MXNetError
from symjit.gluon.model_zoo import model_store

from shared_data import model_path

vision = gluon.model_zoo.vision

#: input side per family (the fixed final pooling of DenseNet/SqueezeNet/Inception needs it)
_SIDE = {"densenet": 224, "squeezenet": 224, "inceptionv3": 299, "alexnet": 64}
_FAST = {"alexnet", "resnet18_v1", "resnet18_v2", "mobilenet0.25", "mobilenetv2_0.25", "squeezenet1.1"}
_ALL = sorted(vision._models)


def _side(name):
    return next((s for k, s in _SIDE.items() if name.startswith(k)), 32)


@pytest.mark.parametrize("name", [n if n in _FAST else pytest.param(n, marks=pytest.mark.slow) for n in _ALL])
def test_constructor_output_shape(name):
    net = vision.get_model(name, classes=10)
    net.initialize()
    side = _side(name)
    y = net(nd.ones((2, 3, side, side)))
    assert y.shape == (2, 10)
    assert np.isfinite(y.asnumpy()).all()


def test_every_mxnet_constructor_exists():
    names = ["alexnet", "densenet121", "densenet161", "densenet169", "densenet201", "inception_v3",
             "mobilenet1_0", "mobilenet0_75", "mobilenet0_5", "mobilenet0_25", "mobilenet_v2_1_0",
             "mobilenet_v2_0_75", "mobilenet_v2_0_5", "mobilenet_v2_0_25", "squeezenet1_0", "squeezenet1_1",
             "get_model", "get_resnet", "get_vgg", "get_mobilenet", "get_mobilenet_v2", "get_squeezenet",
             "get_densenet"]
    names += ["resnet%d_v%d" % (d, v) for d in (18, 34, 50, 101, 152) for v in (1, 2)]
    names += ["vgg%d%s" % (d, bn) for d in (11, 13, 16, 19) for bn in ("", "_bn")]
    for n in names:
        assert callable(getattr(vision, n)), n
        assert n in vision.__all__, n
    assert set(vision._models) == set(model_store._model_sha1)
    with pytest.raises(ValueError, match="not supported"):
        vision.get_model("resnet19_v1")


@pytest.mark.parametrize("name,side", [("mobilenet0.25", 32), ("squeezenet1.1", 224),
                                       pytest.param("densenet121", 224, marks=pytest.mark.slow),
                                       pytest.param("inceptionv3", 299, marks=pytest.mark.slow)])
def test_hybridized_equals_imperative(name, side):
    net = vision.get_model(name, classes=10)
    net.initialize(mx.init.Xavier())
    x = nd.array(np.random.default_rng(0).standard_normal((2, 3, side, side)))
    y = net(x).asnumpy()
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), y, rtol=1e-4, atol=1e-4)


def test_parameter_names_are_mxnet():
    net = vision.mobilenet_v2_0_25(prefix="mobilenetv20_")
    names = list(net.collect_params())
    assert names[0] == "mobilenetv20_features_conv0_weight"
    assert "mobilenetv20_features_linearbottleneck0_batchnorm0_gamma" in names
    assert names[-1] == "mobilenetv20_output_pred_weight"
    net = vision.densenet121(prefix="densenet0_")
    names = list(net.collect_params())
    assert "densenet0_stage1_conv0_weight" in names and "densenet0_stage4_batchnorm31_running_var" in names
    net = vision.inception_v3(prefix="inception30_")
    names = list(net.collect_params())
    assert "inception30_A1_conv0_weight" in names and "inception30_E2_batchnorm8_gamma" in names
    net = vision.vgg11_bn(prefix="vgg0_")
    assert "vgg0_batchnorm7_running_mean" in net.collect_params() and "vgg0_dense2_weight" in net.collect_params()
    net = vision.squeezenet1_0(prefix="squeezenet0_")
    assert list(net.collect_params())[-2:] == ["squeezenet0_conv25_weight", "squeezenet0_conv25_bias"]


def _exported(name):
    return model_path(f"{name}-0000.params")


@pytest.mark.parametrize("name,ctor,prefix", [("resnet18_v1", "resnet18_v1", "resnetv10_"),
                                              ("mobilenet1.0", "mobilenet1_0", "mobilenet0_")])
def test_mxnet_exported_params_load_by_name(tmp_path, name, ctor, prefix):
    """MXNet's HybridBlock.export writes `arg:`/`aux:` + full names; with those prefixes and the
    network's prefix removed they are the legacy names load_parameters takes."""
    params = nd.load(str(_exported(name)))
    assert all(k[:4] in ("arg:", "aux:") and k[4:].startswith(prefix) for k in params)
    stripped = {k[4 + len(prefix):]: v for k, v in params.items()}
    nd.save(str(tmp_path / "p.params"), stripped)
    net = getattr(vision, ctor)()   # default classes=1000, any prefix
    net.load_parameters(str(tmp_path / "p.params"))
    x = nd.array(np.load(model_path(f"{name}-input.npy")))
    want = np.load(model_path(f"{name}-output.npy"))
    np.testing.assert_allclose(net(x).asnumpy(), want, rtol=1e-3, atol=1e-4)
    net.hybridize()
    np.testing.assert_allclose(net(x).asnumpy(), want, rtol=1e-3, atol=1e-4)


def test_pretrained_reads_the_local_store_by_mxnet_file_name(tmp_path, monkeypatch):
    with pytest.raises(MXNetError, match="mobilenet0.25-9f83e440.params"):
        vision.mobilenet0_25(pretrained=True, root=str(tmp_path))
    src = vision.mobilenet0_25(classes=1000)
    src.initialize()
    src(nd.ones((1, 3, 32, 32)))
    path = tmp_path / "mobilenet0.25-9f83e440.params"
    src.save_parameters(str(path))
    # a file whose content is not MXNet's is refused by its SHA-1 ...
    with pytest.raises(MXNetError, match="does not match its SHA-1"):
        vision.get_model("mobilenet0.25", pretrained=True, root=str(tmp_path))
    # ... and loaded when the table's SHA-1 is that of the file (its name carries the hash)
    sha1 = hashlib.sha1(path.read_bytes()).hexdigest()
    monkeypatch.setitem(model_store._model_sha1, "mobilenet0.25", sha1)
    path.rename(tmp_path / f"mobilenet0.25-{sha1[:8]}.params")
    net = vision.get_model("mobilenet0.25", pretrained=True, root=str(tmp_path))
    np.testing.assert_array_equal(net.output.weight.data().asnumpy(), src.output.weight.data().asnumpy())
    # MXNET_HOME sets the default root
    monkeypatch.setenv("MXNET_HOME", str(tmp_path / "home"))
    with pytest.raises(MXNetError, match=str(tmp_path / "home" / "models" / "vgg11-dd221b16.params")):
        vision.vgg11(pretrained=True)
    assert model_store.short_hash("resnet18_v1") == "e54b379f"


def test_pretrained_default_root_is_the_users_mxnet_home(tmp_path, monkeypatch):
    """Without MXNET_HOME the store is ~/.mxnet/models; get_model_file names the exact file."""
    monkeypatch.delenv("MXNET_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    want = tmp_path / ".mxnet" / "models" / "resnet18_v2-84f66640.params"
    with pytest.raises(MXNetError, match=str(want)):
        vision.resnet18_v2(pretrained=True)
    with pytest.raises(MXNetError, match=str(want)):
        model_store.get_model_file("resnet18_v2")
    with pytest.raises(ValueError, match="Pretrained model for resnet19_v1 is not available"):
        model_store.get_model_file("resnet19_v1")
