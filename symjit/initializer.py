"""symjit.initializer (`mx.init`): MXNet 1.x parameter initializers.

An initializer is called as `init(desc, arr)` with an `InitDesc` (the parameter's
name, plus attributes such as `__init__`) and fills the NDArray `arr` in place.
The base class dispatches on the name's suffix exactly as MXNet does (weight ->
`_init_weight`, bias/beta/moving_mean -> 0, gamma/moving_var -> 1). `dumps()`
serialises as MXNet: `'["xavier", {"rnd_type": "uniform", ...}]'`. Random draws come
from the global generator of `symjit.random`.
"""
from __future__ import annotations

import json
import re
from typing import Callable

import numpy as np

from .base import MXNetError
from . import random as _random

__all__ = ["InitDesc", "Initializer", "register", "create", "Load", "Mixed", "Zero", "One", "Constant",
           "Uniform", "Normal", "Orthogonal", "Xavier", "MSRAPrelu", "Bilinear", "LSTMBias", "FusedRNN"]

_REGISTRY: dict[str, type] = {}


def register(klass: type) -> type:
    """Register an initializer class under its lower-case name (for `create` and string specs)."""
    _REGISTRY[klass.__name__.lower()] = klass
    return klass


def create(init, **kwargs) -> "Initializer":
    """An Initializer from an instance, a registered name ('xavier') or a dumps() string."""
    if isinstance(init, Initializer):
        return init
    if isinstance(init, str):
        s = init.strip()
        if s.startswith("["):
            name, kw = json.loads(s)
            return _REGISTRY[name.lower()](**kw)
        if s.lower() not in _REGISTRY:
            raise MXNetError(f"unknown initializer {init!r}; registered: {sorted(_REGISTRY)}")
        return _REGISTRY[s.lower()](**kwargs)
    raise MXNetError(f"cannot create an initializer from {type(init).__name__}")


class InitDesc(str):
    """A parameter name carrying the attributes an initializer may look at."""

    def __new__(cls, name, attrs=None, global_init=None):
        ret = super().__new__(cls, name)
        ret.attrs = attrs or {}
        ret.global_init = global_init
        return ret


def _fill(arr, values: np.ndarray) -> None:
    arr[:] = values.astype(np.dtype(arr.dtype), copy=False)


class Initializer:
    """Base class: dispatch on the parameter name's suffix, MXNet style."""

    def __init__(self, **kwargs):
        self._kwargs = kwargs
        self._verbose = False
        self._print_func = None

    def set_verbosity(self, verbose=False, print_func=None):
        self._verbose = verbose
        self._print_func = print_func
        return self

    def dumps(self) -> str:
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])

    def __eq__(self, other):
        return isinstance(other, Initializer) and self.dumps() == other.dumps()

    __hash__ = object.__hash__

    def __repr__(self):
        return self.dumps()

    def __call__(self, desc, arr) -> None:
        if not isinstance(desc, InitDesc):
            desc = InitDesc(str(desc))
        if desc.global_init is None:
            desc.global_init = self
        init = desc.attrs.get("__init__", "")
        if init:
            create(init)._init_weight(desc, arr)
            return
        name = str(desc)
        if name.endswith("weight"):
            self._init_weight(desc, arr)
        elif name.endswith("bias"):
            self._init_bias(desc, arr)
        elif name.endswith("gamma"):
            self._init_gamma(desc, arr)
        elif name.endswith("beta"):
            self._init_beta(desc, arr)
        elif name.endswith("min") or name.endswith("max"):
            self._init_zero(desc, arr)
        elif name.endswith(("moving_mean", "moving_inv_var", "moving_avg")):
            self._init_zero(desc, arr)
        elif name.endswith("moving_var"):
            self._init_one(desc, arr)
        elif name.endswith("running_mean"):
            self._init_zero(desc, arr)
        elif name.endswith("running_var"):
            self._init_one(desc, arr)
        else:
            self._init_default(desc, arr)

    def _init_zero(self, _, arr):
        arr[:] = 0

    def _init_one(self, _, arr):
        arr[:] = 1

    def _init_bias(self, _, arr):
        arr[:] = 0

    def _init_gamma(self, _, arr):
        arr[:] = 1

    def _init_beta(self, _, arr):
        arr[:] = 0

    def _init_weight(self, name, arr):
        raise MXNetError(f"{type(self).__name__} does not initialize weights ({name})")

    def _init_default(self, name, arr):
        raise MXNetError(
            f'Unknown initialization pattern for {name}. Default initialization is now limited to '
            '"weight", "bias", "gamma" (1.0), and "beta" (0.0). Please use mx.sym.Variable(init=mx.init.*) '
            'to set initialization pattern')


@register
class Load(Initializer):
    """Initialize from a dict (or a .params file) of arrays, falling back to `default_init`."""

    def __init__(self, param, default_init=None, verbose=False):
        super().__init__()
        if isinstance(param, str):
            from .ndarray import load
            param = load(param)
        if not isinstance(param, dict):
            raise MXNetError("Load: param must be a dict of arrays or a path to a .params dict file")
        self.param = {}
        for name, arr in param.items():
            if name.startswith(("arg:", "aux:")):
                name = name[4:]
            self.param[name] = arr
        self.default_init = default_init
        self.verbose = verbose

    def __call__(self, name, arr):
        if name in self.param:
            src = self.param[name]
            if tuple(src.shape) != tuple(arr.shape):
                raise MXNetError(f"Load: parameter {name} has shape {tuple(arr.shape)} but the loaded "
                                 f"array has shape {tuple(src.shape)}")
            arr[:] = src
        else:
            if self.default_init is None:
                raise MXNetError(f"Load: cannot initialize {name}: not found in the loaded params and "
                                 "no default_init given")
            self.default_init(name, arr)


@register
class Mixed:
    """Initialize each parameter with the first initializer whose regex pattern matches its name."""

    def __init__(self, patterns, initializers):
        if len(patterns) != len(initializers):
            raise MXNetError("Mixed: patterns and initializers must have the same length")
        self.map = list(zip([re.compile(p) for p in patterns], initializers))

    def __call__(self, name, arr):
        for prog, init in self.map:
            if prog.match(str(name)):
                init(name, arr)
                return
        raise MXNetError(f"Mixed: parameter name {name} did not match any pattern. Consider adding a "
                         '".*" pattern at the end with a default Initializer.')


@register
class Zero(Initializer):
    def __init__(self):
        super().__init__()

    def _init_weight(self, _, arr):
        arr[:] = 0


@register
class One(Initializer):
    def __init__(self):
        super().__init__()

    def _init_weight(self, _, arr):
        arr[:] = 1


@register
class Constant(Initializer):
    def __init__(self, value):
        super().__init__(value=value)
        self.value = value

    def _init_weight(self, _, arr):
        if hasattr(self.value, "asnumpy"):
            arr[:] = self.value.asnumpy()
        else:
            arr[:] = np.asarray(self.value)

    def dumps(self) -> str:
        """JSON form; an array value is stored as nested lists (also in `_kwargs`, as MXNet)."""
        val = self._kwargs["value"]
        if hasattr(val, "asnumpy"):
            self._kwargs["value"] = val.asnumpy().tolist()
        elif isinstance(val, np.ndarray):
            self._kwargs["value"] = val.tolist()
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])


@register
class Uniform(Initializer):
    """Weights drawn from U(-scale, scale)."""

    def __init__(self, scale=0.07):
        super().__init__(scale=scale)
        self.scale = scale

    def _init_weight(self, _, arr):
        _fill(arr, _random.generator().uniform(-self.scale, self.scale, size=arr.shape))


@register
class Normal(Initializer):
    """Weights drawn from N(0, sigma^2)."""

    def __init__(self, sigma=0.01):
        super().__init__(sigma=sigma)
        self.sigma = sigma

    def _init_weight(self, _, arr):
        _fill(arr, _random.generator().normal(0, self.sigma, size=arr.shape))


@register
class Orthogonal(Initializer):
    """Orthogonal weights (Saxe et al.), scaled by `scale`."""

    def __init__(self, scale=1.414, rand_type="uniform"):
        super().__init__(scale=scale, rand_type=rand_type)
        self.scale = scale
        self.rand_type = rand_type

    def _init_weight(self, _, arr):
        nout = arr.shape[0]
        nin = int(np.prod(arr.shape[1:]))
        gen = _random.generator()
        if self.rand_type == "uniform":
            tmp = gen.uniform(-1.0, 1.0, (nout, nin))
        elif self.rand_type == "normal":
            tmp = gen.normal(0.0, 1.0, (nout, nin))
        else:
            raise MXNetError(f"Orthogonal: rand_type must be 'uniform' or 'normal', got {self.rand_type!r}")
        u, _, v = np.linalg.svd(tmp, full_matrices=False)
        q = u if u.shape == tmp.shape else v
        _fill(arr, (self.scale * q).reshape(arr.shape))


@register
class Xavier(Initializer):
    """Glorot initialization: variance magnitude / fan (avg, in or out), uniform or gaussian."""

    def __init__(self, rnd_type="uniform", factor_type="avg", magnitude=3):
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        self.rnd_type = rnd_type
        self.factor_type = factor_type
        self.magnitude = float(magnitude)

    def _init_weight(self, name, arr):
        shape = arr.shape
        hw_scale = 1.0
        if len(shape) < 2:
            raise MXNetError(f"Xavier initializer cannot be applied to vector {name}. It requires at least 2D.")
        if len(shape) > 2:
            hw_scale = float(np.prod(shape[2:]))
        fan_in, fan_out = shape[1] * hw_scale, shape[0] * hw_scale
        factor = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}.get(self.factor_type)
        if factor is None:
            raise MXNetError(f"Xavier: factor_type must be 'avg', 'in' or 'out', got {self.factor_type!r}")
        scale = np.sqrt(self.magnitude / factor)
        gen = _random.generator()
        if self.rnd_type == "uniform":
            _fill(arr, gen.uniform(-scale, scale, size=shape))
        elif self.rnd_type == "gaussian":
            _fill(arr, gen.normal(0, scale, size=shape))
        else:
            raise MXNetError(f"Xavier: rnd_type must be 'uniform' or 'gaussian', got {self.rnd_type!r}")


@register
class MSRAPrelu(Xavier):
    """He initialization for PReLU networks: gaussian Xavier with magnitude 2 / (1 + slope^2)."""

    def __init__(self, factor_type="avg", slope=0.25):
        magnitude = 2.0 / (1 + slope ** 2)
        super().__init__("gaussian", factor_type, magnitude)
        self._kwargs = {"factor_type": factor_type, "slope": slope}


@register
class Bilinear(Initializer):
    """Bilinear-upsampling weights for Deconvolution."""

    def __init__(self):
        super().__init__()

    def _init_weight(self, _, arr):
        shape = arr.shape
        weight = np.zeros(int(np.prod(shape)), dtype="float32")
        f = np.ceil(shape[3] / 2.0)
        c = (2 * f - 1 - f % 2) / (2.0 * f)
        for i in range(int(np.prod(shape))):
            x = i % shape[3]
            y = (i // shape[3]) % shape[2]
            weight[i] = (1 - abs(x / f - c)) * (1 - abs(y / f - c))
        arr[:] = weight.reshape(shape)


@register
class LSTMBias(Initializer):
    """LSTM biases: zero except the forget gate, set to `forget_bias`."""

    def __init__(self, forget_bias=1.0):
        super().__init__(forget_bias=forget_bias)
        self.forget_bias = forget_bias

    def _init_weight(self, name, arr):
        values = np.zeros(arr.shape, dtype=np.float32)
        num_hidden = int(arr.shape[0] / 4)
        values[num_hidden:2 * num_hidden] = self.forget_bias
        arr[:] = values


@register
class FusedRNN(Initializer):
    """Initialize the packed parameter vector of a fused RNN layer gate by gate."""

    def __init__(self, init, num_hidden, num_layers, mode, bidirectional=False, forget_bias=1.0):
        if isinstance(init, str):
            init = create(init)
        super().__init__(init=init.dumps() if init is not None else None, num_hidden=num_hidden,
                         num_layers=num_layers, mode=mode, bidirectional=bidirectional,
                         forget_bias=forget_bias)
        self._init = init
        self._num_hidden = num_hidden
        self._num_layers = num_layers
        self._mode = mode
        self._bidirectional = bidirectional
        self._forget_bias = forget_bias

    def _init_weight(self, desc, arr):
        gates = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}.get(self._mode)
        if gates is None:
            raise MXNetError(f"FusedRNN: unknown mode {self._mode!r}")
        h = self._num_hidden
        dirs = 2 if self._bidirectional else 1
        total = arr.size
        biases = self._num_layers * dirs * 2 * gates * h
        flat = np.zeros(total, dtype=np.float32)
        gen_init = self._init or Uniform()
        weights = np.zeros(total - biases, dtype=np.float32)
        from .ndarray import zeros
        tmp = zeros((weights.size // h, h)) if weights.size % h == 0 else zeros((weights.size,))
        gen_init._init_weight(InitDesc(str(desc) + "_weight"), tmp)
        flat[:weights.size] = tmp.asnumpy().reshape(-1)
        if self._mode == "lstm":
            bias = flat[weights.size:].reshape(-1, gates, h)
            bias[:, 1, :] = self._forget_bias / 2.0
        arr[:] = flat.reshape(arr.shape)


_ALIASES: dict[str, Callable] = {"zeros": Zero, "ones": One, "msra": MSRAPrelu}
_REGISTRY.update(_ALIASES)
