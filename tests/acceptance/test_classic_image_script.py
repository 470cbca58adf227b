"""A classic MXNet 1.x image-classification script runs unchanged under `import symjit as mx`:
images packed into a .rec/.idx pair the way im2rec does it (a .lst file, `cv2.imread`,
`mx.recordio.pack_img`, `MXIndexedRecordIO.write_idx`), read back by `mx.io.ImageRecordIter`
with augmentation, trained by `mx.mod.Module.fit` with `mx.callback.Speedometer` and
`mx.callback.do_checkpoint`; it converges, and the checkpoint loads back and predicts."""
from __future__ import annotations

import logging
import os
import random

import cv2
import numpy as np
import pytest

import symjit as mx

from synthetic_images import CLASSES, write_image_folder


def write_lst(path, items, seed=0):
    """im2rec's list file: `index<TAB>label<TAB>relative path` per line, shuffled."""
    items = list(items)
    random.Random(seed).shuffle(items)
    with open(path, "w") as f:
        for i, (rel, label) in enumerate(items):
            f.write(f"{i}\t{float(label):f}\t{rel}\n")


def pack_lst(lst_path, image_root, prefix, quality=95):
    """im2rec's packing step: every line of the .lst becomes one record of prefix.rec, indexed
    by prefix.idx (header label = the list's label, id = the list's index)."""
    record = mx.recordio.MXIndexedRecordIO(prefix + ".idx", prefix + ".rec", "w")
    with open(lst_path) as f:
        for line in f:
            idx, label, rel = line.rstrip("\n").split("\t")
            img = cv2.imread(os.path.join(image_root, rel), cv2.IMREAD_COLOR)
            header = mx.recordio.IRHeader(0, float(label), int(idx), 0)
            record.write_idx(int(idx), mx.recordio.pack_img(header, img, quality=quality, img_fmt=".jpg"))
    record.close()


def small_convnet(num_classes):
    data = mx.sym.Variable("data")
    net = mx.sym.Convolution(data, kernel=(3, 3), num_filter=16, pad=(1, 1), name="conv1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.Pooling(net, kernel=(2, 2), stride=(2, 2), pool_type="max", name="pool1")
    net = mx.sym.Convolution(net, kernel=(3, 3), num_filter=16, pad=(1, 1), name="conv2")
    net = mx.sym.Activation(net, act_type="relu", name="relu2")
    net = mx.sym.Pooling(net, kernel=(1, 1), global_pool=True, pool_type="avg", name="pool2")
    net = mx.sym.Flatten(net, name="flatten")
    net = mx.sym.FullyConnected(net, num_hidden=num_classes, name="fc")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def run_classic_script(workdir, per_class, side, crop, batch_size, num_epoch):
    """The script; returns (validation accuracy after fit, accuracy of the reloaded checkpoint,
    the checkpoint prefix)."""
    image_root = os.path.join(workdir, "images")
    items = write_image_folder(image_root, per_class + per_class // 2, side, seed=1)
    by_label = {}
    for rel, label in items:
        by_label.setdefault(label, []).append((rel, label))
    train_items = [it for its in by_label.values() for it in its[:per_class]]
    val_items = [it for its in by_label.values() for it in its[per_class:]]
    write_lst(os.path.join(workdir, "train.lst"), train_items)
    write_lst(os.path.join(workdir, "val.lst"), val_items)
    pack_lst(os.path.join(workdir, "train.lst"), image_root, os.path.join(workdir, "train"))
    pack_lst(os.path.join(workdir, "val.lst"), image_root, os.path.join(workdir, "val"))

    # --- from here on, the training script as written for MXNet 1.x ---
    mean = dict(mean_r=123.68, mean_g=116.78, mean_b=103.94, std_r=58.4, std_g=57.1, std_b=57.4)
    train = mx.io.ImageRecordIter(path_imgrec=os.path.join(workdir, "train.rec"),
                                  path_imgidx=os.path.join(workdir, "train.idx"),
                                  data_shape=(3, crop, crop), batch_size=batch_size, shuffle=True,
                                  rand_crop=True, rand_mirror=True, preprocess_threads=2, **mean)
    val = mx.io.ImageRecordIter(path_imgrec=os.path.join(workdir, "val.rec"),
                                path_imgidx=os.path.join(workdir, "val.idx"),
                                data_shape=(3, crop, crop), batch_size=batch_size, preprocess_threads=2,
                                **mean)
    prefix = os.path.join(workdir, "convnet")
    mod = mx.mod.Module(small_convnet(len(CLASSES)), context=mx.cpu())
    mod.fit(train, eval_data=val, eval_metric="acc", optimizer="sgd",
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-4},
            initializer=mx.init.Xavier(rnd_type="gaussian", factor_type="in", magnitude=2),
            batch_end_callback=mx.callback.Speedometer(batch_size, frequent=2),
            epoch_end_callback=mx.callback.do_checkpoint(prefix), num_epoch=num_epoch)
    fit_acc = dict(mod.score(val, "acc"))["accuracy"]

    sym, arg_params, aux_params = mx.model.load_checkpoint(prefix, num_epoch)
    reloaded = mx.mod.Module(sym, context=mx.cpu())
    reloaded.bind(data_shapes=val.provide_data, label_shapes=val.provide_label, for_training=False)
    reloaded.set_params(arg_params, aux_params)
    return fit_acc, dict(reloaded.score(val, "acc"))["accuracy"], prefix


def _check(tmp_path, caplog, num_epoch, **sizes):
    caplog.set_level(logging.INFO)
    mx.random.seed(0)
    np.random.seed(0)
    fit_acc, reloaded_acc, prefix = run_classic_script(str(tmp_path), num_epoch=num_epoch, **sizes)
    chance = 1.0 / len(CLASSES)
    assert fit_acc >= 0.85 > chance + 0.5, fit_acc
    assert reloaded_acc == pytest.approx(fit_acc)
    for epoch in range(1, num_epoch + 1):   # do_checkpoint(period=1) writes every epoch
        assert os.path.exists("%s-%04d.params" % (prefix, epoch))
    assert os.path.exists(prefix + "-symbol.json")
    messages = [r.getMessage() for r in caplog.records]
    assert any("samples/sec" in m for m in messages)                 # Speedometer's lines
    assert any('Saved checkpoint to "%s-0001.params"' % prefix in m for m in messages)
    assert any("Validation-accuracy" in m for m in messages)


def test_classic_image_record_script_converges(tmp_path, caplog):
    _check(tmp_path, caplog, per_class=24, side=20, crop=16, batch_size=16, num_epoch=4)


@pytest.mark.slow
def test_classic_image_record_script_converges_on_larger_images(tmp_path, caplog):
    _check(tmp_path, caplog, per_class=100, side=72, crop=64, batch_size=32, num_epoch=8)
