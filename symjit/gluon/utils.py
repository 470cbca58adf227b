"""Gluon utilities (MXNet 1.x `gluon.utils`): splitting batches over contexts, clipping
gradients by their global norm, file checksums, downloads and atomic file replacement."""
from __future__ import annotations

import hashlib
import math
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import warnings

import numpy as np

from .. import ndarray as _nd
from ..base import MXNetError
from ..ndarray import NDArray
from .parameter import shape_is_known

__all__ = ["split_data", "split_and_load", "clip_global_norm", "check_sha1", "download", "replace_file",
           "shape_is_known"]


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


def check_sha1(filename, sha1_hash):
    """True when the SHA-1 of the file `filename` is `sha1_hash` (hex digits; a shorter
    `sha1_hash` is compared with as many leading digits of the file's hash)."""
    sha1 = hashlib.sha1()
    with open(filename, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            sha1.update(chunk)
    digest = sha1.hexdigest()
    return digest[:len(sha1_hash)] == sha1_hash if len(sha1_hash) < len(digest) else digest == sha1_hash


def replace_file(src, dst):
    """Atomically move file `src` to `dst`, replacing `dst` if it exists."""
    os.replace(src, dst)


def download(url, path=None, overwrite=False, sha1_hash=None, retries=5, verify_ssl=True):
    """Download `url` to `path` (a file, or a directory to put the URL's file name in; default
    the URL's file name in the working directory) and return the file's path.

    An existing file is kept unless `overwrite`, or its SHA-1 differs from `sha1_hash`. The file
    is written to a temporary name and moved into place only when complete, so a failed download
    leaves nothing behind. When every one of `retries` attempts fails (e.g. without network
    access) an MXNetError names the URL, the destination and the last error."""
    if path is None:
        fname = url.split("/")[-1]
        assert fname, "Can't construct file-name from this URL. Please set the `path` option manually."
    else:
        path = os.path.expanduser(path)
        fname = os.path.join(path, url.split("/")[-1]) if os.path.isdir(path) else path
    if not isinstance(retries, int) or retries < 0:
        raise MXNetError(f"download: retries must be a non-negative integer, got {retries!r}")
    if not verify_ssl:
        warnings.warn("Unverified HTTPS request is being made (verify_ssl=False). Adding certificate "
                      "verification is strongly advised.")
    if not overwrite and os.path.exists(fname) and (not sha1_hash or check_sha1(fname, sha1_hash)):
        return fname
    dirname = os.path.dirname(os.path.abspath(fname))
    os.makedirs(dirname, exist_ok=True)
    context = None
    if not verify_ssl and urllib.parse.urlparse(url).scheme == "https":
        import ssl
        context = ssl._create_unverified_context()  # pylint: disable=protected-access
    last_error = None
    for attempt in range(retries + 1):
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(fname) + ".", suffix=".part", dir=dirname)
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=30, context=context) as resp:
                shutil.copyfileobj(resp, out, 1 << 20)
            if sha1_hash and not check_sha1(tmp, sha1_hash):
                raise MXNetError(f"File {fname} is downloaded but the content hash does not match. "
                                 "The repo may be outdated or download may be incomplete.")
            replace_file(tmp, fname)
            return fname
        except (OSError, urllib.error.URLError, MXNetError) as err:
            last_error = err
            if os.path.exists(tmp):
                os.remove(tmp)
            if attempt < retries:
                time.sleep(min(0.1 * (attempt + 1), 1.0))
    raise MXNetError(f"download: could not fetch {url} to {fname} after {retries + 1} attempts "
                     f"(last error: {last_error}); without network access, copy the file there by hand")
