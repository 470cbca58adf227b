"""The main demo: `python -m symjit.demo`. Self-contained, no downloads.

1. An elementwise expression run eagerly (NDArray, one numpy op at a time) and compiled
   (Symbol -> IR -> passes -> one fused, vectorized LLVM kernel): same result, speed-up.
2. A small MLP built with Gluon, run imperatively and hybridized (compiled forward and
   backward), trained for a few steps; both agree.
3. What the compiler did (`symjit.inspect`): passes, fusion groups, memory plan.
"""
from __future__ import annotations

import time

import numpy as np

import symjit as mx
from symjit import autograd, gluon, nd


def _time(fn, repeat: int = 10) -> float:
    fn()
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat


def elementwise_demo() -> None:
    n = 2 ** 22
    rng = np.random.default_rng(0)
    arrays = {k: nd.array(rng.standard_normal(n)) for k in "abc"}
    a, b, c = (arrays[k] for k in "abc")

    def eager():
        return nd.relu(a * b + c) * nd.sigmoid(a) - nd.tanh(c)

    sa, sb, sc = (mx.sym.var(k) for k in "abc")
    expr = mx.sym.relu(sa * sb + sc) * mx.sym.sigmoid(sa) - mx.sym.tanh(sc)
    exe = expr.bind(mx.cpu(), arrays, grad_req="null")
    compiled = exe.forward()[0]
    err = float(np.abs(compiled.asnumpy() - eager().asnumpy()).max())
    t_eager, t_compiled = _time(eager, 3), _time(lambda: exe.forward(), 10)
    print(f"[1] relu(a*b + c) * sigmoid(a) - tanh(c) on {n} float32 elements")
    print(f"    eager NDArray {t_eager * 1e3:8.2f} ms | compiled {t_compiled * 1e3:6.2f} ms | "
          f"speed-up {t_eager / t_compiled:5.1f}x | max |diff| {err:.1e}")


def gluon_demo() -> None:
    mx.random.seed(1)
    rng = np.random.default_rng(1)
    x = nd.array(rng.standard_normal((64, 20)))
    y = nd.array(rng.integers(0, 3, 64))

    def build():
        net = gluon.nn.HybridSequential()
        with net.name_scope():
            net.add(gluon.nn.Dense(64, activation="relu"), gluon.nn.Dense(3))
        net.initialize(mx.init.Xavier())
        return net

    eager_net, hybrid_net = build(), build()
    hybrid_net(x)
    eager_net(x)
    for p_e, p_h in zip(eager_net.collect_params().values(), hybrid_net.collect_params().values()):
        p_h.set_data(p_e.data())
    hybrid_net.hybridize()
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    losses = {}
    for name, net in (("imperative", eager_net), ("hybridized", hybrid_net)):
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        history = []
        for _ in range(5):
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(x.shape[0])
            history.append(float(loss.mean().asscalar()))
        losses[name] = history
    diff = max(abs(a - b) for a, b in zip(losses["imperative"], losses["hybridized"]))
    t_eager = _time(lambda: eager_net(x), 20)
    t_hybrid = _time(lambda: hybrid_net(x), 20)
    print("[2] Gluon MLP 20-64-3, 5 SGD steps")
    print(f"    losses imperative {['%.4f' % v for v in losses['imperative']]}")
    print(f"    losses hybridized {['%.4f' % v for v in losses['hybridized']]}  (max diff {diff:.1e})")
    print(f"    forward: imperative {t_eager * 1e6:7.1f} us | hybridized {t_hybrid * 1e6:7.1f} us")


def inspect_demo() -> None:
    data = mx.sym.var("data")
    net = mx.sym.FullyConnected(data, num_hidden=32, name="fc1")
    net = mx.sym.Activation(net, act_type="relu", name="relu1")
    net = mx.sym.FullyConnected(net, num_hidden=10, name="fc2")
    report = mx.inspect(net, shapes={"data": (8, 16)})
    print("[3] symjit.inspect of FullyConnected -> relu -> FullyConnected")
    print("    " + report.passes.replace("\n", "\n    "))
    for name, op, members in report.groups:
        print(f"    group {name} [{op}]: {', '.join(members)}")
    print(f"    memory plan: {report.memory}")


def main() -> None:
    print(f"symjit {mx.__symjit_version__} (MXNet {mx.__version__} API)")
    elementwise_demo()
    gluon_demo()
    inspect_demo()


if __name__ == "__main__":
    main()
