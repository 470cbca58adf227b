"""In-process KVStores ('local', 'device', 'nccl') and the 1-worker distributed stores."""
from __future__ import annotations

import numpy as np
import pytest

import symjit as mx
from symjit.base import MXNetError
from symjit.kvstore.base import GradientCompression

SHAPE = (2, 3)


def _pulled(kv, key, shape=SHAPE, dtype="float32"):
    out = mx.nd.zeros(shape, dtype=dtype)
    kv.pull(key, out=out)
    return out.asnumpy()


@pytest.mark.parametrize("name", ["local", "device", "nccl", "dist_sync", "dist_sync_device",
                                  "dist_async", "dist_async_device"])
def test_push_sums_devices_then_assigns(name):
    kv = mx.kv.create(name)
    assert kv.type == name and kv.rank == 0 and kv.num_workers == 1
    kv.init(3, mx.nd.ones(SHAPE) * 2)
    np.testing.assert_array_equal(_pulled(kv, 3), np.full(SHAPE, 2, np.float32))
    vals = [mx.nd.array(np.arange(6).reshape(SHAPE) * (i + 1), mx.cpu(i)) for i in range(3)]
    kv.push(3, vals)
    np.testing.assert_array_equal(_pulled(kv, 3), np.arange(6).reshape(SHAPE) * 6.0)
    outs = [mx.nd.zeros(SHAPE, mx.cpu(i)) for i in range(3)]
    kv.pull(3, out=outs)
    for o in outs:
        np.testing.assert_array_equal(o.asnumpy(), np.arange(6).reshape(SHAPE) * 6.0)


def test_updater_called_once_per_key_in_sorted_order_never_on_pull():
    kv = mx.kv.create("local")
    calls = []

    def upd(key, inp, stored):
        calls.append((key, inp.asnumpy().copy()))
        stored += inp * 2

    kv.init([9, 5, 7], [mx.nd.ones(SHAPE)] * 3)
    kv.set_updater(upd)
    kv.pull([9, 5], out=[mx.nd.zeros(SHAPE), mx.nd.zeros(SHAPE)])
    assert calls == []
    kv.push([9, 5, 7], [[mx.nd.ones(SHAPE)] * 2, mx.nd.ones(SHAPE), mx.nd.ones(SHAPE) * 3])
    assert [k for k, _ in calls] == [5, 7, 9]
    np.testing.assert_array_equal(calls[2][1], np.full(SHAPE, 2.0))
    np.testing.assert_array_equal(_pulled(kv, 9), np.full(SHAPE, 5.0))
    np.testing.assert_array_equal(_pulled(kv, 7), np.full(SHAPE, 7.0))


def test_duplicate_keys_in_one_push_are_summed():
    kv = mx.kv.create("device")
    kv.init(1, mx.nd.zeros(SHAPE))
    kv.push([1, 1], [mx.nd.ones(SHAPE), mx.nd.ones(SHAPE) * 4])
    np.testing.assert_array_equal(_pulled(kv, 1), np.full(SHAPE, 5.0))


def test_str_keys_and_pushpull_and_broadcast():
    kv = mx.kv.create("local")
    kv.init("w", mx.nd.ones(SHAPE))
    out = mx.nd.zeros(SHAPE)
    kv.pushpull("w", [mx.nd.ones(SHAPE), mx.nd.ones(SHAPE) * 2], out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.full(SHAPE, 3.0))
    val = mx.nd.ones(SHAPE) * 7
    kv.pushpull("w", val)  # out=None writes into the value
    np.testing.assert_array_equal(val.asnumpy(), np.full(SHAPE, 7.0))
    outs = [mx.nd.zeros(SHAPE), mx.nd.zeros(SHAPE)]
    kv.broadcast("b", mx.nd.ones(SHAPE) * 4, out=outs)
    for o in outs:
        np.testing.assert_array_equal(o.asnumpy(), np.full(SHAPE, 4.0))
    with pytest.raises(MXNetError, match="duplicate init"):
        kv.broadcast("b", mx.nd.ones(SHAPE), out=outs[0])


def test_row_sparse_pull_keeps_only_the_rows():
    kv = mx.kv.create("local")
    w = np.arange(12, dtype=np.float32).reshape(4, 3)
    kv.init("e", mx.nd.array(w))
    out = (mx.nd.ones((4, 3)) * -1).tostype("row_sparse")
    kv.row_sparse_pull("e", out=out, row_ids=mx.nd.array([2, 0, 2]))
    want = np.zeros_like(w)
    want[[0, 2]] = w[[0, 2]]
    assert out.stype == "row_sparse"
    np.testing.assert_array_equal(out.asnumpy(), want)
    assert out.indices.asnumpy().tolist() == [0, 2]
    with pytest.raises(MXNetError, match="row_ids"):
        kv.row_sparse_pull("e", out=out, row_ids=mx.nd.array([4]))
    with pytest.raises(MXNetError, match="row_sparse"):   # MXNet: the outputs must be row_sparse
        kv.row_sparse_pull("e", out=mx.nd.zeros((4, 3)), row_ids=mx.nd.array([0]))


def test_sparse_values_push_and_pull():
    kv = mx.kv.create("local")
    kv.init(3, mx.nd.zeros((4, 4), stype="row_sparse"))
    kv.push(3, [mx.nd.ones((4, 4)).tostype("row_sparse") * 2, mx.nd.ones((4, 4))])
    out = mx.nd.zeros((4, 4))
    kv.pull(3, out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.full((4, 4), 3.0))
    # MXNet ignores pulls into sparse outputs (ignore_sparse=True): the output keeps its values
    rsp = (mx.nd.ones((4, 4)) * 5).tostype("row_sparse")
    kv.pull(3, out=rsp)
    np.testing.assert_array_equal(rsp.asnumpy(), np.full((4, 4), 5.0))
    kv.pull(3, out=rsp, ignore_sparse=False)
    np.testing.assert_array_equal(rsp.asnumpy(), np.full((4, 4), 3.0))


@pytest.mark.parametrize("bad", ["shape", "dtype", "unknown", "type"])
def test_bad_push_raises_and_keeps_values(bad):
    kv = mx.kv.create("local")
    kv.init([0, 1], [mx.nd.ones(SHAPE), mx.nd.ones(SHAPE) * 2])
    good = mx.nd.ones(SHAPE) * 9
    value = {"shape": mx.nd.ones((3, 2)), "dtype": mx.nd.ones(SHAPE, dtype="float64"),
             "unknown": good, "type": np.ones(SHAPE)}[bad]
    keys = [0, 5] if bad == "unknown" else [0, 1]
    with pytest.raises(MXNetError):
        kv.push(keys, [good, value])
    np.testing.assert_array_equal(_pulled(kv, 0), np.ones(SHAPE))
    np.testing.assert_array_equal(_pulled(kv, 1), np.full(SHAPE, 2.0))


def test_pull_before_init_and_bad_outputs():
    kv = mx.kv.create("device")
    with pytest.raises(MXNetError, match="not been initialized"):
        kv.pull(3, out=mx.nd.zeros(SHAPE))
    kv.init(3, mx.nd.ones(SHAPE))
    with pytest.raises(MXNetError, match="shape mismatch"):
        kv.pull(3, out=mx.nd.zeros((3, 3)))
    with pytest.raises(MXNetError, match="key must be an int or a str"):
        kv.pull(3.5, out=mx.nd.zeros(SHAPE))
    with pytest.raises(MXNetError, match="duplicate init"):
        kv.init(3, mx.nd.ones(SHAPE))
    with pytest.raises(MXNetError):
        kv.pull(3)
    with pytest.raises(MXNetError, match="Unknown KVStore type"):
        mx.kv.create("dist_wrong")


def test_set_optimizer_updates_on_store_and_states_roundtrip(tmp_path):
    kv = mx.kv.create("local")
    assert kv.is_capable("optimizer")
    w0 = np.array([[1.0, -2.0, 3.0]], np.float32)
    kv.init(0, mx.nd.array(w0))
    kv.set_optimizer(mx.optimizer.SGD(learning_rate=0.5, momentum=0.9))
    g = np.array([[0.5, 0.25, -1.0]], np.float32)
    kv.push(0, mx.nd.array(g))
    mom = -0.5 * g
    want = w0 + mom
    np.testing.assert_allclose(_pulled(kv, 0, (1, 3)), want, rtol=1e-6)
    fname = str(tmp_path / "states")
    kv.save_optimizer_states(fname)
    kv.push(0, mx.nd.array(g))
    kv2 = mx.kv.create("local")
    kv2.init(0, mx.nd.array(want))
    kv2.set_optimizer(mx.optimizer.SGD(learning_rate=0.5, momentum=0.9))
    kv2.load_optimizer_states(fname)
    kv2.push(0, mx.nd.array(g))
    want2 = want + (0.9 * mom - 0.5 * g)
    np.testing.assert_allclose(_pulled(kv2, 0, (1, 3)), want2, rtol=1e-6)
    np.testing.assert_allclose(_pulled(kv, 0, (1, 3)), want2, rtol=1e-6)
    bad = tmp_path / "bad"
    bad.write_bytes(b"not a pickle")
    with pytest.raises(MXNetError, match="not an optimizer states file"):
        kv2.load_optimizer_states(str(bad))
    with pytest.raises(MXNetError, match="no optimizer"):
        mx.kv.create("local").save_optimizer_states(fname)


def test_two_bit_compression_matches_mxnet_rule():
    kv = mx.kv.create("device")
    with pytest.raises(MXNetError, match="not supported"):
        mx.kv.create("local").set_gradient_compression({"type": "2bit"})
    with pytest.raises(MXNetError, match="unknown type"):
        kv.set_gradient_compression({"type": "1bit"})
    with pytest.raises(MXNetError, match="greater than 0"):
        kv.set_gradient_compression({"type": "2bit", "threshold": 0})
    kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    kv.init(0, mx.nd.zeros((4,)))
    g = mx.nd.array([0.3, 0.6, -0.7, 0.1])
    kv.push(0, [g, g])  # each device quantizes its own copy: [0, .5, -.5, 0] twice
    np.testing.assert_allclose(_pulled(kv, 0, (4,)), [0.0, 1.0, -1.0, 0.0])
    kv.push(0, [g, g])  # residuals [.3, .1, -.2, .1] + g = [.6, .7, -.9, .2]
    np.testing.assert_allclose(_pulled(kv, 0, (4,)), [1.0, 1.0, -1.0, 0.0])


def test_compression_residual_is_independent_reference():
    comp = GradientCompression({"type": "2bit", "threshold": 1.0})
    rng = np.random.default_rng(0)
    grads = [rng.normal(size=16).astype(np.float32) for _ in range(5)]
    total_sent = sum(comp.quantize("k", g) for g in grads)
    # what was sent plus what is still held back equals everything that came in
    np.testing.assert_allclose(total_sent + comp._residuals["k"], sum(grads), rtol=1e-5, atol=1e-5)
    assert set(np.unique(comp.quantize("k", grads[0]))) <= {-1.0, 0.0, 1.0}


def test_horovod_store_single_worker():
    kv = mx.kv.create("horovod")
    assert not kv.is_capable("optimizer")
    out = mx.nd.zeros(SHAPE)
    kv.pushpull(0, [mx.nd.ones(SHAPE), mx.nd.ones(SHAPE)], out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.full(SHAPE, 2.0))
    kv.broadcast(0, mx.nd.ones(SHAPE) * 3, out=out)
    np.testing.assert_array_equal(out.asnumpy(), np.full(SHAPE, 3.0))
    with pytest.raises(MXNetError, match="not supported"):
        kv.set_optimizer(mx.optimizer.SGD())
    with pytest.raises(MXNetError, match="not supported"):
        kv.push(0, out)


def test_distributed_single_process():
    import symjit.distributed as hvd
    hvd.init()
    assert (hvd.rank(), hvd.size(), hvd.local_rank(), hvd.local_size()) == (0, 1, 0, 1)
    x = mx.nd.array([1.0, 2.0])
    np.testing.assert_array_equal(hvd.allreduce(x).asnumpy(), [1.0, 2.0])
    np.testing.assert_array_equal(hvd.allreduce(x, op=hvd.Max).asnumpy(), [1.0, 2.0])
    np.testing.assert_array_equal(hvd.allgather(x).asnumpy(), [1.0, 2.0])
    np.testing.assert_array_equal(hvd.broadcast(x, 0).asnumpy(), [1.0, 2.0])
    with pytest.raises(MXNetError, match="root rank"):
        hvd.broadcast(x, 1)
    with pytest.raises(MXNetError, match="floating-point"):
        hvd.allreduce(mx.nd.array([1, 2], dtype="int32"))


@pytest.mark.parametrize("predivide", [1.0, 4.0])
def test_distributed_trainer_on_two_contexts_matches_trainer(predivide):
    """The gradients of the contexts are summed into the first one's buffer (no copy), reduced,
    and copied to the others: the same update as gluon.Trainer's."""
    import symjit.distributed as hvd
    from symjit import autograd, gluon
    hvd.init()
    rng = np.random.default_rng(3)
    x = rng.normal(size=(8, 3)).astype(np.float32)
    y = rng.normal(size=(8, 2)).astype(np.float32)
    ctxs = [mx.cpu(0), mx.cpu(1)]

    def train(make_trainer):
        net = gluon.nn.Dense(2, in_units=3)
        net.initialize(mx.init.Constant(0.1), ctx=ctxs)
        trainer = make_trainer(net)
        for _ in range(3):
            with autograd.record():
                losses = [mx.nd.sum(mx.nd.square(net(mx.nd.array(x[i::2], ctx=c)) - mx.nd.array(y[i::2], ctx=c)))
                          for i, c in enumerate(ctxs)]
            for loss in losses:
                loss.backward()
            trainer.step(8)
        return net

    want = train(lambda n: gluon.Trainer(n.collect_params(), "sgd", {"learning_rate": 0.1}))
    got = train(lambda n: hvd.DistributedTrainer(n.collect_params(), "sgd", {"learning_rate": 0.1},
                                                 gradient_predivide_factor=predivide))
    for w in got.weight.list_data():
        np.testing.assert_allclose(w.asnumpy(), want.weight.data().asnumpy(), atol=1e-6)
    g0, g1 = (g.asnumpy() for g in got.weight.list_grad())
    np.testing.assert_array_equal(g0, g1)


def test_launcher_command_line():
    from symjit import launch
    cmd = launch.build_command("/x/mpiexec", 3, "/tmp/d", ["python", "t.py"], True, True)
    assert cmd[:4] == ["/x/mpiexec", "-n", "3", "-disable-auto-cleanup"]
    assert cmd[-3:] == ["--", "python", "t.py"]
    # the supervisor runs as a module (by path, symjit/random.py would shadow `random`)
    assert cmd[5:7] == ["-m", "symjit.launch"]
    with pytest.raises(SystemExit):
        launch.main(["-n", "2"])


def test_one_kind_of_key_per_store():
    kv = mx.kv.create("local")
    kv.init(3, mx.nd.zeros((2,)))
    for call in (lambda: kv.init("a", mx.nd.zeros((2,))), lambda: kv.push("a", mx.nd.zeros((2,))),
                 lambda: kv.pull("a", out=mx.nd.zeros((2,)))):
        with pytest.raises(MXNetError, match="str"):
            call()
