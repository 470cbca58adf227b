"""Export Gluon model-zoo ImageNet networks with Apache MXNet 1.9.1, for `bench_zoo.py`.

Runs ONLY with the MXNet reference venv (never imported by symjit or its tests). For each
architecture: `gluon.model_zoo.vision.get_model(NAME)` with random weights (Xavier, seed 0) and
randomised BatchNorm statistics (running mean N(0, 0.1), running variance U(0.5, 1.5), so that
folding BatchNorm is exercised), hybridized, one input batch run in inference mode; written to
the output directory as bench_zoo.py reads them:

  NAME-symbol.json, NAME-0000.params   `net.export(NAME)` (MXNet's own files)
  NAME-input.npy, NAME-output.npy      the input (1x3xHxW, N(0, 1), seed 1) and MXNet's output
  NAME.onnx                            MXNet's own converter, `mx.onnx.export_model` (opset 12,
                                       batch dimension dynamic), on the same symbol and params,
                                       initializers then dropped from the graph inputs

MXNet 1.9.1's converter needs the `onnx` package, which the reference venv does not carry:
install one that works with its numpy 1.23 into a separate directory and put it on PYTHONPATH
for this script only (installing it into the venv itself would make `import mxnet` load it):

    /work/mxref/bin/pip install --no-deps --target /tmp/onnx-mx onnx==1.14.1 protobuf==3.20.3
    PYTHONPATH=/tmp/onnx-mx /work/mxref/bin/python benchmarks/export_zoo.py /tmp/zoo-models
    python benchmarks/bench_zoo.py --models /tmp/zoo-models

`--convert DIR NAME ...` converts models that exist only as MXNet files (e.g. ../shared/models'
mlp and lenet, which carry no .onnx) the same way: the five files land in the output directory,
the MXNet ones copied unchanged, NAME.onnx from `mx.onnx.export_model` on them with the input's
batch dimension dynamic (so bench_zoo can run batch 1 and 8 on identical weights).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

#: model-zoo name -> input side (inception_v3 is defined on 299x299 images)
ARCHITECTURES = {"mobilenetv2_1.0": 224, "squeezenet1.1": 224, "densenet121": 224, "inceptionv3": 299}


def _randomise_batchnorm(net, rng) -> None:
    for name, p in net.collect_params().items():
        if name.endswith("running_mean"):
            p.set_data(rng.normal(0.0, 0.1, p.shape).astype(np.float32))
        elif name.endswith("running_var"):
            p.set_data(rng.uniform(0.5, 1.5, p.shape).astype(np.float32))


def _initializers_out_of_inputs(path: str) -> None:
    """Drop the graph inputs that name initializers (MXNet's converter lists every weight as an
    input too, which keeps ONNX Runtime from treating weights as constants)."""
    import onnx
    model = onnx.load(path)
    weights = {t.name for t in model.graph.initializer}
    kept = [i for i in model.graph.input if i.name not in weights]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    onnx.save(model, path)


def export(mx, name: str, side: int, out_dir: str) -> None:
    """Write the five files of one architecture (module docstring)."""
    mx.random.seed(0)
    net = mx.gluon.model_zoo.vision.get_model(name, pretrained=False)
    net.initialize(mx.init.Xavier())
    x = np.random.default_rng(1).standard_normal((1, 3, side, side)).astype(np.float32)
    net(mx.nd.array(x))       # deferred shapes
    _randomise_batchnorm(net, np.random.default_rng(2))
    net.hybridize()
    y = net(mx.nd.array(x)).asnumpy()
    prefix = os.path.join(out_dir, name)
    net.export(prefix)
    np.save(prefix + "-input.npy", x)
    np.save(prefix + "-output.npy", y)
    mx.onnx.export_model(prefix + "-symbol.json", prefix + "-0000.params", in_shapes=[x.shape],
                         in_types=[np.float32], onnx_file_path=prefix + ".onnx", dynamic=True,
                         dynamic_input_shapes=[(None, 3, side, side)])
    _initializers_out_of_inputs(prefix + ".onnx")
    print(f"{name}: {prefix}-symbol.json, -0000.params, -input.npy, -output.npy, .onnx")


def convert(mx, models_dir: str, name: str, out_dir: str) -> None:
    """Copy NAME's MXNet files from models_dir into out_dir and add NAME.onnx (module docstring)."""
    import shutil
    src, prefix = os.path.join(models_dir, name), os.path.join(out_dir, name)
    for suffix in ("-symbol.json", "-0000.params", "-input.npy", "-output.npy"):
        if os.path.exists(src + suffix):
            shutil.copyfile(src + suffix, prefix + suffix)
    x = np.load(prefix + "-input.npy")
    mx.onnx.export_model(prefix + "-symbol.json", prefix + "-0000.params", in_shapes=[x.shape],
                         in_types=[np.float32], onnx_file_path=prefix + ".onnx", dynamic=True,
                         dynamic_input_shapes=[(None,) + x.shape[1:]])
    _initializers_out_of_inputs(prefix + ".onnx")
    print(f"{name}: converted from {src}-symbol.json to {prefix}.onnx")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--only", nargs="+", default=None, help="model-zoo names (default: all of ARCHITECTURES)")
    ap.add_argument("--convert", nargs="+", metavar=("DIR", "NAME"), default=None,
                    help="convert existing MXNet exports DIR/NAME-symbol.json instead of exporting the zoo")
    a = ap.parse_args(argv)
    import mxnet as mx
    os.makedirs(a.out_dir, exist_ok=True)
    if a.convert:
        for name in a.convert[1:]:
            convert(mx, a.convert[0], name, a.out_dir)
        return 0
    for name, side in ARCHITECTURES.items():
        if a.only is None or name in a.only:
            export(mx, name, side, a.out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
