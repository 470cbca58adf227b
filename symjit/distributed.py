"""symjit.distributed: Horovod-style data parallelism over MPI (`import symjit.distributed as hvd`).

    hvd.init()
    hvd.broadcast_parameters(net.collect_params(), root_rank=0)
    trainer = hvd.DistributedTrainer(net.collect_params(), 'sgd', {'learning_rate': 0.1})
    ... trainer.step(batch_size)        # gradients averaged over hvd.size() workers

Start the workers with `mpiexec -n N python train.py` or `python -m symjit.launch -n N -- ...`.
A plain single process is a group of one (rank 0, size 1). Collectives are the ones of
`symjit.kvstore.comm`: they raise MXNetError when a peer dies or stalls (SYMJIT_KV_TIMEOUT).
"""
from __future__ import annotations

import numpy as np

from .base import MXNetError
from .kvstore import comm as _comm
from .ndarray import NDArray
from .ndarray.write_guard import writable

__all__ = ["init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
           "allreduce", "allreduce_", "allgather", "broadcast", "broadcast_", "broadcast_parameters",
           "DistributedTrainer", "Sum", "Average", "Min", "Max", "Product"]

Sum, Average, Min, Max, Product = "sum", "average", "min", "max", "prod"
_initialized = False


def init() -> None:
    """Join the worker group (collective under a launcher; idempotent)."""
    global _initialized
    _comm.get()
    _initialized = True


def shutdown() -> None:
    """Leave the group (MPI is finalized at interpreter exit)."""
    global _initialized
    _initialized = False


def is_initialized() -> bool:
    return _initialized


def _group():
    if not _initialized:
        raise MXNetError("symjit.distributed: call init() first")
    return _comm.get()


def rank() -> int:
    return _group().rank


def size() -> int:
    return _group().size


def local_rank() -> int:
    return _group().local_rank


def local_size() -> int:
    return _group().local_size


def _check_tensor(tensor, what: str) -> None:
    if not isinstance(tensor, NDArray):
        raise MXNetError(f"{what}: expected an NDArray, got {type(tensor).__name__}")


def _reduce_op(average, op) -> str:
    if op is not None and average is not None:
        raise MXNetError("allreduce: give either average= or op=, not both")
    if op is None:
        op = Sum if average is False else Average
    if op not in (Sum, Average, Min, Max, Product):
        raise MXNetError(f"allreduce: unknown op {op!r}; expected one of Sum, Average, Min, Max, Product")
    return op


def allreduce_(tensor: NDArray, average=None, name=None, priority: int = 0, prescale_factor: float = 1.0,
               postscale_factor: float = 1.0, op=None) -> NDArray:
    """In place: tensor = reduction of every worker's tensor (default: the average)."""
    _check_tensor(tensor, "allreduce")
    op = _reduce_op(average, op)
    data = tensor._data
    if op == Average and not np.issubdtype(data.dtype, np.floating):
        raise MXNetError(f"allreduce: averaging needs a floating-point tensor, got {data.dtype.name}; "
                         "use op=Sum")
    if prescale_factor != 1.0:
        buf = np.ascontiguousarray(data * data.dtype.type(prescale_factor))
    else:
        buf = np.ascontiguousarray(data)  # the tensor itself when contiguous: no copy
    g = _group()
    g.allreduce([buf], [buf], Sum if op == Average else op, f"allreduce{'' if name is None else ' ' + str(name)}")
    scale = postscale_factor / g.size if op == Average else postscale_factor
    if scale != 1.0:
        buf *= buf.dtype.type(scale)
    if buf is not data:
        data[...] = buf
    return tensor


def allreduce(tensor: NDArray, average=None, name=None, priority: int = 0, prescale_factor: float = 1.0,
              postscale_factor: float = 1.0, op=None) -> NDArray:
    """A new NDArray: reduction of every worker's tensor (default: the average)."""
    _check_tensor(tensor, "allreduce")
    out = NDArray(np.array(tensor._data, copy=True, order="C"), tensor.context)
    return allreduce_(out, average, name, priority, prescale_factor, postscale_factor, op)


def allgather(tensor: NDArray, name=None, priority: int = 0) -> NDArray:
    """Concatenation along the first axis of every worker's tensor, in rank order (the first
    dimensions may differ between workers)."""
    _check_tensor(tensor, "allgather")
    data = _group().allgather(np.ascontiguousarray(tensor._data),
                              f"allgather{'' if name is None else ' ' + str(name)}")
    return NDArray(np.array(data, copy=True), tensor.context)


def broadcast_(tensor: NDArray, root_rank: int = 0, name=None, priority: int = 0) -> NDArray:
    """In place: tensor = root_rank's tensor."""
    _check_tensor(tensor, "broadcast")
    g = _group()
    _comm._check_root(root_rank, g.size)
    meta = g.allgather_obj((tuple(tensor.shape), tensor._data.dtype.name), "broadcast")
    for r, m in enumerate(meta):
        if m != meta[root_rank]:
            raise MXNetError(f"broadcast: tensors differ between workers: rank {r} has {m}, "
                             f"root has {meta[root_rank]}")
    buf = np.ascontiguousarray(writable(tensor._data))
    g.bcast([buf], root_rank, f"broadcast{'' if name is None else ' ' + str(name)}")
    if buf is not tensor._data:
        tensor._data[...] = buf
    return tensor


def broadcast(tensor: NDArray, root_rank: int = 0, name=None, priority: int = 0) -> NDArray:
    """A new NDArray holding root_rank's tensor."""
    _check_tensor(tensor, "broadcast")
    out = NDArray(np.array(tensor._data, copy=True, order="C"), tensor.context)
    return broadcast_(out, root_rank, name, priority)


def broadcast_parameters(params, root_rank: int = 0, prefix=None) -> None:
    """Give every worker root_rank's parameter values.

    `params`: a dict of name -> NDArray (e.g. Module.get_params()[0]) or a Gluon ParameterDict /
    dict of Parameters (every context's copy is set; a Parameter whose initialization is deferred
    is broadcast as soon as it is initialized)."""
    if not hasattr(params, "items"):
        raise MXNetError(f"broadcast_parameters: expected a dict or ParameterDict, got {type(params).__name__}")
    items = sorted(params.items(), key=lambda kv: str(kv[0]))
    for name, p in items:
        tag = f"{prefix or ''}{name}"
        if isinstance(p, NDArray):
            broadcast_(p, root_rank, tag)
            continue
        if not hasattr(p, "list_data"):
            raise MXNetError(f"broadcast_parameters: {name!r} is neither an NDArray nor a Parameter")
        if getattr(p, "_deferred_init", ()):
            _broadcast_when_initialized(p, root_rank, tag)
            continue
        arrays = p.list_data()
        broadcast_(arrays[0], root_rank, tag)
        for a in arrays[1:]:
            writable(a._data)[...] = arrays[0]._data


def _broadcast_when_initialized(param, root_rank: int, tag: str) -> None:
    init_impl = param._init_impl

    def wrapped(*args, **kwargs):
        init_impl(*args, **kwargs)
        arrays = param.list_data()
        broadcast_(arrays[0], root_rank, tag)
        for a in arrays[1:]:
            writable(a._data)[...] = arrays[0]._data
        param._init_impl = init_impl

    param._init_impl = wrapped


def _reduction_buffer(grad: np.ndarray) -> np.ndarray:
    """Where a parameter's gradients are summed and allreduced: the first gradient itself when
    it is C-contiguous and writeable (no copy; every gradient is overwritten with the result
    anyway), else a C-contiguous copy of it."""
    if grad.flags.c_contiguous and grad.flags.writeable:
        return grad
    return np.array(grad, copy=True, order="C")


def _make_trainer_class():
    from .gluon.trainer import Trainer

    class DistributedTrainer(Trainer):
        """gluon.Trainer whose gradients are averaged over the workers (allreduce) before the
        update; no KVStore. `gradient_predivide_factor` splits the averaging into a division
        before and after the sum, as Horovod's."""

        def __init__(self, params, optimizer, optimizer_params=None, compression=None,
                     gradient_predivide_factor: float = 1.0, prefix=None):
            if compression not in (None, "none"):
                raise MXNetError("DistributedTrainer: gradient compression is not supported; use "
                                 "compression=None")
            super().__init__(params, optimizer, optimizer_params=optimizer_params, kvstore=None)
            self._hvd_group = _group()
            self._predivide = float(gradient_predivide_factor)
            self._prefix = prefix or ""
            # averaging = summing, then dividing by size through the optimizer's rescale_grad
            self._scale /= self._hvd_group.size

        def _allreduce_grads(self):
            bufs, targets = [], []
            for param in self._params:
                if param.grad_req == "null":
                    continue
                grads = param.list_grad()
                acc = _reduction_buffer(grads[0]._data)
                for g in grads[1:]:
                    acc += g._data
                if self._predivide != 1.0:
                    acc /= acc.dtype.type(self._predivide)
                bufs.append(acc)
                targets.append(grads)
            if bufs:
                self._hvd_group.allreduce(bufs, bufs, "sum", f"{self._prefix}DistributedTrainer gradients")
            for acc, grads in zip(bufs, targets):
                if self._predivide != 1.0:
                    acc *= acc.dtype.type(self._predivide)
                for g in grads:
                    if g._data is not acc:
                        g._data[...] = acc

    return DistributedTrainer


def __getattr__(name: str):
    if name == "DistributedTrainer":
        cls = _make_trainer_class()
        globals()["DistributedTrainer"] = cls
        return cls
    raise AttributeError(f"module 'symjit.distributed' has no attribute {name!r}")
