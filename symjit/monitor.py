"""symjit.monitor (`mx.monitor`): MXNet 1.x's Monitor, statistics of the arrays of executors.

`install(exe)` registers a callback on an executor; between `tic()` (every `interval`-th call
activates it) and `toc()` every operator output (and with `monitor_all` every input) whose name
matches `pattern` is summarized by `stat_func` (default: ||x||_2 / sqrt(size)); `toc()` adds the
arguments and auxiliary states and returns (step, name, text) rows; `toc_print()` logs them as
MXNet does (`Batch: %7d %30s %s`)."""
from __future__ import annotations

import logging
import math
import re

from . import ndarray
from .ndarray import NDArray

__all__ = ["Monitor"]


class _StatHelper:
    """The executor callback: records stat_func(array) while the monitor is active. Executors
    ask `monitor_active()` first and skip computing the internal values when it is False."""

    def __init__(self, monitor):
        self._monitor = monitor

    def monitor_active(self):
        return self._monitor.activated

    def __call__(self, name, array):
        mon = self._monitor
        if isinstance(name, bytes):
            name = name.decode()
        if not mon.activated or not mon.re_prog.match(name):
            return
        mon.queue.append((mon.step, name, mon.stat_func(array)))


def _asum_stat(x):
    """|x|_2 / sqrt(size(x))."""
    return ndarray.norm(x) / math.sqrt(x.size)


class Monitor:
    """Monitor the outputs, weights and gradients of executors every `interval` batches."""

    def __init__(self, interval, stat_func=None, pattern=".*", sort=False, monitor_all=False):
        self.stat_func = stat_func if stat_func is not None else _asum_stat
        self.interval = interval
        self.activated = False
        self.queue = []
        self.step = 0
        self.exes = []
        self.re_prog = re.compile(pattern)
        self.sort = sort
        self.monitor_all = monitor_all
        self.stat_helper = _StatHelper(self)

    def install(self, exe):
        """Register the monitor's callback on the executor `exe`."""
        exe.set_monitor_callback(self.stat_helper, self.monitor_all)
        self.exes.append(exe)

    def tic(self):
        """Start collecting for this batch when it is an `interval`-th one."""
        if self.step % self.interval == 0:
            for exe in self.exes:
                for array in exe.arg_arrays + exe.aux_arrays:
                    array.wait_to_read()
            self.queue = []
            self.activated = True
        self.step += 1

    def toc(self):
        """Stop collecting; the (step, name, statistic text) rows of this batch, arguments and
        auxiliary states included."""
        if not self.activated:
            return []
        for exe in self.exes:
            for name, array in zip(exe._symbol.list_arguments(), exe.arg_arrays):
                if self.re_prog.match(name):
                    self.queue.append((self.step, name, self.stat_func(array)))
            for name, array in zip(exe._symbol.list_auxiliary_states(), exe.aux_arrays):
                if self.re_prog.match(name):
                    self.queue.append((self.step, name, self.stat_func(array)))
        self.activated = False
        res = []
        if self.sort:
            self.queue.sort(key=lambda x: x[1])
        for n, k, v_list in self.queue:
            if isinstance(v_list, NDArray):
                v_list = [v_list]
            if not isinstance(v_list, list):
                raise TypeError(f"Monitor: stat_func must return an NDArray or a list of them, got "
                                f"{type(v_list).__name__}")
            s = ""
            for v in v_list:
                if not isinstance(v, NDArray):
                    raise TypeError(f"Monitor: stat_func must return NDArrays, got {type(v).__name__}")
                s += (str(v.asscalar()) if v.shape == (1,) else str(v.asnumpy())) + "\t"
            res.append((n, k, s))
        self.queue = []
        return res

    def toc_print(self):
        """`toc()` and log each row."""
        for n, k, v in self.toc():
            logging.info("Batch: {:7d} {:30s} {:s}".format(n, k, v))
