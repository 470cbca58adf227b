"""Basic Gluon layers (MXNet 1.x `gluon.nn`): containers, Dense, Activation, Dropout,
BatchNorm, Embedding, LayerNorm, Flatten, Lambda/HybridLambda, Identity and Concatenate.

Each HybridBlock layer writes its computation once in `hybrid_forward(F, ...)` with MXNet's op
names and attributes, so imperative execution and hybridized traces (and exported JSON) agree
node for node with MXNet: e.g. Dense emits `FullyConnected` named `<prefix>fwd` followed by its
Activation child's `Activation` named `<prefix><act>_fwd`.
"""
from __future__ import annotations

import warnings

from ... import ndarray as _nd
from ... import symbol as _sym
from ...util import is_np_array
from ..block import Block, HybridBlock
from ..parameter import _indent

__all__ = ["Sequential", "HybridSequential", "Dense", "Dropout", "Embedding", "BatchNorm", "LayerNorm",
           "Flatten", "Lambda", "HybridLambda", "Activation", "Identity", "Concatenate",
           "HybridConcatenate", "Concurrent", "HybridConcurrent"]


def _children_repr(block) -> str:
    modstr = "\n".join(f"  ({key}): {_indent(child.__repr__(), 2)}"
                       for key, child in block._children.items())
    return f"{block.__class__.__name__}(\n{modstr}\n)"


class _SequentialMixin:
    """What Sequential and HybridSequential share: children in order, indexing and slicing,
    and feeding each child's output to the next (a tuple output is unpacked into the next
    child's positional arguments)."""

    def add(self, *blocks):
        """Append blocks."""
        for block in blocks:
            self.register_child(block)

    def _chain(self, x, *args):
        for block in self._children.values():
            x = block(x, *args)
            args = []
            if isinstance(x, (tuple, list)):
                args = x[1:]
                x = x[0]
        if args:
            x = tuple([x] + list(args))
        return x

    def __repr__(self):
        return _children_repr(self)

    def __getitem__(self, key):
        layers = list(self._children.values())[key]
        if isinstance(layers, list):
            net = type(self)(prefix=self._prefix)
            with net.name_scope():
                net.add(*layers)
            return net
        return layers

    def __len__(self):
        return len(self._children)


class Sequential(_SequentialMixin, Block):
    """Stacks Blocks sequentially: `net.add(block, ...)`; forward feeds each block's output to
    the next (a tuple output is unpacked into the next block's positional arguments)."""

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)

    def forward(self, x, *args):
        return self._chain(x, *args)

    def hybridize(self, active=True, **kwargs):
        if self._children and all(isinstance(c, HybridBlock) for c in self._children.values()):
            warnings.warn(f"All children of this Sequential layer '{self.prefix}' are HybridBlocks. "
                          "Consider using HybridSequential for the best performance.", stacklevel=2)
        super().hybridize(active, **kwargs)


class HybridSequential(_SequentialMixin, HybridBlock):
    """Stacks HybridBlocks sequentially (traced as one graph when hybridized)."""

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)

    def hybrid_forward(self, F, x, *args):
        return self._chain(x, *args)


class Dense(HybridBlock):
    """Fully connected layer: `activation(dot(x, weight.T) + bias)`; `in_units=0` infers the
    input size on the first forward (weight shape (units, 0) until then)."""

    def __init__(self, units, activation=None, use_bias=True, flatten=True, dtype="float32",
                 weight_initializer=None, bias_initializer="zeros", in_units=0, **kwargs):
        super().__init__(**kwargs)
        self._flatten = flatten
        with self.name_scope():
            self._units = units
            self._in_units = in_units
            self.weight = self.params.get("weight", shape=(units, in_units), init=weight_initializer,
                                          dtype=dtype, allow_deferred_init=True)
            if use_bias:
                self.bias = self.params.get("bias", shape=(units,), init=bias_initializer, dtype=dtype,
                                            allow_deferred_init=True)
            else:
                self.bias = None
            if activation is not None:
                self.act = Activation(activation, prefix=activation + "_")
            else:
                self.act = None

    def hybrid_forward(self, F, x, weight, bias=None):
        fc = F.npx.fully_connected if is_np_array() else F.FullyConnected
        act = fc(x, weight, bias, no_bias=bias is None, num_hidden=self._units,
                 flatten=self._flatten, name="fwd")
        if self.act is not None:
            act = self.act(act)
        return act

    def __repr__(self):
        shape = self.weight.shape
        layout = "{0} -> {1}".format(shape[1] if shape[1] else None, shape[0])
        return f"{self.__class__.__name__}({layout}, {self.act if self.act else 'linear'})"


class Activation(HybridBlock):
    """Applies an activation ('relu', 'sigmoid', 'tanh', 'softrelu', 'softsign')."""

    def __init__(self, activation, **kwargs):
        self._act_type = activation
        super().__init__(**kwargs)

    def _alias(self):
        return self._act_type

    def hybrid_forward(self, F, x):
        act = F.npx.activation if is_np_array() else F.Activation
        return act(x, act_type=self._act_type, name="fwd")

    def __repr__(self):
        return f"{self.__class__.__name__}({self._act_type})"


class Dropout(HybridBlock):
    """Zeroes inputs with probability `rate` in training (scaling the rest by 1/(1-rate));
    identity at inference or when rate is 0."""

    def __init__(self, rate, axes=(), **kwargs):
        super().__init__(**kwargs)
        self._rate = rate
        self._axes = axes

    def hybrid_forward(self, F, x):
        if self._rate > 0:
            dropout = F.npx.dropout if is_np_array() else F.Dropout
            return dropout(x, p=self._rate, axes=self._axes, name="fwd", cudnn_off=False)
        return F.np.copy(x) if is_np_array() else F.identity(x)

    def __repr__(self):
        return f"{self.__class__.__name__}(p = {self._rate}, axes={self._axes})"


class BatchNorm(HybridBlock):
    """Batch normalization over `axis`; running statistics (aux states) are updated in training
    with `momentum` and used at inference."""

    def __init__(self, axis=1, momentum=0.9, epsilon=1e-5, center=True, scale=True,
                 use_global_stats=False, beta_initializer="zeros", gamma_initializer="ones",
                 running_mean_initializer="zeros", running_variance_initializer="ones",
                 in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self._kwargs = {"axis": axis, "eps": epsilon, "momentum": momentum, "fix_gamma": not scale,
                        "use_global_stats": use_global_stats}
        self._axis = axis
        if in_channels != 0:
            self.in_channels = in_channels
        self.gamma = self.params.get("gamma", grad_req="write" if scale else "null", shape=(in_channels,),
                                     init=gamma_initializer, allow_deferred_init=True,
                                     differentiable=scale)
        self.beta = self.params.get("beta", grad_req="write" if center else "null", shape=(in_channels,),
                                    init=beta_initializer, allow_deferred_init=True,
                                    differentiable=center)
        self.running_mean = self.params.get("running_mean", grad_req="null", shape=(in_channels,),
                                            init=running_mean_initializer, allow_deferred_init=True,
                                            differentiable=False)
        self.running_var = self.params.get("running_var", grad_req="null", shape=(in_channels,),
                                           init=running_variance_initializer, allow_deferred_init=True,
                                           differentiable=False)

    def cast(self, dtype):
        import numpy as np
        if np.dtype(dtype).name == "float16":
            dtype = "float32"
        super().cast(dtype)

    def hybrid_forward(self, F, x, gamma, beta, running_mean, running_var):
        batch_norm = F.npx.batch_norm if is_np_array() else F.BatchNorm
        return batch_norm(x, gamma, beta, running_mean, running_var, name="fwd", **self._kwargs)

    def __repr__(self):
        in_channels = self.gamma.shape[0]
        content = ", ".join("=".join([k, v.__repr__()]) for k, v in self._kwargs.items())
        return f"{self.__class__.__name__}({content}, in_channels={in_channels if in_channels else None})"


class Embedding(HybridBlock):
    """Maps integer indices to rows of a (input_dim, output_dim) weight."""

    def __init__(self, input_dim, output_dim, dtype="float32", weight_initializer=None, sparse_grad=False,
                 **kwargs):
        super().__init__(**kwargs)
        grad_stype = "row_sparse" if sparse_grad else "default"
        self._kwargs = {"input_dim": input_dim, "output_dim": output_dim, "dtype": dtype,
                        "sparse_grad": sparse_grad}
        self.weight = self.params.get("weight", shape=(input_dim, output_dim), init=weight_initializer,
                                      dtype=dtype, allow_deferred_init=True, grad_stype=grad_stype)

    def hybrid_forward(self, F, x, weight):
        embedding = F.npx.embedding if is_np_array() else F.Embedding
        return embedding(x, weight, name="fwd", **self._kwargs)

    def __repr__(self):
        k = self._kwargs
        return f"{self.__class__.__name__}({k['input_dim']} -> {k['output_dim']}, {k['dtype']})"


class Flatten(HybridBlock):
    """Reshapes (N, d1, d2, ...) to (N, d1*d2*...)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    def hybrid_forward(self, F, x):
        return F.npx.batch_flatten(x) if is_np_array() else F.Flatten(x)

    def __repr__(self):
        return self.__class__.__name__


class LayerNorm(HybridBlock):
    """Layer normalization over `axis` with learned gamma (scale) and beta (center)."""

    def __init__(self, axis=-1, epsilon=1e-5, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", in_channels=0, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self._kwargs = {"eps": epsilon, "axis": axis, "center": center, "scale": scale}
        self._axis = axis
        self._epsilon = epsilon
        self._center = center
        self._scale = scale
        self.gamma = self.params.get("gamma", grad_req="write" if scale else "null", shape=(in_channels,),
                                     init=gamma_initializer, allow_deferred_init=True)
        self.beta = self.params.get("beta", grad_req="write" if center else "null", shape=(in_channels,),
                                    init=beta_initializer, allow_deferred_init=True)

    def hybrid_forward(self, F, data, gamma, beta):
        layer_norm = F.npx.layer_norm if is_np_array() else F.LayerNorm
        return layer_norm(data, gamma=gamma, beta=beta, axis=self._axis, eps=self._epsilon)

    def __repr__(self):
        in_channels = self.gamma.shape[0]
        content = ", ".join("=".join([k, v.__repr__()]) for k, v in self._kwargs.items())
        return f"{self.__class__.__name__}({content}, in_channels={in_channels})"


class Lambda(Block):
    """Wraps a function (or the name of an `nd` function) as a Block."""

    def __init__(self, function, prefix=None):
        super().__init__(prefix=prefix)
        if isinstance(function, str):
            if not hasattr(_nd, function):
                raise ValueError(f"Function name {function} is not found in ndarray.")
            self._func_impl = getattr(_nd, function)
        elif callable(function):
            self._func_impl = function
        else:
            raise ValueError(f"Unrecognized function in lambda: {function} of type {type(function)}")

    def forward(self, *args):
        return self._func_impl(*args)

    def __repr__(self):
        return f"{self.__class__.__name__}({self._func_impl.__name__})"


class HybridLambda(HybridBlock):
    """Wraps `function(F, x, *args)` (or the name of an op present in `nd` and `sym`)."""

    def __init__(self, function, prefix=None):
        super().__init__(prefix=prefix)
        if isinstance(function, str):
            if not (hasattr(_nd, function) and hasattr(_sym, function)):
                raise ValueError(f"Function name {function} is not found in symbol/ndarray.")
            func_dict = {_sym: getattr(_sym, function), _nd: getattr(_nd, function)}
            self._func = lambda F, *args: func_dict[F](*args)
            self._func_name = function
        elif callable(function):
            self._func = function
            self._func_name = function.__name__
        else:
            raise ValueError(f"Unrecognized function in lambda: {function} of type {type(function)}")

    def hybrid_forward(self, F, x, *args):
        return self._func(F, x, *args)

    def __repr__(self):
        return f"{self.__class__.__name__}({self._func_name})"


class Identity(HybridBlock):
    """Returns its input unchanged (e.g. the identity branch of a residual HybridConcatenate)."""

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)

    def hybrid_forward(self, F, x):
        return x


class Concatenate(Sequential):
    """Runs every child on the same input and concatenates the outputs along `axis`."""

    def __init__(self, axis=-1, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self.axis = axis

    def forward(self, x):
        out = [block(x) for block in self._children.values()]
        return _nd.concat(*out, dim=self.axis)


class HybridConcatenate(HybridSequential):
    """Hybridizable Concatenate."""

    def __init__(self, axis=-1, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self.axis = axis

    def hybrid_forward(self, F, x):
        out = [block(x) for block in self._children.values()]
        return F.concat(*out, dim=self.axis)


#: MXNet 1.x names (gluon.contrib.nn)
Concurrent = Concatenate
HybridConcurrent = HybridConcatenate
