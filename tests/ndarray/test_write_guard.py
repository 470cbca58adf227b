"""symjit.ndarray.write_guard: frozen buffers refuse raw writes, `writable` thaws them (and only
them) and advances the generation; NDArray write paths go through it."""
from __future__ import annotations

import numpy as np
import pytest

from symjit import nd
from symjit.ndarray import write_guard as wg


def test_freeze_then_writable_thaws_and_advances_generation():
    a = np.zeros(8, np.float32)
    root = wg.freeze(a)
    assert root is a and wg.is_frozen(a) and not a.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        a[0] = 1
    g = wg.generation()
    assert wg.writable(a) is a and a.flags.writeable and not wg.is_frozen(a)
    assert wg.generation() != g
    a[0] = 1
    g = wg.generation()
    wg.writable(a)                     # not frozen any more: nothing changes
    assert wg.generation() == g


def test_views_share_the_freeze_of_their_buffer():
    base = np.arange(12, dtype=np.float32)
    view = base.reshape(3, 4)
    root = wg.freeze(view)
    assert root is base and not view.flags.writeable and not base.flags.writeable
    later = base[2:5]                  # a view made while frozen is read-only too
    with pytest.raises(ValueError):
        later[0] = 0
    g = wg.generation()
    wg.writable(later)[0] = -1.0
    assert base[2] == -1.0 and not wg.is_frozen(base) and wg.generation() != g


def test_other_read_only_arrays_are_never_thawed():
    b = np.broadcast_to(np.ones(3), (4, 3))
    g = wg.generation()
    assert wg.writable(b) is b and not b.flags.writeable and wg.generation() == g
    c = np.ones(3)
    c.flags.writeable = False
    wg.writable(c)
    assert not c.flags.writeable


@pytest.mark.parametrize("write", [
    lambda x: x.__setitem__(slice(None), 2.0),
    lambda x: x.__iadd__(1.0),
    lambda x: nd.ones_like(x).copyto(x),
    lambda x: nd.elemwise_add(x, x, out=x),
], ids=["setitem", "iadd", "copyto", "out"])
def test_ndarray_writes_thaw_frozen_buffers(write):
    x = nd.array(np.arange(6, dtype=np.float32))
    wg.freeze(x._data)
    g = wg.generation()
    write(x)
    assert not wg.is_frozen(x._data) and wg.generation() != g
    assert x.asnumpy().tolist() != list(range(6))
