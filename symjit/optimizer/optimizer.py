"""MXNet 1.x optimizers: per-parameter learning rate / weight decay bookkeeping around the
registered update ops of `symjit.ops.optimizer_ops`.

Invariants: `update(index, weight, grad, state)` modifies `weight` and `state` in place
and never touches `grad`; `_update_count` advances once per parameter per step, and
`num_update` is the largest count (the lr scheduler's clock), as in MXNet.
"""
from __future__ import annotations

import contextvars
import math
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

    def _update_many(self, indices: list, weights: list, grads: list, states: list) -> bool:
        """Update several parameters at once (MXNet's aggregated updates, `multi_sgd_update`);
        False, with nothing done, where the optimizer has no such path (then `update` runs
        per parameter). The base class has none."""
        return False

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


def _is_sparse(x) -> bool:
    return isinstance(x, BaseSparseNDArray)


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

    def __init__(self):
        self.updates: list = []
        self.read: set = set()
        self.written: set = set()

    def add(self, prepared) -> None:
        arrays = prepared.arrays
        reads = {id(a) for a in arrays}
        writes = {id(arrays[0])} | {id(a) for a in arrays[2:]}
        if reads & self.written or writes & self.read:
            self.flush()
        self.updates.append(prepared)
        self.read |= reads
        self.written |= writes

    def flush(self) -> None:
        updates, self.updates = self.updates, []
        self.read, self.written = set(), set()
        if updates:
            fastpath.run_updates(updates)


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


@register
class SGD(Optimizer):
    """SGD with optional momentum; MXNet's `sgd_update` / `sgd_mom_update`."""

    _momentum_op = "sgd_mom_update"

    def __init__(self, momentum=0.0, lazy_update=True, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.lazy_update = lazy_update

    def create_state(self, index, weight):
        return _zeros_like(weight) if self.momentum != 0.0 else None

    def create_state_multi_precision(self, index, weight):
        """(momentum, float32 master weight) for fp16 weights with multi_precision, as MXNet's
        `mp_sgd_mom_update` takes them; the momentum is None without momentum."""
        if self.multi_precision and weight.dtype == np.float16:
            master = weight.astype(np.float32)
            return (self.create_state(index, master), master)
        return self.create_state(index, weight)

    def update_multi_precision(self, index, weight, grad, state) -> None:
        if (self.multi_precision and weight.dtype == np.float16 and isinstance(state, (tuple, list))
                and not (_is_sparse(weight) or _is_sparse(grad))):
            mom, master = state
            token = _PENDING.set(None)
            try:
                self.update(index, master, grad.astype(np.float32), mom)
            finally:
                _PENDING.reset(token)
            weight[:] = master.astype(np.float16)
        else:
            super().update_multi_precision(index, weight, grad, state)

    def update(self, index, weight, grad, state):
        self._update_count(index)
        kw = dict(self._common(index), lr=self._get_lr(index), wd=self._get_wd(index))
        if state is not None:
            _apply(self._momentum_op, weight, grad, [state], momentum=self.momentum, **kw)
        else:
            _apply("sgd_update", weight, grad, [], **kw)

    def _update_many(self, indices, weights, grads, states) -> bool:
        """MXNet's aggregated SGD (multi_sgd_update / multi_sgd_mom_update): the counts first,
        then every parameter's learning rate and weight decay, then one multi-tensor kernel
        call for all (the same ops and attributes `update` applies one by one). fp16 weights
        with float32 masters take the per-parameter path."""
        if self.multi_precision or any(_is_sparse(a) for a in list(weights) + list(grads)):
            return False
        self._update_count(indices)
        common = self._common(indices[0])
        ctx = weights[0]._ctx if type(weights[0]) is NDArray else None
        fast = not autograd.is_recording()
        calls, datas_list, seen = {}, {}, set()
        for idx, w, g, state in zip(indices, weights, grads, states):
            kw = dict(common, lr=self._get_lr(idx), wd=self._get_wd(idx))
            if state is not None:
                name, arrays = self._momentum_op, [w, g, state]
                kw["momentum"] = self.momentum
            else:
                name, arrays = "sgd_update", [w, g]
            calls.setdefault(name, []).append((arrays, kw))
            if fast:
                if not all(type(a) is NDArray and (a._ctx is ctx or a._ctx == ctx) for a in arrays):
                    fast = False
                    continue
                datas = [a._data for a in arrays]
                for d in datas[:1] + datas[2:]:
                    writable(d)
                ids = {id(d) for d in datas}
                if ids & seen or len(ids) != len(datas):   # a repeated array: one at a time
                    fast = False
                seen |= ids
                datas_list.setdefault(name, []).append(datas)
        prepared = []
        for name, items in calls.items() if fast else ():
            p = fastpath.prepare_updates_raw(name, [kw for _, kw in items], datas_list[name])
            if p is None:
                fast = False
                break
            prepared += p
        if fast:
            fastpath.run_updates(prepared)
        else:   # the general path, parameter by parameter (batched where it can be)
            for name, items in calls.items():
                for arrays, kw in items:
                    _apply(name, arrays[0], arrays[1], arrays[2:], **kw)
        return True


@register
class NAG(SGD):
    """Nesterov accelerated gradient (SGD whose momentum step looks ahead)."""

    _momentum_op = "nag_mom_update"


@register
class Adam(Optimizer):
    """Adam (Kingma & Ba), bias correction folded into the learning rate as MXNet does."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, lazy_update=True,
                 **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.lazy_update = lazy_update

    def create_state(self, index, weight):
        return (_zeros_like(weight), _zeros_like(weight))

    def update(self, index, weight, grad, state):
        self._update_count(index)
        t = self._index_update_count[index]
        lr = self._get_lr(index) * math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
        _apply("adam_update", weight, grad, state, lr=lr, wd=self._get_wd(index), beta1=self.beta1,
               beta2=self.beta2, epsilon=self.epsilon, **self._common(index))


@register
class AdamW(Optimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter); `eta` scales the whole step."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, eta=1.0, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon, self.eta = beta1, beta2, epsilon, eta

    def create_state(self, index, weight):
        return (_zeros_like(weight), _zeros_like(weight))

    def update(self, index, weight, grad, state):
        self._update_count(index)
        t = self._index_update_count[index]
        lr = self._get_lr(index) * math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
        _apply("_adamw_update", weight, grad, state, lr=lr, wd=self._get_wd(index), beta1=self.beta1,
               beta2=self.beta2, epsilon=self.epsilon, eta=self.eta, **self._common(index))


@register
class AdaGrad(Optimizer):
    """AdaGrad (Duchi et al.)."""

    _lazy_sparse = True

    def __init__(self, eps=1e-7, **kwargs):
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index, weight):
        return _zeros_like(weight)

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
        return (_zeros_like(weight), _zeros_like(weight))

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
    """LAMB (You et al.): Adam direction scaled by the trust ratio ||w|| / ||step||."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6, lower_bound=None,
                 upper_bound=None, bias_correction=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.lower_bound, self.upper_bound = lower_bound, upper_bound
        self.bias_correction = bias_correction

    def create_state(self, index, weight):
        return (_zeros_like(weight), _zeros_like(weight))

    def update(self, index, weight, grad, state):
        self._update_count(index)
        t = self._index_update_count[index]
        g = invoke("lamb_update_phase1", [weight, grad, *state],
                   dict(self._common(index), beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon,
                        t=t, bias_correction=self.bias_correction, wd=self._get_wd(index)))
        r1 = NDArray(np.array([np.linalg.norm(weight._data.astype(np.float64))], dtype=weight._data.dtype),
                     weight.context)
        r2 = NDArray(np.array([np.linalg.norm(g._data.astype(np.float64))], dtype=weight._data.dtype),
                     weight.context)
        attrs = {"lr": self._get_lr(index)}
        if self.lower_bound:
            attrs["lower_bound"] = self.lower_bound
        if self.upper_bound:
            attrs["upper_bound"] = self.upper_bound
        invoke("lamb_update_phase2", [weight, g, r1, r2], attrs, out=weight)


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
        indices = index if isinstance(index, (list, tuple)) else [index]
        grads = grad if isinstance(grad, (list, tuple)) else [grad]
        weights = weight if isinstance(weight, (list, tuple)) else [weight]
        if weights:
            self.optimizer._set_current_context(weights[0].context.device_id)
        pending = _PendingUpdates() if len(indices) > 1 else None
        token = _PENDING.set(pending)
        try:
            for idx, w in zip(indices, weights):
                if idx not in self.states:
                    self.states[idx] = self.optimizer.create_state_multi_precision(idx, w)
                    self.states_synced[idx] = True
            if pending is None or not self.optimizer._update_many(
                    list(indices), list(weights), list(grads), [self.states[i] for i in indices]):
                for idx, g, w in zip(indices, grads, weights):
                    self.optimizer.update_multi_precision(idx, w, g, self.states[idx])
        finally:
            _PENDING.reset(token)
            if pending is not None:
                pending.flush()

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
