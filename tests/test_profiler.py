"""mx.profiler: MXNet 1.9.1's API over eager ops, compiled graphs (with per-node times) and
the user's own Domain/Task/Frame/Event/Counter/Marker objects."""
import json
import time

import numpy as np
import pytest

import symjit as mx
from symjit import profiler, runtime
from symjit.base import MXNetError
from symjit.gluon import nn
from symjit.ndarray import ndarray as nd_module


@pytest.fixture
def prof(tmp_path):
    """A profiler writing to tmp_path, left stopped and empty afterwards."""
    path = tmp_path / "profile.json"

    def configure(**kwargs):
        kwargs.setdefault("filename", str(path))
        profiler.set_config(**kwargs)

    configure.path = path
    yield configure
    profiler.set_state("stop")
    profiler.set_config(filename=str(path))
    profiler.dump(finished=True)
    profiler.dumps(reset=True)


def _events(path, cat=None, ph="X"):
    events = json.loads(path.read_text())["traceEvents"]
    return [e for e in events if e["ph"] == ph and (cat is None or e.get("cat") == cat)]


def test_off_installs_nothing(prof):
    prof(profile_all=True)
    assert nd_module._op_observer is None and runtime.call_hook is None
    profiler.set_state("run")
    assert nd_module._op_observer is not None and runtime.call_hook is not None
    profiler.pause()
    assert nd_module._op_observer is None and runtime.call_hook is None
    profiler.resume()
    assert runtime.call_hook is not None
    profiler.set_state("stop")
    assert nd_module._op_observer is None and runtime.call_hook is None


def test_imperative_ops_one_event_each(prof):
    prof(profile_imperative=True, profile_symbolic=False, aggregate_stats=True)
    x = mx.nd.array(np.arange(6.0).reshape(2, 3))
    profiler.set_state("run")
    y = mx.nd.relu(x - 2)
    z = mx.nd.dot(y, y.T)           # may run as a compiled one-node graph: still one op event
    profiler.set_state("stop")
    np.testing.assert_allclose(z.asnumpy(), np.maximum(x.asnumpy() - 2, 0) @ np.maximum(x.asnumpy() - 2, 0).T)
    profiler.dump()
    names = [e["name"] for e in _events(prof.path)]
    assert names == ["_minus_scalar", "relu", "transpose", "dot"]
    assert all(e["cat"] == "operator" and e["dur"] >= 0 for e in _events(prof.path))
    assert _events(prof.path, "graph") == []


def test_nothing_recorded_when_stopped_or_paused(prof):
    prof(profile_all=True)
    x = mx.nd.ones((3,))
    mx.nd.relu(x)
    profiler.set_state("run")
    mx.nd.exp(x)
    profiler.pause()
    mx.nd.log(x)
    profiler.resume()
    mx.nd.sqrt(x)
    profiler.set_state("stop")
    mx.nd.abs(x)
    profiler.dump()
    assert [e["name"] for e in _events(prof.path)] == ["exp", "sqrt"]


def _mlp():
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu", in_units=10), nn.Dense(4, in_units=16))
    net.initialize(mx.init.Xavier())
    net.hybridize()
    return net


def test_symbolic_graph_calls_with_node_times(prof):
    prof(profile_symbolic=True, profile_imperative=False, aggregate_stats=True)
    net = _mlp()
    x = mx.nd.array(np.random.RandomState(0).rand(8, 10).astype(np.float32))
    profiler.set_state("run")          # graphs compiled from here on time their nodes
    out = [net(x).asnumpy() for _ in range(3)]
    profiler.set_state("stop")
    profiler.dump()
    graphs = _events(prof.path, "graph")
    assert len(graphs) == 3
    nodes = _events(prof.path, "operator")
    assert nodes and all("graph" in e["args"] and "node" in e["args"] for e in nodes)
    assert any(e["name"].startswith("FullyConnected") for e in nodes)
    for g in graphs:     # node events lie end to end inside their call's event
        inside = [e for e in nodes if g["ts"] <= e["ts"] <= g["ts"] + g["dur"] + 1e-3]
        assert inside
        assert sum(e["dur"] for e in inside) <= g["dur"] + 1e-3
    np.testing.assert_allclose(out[0], out[2])
    table = profiler.dumps()
    assert "graph\n=================" in table and "operator\n=================" in table


def test_symbolic_only_records_no_eager_op_nor_its_compiled_kernel(prof):
    prof(profile_symbolic=True, profile_imperative=False, profile_memory=False)
    from symjit.ndarray import fastpath
    a = mx.nd.array(np.random.RandomState(1).rand(256, 256).astype(np.float32))
    w = mx.nd.ones((64, 256))
    assert fastpath.try_compiled_op(mx.ops.get_op("FullyConnected"), mx.ops.get_op("FullyConnected").parse(
        {"num_hidden": 64, "no_bias": True}), [a._data, w._data], False) is not None   # a compiled graph runs it
    profiler.set_state("run")
    mx.nd.FullyConnected(a, w, no_bias=True, num_hidden=64)
    profiler.set_state("stop")
    profiler.dump()
    assert _events(prof.path) == []


def test_graph_compiled_before_run_is_recorded_without_nodes(prof):
    prof(profile_symbolic=True, profile_imperative=False)
    net = _mlp()
    x = mx.nd.ones((2, 10))
    net(x)                          # compiled while the profiler is off: no counters
    profiler.set_state("run")
    net(x)
    profiler.set_state("stop")
    profiler.dump()
    assert len(_events(prof.path, "graph")) == 1
    assert _events(prof.path, "operator") == []


def test_dumps_table_and_json(prof):
    prof(profile_imperative=True, aggregate_stats=True)
    x = mx.nd.ones((4,))
    profiler.set_state("run")
    for _ in range(3):
        mx.nd.exp(x)
    mx.nd.log(x)
    profiler.set_state("stop")
    table = profiler.dumps(sort_by="count")
    lines = table.splitlines()
    assert lines[1] == "Profile Statistics:" and lines[2] == "\tNote the difference in units for different entries."
    header = lines.index("operator") + 2
    assert lines[header] == (f"{'Name':<25}{'Total Count':>16} {'Time (ms)':>16} {'Min Time (ms)':>16} "
                             f"{'Max Time (ms)':>16} {'Avg Time (ms)':>16}")
    rows = lines[header + 2:header + 4]
    assert rows[0].split()[:2] == ["exp", "3"] and rows[1].split()[:2] == ["log", "1"]
    total, lo, hi, avg = map(float, rows[0].split()[2:])
    assert lo <= avg <= hi and avg == pytest.approx(total / 3, abs=2e-4)
    ascending = profiler.dumps(sort_by="count", ascending=True).splitlines()
    assert ascending[header + 2].split()[0] == "log"
    doc = json.loads(profiler.dumps(format="json", reset=True))
    assert doc["Time"]["operator"]["exp"]["Count"] == 3 and doc["Unit"] == {"Time": "ms", "Memory": "kb"}
    assert "operator" not in profiler.dumps()          # reset cleared the statistics


def test_no_aggregates_without_aggregate_stats(prof):
    prof(profile_imperative=True)
    profiler.set_state("run")
    mx.nd.exp(mx.nd.ones((2,)))
    profiler.set_state("stop")
    assert "operator" not in profiler.dumps()


def test_domain_objects(prof):
    prof(aggregate_stats=True)
    domain = profiler.Domain("mydomain")
    task, frame, event = domain.new_task("mytask"), domain.new_frame("myframe"), profiler.Event("myevent")
    counter, marker = domain.new_counter("mycounter", 5), domain.new_marker("mymarker")
    profiler.set_state("run")
    for obj in (task, frame, event):
        obj.start()
        time.sleep(0.002)
        obj.stop()
    counter.set_value(10)
    counter += 3
    counter -= 1
    counter.increment(2)
    counter.decrement()
    marker.mark("global")
    profiler.set_state("stop")
    profiler.dump()
    spans = {e["name"]: e for e in _events(prof.path)}
    assert spans["mytask"]["cat"] == "mydomain" and spans["myevent"]["cat"] == "event"
    assert all(spans[n]["dur"] >= 2000 for n in ("mytask", "myframe", "myevent"))      # microseconds
    values = [e["args"]["mycounter"] for e in _events(prof.path, ph="C")]
    assert values == [10, 13, 12, 14, 13] and counter.value == 13
    (mark,) = _events(prof.path, ph="i")
    assert mark["name"] == "mymarker" and mark["s"] == "g"
    doc = json.loads(profiler.dumps(format="json"))
    assert doc["Time"]["mydomain"]["mycounter"]["Max"] == 14 and doc["Time"]["mydomain"]["mycounter"]["Count"] == 5
    with pytest.raises(MXNetError):
        profiler.Event("never").stop()
    with pytest.raises(MXNetError):
        marker.mark("galaxy")


def test_scope_tags_events(prof):
    prof(profile_imperative=True)
    profiler.set_state("run")
    with profiler.scope("outer") as outer:
        assert outer == "outer:" and profiler.current_scope() == "outer:"
        mx.nd.exp(mx.nd.ones((2,)))
        with profiler.scope("inner"):
            mx.nd.log(mx.nd.ones((2,)))
        with profiler.scope("alone:", append_mode=False):
            mx.nd.sqrt(mx.nd.ones((2,)))
    assert profiler.current_scope() == "<unk>:"
    profiler.set_state("stop")
    profiler.dump()
    scopes = {e["name"]: e["args"]["profiler_scope"] for e in _events(prof.path) if "args" in e}
    assert scopes == {"exp": "outer:", "log": "outer:inner:", "sqrt": "alone:"}


def test_dump_finished_drops_events(prof):
    prof(profile_imperative=True)
    profiler.set_state("run")
    mx.nd.exp(mx.nd.ones((2,)))
    profiler.dump(finished=False)
    mx.nd.log(mx.nd.ones((2,)))
    profiler.dump()
    assert [e["name"] for e in _events(prof.path)] == ["exp", "log"]
    profiler.dump()
    assert _events(prof.path) == []


def test_continuous_dump_writes_periodically(prof):
    prof(profile_imperative=True, continuous_dump=True, dump_period=0.05)
    profiler.set_state("run")
    mx.nd.exp(mx.nd.ones((2,)))
    deadline = time.time() + 10
    while not prof.path.exists() and time.time() < deadline:
        time.sleep(0.02)
    profiler.set_state("stop")
    assert [e["name"] for e in _events(prof.path)][:1] == ["exp"]


def test_bad_arguments(prof):
    with pytest.raises(MXNetError, match="unknown argument 'profile_everything'"):
        profiler.set_config(profile_everything=True)
    with pytest.raises(MXNetError, match="'run' or 'stop'"):
        profiler.set_state("go")
    with pytest.raises(MXNetError, match="format"):
        profiler.dumps(format="xml")
    with pytest.raises(MXNetError, match="sort_by"):
        profiler.dumps(sort_by="median")
    with pytest.raises(MXNetError, match="server"):
        profiler.set_state("run", profile_process="server")
    with pytest.raises(MXNetError, match="boolean"):
        profiler.set_config(profile_all="maybe")
    profiler.set_config(profile_all="True", aggregate_stats="false", filename=str(prof.path))   # MXNet passes strings
    assert profiler._rec.config["profile_all"] is True and profiler._rec.config["aggregate_stats"] is False


def test_mx_profiler_attribute():
    assert mx.profiler is profiler and mx.runtime.Features().is_enabled("PROFILER")


def test_training_step_records_backward_graph_and_optimizer_updates(prof):
    prof(profile_all=True, aggregate_stats=True)
    net = _mlp()
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    x = mx.nd.ones((4, 10))
    profiler.set_state("run")
    for _ in range(2):
        with mx.autograd.record():
            loss = net(x).sum()
        loss.backward()
        trainer.step(4)
    profiler.set_state("stop")
    doc = json.loads(profiler.dumps(format="json"))
    graphs = doc["Time"]["graph"]
    assert any(name.endswith("_backward") for name in graphs), graphs
    assert doc["Time"]["operator"]["sgd_update"]["Count"] >= 2     # fused update kernels, per step


def test_memory_counter_follows_live_numpy_buffers(prof):
    from symjit import _runtime
    prof(profile_memory=True, profile_imperative=True, profile_symbolic=False, aggregate_stats=True)
    profiler.set_state("run")
    base = _runtime.numpy_memory(False)[0]
    x = np.ones(1000)                                   # counted: 8000 bytes, exactly
    assert _runtime.numpy_memory(False)[0] - base == 8000
    del x
    assert _runtime.numpy_memory(False)[0] == base
    a = mx.nd.zeros((1000,), dtype="float64")
    b = mx.nd.exp(a)
    c = mx.nd.exp(b)                                    # three 8000-byte results at least
    profiler.set_state("stop")
    live = _runtime.numpy_memory(False)[0]
    assert live - base >= 24000
    profiler.dump()
    samples = [e["args"]["Memory: cpu/0"] for e in _events(prof.path, "Device Storage", ph="C")]
    assert samples and samples[-1] == live
    assert max(samples) - base >= 24000
    table = profiler.dumps()
    lines = table.splitlines()
    header = lines.index("Device Storage") + 2
    assert lines[header] == f"{'Name':<25}{'Total Count':>16} {'Min Use  (kb)':>16} {'Max Use  (kb)':>16} {'Avg Use  (kb)':>16}"
    row = lines[header + 2].split()
    assert row[:3] == ["Memory:", "cpu/0", str(len(samples))]
    assert float(row[4]) == pytest.approx(max(samples) / 1024, abs=1e-3)
    assert json.loads(profiler.dumps(format="json"))["Memory"]["Device Storage"]["Memory: cpu/0"]["Count"] == len(samples)
    del a, b, c
