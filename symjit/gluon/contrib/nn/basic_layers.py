"""MXNet 1.9.1's `gluon.contrib.nn` layers: Concurrent, HybridConcurrent, Identity,
SparseEmbedding, SyncBatchNorm, PixelShuffle1D/2D/3D.

Concurrent and HybridConcurrent are their own classes (not aliases of nn.Concatenate) so that
their automatic prefixes, and hence parameter names, are MXNet's ("hybridconcurrent0_...").

SyncBatchNorm normalizes with the statistics of the whole batch across workers: when the
process belongs to a group of several (started by `symjit launch` / mpiexec, the group of the
distributed KVStore and `symjit.distributed`), training-mode calls allreduce the per-channel
sums over the group, and the backward pass allreduces the matching gradient sums (the allreduce
is a differentiable step whose gradient is the allreduce of the gradients). In a group of one it
is BatchNorm over the batch it is given, which is MXNet's result for one device. Devices of one
process are not combined: symjit runs each device's call to completion before the next starts,
so there is no moment when all the parts of a batch are in flight together (MXNet's engine
defers execution to make one).
"""
from __future__ import annotations

import warnings

import numpy as np

from .... import autograd
from ....base import MXNetError
from ....context import num_gpus
from ....ndarray import NDArray
from ... import nn
from ...block import Block, HybridBlock
from ...nn import BatchNorm

__all__ = ["Concurrent", "HybridConcurrent", "Identity", "SparseEmbedding", "SyncBatchNorm",
           "PixelShuffle1D", "PixelShuffle2D", "PixelShuffle3D"]


class Concurrent(nn.Concatenate):
    """Runs every child on the same input and concatenates their outputs along `axis`
    (default -1). Not hybridizable; see HybridConcurrent."""


class HybridConcurrent(nn.HybridConcatenate):
    """Hybridizable Concurrent: children run on the same input, outputs concatenated on `axis`."""


class Identity(nn.Identity):
    """Returns its input (a placeholder branch of a Concurrent, e.g. a residual path)."""


class SparseEmbedding(Block):
    """Embedding whose weight is stored row_sparse and whose gradient is row_sparse: each forward
    pulls only the rows the batch indexes (`weight.row_sparse_data(x)`), so a Trainer with a
    KVStore updates only those rows. Output shape: x.shape + (output_dim,)."""

    def __init__(self, input_dim, output_dim, dtype="float32", weight_initializer=None, **kwargs):
        super().__init__(**kwargs)
        self._kwargs = {"input_dim": input_dim, "output_dim": output_dim, "dtype": dtype, "sparse_grad": True}
        self.weight = self.params.get("weight", shape=(input_dim, output_dim), init=weight_initializer,
                                      dtype=dtype, grad_stype="row_sparse", stype="row_sparse")

    def forward(self, x):
        from .... import ndarray as nd
        weight = self.weight.row_sparse_data(x)
        return nd.Embedding(x, weight, name="fwd", **self._kwargs)

    def __repr__(self):
        k = self._kwargs
        return f"{self.__class__.__name__}({k['input_dim']} -> {k['output_dim']}, {k['dtype']})"


# ------------------------------------------------------------------------------------ SyncBatchNorm

def _group():
    """The process group statistics are combined over (None: this process alone)."""
    from ....kvstore import comm
    if comm.launched_size() in (None, 1):
        return None
    g = comm.get()
    return g if g.size > 1 else None


class _AllReduceSum(autograd.Function):
    """Sum of an NDArray over the process group; its gradient is the sum of the gradients."""

    def __init__(self, group, what: str):
        super().__init__()
        self._group = group
        self._what = what

    def _sum(self, x: NDArray) -> NDArray:
        buf = np.ascontiguousarray(x.asnumpy())
        self._group.allreduce([buf], [buf], "sum", self._what)
        return NDArray(buf, x.context)

    def forward(self, x):
        return self._sum(x)

    def backward(self, dy):
        return self._sum(dy)


class SyncBatchNorm(BatchNorm):
    """Batch normalization over channel axis 1 with statistics of the whole batch across
    workers (see the module docstring). `num_devices` (MXNet's `ndev`): the number of devices
    MXNet would wait for; None takes the GPU count (at least 1), as MXNet."""

    def __init__(self, in_channels=0, num_devices=None, momentum=0.9, epsilon=1e-5, center=True, scale=True,
                 use_global_stats=False, beta_initializer="zeros", gamma_initializer="ones",
                 running_mean_initializer="zeros", running_variance_initializer="ones", **kwargs):
        super().__init__(axis=1, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
                         use_global_stats=use_global_stats, beta_initializer=beta_initializer,
                         gamma_initializer=gamma_initializer,
                         running_mean_initializer=running_mean_initializer,
                         running_variance_initializer=running_variance_initializer,
                         in_channels=in_channels, **kwargs)
        if num_devices is None:
            num_devices = self._get_num_devices()
        if int(num_devices) < 1:
            raise MXNetError(f"SyncBatchNorm: num_devices must be >= 1, got {num_devices}")
        self.num_devices = int(num_devices)
        self._momentum, self._eps = float(momentum), float(epsilon)
        self._fix_gamma, self._use_global_stats = not scale, bool(use_global_stats)
        self._warned_unsynced = False

    @staticmethod
    def _get_num_devices() -> int:
        warnings.warn("Caution using SyncBatchNorm: if not using all the GPUs, please mention number of GPUs.")
        n = num_gpus()
        return n if n > 0 else 1

    def forward(self, x, *args):
        training = autograd.is_training() and not self._use_global_stats
        group = _group() if training else None
        if group is None or not isinstance(x, NDArray):
            if training and self.num_devices > 1 and not self._warned_unsynced:
                self._warned_unsynced = True
                warnings.warn(f"SyncBatchNorm {self.name}: num_devices={self.num_devices} in one process: each "
                              "device's part of the batch is normalized with its own statistics (symjit runs each "
                              "device's call to completion before the next; statistics are combined across "
                              "processes only)")
            return super().forward(x, *args)
        return self._synced_forward(x, group)

    def _synced_forward(self, x: NDArray, group) -> NDArray:
        """Training-mode BatchNorm with sums allreduced over `group` (differentiably)."""
        from .... import ndarray as nd
        ctx = x.context
        gamma, beta = self.gamma.data(ctx), self.beta.data(ctx)
        running_mean, running_var = self.running_mean.data(ctx), self.running_var.data(ctx)
        if self._fix_gamma:
            gamma = nd.ones_like(gamma)
        axes = tuple(i for i in range(x.ndim) if i != 1)
        count = NDArray(np.array([x.size / x.shape[1]], dtype=np.float64), ctx)
        total = float(_AllReduceSum(group, "SyncBatchNorm count")(count).asscalar())
        stats = nd.concat(nd.sum(x, axis=axes), nd.sum(x * x, axis=axes), dim=0)
        stats = _AllReduceSum(group, f"SyncBatchNorm {self.name}")(stats)
        c = x.shape[1]
        mean = nd.slice_axis(stats, axis=0, begin=0, end=c) / total
        var = nd.slice_axis(stats, axis=0, begin=c, end=2 * c) / total - mean * mean
        bshape = (1, c) + (1,) * (x.ndim - 2)
        y = (x - mean.reshape(bshape)) * (gamma / nd.sqrt(var + self._eps)).reshape(bshape) + beta.reshape(bshape)
        m = self._momentum
        with autograd.pause():
            running_mean[:] = running_mean * m + mean.detach() * (1 - m)
            running_var[:] = running_var * m + var.detach() * (1 - m)
        return y

    def __repr__(self):
        in_channels = self.gamma.shape[0]
        return (f"{self.__class__.__name__}(eps={self._eps}, momentum={self._momentum}, fix_gamma={self._fix_gamma}, "
                f"use_global_stats={self._use_global_stats}, ndev={self.num_devices}, "
                f"in_channels={in_channels if in_channels else None})")


# ------------------------------------------------------------------------------------ PixelShuffle

def _factors(factor, n: int, name: str) -> tuple:
    try:
        fs = (int(factor),) * n if np.ndim(factor) == 0 else tuple(int(f) for f in factor)
    except (TypeError, ValueError):
        raise MXNetError(f"{name}: factor must be an int or {n} ints, got {factor!r}") from None
    if len(fs) != n or any(f < 1 for f in fs):
        raise MXNetError(f"{name}: factor must be {n} positive ints, got {factor!r}")
    return fs


class _PixelShuffle(HybridBlock):
    """(N, C*f1*...*fn, D1, ..., Dn) -> (N, C, D1*f1, ..., Dn*fn): channel blocks become
    sub-pixel positions (Shi et al., 2016), the channel index c*f1*..*fn + i1*f2*..*fn + ... + in
    going to spatial offsets (i1, ..., in)."""
    _ndim = 0

    def __init__(self, factor):
        super().__init__()
        self._factors = _factors(factor, self._ndim, type(self).__name__)

    def hybrid_forward(self, F, x):
        fs, n = self._factors, self._ndim
        x = F.reshape(x, (0, -4, -1, int(np.prod(fs))) + (0,) * n)          # (N, C, f1*..*fn, D1..Dn)
        for i in range(n - 1):                                               # (N, C, f1, .., fn, D1..Dn)
            x = F.reshape(x, (0, 0) + (0,) * i + (-4, fs[i], int(np.prod(fs[i + 1:]))) + (0,) * n)
        # (N, C, D1, f1, D2, f2, ...)
        axes = (0, 1) + tuple(a for i in range(n) for a in (2 + n + i, 2 + i))
        x = F.transpose(x, axes=axes)
        return F.reshape(x, (0, 0) + (-3,) * n)

    def __repr__(self):
        f = self._factors[0] if self._ndim == 1 else self._factors
        return f"{self.__class__.__name__}({f})"


class PixelShuffle1D(_PixelShuffle):
    """(N, f*C, W) -> (N, C, W*f)."""
    _ndim = 1


class PixelShuffle2D(_PixelShuffle):
    """(N, f1*f2*C, H, W) -> (N, C, H*f1, W*f2); `factor` an int or a pair."""
    _ndim = 2


class PixelShuffle3D(_PixelShuffle):
    """(N, f1*f2*f3*C, D, H, W) -> (N, C, D*f1, H*f2, W*f3); `factor` an int or a triple."""
    _ndim = 3
