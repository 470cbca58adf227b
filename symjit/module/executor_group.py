"""MXNet 1.x's `DataParallelExecutorGroup`: one executor per context over slices of a batch.

The group binds `symbol` once per context; the batch (axis given by each input's layout, 0 by
default) is split across the contexts in proportion to `workload`. Parameters and their
gradients are separate arrays per context; Module keeps the replicas identical.

Sharing (for bucketing, `shared_group=`): a new group over the same contexts reuses the
shared group's parameter arrays and gradient arrays of the same name and shape (the same
memory, so an update through one group is seen by the other), and its input arrays come from
`shared_data_arrays`, one dict per context shared by every group of the family: an input whose
existing array is large enough is a reshaped view of it, otherwise a new array replaces it.

Invariants: `execs[i]` runs on `contexts[i]` over batch rows `slices[i]`; `grad_req[name]`
is the request every executor uses for argument `name`.
"""
from __future__ import annotations

import logging
from typing import Sequence

import numpy as np

from ..base import MXNetError
from ..io import DataDesc

__all__ = ["DataParallelExecutorGroup"]


def _descs(shapes) -> list:
    if shapes is None:
        return []
    return [s if isinstance(s, DataDesc) else DataDesc(s[0], s[1]) for s in shapes]


def split_batch(batch_size: int, workload: Sequence[float]) -> list[slice]:
    """Consecutive slices of [0, batch_size) with sizes proportional to `workload`
    (rounded; the last slice takes the remainder). Every slice is non-empty."""
    total = float(sum(workload))
    if batch_size < len(workload):
        raise MXNetError(f"executor group: batch size {batch_size} is smaller than the number of "
                         f"contexts {len(workload)}")
    sizes = [int(round(batch_size * w / total)) for w in workload]
    sizes[-1] = batch_size - sum(sizes[:-1])
    if any(s <= 0 for s in sizes):
        raise MXNetError(f"executor group: workload {list(workload)} leaves a context without rows "
                         f"of a batch of {batch_size}")
    out, start = [], 0
    for s in sizes:
        out.append(slice(start, start + s))
        start += s
    return out


def _merge(blocks, axes=None) -> list:
    """One array per block: a block's per-context arrays concatenated along its batch axis
    (`axes[k]`, default 0) on the first context (a single array is returned as is)."""
    from .. import ndarray as nd
    merged = []
    for k, block in enumerate(blocks):
        if len(block) == 1 or block[0] is None:
            merged.append(block[0])
        else:
            ctx = block[0].context
            axis = axes[k] if axes is not None and axes[k] >= 0 else 0
            merged.append(nd.concatenate([a.as_in_context(ctx) for a in block], axis=axis))
    return merged


def _take_slice(arr, sl, axis):
    """arr[..., sl, ...] along `axis` (a batch slice of an input or output gradient)."""
    if axis <= 0:
        return arr[sl]
    from .. import ndarray as nd
    return nd.slice_axis(arr, axis=axis, begin=sl.start, end=sl.stop)


class DataParallelExecutorGroup:
    """Executors of `symbol`, one per context, each over its slice of the batch."""

    def __init__(self, symbol, contexts, workload, data_shapes, label_shapes, param_names, for_training,
                 inputs_need_grad, shared_group=None, logger=logging, fixed_param_names=None, grad_req="write",
                 state_names=None, group2ctxs=None):
        self.symbol = symbol
        self.contexts = list(contexts)
        self.workload = list(workload) if workload is not None else [1] * len(self.contexts)
        if len(self.workload) != len(self.contexts):
            raise MXNetError(f"executor group: {len(self.workload)} workloads for {len(self.contexts)} contexts")
        self.param_names = list(param_names)
        self.arg_names = symbol.list_arguments()
        self.aux_names = symbol.list_auxiliary_states()
        self.for_training = for_training
        self.inputs_need_grad = inputs_need_grad
        self.logger = logger
        self.fixed_param_names = list(fixed_param_names or [])
        self.state_names = list(state_names or [])
        self.group2ctxs = group2ctxs
        self.data_shapes = _descs(data_shapes)
        self.label_shapes = _descs(label_shapes) if label_shapes is not None else None
        self.data_names = [d.name for d in self.data_shapes]
        self.label_names = [d.name for d in self.label_shapes or []]
        self.grad_req = self._grad_reqs("null" if not for_training else grad_req)
        if shared_group is not None:
            if len(shared_group.contexts) != len(self.contexts):
                raise MXNetError("executor group: the shared group has a different number of contexts")
            self.shared_data_arrays = shared_group.shared_data_arrays
        else:
            self.shared_data_arrays = [{} for _ in self.contexts]
        self.execs = []
        self.bind_exec(self.data_shapes, self.label_shapes, shared_group)

    # ---- binding ----------------------------------------------------------------------------------
    def _grad_reqs(self, grad_req) -> dict:
        if isinstance(grad_req, str):
            reqs = {}
            for name in self.arg_names:
                if name in self.param_names:
                    reqs[name] = "null" if name in self.fixed_param_names else grad_req
                elif name in self.data_names:
                    reqs[name] = grad_req if self.inputs_need_grad else "null"
                else:
                    reqs[name] = "null"
            return reqs
        if isinstance(grad_req, (list, tuple)):
            if len(grad_req) != len(self.arg_names):
                raise MXNetError(f"executor group: grad_req has {len(grad_req)} entries for "
                                 f"{len(self.arg_names)} arguments")
            return dict(zip(self.arg_names, grad_req))
        if isinstance(grad_req, dict):
            # names this symbol does not have are ignored, as MXNet does (one dict may serve
            # several modules, e.g. a fused and an unfused network)
            reqs = self._grad_reqs("write")
            reqs.update({name: req for name, req in grad_req.items() if name in reqs})
            return reqs
        raise MXNetError(f"executor group: grad_req must be a str, list or dict, got {type(grad_req).__name__}")

    def decide_slices(self, data_shapes) -> list[slice]:
        """The batch slices per context; every input must have the same batch size."""
        sizes = {d.shape[DataDesc.get_batch_axis(getattr(d, "layout", None))] for d in data_shapes if d.shape}
        if len(sizes) > 1:
            raise MXNetError(f"executor group: inputs disagree on the batch size: {sorted(sizes)}")
        self.batch_size = sizes.pop() if sizes else 1
        self.slices = split_batch(self.batch_size, self.workload)
        return self.slices

    def _sliced(self, descs, i):
        out = {}
        for d in descs:
            axis = DataDesc.get_batch_axis(getattr(d, "layout", None))
            shape = list(d.shape)
            if shape and axis >= 0:
                shape[axis] = self.slices[i].stop - self.slices[i].start
            out[d.name] = (tuple(shape), np.dtype(getattr(d, "dtype", np.float32)))
        return out

    def _input_array(self, name, shape, dtype, i):
        """The array of input `name` on context i: a view of the family's shared array when it is
        large enough (and of the same dtype), else a new one that replaces it."""
        from .. import ndarray as nd
        shared = self.shared_data_arrays[i]
        ctx = self.contexts[i]
        arr = shared.get(name)
        if arr is not None and np.dtype(arr.dtype) == dtype and arr.size >= int(np.prod(shape)):
            if arr.shape == shape:
                return arr
            flat = arr.reshape((-1,))
            return flat[:int(np.prod(shape))].reshape(shape)
        arr = nd.zeros(shape, ctx, dtype)
        shared[name] = arr
        return arr

    def _bind_ith_exec(self, i, shared_group):
        from .. import ndarray as nd
        from ..executor import Executor
        ctx = self.contexts[i]
        shared_exec = shared_group.execs[i] if shared_group is not None else None
        inputs = self._sliced(self.data_shapes + (self.label_shapes or []), i)
        shapes = {k: s for k, (s, _) in inputs.items()}
        types = {k: t for k, (_, t) in inputs.items()}
        arg_shapes, _, aux_shapes = self.symbol.infer_shape(**shapes)
        arg_types, _, aux_types = self.symbol.infer_type(**types)
        if arg_shapes is None or any(s is None for s in arg_shapes):
            raise MXNetError(f"executor group: cannot infer every argument shape from {shapes}")
        args, grads, aux = [], [], []
        for name, shape, dtype in zip(self.arg_names, arg_shapes, arg_types):
            shape, dtype = tuple(shape), np.dtype(dtype or np.float32)
            req = self.grad_req[name]
            if name in self.param_names:
                if shared_exec is not None and name in shared_exec.arg_dict \
                        and shared_exec.arg_dict[name].shape == shape:
                    arr = shared_exec.arg_dict[name]
                    grad = shared_exec.grad_dict.get(name) if req != "null" else None
                    if req != "null" and grad is None:
                        grad = nd.zeros(shape, ctx, dtype)
                else:
                    arr = nd.zeros(shape, ctx, dtype)
                    grad = nd.zeros(shape, ctx, dtype) if req != "null" else None
            else:
                arr = self._input_array(name, shape, dtype, i)
                grad = nd.zeros(shape, ctx, dtype) if req != "null" else None
            args.append(arr)
            grads.append(grad)
        for name, shape, dtype in zip(self.aux_names, aux_shapes, aux_types):
            shape, dtype = tuple(shape), np.dtype(dtype or np.float32)
            if shared_exec is not None and name in shared_exec.aux_dict and shared_exec.aux_dict[name].shape == shape:
                aux.append(shared_exec.aux_dict[name])
            else:
                aux.append(nd.zeros(shape, ctx, dtype))
        reqs = [self.grad_req[n] for n in self.arg_names]
        return Executor.bind(self.symbol, ctx, args, args_grad=grads, grad_req=reqs, aux_states=aux)

    def bind_exec(self, data_shapes, label_shapes, shared_group=None, reshape=False):
        """(Re)bind one executor per context for these input shapes."""
        self.data_shapes = _descs(data_shapes)
        self.label_shapes = _descs(label_shapes) if label_shapes is not None else None
        self.decide_slices(self.data_shapes)
        self.execs = [self._bind_ith_exec(i, shared_group) for i in range(len(self.contexts))]
        self._collect_arrays()

    def reshape(self, data_shapes, label_shapes):
        """Rebind for new input shapes, keeping the parameter values."""
        arg_params = {n: self.execs[0].arg_dict[n].copy() for n in self.param_names if n in self.execs[0].arg_dict}
        aux_params = {n: self.execs[0].aux_dict[n].copy() for n in self.aux_names}
        self.bind_exec(data_shapes, label_shapes, reshape=True)
        self.set_params(arg_params, aux_params)

    def _collect_arrays(self):
        ex = self.execs
        self.data_arrays = [[(s, e.arg_dict[d.name]) for s, e in zip(self.slices, ex)] for d in self.data_shapes]
        self.label_arrays = ([[(s, e.arg_dict[d.name]) for s, e in zip(self.slices, ex)] for d in self.label_shapes]
                             if self.label_shapes else None)
        self.param_arrays = [[e.arg_arrays[i] for e in ex] for i, n in enumerate(self.arg_names)
                             if n in self.param_names]
        self.grad_arrays = ([[e.grad_arrays[i] for e in ex] for i, n in enumerate(self.arg_names)
                             if n in self.param_names] if self.for_training else None)
        self.aux_arrays = [[e.aux_arrays[i] for e in ex] for i in range(len(self.aux_names))]
        # None where the data's grad_req is 'null' (MXNet: get_input_grads gives None there)
        self.input_grad_arrays = ([[e.grad_dict.get(d.name) for e in ex] for d in self.data_shapes]
                                  if self.inputs_need_grad else None)
        self.state_arrays = [[e.arg_dict[n] for e in ex] for n in self.state_names]

    # ---- parameters -------------------------------------------------------------------------------
    def set_params(self, arg_params, aux_params, allow_extra=False):
        """Copy parameter values into every executor."""
        for ex in self.execs:
            ex.copy_params_from(arg_params, aux_params, allow_extra_params=allow_extra)

    def get_params(self, arg_params, aux_params):
        """Write the parameters averaged over the contexts into the given dicts' arrays."""
        for name, block in zip([n for n in self.arg_names if n in self.param_names], self.param_arrays):
            arg_params[name][:] = sum(w.asnumpy().astype(np.float64) for w in block) / len(block)
        for name, block in zip(self.aux_names, self.aux_arrays):
            aux_params[name][:] = sum(w.asnumpy().astype(np.float64) for w in block) / len(block)

    # ---- execution --------------------------------------------------------------------------------
    def _batch_axes(self):
        """name -> batch axis of every data and label input (from its DataDesc layout)."""
        return {d.name: DataDesc.get_batch_axis(getattr(d, "layout", None))
                for d in self.data_shapes + (self.label_shapes or [])}

    def _output_axes(self):
        """Batch axis of each output (its `__layout__` attribute, as MXNet's output_layouts)."""
        axes = []
        for name in self.symbol.list_outputs():
            try:
                layout = self.symbol[name].attr("__layout__")
            except Exception:   # noqa: BLE001 - an output without attributes: batch-major
                layout = None
            axes.append(DataDesc.get_batch_axis(layout))
        return axes

    def _split(self, arrays, names):
        per_ctx = [dict() for _ in self.execs]
        axes = self._batch_axes()
        for name, arr in zip(names, arrays):
            for i, sl in enumerate(self.slices):
                per_ctx[i][name] = _take_slice(arr, sl, axes.get(name, 0)) if len(self.execs) > 1 else arr
        return per_ctx

    def forward(self, data_batch, is_train=None):
        """Run every executor on its slice of `data_batch` (labels fed when the group has them)."""
        is_train = self.for_training if is_train is None else is_train
        data = list(data_batch.data) if isinstance(data_batch.data, (list, tuple)) else [data_batch.data]
        feeds = self._split(data, self.data_names)
        label = getattr(data_batch, "label", None)
        if label is not None and self.label_names:
            label = list(label) if isinstance(label, (list, tuple)) else [label]
            for feed, extra in zip(feeds, self._split(label, self.label_names)):
                feed.update(extra)
        for ex, feed in zip(self.execs, feeds):
            ex.forward(is_train=is_train, **feed)

    def backward(self, out_grads=None):
        """Backward on every executor; `out_grads` (whole-batch arrays) are sliced per context."""
        if not self.for_training:
            raise MXNetError("backward: the executor group was bound with for_training=False")
        for i, ex in enumerate(self.execs):
            og = None
            if out_grads is not None:
                grads = out_grads if isinstance(out_grads, (list, tuple)) else [out_grads]
                axes = self._output_axes()
                og = [_take_slice(g, self.slices[i], axes[k] if k < len(axes) else 0) if len(self.execs) > 1
                      else g for k, g in enumerate(grads)]
            ex.backward(og)

    def get_output_shapes(self):
        """(name, shape) of each output over the whole batch."""
        outs = self.execs[0].outputs
        shapes = []
        for name, o in zip(self.symbol.list_outputs(), outs):
            shape = list(o.shape)
            if len(self.execs) > 1 and shape:
                shape[0] = sum(e.output_dict[name].shape[0] for e in self.execs)
            shapes.append((name, tuple(shape)))
        return shapes

    def get_outputs(self, merge_multi_context=True, begin=0, end=None):
        """Outputs [begin:end]: merged over the contexts along the batch axis, or one list per
        output with one array per context."""
        end = len(self.execs[0].outputs) if end is None else end
        per = [[ex.outputs[i] for ex in self.execs] for i in range(begin, end)]
        return _merge(per, self._output_axes()[begin:end]) if merge_multi_context else per

    def get_states(self, merge_multi_context=True):
        """The state inputs' arrays (merged over the contexts by default)."""
        return _merge(self.state_arrays) if merge_multi_context else self.state_arrays

    def set_states(self, states=None, value=None):
        """Set the state inputs from arrays (one list per state, one array per context) or to a
        scalar `value`."""
        if (states is None) == (value is None):
            raise MXNetError("set_states: give exactly one of states and value")
        for i, block in enumerate(self.state_arrays):
            for j, arr in enumerate(block):
                arr[:] = value if value is not None else states[i][j]

    def get_input_grads(self, merge_multi_context=True):
        """Gradients of the data inputs (needs inputs_need_grad=True)."""
        if not self.inputs_need_grad:
            raise MXNetError("get_input_grads: bind with inputs_need_grad=True")
        axes = self._batch_axes()
        return (_merge(self.input_grad_arrays, [axes.get(d.name, 0) for d in self.data_shapes])
                if merge_multi_context else self.input_grad_arrays)

    def update_metric(self, eval_metric, labels, pre_sliced=False):
        """Update `eval_metric` with each context's outputs and its slice of `labels`."""
        for i, ex in enumerate(self.execs):
            if pre_sliced:
                labels_slice = labels[i]
            else:
                labels_slice = [l[self.slices[i]] if len(self.execs) > 1 else l for l in labels]
            eval_metric.update(labels_slice, ex.outputs)
