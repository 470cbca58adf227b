"""symjit.viz: plot_network and print_summary as MXNet 1.9.1 draws/prints them, plus the
optimized-graph and memory-plan pictures.

The golden DOT of the seed example E45 was written by hand from MXNet 1.9.1's
python/mxnet/visualization.py applied to tests/data/models/matfact-symbol.json (the same
network saved by MXNet itself): weight-like variables (`*_weight`) are not drawn and their edges
are dropped; other variables are ovals filled #8dd3c7 labelled with their names; Flatten is
filled #fdb462; ops without a special case (Embedding, elemwise_mul, sum,
LinearRegressionOutput) are labelled with the node name and filled #fccde5; every edge goes
from a node to its input with dir=back, arrowtail=open and an empty label; node attributes are
MXNet's defaults (box, fixedsize, width 1.3, height 0.8034, filled).
"""
from __future__ import annotations

import io
import re
import struct
import zlib
from contextlib import redirect_stdout

import numpy as np
import pytest

import symjit as mx

from shared_data import model_path

_BOX = 'fixedsize=true height=0.8034 shape=box style=filled width=1.3'
_OVAL = 'fixedsize=true height=0.8034 shape=oval style=filled width=1.3'
E45_GOLDEN = f"""digraph plot {{
	user [label=user fillcolor="#8dd3c7" {_OVAL}]
	embedding0 [label=embedding0 fillcolor="#fccde5" {_BOX}]
	item [label=item fillcolor="#8dd3c7" {_OVAL}]
	embedding1 [label=embedding1 fillcolor="#fccde5" {_BOX}]
	_mul0 [label=_mul0 fillcolor="#fccde5" {_BOX}]
	sum_axis0 [label=sum_axis0 fillcolor="#fccde5" {_BOX}]
	flatten0 [label=flatten0 fillcolor="#fdb462" {_BOX}]
	score [label=score fillcolor="#8dd3c7" {_OVAL}]
	linearregressionoutput0 [label=linearregressionoutput0 fillcolor="#fccde5" {_BOX}]
	embedding0 -> user [label="" arrowtail=open dir=back]
	embedding1 -> item [label="" arrowtail=open dir=back]
	_mul0 -> embedding0 [label="" arrowtail=open dir=back]
	_mul0 -> embedding1 [label="" arrowtail=open dir=back]
	sum_axis0 -> _mul0 [label="" arrowtail=open dir=back]
	flatten0 -> sum_axis0 [label="" arrowtail=open dir=back]
	linearregressionoutput0 -> flatten0 [label="" arrowtail=open dir=back]
	linearregressionoutput0 -> score [label="" arrowtail=open dir=back]
}}
"""


def _e45_symbol():
    user = mx.symbol.Variable('user')
    item = mx.symbol.Variable('item')
    score = mx.symbol.Variable('score')
    user = mx.symbol.Embedding(data=user, input_dim=100, output_dim=64)
    item = mx.symbol.Embedding(data=item, input_dim=50, output_dim=64)
    net = user * item
    net = mx.symbol.sum_axis(data=net, axis=1)
    net = mx.symbol.Flatten(data=net)
    return mx.symbol.LinearRegressionOutput(data=net, label=score)


def _edges(source: str) -> list[tuple[str, str, str]]:
    return re.findall(r'^\t(\S+) -> (\S+) \[label=("[^"]*"|\S+)', source, flags=re.M)


@pytest.fixture(autouse=True)
def _fresh_names(monkeypatch):
    from symjit.symbol.naming import NameManager
    monkeypatch.setattr(NameManager._current, "value", NameManager(), raising=False)


def test_e45_dot_matches_mxnet_golden():
    import graphviz
    dot = mx.viz.plot_network(_e45_symbol())
    assert isinstance(dot, graphviz.Digraph)
    assert dot.source == E45_GOLDEN


def test_e45_from_mxnet_saved_json_is_the_same_picture():
    dot = mx.viz.plot_network(mx.sym.load(str(model_path("matfact-symbol.json"))))
    assert dot.source == E45_GOLDEN


def _small_cnn():
    data = mx.sym.var("data")
    net = mx.sym.Convolution(data, kernel=(7, 7), stride=(2, 2), pad=(3, 3), num_filter=64, name="conv0")
    net = mx.sym.BatchNorm(net, name="bn0")
    net = mx.sym.Activation(net, act_type="relu", name="relu0")
    net = mx.sym.Pooling(net, kernel=(3, 3), stride=(2, 2), pool_type="max", name="pool0")
    net = mx.sym.LeakyReLU(net, act_type="leaky", name="lrelu0")
    net = mx.sym.Flatten(net, name="flat0")
    return mx.sym.FullyConnected(net, num_hidden=10, name="fc0")


def test_labels_colors_and_shape_edges():
    dot = mx.viz.plot_network(_small_cnn(), shape={"data": (2, 3, 32, 32)}, dtype={"data": np.float32})
    src = dot.source
    assert 'conv0 [label="Convolution\n7x7/2x2, 64" fillcolor="#fb8072"' in src
    assert 'fc0 [label="FullyConnected\n10" fillcolor="#fb8072"' in src
    assert 'relu0 [label="Activation\nrelu" fillcolor="#ffffb3"' in src
    assert 'lrelu0 [label="LeakyReLU\nleaky" fillcolor="#ffffb3"' in src
    assert 'pool0 [label="Pooling\nmax, 3x3/2x2" fillcolor="#80b1d3"' in src
    assert 'bn0 [label=bn0 fillcolor="#bebada"' in src
    assert "conv0_weight" not in src and "bn0_gamma" not in src and "bn0_moving_mean" not in src
    # conv output: (32 + 6 - 7) // 2 + 1 = 16; pool: (16 - 3) // 2 + 1 = 7 (valid pooling)
    assert ("conv0", "data", '"3x32x32(float32)"') in _edges(src)
    assert ("bn0", "conv0", '"64x16x16(float32)"') in _edges(src)
    assert ("lrelu0", "pool0", '"64x7x7(float32)"') in _edges(src)
    assert ("fc0", "flat0", '"3136(float32)"') in _edges(src)


def test_hide_weights_false_keeps_weight_edges_and_node_attrs_override():
    dot = mx.viz.plot_network(_small_cnn(), hide_weights=False, node_attrs={"shape": "oval", "fixedsize": "false"})
    edges = _edges(dot.source)
    assert ("conv0", "conv0_weight", '""') in edges and ("bn0", "bn0_moving_var", '""') in edges
    # weights have no node statement of their own (graphviz draws them as plain ovals)
    assert not re.search(r"^\tconv0_weight \[", dot.source, flags=re.M)
    assert 'fc0 [label="FullyConnected\n10" fillcolor="#fb8072" fixedsize=false' in dot.source


def test_plot_network_rejects_non_symbols_and_save_format():
    with pytest.raises(TypeError):
        mx.viz.plot_network("not a symbol")
    assert mx.viz.plot_network(_small_cnn(), save_format="png").format == "png"


def _summary(sym, shape) -> str:
    buf = io.StringIO()
    with redirect_stdout(buf):
        mx.viz.print_summary(sym, shape=shape)
    return buf.getvalue()


def test_print_summary_small_network_counts():
    out = _summary(_small_cnn(), {"data": (2, 3, 32, 32)})
    lines = out.splitlines()
    assert lines[0] == "_" * 120 and lines[2] == "=" * 120
    assert lines[1].rstrip() == "Layer (type)" + " " * 40 + "Output Shape" + " " * 12 + "Param #" + " " * 5 + "Previous Layer"
    row = next(l for l in lines if l.startswith("conv0(Convolution)"))
    # conv: 3 in-channels * 64 * 7 * 7 + 64 biases; columns at 52, 76, 88
    assert row[52:76].strip() == "64x16x16" and row[76:88].strip() == str(3 * 64 * 49 + 64) and row[88:].strip() == "data"
    row = next(l for l in lines if l.startswith("bn0(BatchNorm)"))
    assert row[76:88].strip() == "128"
    row = next(l for l in lines if l.startswith("fc0(FullyConnected)"))
    assert row[76:88].strip() == str((64 * 7 * 7 + 1) * 10)
    assert f"Total params: {3 * 64 * 49 + 64 + 128 + (64 * 49 + 1) * 10}" in out


def test_print_summary_resnet18_matches_mxnet_table():
    sym = mx.sym.load(str(model_path("resnet18_v1-symbol.json")))
    params = mx.nd.load(str(model_path("resnet18_v1-0000.params")))
    out = _summary(sym, {"data": (1, 3, 224, 224)})
    # MXNet counts convolution/dense weights and biases and BatchNorm gamma+beta: exactly the
    # trainable (arg:) parameters of the exported model
    trainable = sum(v.size for k, v in params.items() if k.startswith("arg:"))
    assert trainable == 11689512
    assert f"Total params: {trainable}" in out.splitlines()
    rows = {l.split("(")[0]: l for l in out.splitlines() if "(" in l and not l.startswith("Layer")}
    assert rows["resnetv10_conv0_fwd"][52:76].strip() == "64x112x112"
    assert rows["resnetv10_conv0_fwd"][76:88].strip() == str(3 * 64 * 7 * 7)
    assert rows["resnetv10_pool0_fwd"][52:76].strip() == "64x56x56"
    assert rows["resnetv10_dense0_fwd"][52:76].strip() == "1000"
    assert rows["resnetv10_dense0_fwd"][76:88].strip() == str(513 * 1000)
    # an addition lists its first input on its row and the second on a continuation row
    # (inputs of resnetv10_stage1__plus0 in the JSON: pool0, then stage1_batchnorm1)
    add = out.splitlines().index(rows["resnetv10_stage1__plus0"])
    assert rows["resnetv10_stage1__plus0"][88:].strip() == "resnetv10_pool0_fwd"
    assert out.splitlines()[add + 1] == " " * 88 + "resnetv10_stage1_batchnorm1_fwd".ljust(32)
    assert out.splitlines()[-2] == f"Total params: {trainable}" and out.splitlines()[-1] == "_" * 120


def test_optimized_plot_has_one_cluster_per_fusion_group():
    sym = _small_cnn()
    shape = {"data": (2, 3, 32, 32)}
    rep = mx.inspect(sym, shapes=shape)
    dot = mx.viz.plot_network(sym, shape=shape, optimized=True)
    clusters = re.findall(r"subgraph cluster_(\S+) \{", dot.source)
    assert len(clusters) == len(rep.groups) > 0
    for name, _, members in rep.groups:
        assert name in clusters
        for m in members:
            assert f"label={m} " in dot.source or f'label="{m}"' in dot.source


def test_optimized_plot_shows_convolution_and_max_pooling_as_one_node():
    data = mx.sym.var("data")
    net = mx.sym.Convolution(data, kernel=(3, 3), pad=(1, 1), num_filter=8, name="conv0")
    net = mx.sym.Activation(net, act_type="relu", name="relu0")
    net = mx.sym.Pooling(net, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool0")
    shape = {"data": (1, 3, 16, 16)}
    rep = mx.inspect(net, shapes=shape)
    assert [(op, m) for _, op, m in rep.groups] == [("_conv_pool", ["conv0", "relu0", "pool0"])]
    dot = mx.viz.plot_network(net, shape=shape, optimized=True)
    assert re.findall(r"subgraph cluster_(\S+) \{", dot.source) == [rep.groups[0][0]]
    assert all(f"label={m} " in dot.source or f'label="{m}"' in dot.source for m in ("conv0", "relu0", "pool0"))


def _png_pixels(data: bytes) -> np.ndarray:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    w, h = struct.unpack(">II", data[16:24])
    pos, idat = 8, b""
    while pos < len(data):
        (n,), tag = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        if tag == b"IDAT":
            idat += data[pos + 8:pos + 8 + n]
        pos += 12 + n
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + 3 * w)
    assert (raw[:, 0] == 0).all()
    return raw[:, 1:].reshape(h, w, 3)


def test_memory_plan_pictures(tmp_path):
    sym = _small_cnn()
    svg = mx.viz.plot_memory_plan(sym, {"data": (2, 3, 32, 32)}, path=str(tmp_path / "plan.svg"))
    assert (tmp_path / "plan.svg").read_text() == svg
    from symjit.visualization import _optimized_graph
    plan = _optimized_graph(sym, {"data": (2, 3, 32, 32)}, None, None).annotations["memory_plan"]
    assert svg.count("<rect ") == len(plan.intervals) + 1   # one per value plus the frame
    assert f"arena {plan.arena_bytes} B" in svg
    png = mx.viz.plot_memory_plan(sym, {"data": (2, 3, 32, 32)}, fmt="png")
    img = _png_pixels(png)
    assert img.shape == (480, 800, 3)
    assert (img != 255).any(axis=2).mean() > 0.05   # rectangles were drawn
    with pytest.raises(mx.MXNetError):
        mx.viz.plot_memory_plan(sym, {"data": (2, 3, 32, 32)}, fmt="gif")
