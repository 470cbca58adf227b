"""A Gluon image-classification script runs unchanged under `import symjit as mx`:
`model_zoo.vision.resnet18_v1(classes=...)`, an `ImageFolderDataset` of JPEGs with random
augmentations (RandomResizedCrop, RandomFlipLeftRight, ToTensor, Normalize), a `DataLoader` with
2 worker processes, trained by `gluon.contrib.estimator.Estimator`; it converges on a small
synthetic image set (validation accuracy far above chance, in inference mode)."""
from __future__ import annotations

import logging
import os

import numpy as np
import pytest

import symjit as mx
from symjit import gluon
from symjit.gluon.contrib.estimator import Estimator
from symjit.gluon.data.vision import transforms

from synthetic_images import CLASSES, write_image_folder


def run_gluon_script(train_dir, val_dir, side, batch_size, epochs, lr):
    """The script; returns (final validation accuracy from the Estimator's evaluate, the
    accuracy the trained network reaches on the validation loader by hand)."""
    normalize = transforms.Normalize(mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225))
    train_tf = transforms.Compose([transforms.RandomResizedCrop(side, scale=(0.6, 1.0)),
                                   transforms.RandomFlipLeftRight(), transforms.ToTensor(), normalize])
    val_tf = transforms.Compose([transforms.ToTensor(), normalize])
    train_folder = gluon.data.vision.ImageFolderDataset(train_dir)
    train_ds = train_folder.transform_first(train_tf)
    val_ds = gluon.data.vision.ImageFolderDataset(val_dir).transform_first(val_tf)
    train_data = gluon.data.DataLoader(train_ds, batch_size=batch_size, shuffle=True, num_workers=2,
                                       last_batch="discard")
    val_data = gluon.data.DataLoader(val_ds, batch_size=batch_size, num_workers=2)

    net = gluon.model_zoo.vision.resnet18_v1(classes=len(train_folder.synsets))
    net.initialize(mx.init.Xavier(magnitude=2), ctx=mx.cpu())
    net.hybridize()
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": lr})
    est = Estimator(net=net, loss=loss, train_metrics=mx.metric.Accuracy(), trainer=trainer,
                    context=mx.cpu())
    est.fit(train_data=train_data, val_data=val_data, epochs=epochs)
    est_acc = dict(m.get() for m in est.val_metrics)["validation accuracy"]

    metric = mx.metric.Accuracy()
    for data, label in val_data:
        metric.update([label], [net(data)])
    return est_acc, metric.get()[1]


def _check(tmp_path, per_class, side, batch_size, epochs, lr=2e-3):
    mx.random.seed(0)
    np.random.seed(0)
    train_dir, val_dir = str(tmp_path / "train"), str(tmp_path / "val")
    write_image_folder(train_dir, per_class, side, seed=2)
    write_image_folder(val_dir, max(4, per_class // 4), side, seed=3)
    est_acc, acc = run_gluon_script(train_dir, val_dir, side, batch_size, epochs, lr)
    assert acc >= 0.8 > 1.0 / len(CLASSES) + 0.5, acc
    assert est_acc == pytest.approx(acc)
    assert sorted(os.listdir(train_dir)) == sorted(CLASSES)


def test_gluon_resnet18_estimator_script_converges(tmp_path, caplog):
    # The augmentations draw from Python's `random` inside two DataLoader workers, so which
    # worker (and random stream) serves a batch depends on timing: five epochs converge in every
    # order (validation accuracy 0.94-1.0 over repeated runs), three reached only 0.75 under load.
    caplog.set_level(logging.INFO)
    _check(tmp_path, per_class=16, side=16, batch_size=16, epochs=5)


@pytest.mark.slow
def test_gluon_resnet18_estimator_script_converges_on_larger_images(tmp_path):
    _check(tmp_path, per_class=48, side=32, batch_size=16, epochs=4)
