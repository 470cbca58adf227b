"""MXNet 1.x optimizers: per-parameter learning rate / weight decay bookkeeping around the
registered update ops of `symjit.ops.optimizer_ops`.

Invariants: `update(index, weight, grad, state)` modifies `weight` and `state` in place
and never touches `grad`; `_update_count` advances once per parameter per step, and
`num_update` is the largest count (the lr scheduler's clock), as in MXNet.
"""
from __future__ import annotations

import contextvars
import math
import os
import pickle

import numpy as np

from ..base import MXNetError
from .. import autograd
from ..ndarray import NDArray, fastpath, invoke, zeros
from ..ndarray.write_guard import writable
from ..ndarray import random as _nd_random
from ..ndarray.sparse import BaseSparseNDArray, cast_storage as _cast_storage
from ..ops.registry import get_op

__all__ = ["Optimizer", "register", "create", "SGD", "NAG", "Adam", "AdamW", "AdaGrad", "AdaDelta",
           "RMSProp", "Ftrl", "Signum", "SignSGD", "LAMB", "SGLD", "FTML", "Adamax", "Nadam", "DCASGD",
           "Updater", "get_updater"]


class LRSchedulerDefinedWarning(MXNetError, UserWarning):
    """`set_learning_rate` on an optimizer driven by an LRScheduler (MXNet raises UserWarning)."""


class Optimizer:
    """Base class: learning rate, weight decay, gradient rescaling/clipping and multipliers."""

    opt_registry: dict[str, type] = {}

    def __init__(self, rescale_grad=1.0, param_idx2name=None, wd=0.0, clip_gradient=None,
                 learning_rate=None, lr_scheduler=None, sym=None, begin_num_update=0,
                 multi_precision=False, param_dict=None, aggregate_num=None, **kwargs):
        if kwargs:
            raise MXNetError(f"{type(self).__name__}: unexpected arguments {sorted(kwargs)}")
        self.rescale_grad = rescale_grad
        self.lr = learning_rate if learning_rate is not None else 0.01
        self.lr_scheduler = lr_scheduler
        if lr_scheduler is not None and learning_rate is not None:
            self.lr_scheduler.base_lr = learning_rate
        self.wd = wd
        self.lr_mult: dict = {}
        self.wd_mult: dict = {}
        self.begin_num_update = begin_num_update
        self.num_update = begin_num_update
        self._all_index_update_counts = {0: {}}
        self._index_update_count = self._all_index_update_counts[0]
        self.clip_gradient = clip_gradient
        self.multi_precision = multi_precision
        self.aggregate_num = aggregate_num or 0
        if param_idx2name is None:
            param_idx2name = {}
        if not isinstance(param_idx2name, dict):
            raise MXNetError("param_idx2name should be a dict of param indexes to names.")
        self.idx2name = param_idx2name.copy()
        self.sym_info = (sym.attr_dict(), sym.list_arguments()) if sym is not None else ()
        self.param_dict = param_dict if param_dict else {}
        self.set_lr_mult({})
        self.set_wd_mult({})

    # ---- registry -----------------------------------------------------------------------
    @staticmethod
    def register(klass: type) -> type:
        name = klass.__name__.lower()
        Optimizer.opt_registry[name] = klass
        return klass

    @staticmethod
    def create_optimizer(name: str, **kwargs) -> "Optimizer":
        if name.lower() not in Optimizer.opt_registry:
            raise MXNetError(f"Cannot find optimizer {name}; registered: {sorted(Optimizer.opt_registry)}")
        return Optimizer.opt_registry[name.lower()](**kwargs)

    # ---- learning rate and weight decay -----------------------------------------------------
    @property
    def learning_rate(self) -> float:
        return self.lr_scheduler(self.num_update) if self.lr_scheduler is not None else self.lr

    def set_learning_rate(self, lr: float) -> None:
        if self.lr_scheduler is not None:
            raise LRSchedulerDefinedWarning("LRScheduler of the optimizer has already been defined. Note that "
                             "set_learning_rate can mutate the value of the learning rate of the "
                             "optimizer only when the LRScheduler of the optimizer is undefined.")
        self.lr = lr

    def set_lr_mult(self, args_lr_mult: dict) -> None:
        self.lr_mult = {}
        if self.sym_info:
            attr, arg_names = self.sym_info
            for name in arg_names:
                if name in attr and "__lr_mult__" in attr[name]:
                    self.lr_mult[name] = float(attr[name]["__lr_mult__"])
        self.lr_mult.update(args_lr_mult)

    def set_wd_mult(self, args_wd_mult: dict) -> None:
        self.wd_mult = {}
        for n in self.idx2name.values():
            if not (n.endswith("_weight") or n.endswith("_gamma")):
                self.wd_mult[n] = 0.0
        if self.sym_info:
            attr, arg_names = self.sym_info
            for name in arg_names:
                if name in attr and "__wd_mult__" in attr[name]:
                    self.wd_mult[name] = float(attr[name]["__wd_mult__"])
        self.wd_mult.update(args_wd_mult)

    def _set_current_context(self, device_id) -> None:
        """Use the update counts of device `device_id` (each device's Updater counts its own
        updates, so several contexts do not advance the schedule several times per step)."""
        if device_id not in self._all_index_update_counts:
            self._all_index_update_counts[device_id] = {}
        self._index_update_count = self._all_index_update_counts[device_id]

    def _update_count(self, index) -> None:
        indices = index if isinstance(index, (list, tuple)) else [index]
        for idx in indices:
            if idx not in self._index_update_count:
                self._index_update_count[idx] = self.begin_num_update
            self._index_update_count[idx] += 1
            self.num_update = max(self._index_update_count[idx], self.num_update)

    def _get_lr(self, index) -> float:
        lr = self.learning_rate
        if index in self.param_dict:
            lr *= self.param_dict[index].lr_mult
        elif index in self.lr_mult:
            lr *= self.lr_mult[index]
        elif index in self.idx2name:
            lr *= self.lr_mult.get(self.idx2name[index], 1.0)
        return lr

    def _get_wd(self, index) -> float:
        wd = self.wd
        if index in self.param_dict:
            wd *= self.param_dict[index].wd_mult
        elif index in self.wd_mult:
            wd *= self.wd_mult[index]
        elif index in self.idx2name:
            wd *= self.wd_mult.get(self.idx2name[index], 1.0)
        return wd

    def _get_lrs(self, indices) -> list:
        """The learning rate of each of `indices`."""
        return [self._get_lr(i) for i in indices]

    def _get_wds(self, indices) -> list:
        """The weight decay of each of `indices`."""
        return [self._get_wd(i) for i in indices]

    def _common(self, index) -> dict:
        """Attributes shared by the update ops: rescale_grad and clip_gradient (MXNet: falsy = off)."""
        kw = {"rescale_grad": self.rescale_grad}
        if self.clip_gradient:
            kw["clip_gradient"] = self.clip_gradient
        return kw

    # ---- states and updates -------------------------------------------------------------------
    def create_state(self, index, weight: NDArray):
        return None

    def create_state_multi_precision(self, index, weight: NDArray):
        if self.multi_precision and weight.dtype == np.float16:
            master = weight.astype(np.float32)
            return (master, self.create_state(index, master))
        return self.create_state(index, weight)

    def update(self, index, weight: NDArray, grad: NDArray, state) -> None:
        raise MXNetError(f"{type(self).__name__} must define update()")

    #: an aggregated update of several parameters gives exactly the results of updating them one
    #: after another (so the Updater may hand them over together when aggregate_num is 0)
    _fuse_updates = False

    #: row_sparse gradients update only their rows (MXNet's lazy update) when True; None: follow
    #: the optimizer's `lazy_update` attribute (False when it has none)
    _lazy_sparse = None

    def _is_lazy_for(self, grad) -> bool:
        if getattr(grad, "stype", "default") != "row_sparse":
            return False
        lazy = self._lazy_sparse
        return bool(getattr(self, "lazy_update", False) if lazy is None else lazy)

    def _update_sparse(self, index, weight, grad, state) -> None:
        """The update with csr / row_sparse operands: computed on dense copies (MXNet's sparse
        kernels are an optimisation of the same arithmetic), restricted to the gradient's stored
        rows for a lazy update, and written back into the sparse containers in place. A lazy
        update runs the update op on the gradient's stored rows only (`sparse_ops`' lazy update
        kernels, reached through the op's sparse dispatch)."""
        if self._is_lazy_for(grad) and _lazy_kernel_for(self):
            self.update(index, weight, grad, state)
            return
        rows = grad._arrays["indices"] if self._is_lazy_for(grad) else None
        w_dense = _dense(weight)
        g_dense = _dense(grad)
        leaves = _state_leaves(state)
        dense_state = _map_state(state, _dense)
        dense_leaves = _state_leaves(dense_state)
        before = [a.asnumpy() for a in [w_dense] + dense_leaves] if rows is not None else None
        self.update_multi_precision(index, w_dense, g_dense, dense_state)
        if rows is not None:
            keep = np.ones(weight.shape[0], dtype=bool)
            keep[rows] = False
            for arr, old in zip([w_dense] + dense_leaves, before):
                new = arr.asnumpy()
                new[keep] = old[keep]
                arr[:] = new
        for orig, dense in zip([weight] + leaves, [w_dense] + dense_leaves):
            if _is_sparse(orig):
                _cast_storage(dense, orig.stype).copyto(orig)

    def update_multi_precision(self, index, weight, grad, state) -> None:
        """Update one parameter, or each of lists of them (an aggregated update, which optimizers
        without multi-tensor kernels apply one parameter at a time)."""
        if isinstance(index, (tuple, list)):
            for i, w, g, st in zip(index, weight, grad, state):
                self.update_multi_precision(i, w, g, st)
            return
        if _is_sparse(weight) or _is_sparse(grad) or any(_is_sparse(s) for s in _state_leaves(state)):
            self._update_sparse(index, weight, grad, state)
            return
        if self.multi_precision and weight.dtype == np.float16:
            master, inner = state
            token = _PENDING.set(None)  # the copy below reads the updated master weight
            try:
                self.update(index, master, grad.astype(np.float32), inner)
            finally:
                _PENDING.reset(token)
            weight[:] = master.astype(np.float16)
        else:
            self.update(index, weight, grad, state)

    def __getstate__(self):
        return self.__dict__.copy()


register = Optimizer.register


def create(name, **kwargs) -> Optimizer:
    """Create an optimizer by registered name ('sgd', 'adam', ...) or pass one through."""
    if isinstance(name, Optimizer):
        return name
    return Optimizer.create_optimizer(name, **kwargs)


def _lazy_kernel_for(optimizer) -> bool:
    """Whether the optimizer's update goes through an op with a lazy row_sparse kernel (and no
    fp16 master copy): then `update` on the sparse arrays themselves is the lazy update."""
    return type(optimizer).update in (SGD.update, Adam.update, AdaGrad.update, Ftrl.update) and \
        not optimizer.multi_precision and type(optimizer) is not NAG


def _zeros_like(weight) -> NDArray:
    return zeros(weight.shape, weight.context, weight.dtype)


def _sparse_state_like(weight, keep_storage: bool = True) -> NDArray:
    """A zero state in the weight's storage when `keep_storage` (MXNet's optimizers that have
    lazy row_sparse kernels: those kernels need the states in the weight's storage), dense
    otherwise."""
    if keep_storage and _is_sparse(weight):
        return zeros(weight.shape, weight.context, weight.dtype, stype=weight.stype)
    return _zeros_like(weight)


def _is_sparse(x) -> bool:
    return isinstance(x, BaseSparseNDArray)


def _any_sparse(*seqs) -> bool:
    """Whether any array of the sequences is sparse (a plain loop: called per step on every
    parameter's weight and gradient)."""
    for seq in seqs:
        for a in seq:
            if isinstance(a, BaseSparseNDArray):
                return True
    return False


def _dense(x):
    """A dense NDArray holding `x`'s values (`x` itself when it is dense)."""
    return NDArray(x.asnumpy(), x.context) if _is_sparse(x) else x


def _state_leaves(state) -> list:
    """The arrays of an optimizer state (None, an array, or nested tuples/lists of them)."""
    if state is None:
        return []
    if isinstance(state, (tuple, list)):
        return [leaf for s in state for leaf in _state_leaves(s)]
    return [state] if isinstance(state, (NDArray, BaseSparseNDArray)) else []


def _map_state(state, fn):
    if isinstance(state, (tuple, list)):
        return type(state)(_map_state(s, fn) for s in state)
    return fn(state) if isinstance(state, (NDArray, BaseSparseNDArray)) else state


class _PendingUpdates:
    """Compiled updates collected while an `Updater` applies a list of parameters, run together
    by `flush` (one multi-tensor native call per kernel, like MXNet's aggregated
    `multi_sgd_update`). Invariant: no pending update reads or writes a buffer another pending
    update writes (an update that would is preceded by a flush), so running them together
    equals running them one after another."""

    def __init__(self, prepared_cache: "_PreparedCache | None" = None):
        self.updates: list = []
        self.read: set = set()
        self.written: set = set()
        self.prepared_cache = prepared_cache

    def add(self, prepared) -> None:
        reads, writes = prepared.read_ids, prepared.write_ids
        if not (reads.isdisjoint(self.written) and writes.isdisjoint(self.read)):
            self.flush()
        self.updates.append(prepared)
        self.read |= reads
        self.written |= writes

    def flush(self) -> None:
        updates, self.updates = self.updates, []
        self.read, self.written = set(), set()
        if updates:
            cache = self.prepared_cache
            fastpath.run_updates(updates, cache.run_plans if cache is not None else None)


class _PreparedCache:
    """The prepared compiled updates of an `Updater`'s multi-tensor ops, reused from step to step.
    Key: the op name, its attributes (hyperparameters included: learning rates, weight decays,
    momentum, gradient scale and clipping) and the identities of the numpy buffers (weights,
    gradients, states). The entries hold those buffers, so no live buffer can take a cached one's
    id: a hit is the same buffers with the same attributes, hence the same prepared updates
    (every change of a hyperparameter or a reallocated buffer is a miss). Entries not used by an
    `Updater` call are dropped at its end (`prune`): reallocated buffers are not kept alive."""

    def __init__(self):
        self.entries: dict = {}
        self.used: set = set()
        self.run_plans: dict = {}   # `fastpath.run_updates`' plans of lists of these entries

    def get(self, key):
        found = self.entries.get(key)
        if found is not None:
            self.used.add(key)
        return found

    def put(self, key, prepared: list) -> None:
        self.entries[key] = prepared
        self.used.add(key)

    def prune(self) -> None:
        if len(self.used) != len(self.entries):
            self.entries = {k: v for k, v in self.entries.items() if k in self.used}
            # a plan holds its updates: keep only plans of kept updates, release the others
            kept = {id(u) for prepared in self.entries.values() for u in prepared}
            self.run_plans = {k: p for k, p in self.run_plans.items() if kept.issuperset(k)}
        self.used = set()


def _prepared_key(op_name: str, datas: list, attrs: dict):
    """`_PreparedCache` key of a multi-tensor update, or None when an attribute is unhashable."""
    try:
        key = (op_name, tuple(map(id, datas)), tuple(sorted(attrs.items())))
        hash(key)
    except TypeError:
        return None
    return key


#: the `_PendingUpdates` of the Updater call in progress on this thread (None: apply at once)
_PENDING: contextvars.ContextVar = contextvars.ContextVar("symjit_pending_updates", default=None)


def _apply(op_name: str, weight: NDArray, grad: NDArray, states, **attrs) -> None:
    """weight and states <- update op `op_name` (in place). Plain same-context NDArrays outside
    autograd recording go straight to the compiled update kernel (deferred to the end of the
    `Updater` call in progress, if any); anything else (and every error case) takes the
    general `invoke` path at once."""
    arrays = [weight, grad, *states]
    ctx = weight._ctx
    if not autograd.is_recording() and all(type(a) is NDArray and (a._ctx is ctx or a._ctx == ctx)
                                           for a in arrays):
        datas = [a._data for a in arrays]
        for d in datas[:1] + datas[2:]:   # written in place: thaw what inference plans froze
            writable(d)
        prepared = fastpath.prepare_update_raw(op_name, attrs, datas)
        if prepared is not None:
            pending = _PENDING.get()
            if pending is not None:
                pending.add(prepared)
            else:
                fastpath.run_updates([prepared])
            return
    invoke(op_name, arrays, attrs, out=weight)


def _plain_datas(arrays: list, ctx) -> list | None:
    """The numpy buffers of `arrays` when all are plain NDArrays on `ctx`, else None."""
    datas = []
    for a in arrays:
        if type(a) is not NDArray:
            return None
        c = a._ctx
        if c is not ctx and (c.device_typeid != ctx.device_typeid or c.device_id != ctx.device_id):
            return None   # (Context equality, without its method call)
        datas.append(a._data)
    return datas


def _apply_multi(op_name: str, groups: list, trailing: list, **attrs) -> None:
    """Multi-tensor update op `op_name` (`ops.optimizer_multi.MultiUpdate`) over `groups` =
    [[weight, grad, states...], ...] (and `trailing` inputs: the preloaded ops' lrs and wds), the
    weights and states written in place. Plain same-context NDArrays outside autograd recording,
    no buffer used twice, take the compiled kernel of the op's single-tensor update once per
    group (the op's `split`: one multi-tensor native call, deferred to the end of the `Updater`
    call in progress, if any); anything else (and every error case) runs the op itself through
    `invoke`."""
    weights = [grp[0] for grp in groups]
    flat = [a for grp in groups for a in grp] + list(trailing)
    pending = _PENDING.get()
    cache = pending.prepared_cache if pending is not None and not trailing else None
    key = prepared = None
    if cache is not None and groups and not autograd.is_recording():
        datas = _plain_datas(flat, groups[0][0]._ctx)
        key = None if datas is None else _prepared_key(op_name, datas, attrs)
        prepared = None if key is None else cache.get(key)
        if prepared is not None:
            k = len(groups[0])
            for i, d in enumerate(datas[:k * len(groups)]):   # written in place (not the
                if i % k != 1 and not d.flags.writeable:         # gradients): thaw what
                    writable(d)                                   # inference plans froze since
    if prepared is None:
        prepared = _prepare_multi(op_name, groups, flat, trailing, attrs)
        if prepared is not None and key is not None:
            cache.put(key, prepared)
    if prepared is None:
        invoke(op_name, flat, attrs, out=weights)
        return
    if pending is None:
        fastpath.run_updates(prepared)
    else:
        for p in prepared:
            pending.add(p)


def _prepare_multi(op_name: str, groups: list, flat: list, trailing: list, attrs: dict) -> list | None:
    """The compiled single-tensor updates equal to the multi-tensor op over plain same-context
    NDArrays outside autograd recording, no buffer used twice (`fastpath.prepare_multi_update`),
    or None for the general path."""
    if not groups or autograd.is_recording():
        return None
    datas = _plain_datas(flat, groups[0][0]._ctx)
    if datas is None or len({id(d) for d in datas}) != len(datas):
        return None
    k = len(groups[0])
    group_datas = [datas[i * k:(i + 1) * k] for i in range(len(groups))]
    for d in group_datas:
        for x in d[:1] + d[2:]:   # written in place: thaw what inference plans froze
            writable(x)
    return fastpath.prepare_multi_update(get_op(op_name), attrs, group_datas, datas[len(datas) - len(trailing):]
                                         if trailing else [])


def _as_lists(indices, weights, grads, states) -> tuple[list, list, list, list]:
    """MXNet's optimizers take one parameter or lists of them (aggregated updates)."""
    if isinstance(indices, (tuple, list)):
        return list(indices), list(weights), list(grads), list(states)
    return [indices], [weights], [grads], [states]


def _env_aggregate(clamp: bool = False) -> int:
    """MXNet's aggregation size MXNET_OPTIMIZER_AGGREGATION_SIZE (clipped to [1, 45] with `clamp`,
    as LAMB does), or 0 when unset: then the Updater hands the optimizer one parameter at a time
    (each still one multi-tensor kernel call where the optimizer has one) and a Gluon Trainer
    keeps its default of updating on the kvstore."""
    value = os.getenv("MXNET_OPTIMIZER_AGGREGATION_SIZE")
    if value is None:
        return 0
    return max(1, min(45, int(value))) if clamp else int(value)


@register
class SGD(Optimizer):
    """SGD with optional momentum, MXNet 1.9.1's: `sgd_update` / `sgd_mom_update` per parameter,
    `mp_sgd_update` / `mp_sgd_mom_update` on float32 master copies of float16 weights with
    multi_precision; dense parameters take MXNet's `multi_[mp_]sgd[_mom]_update` kernel, one call
    per chunk of `aggregate_num` of them (MXNET_OPTIMIZER_AGGREGATION_SIZE by default, see
    `_env_aggregate`), or of one parameter."""

    #: (plain, multi-precision) single-tensor ops with and without momentum
    _single_ops = {(False, False): "sgd_update", (False, True): "sgd_mom_update",
                   (True, False): "mp_sgd_update", (True, True): "mp_sgd_mom_update"}
    #: the multi-tensor op of the same keys; None: aggregated updates run per parameter
    _multi_ops: dict | None = {(mp, mom): f"multi_{'mp_' if mp else ''}sgd{'_mom' if mom else ''}_update"
                               for mp in (False, True) for mom in (False, True)}

    _fuse_updates = True

    def __init__(self, momentum=0.0, lazy_update=True, aggregate_num=None, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.lazy_update = lazy_update
        self.aggregate_num = _env_aggregate() if aggregate_num is None else aggregate_num

    def create_state(self, index, weight):
        return _sparse_state_like(weight, self.lazy_update) if self.momentum != 0.0 else None

    def create_state_multi_precision(self, index, weight):
        """(momentum, float32 master weight) for fp16 weights with multi_precision, as MXNet's
        `mp_sgd_mom_update` takes them; the momentum is None without momentum."""
        if self.multi_precision and weight.dtype == np.float16:
            master = weight.astype(np.float32)
            return (self.create_state(index, master), master)
        return self.create_state(index, weight)

    def _kwargs(self, index) -> dict:
        """rescale_grad, momentum (when positive) and clip_gradient (when set), as MXNet passes them."""
        kw = self._common(index)
        if self.momentum > 0:
            kw["momentum"] = self.momentum
        return kw

    def _update_impl(self, indices, weights, grads, states, multi_precision=False) -> None:
        indices, weights, grads, states = _as_lists(indices, weights, grads, states)
        self._update_count(indices)
        lrs, wds = self._get_lrs(indices), self._get_wds(indices)
        self._apply_updates(weights, grads, states, lrs, wds, self._kwargs(indices[0]), multi_precision)

    def _apply_updates(self, weights, grads, states, lrs, wds, kwargs, mp, preloaded=False) -> None:
        """The update ops for the given parameters: one multi-tensor op per `aggregate_num` of
        them when all are dense and the optimizer has one, else the single op per parameter."""
        multi = self._multi_ops
        aggregate = multi is not None and len(weights) > 0 and not _any_sparse(weights, grads)
        mom = self.momentum > 0
        if aggregate:
            name = ("preloaded_" if preloaded else "") + multi[(mp, mom)]
            step = self.aggregate_num if self.aggregate_num > 0 else len(weights)
            for s in range(0, len(weights), step):
                groups = [[w, g, *self._state_arrays(st, mp, mom)]
                          for w, g, st in zip(weights[s:s + step], grads[s:s + step], states[s:s + step])]
                rates = ([NDArray(np.asarray(lrs[s:s + step], np.float32), weights[0].context),
                          NDArray(np.asarray(wds[s:s + step], np.float32), weights[0].context)]
                         if preloaded else [])
                extra = {} if preloaded else {"lrs": tuple(lrs[s:s + step]), "wds": tuple(wds[s:s + step])}
                _apply_multi(name, groups, rates, num_weights=len(groups), **kwargs, **extra)
            return
        for w, g, st, lr, wd in zip(weights, grads, states, lrs, wds):
            has_mom = (st[0] if mp else st) is not None
            op = self._single_ops[(mp, has_mom)]
            kw = dict(kwargs, lr=lr, wd=wd)
            if op in ("sgd_update", "sgd_mom_update"):
                kw["lazy_update"] = self.lazy_update
            _apply(op, w, g, self._state_arrays(st, mp, has_mom), **kw)

    @staticmethod
    def _state_arrays(state, mp: bool, mom: bool) -> list:
        """The op inputs after weight and grad: [mom][, weight32] (MXNet's order)."""
        if mp:
            return [state[0], state[1]] if mom else [state[1]]
        return [state] if mom else []

    def update(self, index, weight, grad, state):
        self._update_impl(index, weight, grad, state, multi_precision=False)

    def update_multi_precision(self, index, weight, grad, state) -> None:
        ws = weight if isinstance(index, (tuple, list)) else [weight]
        gs = grad if isinstance(index, (tuple, list)) else [grad]
        if not isinstance(index, (tuple, list)) and (
                _is_sparse(weight) or _is_sparse(grad) or any(_is_sparse(s) for s in _state_leaves(state))):
            self._update_sparse(index, weight, grad, state)
            return
        if isinstance(index, (tuple, list)) and _any_sparse(ws, gs):
            for i, w, g, st in zip(index, weight, grad, state):
                self.update_multi_precision(i, w, g, st)
            return
        mp = bool(ws) and self.multi_precision and ws[0].dtype == np.float16
        self._update_impl(index, weight, grad, state, multi_precision=mp)


@register
class NAG(SGD):
    """Nesterov accelerated gradient, MXNet 1.9.1's: `nag_mom_update` (`sgd_update` without
    momentum), `mp_nag_mom_update` / `mp_sgd_update` with multi_precision on float16 weights; no
    multi-tensor kernel (aggregated updates run per parameter; aggregate_num defaults to 0)."""

    _single_ops = {(False, False): "sgd_update", (False, True): "nag_mom_update",
                   (True, False): "mp_sgd_update", (True, True): "mp_nag_mom_update"}
    _multi_ops = None

    def __init__(self, momentum=0.0, aggregate_num=0, **kwargs):
        super().__init__(momentum=momentum, aggregate_num=aggregate_num, **kwargs)


@register
class Adam(Optimizer):
    """Adam (Kingma & Ba), bias correction folded into the learning rate as MXNet does."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, lazy_update=True,
                 **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.lazy_update = lazy_update

    def create_state(self, index, weight):
        return (_sparse_state_like(weight, self.lazy_update), _sparse_state_like(weight, self.lazy_update))

    def update(self, index, weight, grad, state):
        self._update_count(index)
        t = self._index_update_count[index]
        lr = self._get_lr(index) * math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
        _apply("adam_update", weight, grad, state, lr=lr, wd=self._get_wd(index), beta1=self.beta1,
               beta2=self.beta2, epsilon=self.epsilon, **self._common(index))


@register
class AdamW(Optimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter); `eta` scales the whole step and
    the learning rate carries Adam's bias correction. `_adamw_update` per parameter; float16
    weights with multi_precision take `_mp_adamw_update` on their float32 master copies, and
    aggregated updates (`aggregate_num` > 0, lists of dense parameters) one
    `_multi_[mp_]adamw_update` call per chunk. The fused kernels read the gradient scale from an
    array and skip the update when it is NaN, Inf or 0."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, eta=1.0, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon, self.eta = beta1, beta2, epsilon, eta

    def create_state(self, index, weight):
        return (_zeros_like(weight), _zeros_like(weight))

    def _step_attrs(self, index) -> tuple[float, float]:
        """(bias-corrected lr, wd) of `index` after counting its update."""
        self._update_count(index)
        t = self._index_update_count[index]
        return self._get_lr(index) * math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t), self._get_wd(index)

    def _fused_attrs(self) -> dict:
        kw = {"beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon}
        if self.clip_gradient:
            kw["clip_gradient"] = self.clip_gradient
        return kw

    def _scale_array(self, like) -> NDArray:
        return NDArray(np.array([self.rescale_grad], np.float32), like.context)

    def update(self, index, weight, grad, state):
        lr, wd = self._step_attrs(index)
        _apply("_adamw_update", weight, grad, state, lr=lr, wd=wd, beta1=self.beta1,
               beta2=self.beta2, epsilon=self.epsilon, eta=self.eta, **self._common(index))

    def update_multi_precision(self, index, weight, grad, state) -> None:
        lists = isinstance(index, (tuple, list))
        ws, gs = (weight, grad) if lists else ([weight], [grad])
        if not ws or _any_sparse(ws, gs) or (lists and self.aggregate_num <= 0):
            super().update_multi_precision(index, weight, grad, state)
            return
        mp = self.multi_precision and ws[0].dtype == np.float16
        if not lists and not mp:
            self.update(index, weight, grad, state)
            return
        if not lists:
            lr, wd = self._step_attrs(index)
            master, (mean, var) = state
            invoke("_mp_adamw_update", [weight, grad, mean, var, master, self._scale_array(weight)],
                   dict(self._fused_attrs(), lr=lr, wd=wd, eta=self.eta), out=weight)
            return
        rates = [self._step_attrs(i) for i in index]
        flat = []
        for w, g, st in zip(weight, grad, state):
            flat += [w, g, *st[1], st[0]] if mp else [w, g, *st]
        invoke("_multi_mp_adamw_update" if mp else "_multi_adamw_update", flat + [self._scale_array(weight[0])],
               dict(self._fused_attrs(), lrs=tuple(r[0] for r in rates), wds=tuple(r[1] for r in rates),
                    etas=(self.eta,) * len(rates), num_weights=len(rates)), out=list(weight))


@register
class AdaGrad(Optimizer):
    """AdaGrad (Duchi et al.)."""

    _lazy_sparse = True

    def __init__(self, eps=1e-7, **kwargs):
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index, weight):
        return _sparse_state_like(weight)

    def update(self, index, weight, grad, state):
        self._update_count(index)
        _apply("_adagrad_update", weight, grad, [state], lr=self._get_lr(index), wd=self._get_wd(index),
               epsilon=self.float_stable_eps, **self._common(index))


@register
class RMSProp(Optimizer):
    """RMSProp (Tieleman & Hinton), centered variant (Graves) with `centered=True`."""

    def __init__(self, learning_rate=0.001, gamma1=0.9, gamma2=0.9, epsilon=1e-8, centered=False,
                 clip_weights=None, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1, self.gamma2, self.epsilon = gamma1, gamma2, epsilon
        self.centered = centered
        self.clip_weights = clip_weights

    def create_state(self, index, weight):
        if self.centered:
            return (_zeros_like(weight), _zeros_like(weight), _zeros_like(weight))
        return (_zeros_like(weight),)

    def update(self, index, weight, grad, state):
        self._update_count(index)
        kw = dict(self._common(index), lr=self._get_lr(index), wd=self._get_wd(index),
                  gamma1=self.gamma1, epsilon=self.epsilon)
        if self.clip_weights:
            kw["clip_weights"] = self.clip_weights
        if self.centered:
            _apply("rmspropalex_update", weight, grad, state, gamma2=self.gamma2, **kw)
        else:
            _apply("rmsprop_update", weight, grad, state, **kw)


@register
class AdaDelta(Optimizer):
    """AdaDelta (Zeiler); the learning rate is not used, as in MXNet."""

    def __init__(self, rho=0.90, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.rho, self.epsilon = rho, epsilon

    def create_state(self, index, weight):
        return (_zeros_like(weight), _zeros_like(weight))

    def update(self, index, weight, grad, state):
        self._update_count(index)
        _apply("_adadelta_update", weight, grad, state, wd=self._get_wd(index), rho=self.rho,
               epsilon=self.epsilon, **self._common(index))


@register
class Ftrl(Optimizer):
    """FTRL-proximal."""

    _lazy_sparse = True

    def __init__(self, lamda1=0.01, learning_rate=0.1, beta=1, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.lamda1, self.beta = lamda1, beta

    def create_state(self, index, weight):
        return (_sparse_state_like(weight), _sparse_state_like(weight))

    def update(self, index, weight, grad, state):
        self._update_count(index)
        _apply("ftrl_update", weight, grad, state, lr=self._get_lr(index), wd=self._get_wd(index),
               lamda1=self.lamda1, beta=self.beta, **self._common(index))


@register
class Signum(Optimizer):
    """Signum: sign of the momentum (Bernstein et al.); SignSGD without momentum."""

    def __init__(self, learning_rate=0.01, momentum=0.9, wd_lh=0.0, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum, self.wd_lh = momentum, wd_lh

    def create_state(self, index, weight):
        return _zeros_like(weight) if self.momentum != 0.0 else None

    def update(self, index, weight, grad, state):
        self._update_count(index)
        kw = dict(self._common(index), lr=self._get_lr(index), wd=self._get_wd(index))
        if state is not None:
            _apply("signum_update", weight, grad, [state], momentum=self.momentum, wd_lh=self.wd_lh, **kw)
        else:
            _apply("signsgd_update", weight, grad, [], **kw)


@register
class SignSGD(Signum):
    def __init__(self, learning_rate=0.01, **kwargs):
        super().__init__(learning_rate=learning_rate, momentum=0.0, **kwargs)


@register
class LAMB(Optimizer):
    """LAMB (You et al.), MXNet 1.9.1's: `lamb_update_phase1` (Adam direction plus wd * w, mean
    and var updated in place), the trust ratio ||w|| / ||direction|| (r1 clipped to
    [lower_bound, upper_bound]), then `lamb_update_phase2`; float16 weights with multi_precision
    take the `mp_lamb_update_phase1/2` ops on their float32 master copies. Aggregated updates
    (lists; `aggregate_num` > 1, by default MXNET_OPTIMIZER_AGGREGATION_SIZE clipped to [1, 45])
    run one `_multi_[mp_]lamb_update` per chunk."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6, lower_bound=None,
                 upper_bound=None, bias_correction=True, aggregate_num=None, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.lower_bound, self.upper_bound = lower_bound, upper_bound
        self.bias_correction = bias_correction
        self.aggregate_num = _env_aggregate(clamp=True) if aggregate_num is None else aggregate_num

    def create_state(self, index, weight):
        return (_zeros_like(weight), _zeros_like(weight))

    def _phase1_attrs(self) -> dict:
        kw = {"beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon,
              "bias_correction": self.bias_correction, "rescale_grad": self.rescale_grad}
        if self.clip_gradient:
            kw["clip_gradient"] = self.clip_gradient
        return kw

    def _bounds(self) -> dict:
        kw = {}
        if self.lower_bound:
            kw["lower_bound"] = self.lower_bound
        if self.upper_bound:
            kw["upper_bound"] = self.upper_bound
        return kw

    def update(self, index, weight, grad, state):
        self._update_impl(index, weight, grad, state, multi_precision=False)

    def update_multi_precision(self, index, weight, grad, state) -> None:
        ws = weight if isinstance(index, (tuple, list)) else [weight]
        gs = grad if isinstance(index, (tuple, list)) else [grad]
        if _any_sparse(ws, gs):   # computed densely, per parameter
            if isinstance(index, (tuple, list)):
                for i, w, g, st in zip(index, weight, grad, state):
                    self.update_multi_precision(i, w, g, st)
            else:
                self._update_sparse(index, weight, grad, state)
            return
        mp = bool(ws) and self.multi_precision and ws[0].dtype == np.float16
        self._update_impl(index, weight, grad, state, multi_precision=mp)

    def _update_impl(self, index, weight, grad, state, multi_precision) -> None:
        if not isinstance(index, (tuple, list)):
            self._update_one(index, weight, grad, state, multi_precision)
        elif self.aggregate_num <= 1:
            for i, w, g, st in zip(index, weight, grad, state):
                self._update_one(i, w, g, st, multi_precision)
        else:
            self._update_aggregated(list(index), list(weight), list(grad), list(state), multi_precision)

    def _update_one(self, index, weight, grad, state, mp: bool) -> None:
        self._update_count(index)
        lr, wd, t = self._get_lr(index), self._get_wd(index), self._index_update_count[index]
        attrs = dict(self._phase1_attrs(), t=t, wd=wd)
        if mp:
            master, (mean, var) = state
            g = invoke("mp_lamb_update_phase1", [weight, grad, mean, var, master], attrs)
            invoke("mp_lamb_update_phase2", [weight, g, _norm(master), _norm(g), master],
                   dict(self._bounds(), lr=lr), out=weight)
        else:
            mean, var = state
            g = invoke("lamb_update_phase1", [weight, grad, mean, var], attrs)
            invoke("lamb_update_phase2", [weight, g, _norm(weight), _norm(g)], dict(self._bounds(), lr=lr),
                   out=weight)

    def _update_aggregated(self, indices, weights, grads, states, mp: bool) -> None:
        self._update_count(indices)
        steps = [self._index_update_count[i] for i in indices]
        lrs, wds = self._get_lrs(indices), self._get_wds(indices)
        attrs = dict(self._phase1_attrs(), **self._bounds())
        op = "_multi_mp_lamb_update" if mp else "_multi_lamb_update"
        n = self.aggregate_num
        for s in range(0, len(weights), n):
            flat = []
            for w, g, st in zip(weights[s:s + n], grads[s:s + n], states[s:s + n]):
                flat += [w, g, *st[1], st[0]] if mp else [w, g, *st]
            k = len(weights[s:s + n])
            invoke(op, flat, dict(attrs, step_count=tuple(steps[s:s + n]), learning_rates=tuple(lrs[s:s + n]),
                                  wds=tuple(wds[s:s + n]), num_tensors=k), out=weights[s:s + n])


def _norm(x: NDArray) -> NDArray:
    """||x||_2 as a (1,) array of x's float dtype (float32 for float16), accumulated in float64."""
    dtype = np.float32 if x.dtype == np.float16 else x.dtype
    return NDArray(np.array([np.linalg.norm(x.asnumpy().astype(np.float64).ravel())], dtype), x.context)


def _clip(x: NDArray, bound) -> NDArray:
    from .. import ndarray as nd
    return nd.clip(x, -bound, bound) if bound is not None else x


@register
class SGLD(Optimizer):
    """Stochastic Gradient Riemannian Langevin Dynamics (Welling & Teh): half an SGD step plus
    Gaussian noise of variance lr, drawn from `mx.random` (seeded by `mx.random.seed`)."""

    def update(self, index, weight, grad, state):
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        grad = _clip(grad * self.rescale_grad, self.clip_gradient)
        weight[:] += -lr / 2 * (grad + wd * weight)
        weight[:] += _nd_random.normal(0, math.sqrt(lr), shape=weight.shape, dtype=weight.dtype,
                                       ctx=weight.context)


@register
class FTML(Optimizer):
    """Follow the Moving Leader (Zheng & Kwok); states (d, v, z) as MXNet's `ftml_update`."""

    def __init__(self, beta1=0.6, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(**kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon

    def create_state(self, index, weight):
        return (_zeros_like(weight), _zeros_like(weight), _zeros_like(weight))

    def update(self, index, weight, grad, state):
        from .. import ndarray as nd
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        grad = _clip(grad * self.rescale_grad + wd * weight, self.clip_gradient)
        prev_d, prev_v, prev_z = state
        v_t = self.beta2 * prev_v + (1 - self.beta2) * nd.square(grad)
        d_t = (1 - self.beta1 ** t) / lr * (nd.sqrt(v_t / (1 - self.beta2 ** t)) + self.epsilon)
        sigma_t = d_t - self.beta1 * prev_d
        z_t = self.beta1 * prev_z + (1 - self.beta1) * grad - sigma_t * weight
        weight[:] = -z_t / d_t
        prev_d[:] = d_t
        prev_v[:] = v_t
        prev_z[:] = z_t


@register
class Adamax(Optimizer):
    """AdaMax (Kingma & Ba, section 7): Adam with the infinity norm."""

    def __init__(self, learning_rate=0.002, beta1=0.9, beta2=0.999, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2 = beta1, beta2

    def create_state(self, index, weight):
        return (_zeros_like(weight), _zeros_like(weight))

    def update(self, index, weight, grad, state):
        from .. import ndarray as nd
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        lr /= (1. - self.beta1 ** t)
        grad = _clip(grad * self.rescale_grad + wd * weight, self.clip_gradient)
        m_t, u_t = state
        m_t[:] *= self.beta1
        m_t[:] += (1. - self.beta1) * grad
        u_t[:] = nd.maximum(self.beta2 * u_t, nd.abs(grad))
        weight[:] -= lr * m_t / u_t


@register
class Nadam(Optimizer):
    """Adam with Nesterov momentum (Dozat), with the momentum schedule of MXNet's Nadam."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, schedule_decay=0.004,
                 **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.schedule_decay = schedule_decay
        self.m_schedule = 1.

    def create_state(self, index, weight):
        return (_zeros_like(weight), _zeros_like(weight))

    def update(self, index, weight, grad, state):
        from .. import ndarray as nd
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        grad = _clip(grad * self.rescale_grad + wd * weight, self.clip_gradient)
        momentum_t = self.beta1 * (1. - 0.5 * (pow(0.96, t * self.schedule_decay)))
        momentum_t_1 = self.beta1 * (1. - 0.5 * (pow(0.96, (t + 1) * self.schedule_decay)))
        self.m_schedule = self.m_schedule * momentum_t
        m_schedule_next = self.m_schedule * momentum_t_1
        m_t, v_t = state
        m_t[:] *= self.beta1
        m_t[:] += (1. - self.beta1) * grad
        v_t[:] *= self.beta2
        v_t[:] += (1. - self.beta2) * grad * grad
        grad_prime = grad / (1. - self.m_schedule)
        m_t_prime = m_t / (1. - m_schedule_next)
        v_t_prime = v_t / (1. - pow(self.beta2, t))
        m_t_bar = (1. - momentum_t) * grad_prime + momentum_t_1 * m_t_prime
        weight[:] -= lr * m_t_bar / (nd.sqrt(v_t_prime) + self.epsilon)


@register
class DCASGD(Optimizer):
    """Delay-compensated asynchronous SGD (Zheng et al.); state (momentum or None, previous weight)."""

    def __init__(self, momentum=0.0, lamda=0.04, **kwargs):
        super().__init__(**kwargs)
        self.momentum, self.lamda = momentum, lamda
        self.weight_previous = {}

    def create_state(self, index, weight):
        mom = _zeros_like(weight) if self.momentum != 0.0 else None
        return (mom, weight.copy())

    def update(self, index, weight, grad, state):
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        grad = _clip(grad * self.rescale_grad, self.clip_gradient)
        mom, previous_weight = state
        step = -lr * (grad + wd * weight + self.lamda * grad * grad * (weight - previous_weight))
        if mom is not None:
            mom[:] *= self.momentum
            mom[:] += step
            step = mom
        previous_weight[:] = weight
        weight[:] += step


class Updater:
    """Applies an optimizer to (index, grad, weight) triples, creating states on first use."""

    def __init__(self, optimizer: Optimizer):
        self.optimizer = optimizer
        self.states: dict = {}
        self.states_synced: dict = {}

    def __call__(self, index, grad, weight) -> None:
        """Update the weights of `index` (one or a list) with `grad`, as MXNet 1.9.1's Updater:
        states are created on first use (and moved to the weight's context after `set_states`);
        with `optimizer.aggregate_num` > 0 the parameters are grouped by dtype, in chunks of
        aggregate_num, each chunk one `update_multi_precision` call (multi-tensor kernels);
        else one call per parameter. The compiled updates of one call run together at its end."""
        indices = list(index) if isinstance(index, (list, tuple)) else [index]
        grads = list(grad) if isinstance(grad, (list, tuple)) else [grad]
        weights = list(weight) if isinstance(weight, (list, tuple)) else [weight]
        if weights:
            self.optimizer._set_current_context(weights[0].context.device_id)
        for i, (idx, w) in enumerate(zip(indices, weights)):
            if isinstance(idx, bytes):
                indices[i] = idx = idx.decode()
            if idx not in self.states:
                self.states[idx] = self.optimizer.create_state_multi_precision(idx, w)
                self.states_synced[idx] = True
            elif not self.states_synced.get(idx, True):
                self.states[idx] = self.sync_state_context(self.states[idx], w.context)
                self.states_synced[idx] = True
        cache = self.__dict__.get("_prepared_cache")
        if cache is None:
            cache = self._prepared_cache = _PreparedCache()
        pending = _PendingUpdates(cache) if len(indices) > 1 else None
        token = _PENDING.set(pending)
        try:
            fused = self.optimizer.aggregate_num <= 0
            for idx, ws, gs in self._chunks(indices, weights, grads):
                if not isinstance(idx, list):
                    self.optimizer.update_multi_precision(idx, ws, gs, self.states[idx])
                elif fused:
                    self._update_fused(idx, ws, gs)
                else:
                    self.optimizer.update_multi_precision(idx, ws, gs, [self.states[i] for i in idx])
        finally:
            _PENDING.reset(token)
            if pending is not None:
                pending.flush()
                cache.prune()

    def _update_fused(self, indices, weights, grads) -> None:
        """Parameters the optimizer was not asked to aggregate, updated in one call (`_fuse_updates`:
        the same results). If that call fails (nothing is written then), the update counts are
        restored and the parameters are updated one by one, so those before the failing one are
        applied, as without fusion."""
        opt = self.optimizer
        counts, num_update = dict(opt._index_update_count), opt.num_update
        try:
            opt.update_multi_precision(indices, weights, grads, [self.states[i] for i in indices])
        except MXNetError:
            opt._index_update_count.clear()
            opt._index_update_count.update(counts)
            opt.num_update = num_update
            for i, w, g in zip(indices, weights, grads):
                opt.update_multi_precision(i, w, g, self.states[i])

    def _chunks(self, indices, weights, grads):
        """(index, weight, grad) per parameter, or with aggregation (index list, weight list,
        grad list) per chunk of at most aggregate_num parameters of one dtype."""
        agg = self.optimizer.aggregate_num
        if agg <= 0 and self.optimizer._fuse_updates and len(indices) > 1:
            agg = len(indices)   # the same results as one call per parameter, in one kernel call
        if agg <= 0:
            yield from zip(indices, weights, grads)
            return
        by_dtype: dict = {}
        for item in zip(indices, weights, grads):
            by_dtype.setdefault(np.dtype(item[1].dtype), []).append(item)
        for items in by_dtype.values():
            for s in range(0, len(items), agg):
                idx, ws, gs = (list(x) for x in zip(*items[s:s + agg]))
                yield idx, ws, gs

    def sync_state_context(self, state, context):
        if isinstance(state, NDArray):
            return state.as_in_context(context)
        if isinstance(state, (tuple, list)):
            synced = [self.sync_state_context(s, context) for s in state]
            return tuple(synced) if isinstance(state, tuple) else synced
        return state

    def set_states(self, states: bytes) -> None:
        loaded = pickle.loads(states)
        if isinstance(loaded, tuple) and len(loaded) == 2:
            self.states, self.optimizer = loaded
        else:
            self.states = loaded
        self.states_synced = dict.fromkeys(self.states.keys(), False)

    def get_states(self, dump_optimizer: bool = False) -> bytes:
        return pickle.dumps((self.states, self.optimizer) if dump_optimizer else self.states)


def get_updater(optimizer: Optimizer) -> Updater:
    return Updater(optimizer)
