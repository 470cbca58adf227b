"""Distributed stores and collectives on 2 MPI workers (marked `mpi`; see conftest)."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit import autograd
from symjit.base import MXNetError

pytestmark = pytest.mark.mpi

DTYPES = ["float32", "float64", "float16", "int32", "int64", "uint8"]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 7, 100_003])
def test_allreduce_allgather_broadcast(group, dtype, n):
    import symjit.distributed as hvd
    hvd.init()
    r, size = hvd.rank(), hvd.size()
    base = (np.arange(n) % 5).astype(dtype)
    x = mx.nd.array(base + r, dtype=dtype)
    total = sum((base.astype(np.float64) + i) for i in range(size))
    got = hvd.allreduce(x, op=hvd.Sum).asnumpy()
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.astype(np.float64), total, rtol=1e-3)
    np.testing.assert_array_equal(hvd.allreduce(x, op=hvd.Max).asnumpy(), base + (size - 1))
    if dtype.startswith("float"):
        np.testing.assert_allclose(hvd.allreduce(x).asnumpy().astype(np.float64), total / size, rtol=1e-3)
    rows = mx.nd.array(np.full((r + 1, 2), r), dtype=dtype)
    gathered = hvd.allgather(rows).asnumpy()
    want = np.concatenate([np.full((i + 1, 2), i) for i in range(size)]).astype(dtype)
    np.testing.assert_array_equal(gathered, want)
    for root in range(size):
        np.testing.assert_array_equal(hvd.broadcast(x, root).asnumpy(), (base + root).astype(dtype))
    y = mx.nd.array(base + r, dtype=dtype)
    hvd.allreduce_(y, op=hvd.Sum)
    np.testing.assert_array_equal(y.asnumpy(), got)


def test_allreduce_with_a_late_worker(group):
    """The early worker polls (spins, then sleeps between polls: little CPU) until the late one
    arrives; the result is the same, in the buffers given."""
    import time
    n = 1 << 18
    sends = [np.full(n, group.rank + 1, np.float32), np.arange(7, dtype=np.int64)]
    recvs = [np.empty(n, np.float32), sends[1]]
    total = sum(range(1, group.size + 1))
    waits, results = [], []
    for late_rank in range(group.size):
        if group.rank == late_rank:
            time.sleep(0.3)
        # this thread's CPU time: other threads of the process (thread pools of earlier tests)
        # must not count; every rank runs every collective before any assertion, so a failed
        # check on one rank cannot leave the other waiting in a collective
        t, cpu = time.monotonic(), time.thread_time()
        group.allreduce(sends, recvs, "sum", "late allreduce")
        wall, cpu = time.monotonic() - t, time.thread_time() - cpu
        results.append(recvs[0].copy())
        if group.rank != late_rank:
            waits.append((wall, cpu))
    for r in results:
        np.testing.assert_array_equal(r, np.full(n, total, np.float32))
    for wall, cpu in waits:
        assert wall > 0.2 and cpu < 0.5 * wall, (wall, cpu)
    np.testing.assert_array_equal(recvs[1], np.arange(7) * group.size ** group.size)


@pytest.mark.parametrize("name", ["dist_sync", "dist_sync_device"])
def test_dist_sync_store(group, name):
    kv = mx.kv.create(name)
    r, n = kv.rank, kv.num_workers
    assert n == group.size
    shape = (2, 3)
    # one kind of key per store (MXNet's rule, tested in tests/kvstore): str keys here
    kv.init(["b", "w"], [mx.nd.ones(shape) * (r + 1), mx.nd.ones(shape) * (r + 5)])
    a = mx.nd.zeros(shape)
    kv.pull("b", out=a)
    np.testing.assert_array_equal(a.asnumpy(), np.ones(shape))  # rank 0's value
    kv.push("b", [mx.nd.ones(shape) * (r + 1), mx.nd.ones(shape)])
    kv.pull("b", out=a)
    np.testing.assert_array_equal(a.asnumpy(), np.full(shape, sum(i + 2 for i in range(n))))
    calls = []
    kv._set_updater(lambda k, inp, stored: (calls.append(k), stored.__iadd__(inp)))
    kv.push(["w", "b"], [mx.nd.ones(shape), mx.nd.ones(shape)])
    assert calls == ["b", "w"]
    kv.pull("w", out=a)
    np.testing.assert_array_equal(a.asnumpy(), np.full(shape, 5 + n))
    with pytest.raises(MXNetError, match="shape mismatch"):
        kv.push("b", mx.nd.ones((3, 3)))
    kv.pull("b", out=a)
    np.testing.assert_array_equal(a.asnumpy(), np.full(shape, sum(i + 2 for i in range(n)) + n))
    kv.barrier()


def _mlp_params(seed=0):
    rng = np.random.default_rng(seed)
    return {"w1": rng.normal(0, 0.5, (8, 4)).astype(np.float32), "b1": np.zeros(8, np.float32),
            "w2": rng.normal(0, 0.5, (1, 8)).astype(np.float32), "b2": np.zeros(1, np.float32)}


def _grads(params, x, y):
    """Gradients of the summed squared error of a 4-8-1 tanh MLP (symjit autograd)."""
    arrs = {k: mx.nd.array(v) for k, v in params.items()}
    for a in arrs.values():
        a.attach_grad()
    with autograd.record():
        h = mx.nd.tanh(mx.nd.FullyConnected(mx.nd.array(x), arrs["w1"], arrs["b1"], num_hidden=8))
        out = mx.nd.FullyConnected(h, arrs["w2"], arrs["b2"], num_hidden=1)
        loss = mx.nd.sum(mx.nd.square(out - mx.nd.array(y)))
    loss.backward()
    return {k: a.grad for k, a in arrs.items()}


def test_dist_sync_training_equals_one_worker_on_whole_batch(group):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(16, 4)).astype(np.float32)
    y = rng.normal(size=(16, 1)).astype(np.float32)
    keys = sorted(_mlp_params())
    kv = mx.kv.create("dist_sync")
    kv.init(keys, [mx.nd.array(_mlp_params()[k]) for k in keys])
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.05, momentum=0.9, rescale_grad=1.0 / len(x)))
    local = mx.kv.create("local")
    local.init(keys, [mx.nd.array(_mlp_params()[k]) for k in keys])
    local.set_optimizer(mx.optimizer.SGD(learning_rate=0.05, momentum=0.9, rescale_grad=1.0 / len(x)))
    half = np.array_split(np.arange(len(x)), group.size)[group.rank]
    for _ in range(4):
        params = {k: mx.nd.zeros(_mlp_params()[k].shape) for k in keys}
        kv.pull(keys, out=[params[k] for k in keys])
        g = _grads({k: v.asnumpy() for k, v in params.items()}, x[half], y[half])
        kv.push(keys, [g[k] for k in keys])
        ref = {k: mx.nd.zeros(_mlp_params()[k].shape) for k in keys}
        local.pull(keys, out=[ref[k] for k in keys])
        gl = _grads({k: v.asnumpy() for k, v in ref.items()}, x, y)
        local.push(keys, [gl[k] for k in keys])
    for k in keys:
        a, b = mx.nd.zeros(_mlp_params()[k].shape), mx.nd.zeros(_mlp_params()[k].shape)
        kv.pull(k, out=a)
        local.pull(k, out=b)
        np.testing.assert_allclose(a.asnumpy(), b.asnumpy(), atol=1e-5)
        assert not np.allclose(a.asnumpy(), _mlp_params()[k]) or k.startswith("b")
    import symjit.distributed as hvd
    hvd.init()
    w = mx.nd.zeros((8, 4))
    kv.pull("w1", out=w)
    np.testing.assert_array_equal(hvd.broadcast(w, 0).asnumpy(), w.asnumpy())  # identical everywhere


def test_gluon_trainer_with_dist_sync_store(group):
    from symjit import gluon
    rng = np.random.default_rng(2)
    x = rng.normal(size=(8, 3)).astype(np.float32)
    y = rng.normal(size=(8, 2)).astype(np.float32)

    def run(kvstore, xs, ys, batch):
        net = gluon.nn.Dense(2, in_units=3)
        net.initialize(mx.init.Constant(0.1))
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore=kvstore,
                                update_on_kvstore=True)
        for _ in range(3):
            with autograd.record():
                loss = mx.nd.sum(mx.nd.square(net(mx.nd.array(xs)) - mx.nd.array(ys)))
            loss.backward()
            trainer.step(batch)
        return net.weight.data().asnumpy()

    half = np.array_split(np.arange(8), group.size)[group.rank]
    dist = run(mx.kv.create("dist_sync"), x[half], y[half], 8)
    one = run(mx.kv.create("local"), x, y, 8)
    np.testing.assert_allclose(dist, one, atol=1e-5)


def test_dist_async_converges(group):
    kv = mx.kv.create("dist_async")
    rng = np.random.default_rng(10 + kv.rank)
    w_true = np.array([2.0, -1.0, 0.5], np.float32)
    kv.init("w", mx.nd.zeros((3,)))
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.1))
    w = mx.nd.zeros((3,))
    for _ in range(60):
        kv.pull("w", out=w)
        x = rng.normal(size=(16, 3)).astype(np.float32)
        err = x @ w.asnumpy() - x @ w_true
        kv.push("w", mx.nd.array(x.T @ err / len(x)))
    kv.barrier()
    kv.pull("w", out=w)
    np.testing.assert_allclose(w.asnumpy(), w_true, atol=1e-2)
    if kv.rank != 0:
        with pytest.raises(MXNetError, match="rank 0"):
            kv.save_optimizer_states("unused")


def test_seed_e4_and_e5_under_launch(group):
    kv = mx.kvstore.create("dist_sync")
    assert kv.num_workers == group.size
    from types import SimpleNamespace
    from symjit import gluon
    opt = SimpleNamespace(lr=0.1, wd=0.0001, momentum=0.9)
    net = gluon.nn.Dense(10)
    net.initialize()
    kv = mx.kv.create("local")
    gluon.Trainer(net.collect_params(), optimizer="sgd",
                  optimizer_params={"learning_rate": opt.lr, "wd": opt.wd, "momentum": opt.momentum,
                                    "multi_precision": True},
                  kvstore=kv, update_on_kvstore=True)


FAULT_SCRIPT = """
import os, signal, sys, time
import symjit as mx
kv = mx.kv.create('dist_sync')
kv.init(0, mx.nd.ones((4,)))
if kv.rank == 1:
    mode = sys.argv[1]
    if mode == 'kill':
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == 'stop':
        os.kill(os.getpid(), signal.SIGSTOP)
t = time.monotonic()
try:
    kv.push(0, mx.nd.ones((4,)))
except mx.MXNetError as e:
    print(f'rank0 failed after {time.monotonic() - t:.1f} s: {e}', flush=True)
    raise
"""


@pytest.mark.parametrize("mode", ["kill", "stop"])
def test_dead_or_stalled_worker_fails_the_others_in_time(group, tmp_path, mode):
    if group.rank != 0:
        return  # one nested job is enough; rank 1 waits at the fixture's barrier
    from conftest import launch
    script = tmp_path / "fault.py"
    script.write_text(FAULT_SCRIPT)
    res = launch(str(script), args=(mode,), SYMJIT_KV_TIMEOUT=4)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    # the launcher prefixes each worker's line with its rank
    line = [ln.split("] ", 1)[1] for ln in out.splitlines() if ln.startswith("[rank 0] rank0 failed after")]
    assert line, out
    seconds = float(line[0].split()[3])
    if mode == "kill":
        assert "worker rank 1" in line[0] and "SIGKILL" in line[0], out
        assert seconds < 4.0
    else:
        assert "did not complete within 4 s" in line[0], out
        assert 3.9 <= seconds < 8.0


def test_trainer_dist_string_starts_from_rank0_and_matches_one_worker(group):
    import symjit.distributed as hvd
    from symjit import gluon
    hvd.init()
    rng = np.random.default_rng(3)
    x = rng.normal(size=(8, 3)).astype(np.float32)
    y = rng.normal(size=(8, 2)).astype(np.float32)
    half = np.array_split(np.arange(8), group.size)[group.rank]

    def train(make_trainer, xs, ys, init_value, steps=3):
        net = gluon.nn.Dense(2, in_units=3)
        net.initialize(mx.init.Constant(init_value))
        trainer = make_trainer(net)
        for _ in range(steps):
            with autograd.record():
                loss = mx.nd.sum(mx.nd.square(net(mx.nd.array(xs)) - mx.nd.array(ys)))
            loss.backward()
            trainer.step(8)
        return net.weight.data().asnumpy()

    opt = {"learning_rate": 0.1}
    one = train(lambda n: gluon.Trainer(n.collect_params(), "sgd", opt), x, y, 0.1)
    # every worker starts from a different value: the store's broadcast gives rank 0's (0.1)
    dist = train(lambda n: gluon.Trainer(n.collect_params(), "sgd", opt, kvstore="dist_sync"),
                 x[half], y[half], 0.1 + group.rank)
    np.testing.assert_allclose(dist, one, atol=1e-5)

    def hvd_trainer(n):
        hvd.broadcast_parameters(n.collect_params(), root_rank=0)
        return hvd.DistributedTrainer(n.collect_params(), "sgd", {"learning_rate": 0.1 * group.size})

    # DistributedTrainer averages over workers: lr * size on halves == lr on the whole batch
    hv = train(hvd_trainer, x[half], y[half], 0.1 + group.rank)
    np.testing.assert_allclose(hv, one, atol=1e-5)


def test_module_dist_sync_equals_one_worker(group):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(8, 3)).astype(np.float32)
    y = rng.normal(size=(8, 2)).astype(np.float32)
    half = np.array_split(np.arange(8), group.size)[group.rank]

    def train(kvstore, xs, ys, init_value):
        data = mx.sym.var("data")
        net = mx.sym.FullyConnected(data, num_hidden=2, name="fc")
        net = mx.sym.LinearRegressionOutput(net, mx.sym.var("lin_label"), name="lin")
        mod = mx.mod.Module(net, data_names=["data"], label_names=["lin_label"])
        mod.bind(data_shapes=[("data", xs.shape)], label_shapes=[("lin_label", ys.shape)])
        mod.init_params(mx.init.Constant(init_value))
        mod.init_optimizer(kvstore=kvstore, optimizer="sgd",
                           optimizer_params={"learning_rate": 0.1, "rescale_grad": 1.0 / 8})
        batch = mx.io.DataBatch([mx.nd.array(xs)], [mx.nd.array(ys)])
        for _ in range(3):
            mod.forward(batch, is_train=True)
            mod.backward()
            mod.update()
        return mod.get_params()[0]["fc_weight"].asnumpy()

    one = train("local", x, y, 0.1)
    dist = train("dist_sync", x[half], y[half], 0.1 + group.rank)
    np.testing.assert_allclose(dist, one, atol=1e-5)
