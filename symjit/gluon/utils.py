"""Gluon utilities (MXNet 1.x `gluon.utils`): splitting batches over contexts and clipping
gradients by their global norm."""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import ndarray as _nd
from ..base import MXNetError
from ..ndarray import NDArray

__all__ = ["split_data", "split_and_load", "clip_global_norm"]


def split_data(data, num_slice, batch_axis=0, even_split=True):
    """Split `data` into `num_slice` slices along `batch_axis` (the last slices take the
    remainder when `even_split` is False)."""
    size = data.shape[batch_axis]
    if even_split and size % num_slice != 0:
        raise ValueError(
            f"data with shape {data.shape} cannot be evenly split into {num_slice} slices along axis "
            f"{batch_axis}. Use a batch size that's multiple of {num_slice} or set even_split=False to "
            "allow uneven partitioning of data.")
    n_each_section, extras = divmod(size, num_slice)
    section_sizes = [0] + (extras * [n_each_section + 1] + (num_slice - extras) * [n_each_section])
    div_points = np.array(section_sizes).cumsum()
    if num_slice > size:
        raise ValueError(f"Too many slices for data with shape {data.shape}. Arguments are "
                         f"num_slice={num_slice} and batch_axis={batch_axis}.")
    slices = []
    if batch_axis != 0:
        for i in range(num_slice):
            st, end = int(div_points[i]), int(div_points[i + 1])
            slices.append(_nd.slice_axis(data, axis=batch_axis, begin=st, end=end))
    else:
        for i in range(num_slice):
            st, end = int(div_points[i]), int(div_points[i + 1])
            slices.append(data[st:end])
    return slices


def split_and_load(data, ctx_list, batch_axis=0, even_split=True):
    """Split `data` (NDArray or numpy array) along `batch_axis` and put one slice on each context."""
    if not isinstance(data, NDArray):
        data = _nd.array(data, ctx=ctx_list[0])
    if len(ctx_list) == 1:
        return [data.as_in_context(ctx_list[0])]
    slices = split_data(data, len(ctx_list), batch_axis, even_split)
    return [i.as_in_context(ctx) for i, ctx in zip(slices, ctx_list)]


def clip_global_norm(arrays, max_norm, check_isfinite=True):
    """Scale `arrays` in place so that the L2 norm of all of them together is at most `max_norm`;
    returns the norm before clipping (a float, or an NDArray when `check_isfinite` is False)."""
    if len(arrays) == 0:
        raise MXNetError("clip_global_norm: arrays must not be empty")
    total = 0.0
    for arr in arrays:
        x = arr._data.astype(np.float64, copy=False).reshape(-1)
        total += float(np.dot(x, x))
    total_norm = math.sqrt(total)
    if check_isfinite and not np.isfinite(total_norm):
        warnings.warn(UserWarning("nan or inf is detected. Clipping results will be undefined."),
                      stacklevel=2)
    scale = max_norm / (total_norm + 1e-8)
    if scale < 1.0:
        for arr in arrays:
            arr._data[...] = (arr._data * np.asarray(scale, dtype=arr._data.dtype)).astype(arr._data.dtype)
    if check_isfinite:
        return total_norm
    return _nd.array([total_norm], ctx=arrays[0].context)
