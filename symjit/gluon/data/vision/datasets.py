"""Vision datasets (MXNet 1.x `gluon.data.vision.datasets`): MNIST, FashionMNIST (gzip'd IDX
files) and CIFAR10/CIFAR100 (binary batches), decoded with numpy; ImageRecordDataset (a .rec
file of encoded images), ImageFolderDataset (one folder per class) and ImageListDataset (a .lst
file or a list), decoded with mx.image.

symjit never downloads: the files MXNet would fetch must already be under `root` (the
`.gz` IDX files, or the CIFAR `-binary.tar.gz` archive / its extracted folder); a missing file
raises OSError naming it. Samples are (image NDArray (H, W, C) uint8, label), passed through
`transform(data, label)` if given.
"""
from __future__ import annotations

import gzip
import os
import struct
import tarfile
import warnings

import numpy as np

from .... import image
from .... import ndarray as nd
from .... import recordio
from ...data.dataset import Dataset, RecordFileDataset

__all__ = ["MNIST", "FashionMNIST", "CIFAR10", "CIFAR100", "ImageRecordDataset", "ImageFolderDataset",
           "ImageListDataset"]


def _default_root(name: str) -> str:
    base = os.environ.get("MXNET_HOME", os.path.join("~", ".mxnet"))
    return os.path.join(base, "datasets", name)


def _require(path: str, what: str) -> str:
    if not os.path.isfile(path):
        raise OSError(f"{what}: {path} not found. symjit does not download datasets; place the file "
                      f"MXNet would download there.")
    return path


class _DownloadedDataset(Dataset):
    """Base class: decodes its files into `_data` (NDArray) and `_label` (numpy) on creation."""

    def __init__(self, root, transform):
        self._transform = transform
        self._data = None
        self._label = None
        self._root = os.path.expanduser(root)
        os.makedirs(self._root, exist_ok=True)
        self._get_data()

    def __getitem__(self, idx):
        if self._transform is not None:
            return self._transform(self._data[idx], self._label[idx])
        return self._data[idx], self._label[idx]

    def __len__(self):
        return len(self._label)

    def _get_data(self):
        raise NotImplementedError


class MNIST(_DownloadedDataset):
    """MNIST handwritten digits: 28x28x1 uint8 images, labels 0-9 (train 60k / test 10k)."""

    _namespace = "mnist"
    _files = {True: ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
              False: ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}

    def __init__(self, root=None, train=True, transform=None):
        self._train = train
        super().__init__(root or _default_root(self._namespace), transform)

    def _get_data(self):
        data_name, label_name = self._files[bool(self._train)]
        label_file = _require(os.path.join(self._root, label_name), self.__class__.__name__)
        data_file = _require(os.path.join(self._root, data_name), self.__class__.__name__)
        with gzip.open(label_file, "rb") as fin:
            magic, count = struct.unpack(">II", fin.read(8))
            if magic != 2049:
                raise OSError(f"{label_file}: not an IDX label file (magic {magic})")
            label = np.frombuffer(fin.read(), dtype=np.uint8).astype(np.int32)
        with gzip.open(data_file, "rb") as fin:
            magic, n, rows, cols = struct.unpack(">IIII", fin.read(16))
            if magic != 2051:
                raise OSError(f"{data_file}: not an IDX image file (magic {magic})")
            data = np.frombuffer(fin.read(), dtype=np.uint8)
        if count != len(label) or n != len(label) or data.size != n * rows * cols:
            raise OSError(f"{self.__class__.__name__}: {data_file} and {label_file} disagree on the "
                          f"number of samples ({n} images of {rows}x{cols}, {len(label)} labels)")
        data = data.reshape(len(label), rows, cols, 1)
        self._data = nd.array(data, dtype=data.dtype)
        self._label = label


class FashionMNIST(MNIST):
    """Fashion-MNIST (same IDX files and layout as MNIST, 10 clothing classes)."""

    _namespace = "fashion-mnist"


class CIFAR10(_DownloadedDataset):
    """CIFAR-10: 32x32x3 uint8 images, 10 classes (data_batch_1..5 train / test_batch)."""

    _namespace = "cifar10"
    _archive = "cifar-10-binary.tar.gz"
    _folder = "cifar-10-batches-bin"

    def __init__(self, root=None, train=True, transform=None):
        self._train = train
        super().__init__(root or _default_root(self._namespace), transform)

    def _batch_names(self):
        return [f"data_batch_{i}.bin" for i in range(1, 6)] if self._train else ["test_batch.bin"]

    def _read_batch(self, filename):
        with open(filename, "rb") as fin:
            raw = np.frombuffer(fin.read(), dtype=np.uint8)
        if raw.size % 3073:
            raise OSError(f"{filename}: size {raw.size} is not a multiple of a CIFAR-10 record (3073)")
        data = raw.reshape(-1, 3072 + 1)
        return data[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), data[:, 0].astype(np.int32)

    def _get_data(self):
        folder = os.path.join(self._root, self._folder)
        paths = [os.path.join(folder, name) for name in self._batch_names()]
        if not all(os.path.isfile(p) for p in paths):
            archive = _require(os.path.join(self._root, self._archive), self.__class__.__name__)
            with tarfile.open(archive) as tar:
                tar.extractall(self._root, filter="data")
        parts = [self._read_batch(_require(p, self.__class__.__name__)) for p in paths]
        data = np.concatenate([p[0] for p in parts])
        self._data = nd.array(data, dtype=data.dtype)
        self._label = np.concatenate([p[1] for p in parts])


class CIFAR100(CIFAR10):
    """CIFAR-100: coarse (20) labels by default, fine (100) labels with `fine_label=True`."""

    _namespace = "cifar100"
    _archive = "cifar-100-binary.tar.gz"
    _folder = "cifar-100-binary"

    def __init__(self, root=None, fine_label=False, train=True, transform=None):
        self._fine_label = fine_label
        super().__init__(root, train, transform)

    def _batch_names(self):
        return ["train.bin"] if self._train else ["test.bin"]

    def _read_batch(self, filename):
        with open(filename, "rb") as fin:
            raw = np.frombuffer(fin.read(), dtype=np.uint8)
        if raw.size % 3074:
            raise OSError(f"{filename}: size {raw.size} is not a multiple of a CIFAR-100 record (3074)")
        data = raw.reshape(-1, 3072 + 2)
        return (data[:, 2:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1),
                data[:, 0 + self._fine_label].astype(np.int32))


class ImageRecordDataset(RecordFileDataset):
    """Images packed in a RecordIO file (with its .idx): samples (HxWxC uint8 image, label),
    `flag` 1 colour / 0 grayscale; `transform(image, label)` applied when given."""

    def __init__(self, filename, flag=1, transform=None):
        super().__init__(filename)
        self._flag = flag
        self._transform = transform

    def __getitem__(self, idx):
        header, img = recordio.unpack(super().__getitem__(idx))
        data = image.imdecode(img, self._flag)
        if self._transform is not None:
            return self._transform(data, header.label)
        return data, header.label


class ImageFolderDataset(Dataset):
    """Images in `root/<class>/<file>`: classes are the sorted sub-folder names (`synsets`),
    labels their indices; only .jpg/.jpeg/.png files are read (others are skipped with a
    warning). Samples (HxWxC uint8 image, int label)."""

    def __init__(self, root, flag=1, transform=None):
        self._root = os.path.expanduser(root)
        self._flag = flag
        self._transform = transform
        self._exts = [".jpg", ".jpeg", ".png"]
        self._list_images(self._root)

    def _list_images(self, root):
        if not os.path.isdir(root):
            raise OSError(f"ImageFolderDataset: {root} is not a folder")
        self.synsets = []
        self.items = []
        for folder in sorted(os.listdir(root)):
            path = os.path.join(root, folder)
            if not os.path.isdir(path):
                warnings.warn(f"Ignoring {path}, which is not a directory.", stacklevel=3)
                continue
            label = len(self.synsets)
            self.synsets.append(folder)
            for filename in sorted(os.listdir(path)):
                filename = os.path.join(path, filename)
                ext = os.path.splitext(filename)[1]
                if ext.lower() not in self._exts:
                    warnings.warn(f"Ignoring {filename} of type {ext}. Only support {', '.join(self._exts)}",
                                  stacklevel=3)
                    continue
                self.items.append((filename, label))

    def __getitem__(self, idx):
        img = image.imread(self.items[idx][0], self._flag)
        label = self.items[idx][1]
        if self._transform is not None:
            return self._transform(img, label)
        return img, label

    def __len__(self):
        return len(self.items)


class ImageListDataset(Dataset):
    """Images listed in `imglist`: a .lst file under `root` (`index<TAB>label(s)<TAB>path`
    lines) or a list of [label(s)..., path] entries. Samples (HxWxC uint8 image, float32 label
    array)."""

    def __init__(self, root=".", imglist=None, flag=1):
        from ....image.image import read_image_list, read_image_list_file
        self._root = root
        self._flag = flag
        if isinstance(imglist, str):
            table, self._imgkeys = read_image_list_file(os.path.join(root, imglist), "float32")
        elif isinstance(imglist, list):
            table, self._imgkeys = read_image_list(imglist, "float32")
        else:
            raise ValueError(f"ImageListDataset: imglist must be a .lst file name or a list, got {type(imglist)}")
        self._imglist = {k: (nd.array(label), path) for k, (label, path) in table.items()}

    def __getitem__(self, idx):
        key = self._imgkeys[idx]
        label, path = self._imglist[key]
        return image.imread(os.path.join(self._root, path), self._flag), label

    def __len__(self):
        return len(self._imgkeys)
