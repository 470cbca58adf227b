"""Training step time: symjit's ordinary Gluon loop against PyTorch eager and JAX `jit`.

Three workloads (issue 24), each written once as an ordinary Gluon loop under `import symjit
as mx` (hybridized network, loss block not hybridized, `gluon.Trainer`), and the same workload
in PyTorch eager (CPU) and JAX `jit` where those are installed (a peer that is not installed is
skipped with a printed note; they are measuring tools, not symjit dependencies:
`pip install torch==2.13.0` (CPU wheel), `pip install jax jaxlib`):
  cnn   CIFAR-size CNN: [3x3 conv, BatchNorm, relu, 2x2 max-pool] with 32 then 64 channels,
        Dense 128 relu, Dense 10; batch 64 of 3x32x32; SGD lr 0.01 momentum 0.9
  lstm  language model: Embedding 5000x128, 2-layer LSTM 256, Dense 5000 on every step;
        sequence 35, batch 32 (layout TNC), softmax cross-entropy; SGD lr 0.1 (zero initial state)
  mlp   784-512(relu)-512(relu)-10, batch 64; SGD lr 0.05 momentum 0.9
A step is forward, loss, backward and optimizer update on one fixed synthetic batch (so the
loss must fall: the first and last losses of each runtime are printed as a correctness check,
not a speed assertion). All runtimes run in this one process with the same intra-op thread count
(`--threads`, default 2: the process pinned to that many CPUs, symjit.runtime.set_num_threads,
torch.set_num_threads with OMP_WAIT_POLICY=PASSIVE, XLA's flags set before JAX is imported).
After warm-up steps, rounds of `--steps` steps alternate between the runtimes (order reversed
every round); each runtime's figure is the median step time over all its rounds and a ratio is
the median of the rounds' paired ratios. MXNet 1.9.1 cannot be installed next to symjit:
`--mxnet PYTHON` names an interpreter where it is (its own venv) and the same Gluon step (one
function, `gluon_step`, for both packages) runs there in a subprocess that takes part in the
alternating rounds (it inherits the CPU affinity and thread variables; it times its own steps).
Without `--mxnet` the issue's quoted MXNet figures are printed, labelled as not measured.
`--symjit-ref DIR` runs symjit from another (built) source tree the same way: before/after pairs.

    python benchmarks/bench_train.py [--only cnn lstm mlp] [--threads 2] [--rounds 5] [--steps 10]
                                     [--mxnet /work/mxref/bin/python] [--symjit-ref OLD_TREE]
                                     [--symjit-worker]  # this tree's symjit in a subprocess too
                                     [--profile [--windows 5]]  # symjit: cProfile, per-node times

Findings (2026-12, the 2-core development machine under a load average of 5-8 from other work:
absolute times are inflated and noisy, shares and paired ratios are what to read; `--profile`
prints them: cProfile of the step, then every native node's time inside the compiled forward
and backward graphs). One run of this script:
    cnn   symjit 62 ms, torch 62 ms (paired 0.86), jax-jit 203 ms; MXNet 1.9.1 24-28 ms (issue)
    lstm  symjit 2102 ms, torch 289 ms (paired 6.2), jax-jit 537 ms; MXNet 1.9.1 130 ms (issue)
    mlp   symjit 5.5 ms, torch 6.2 ms, jax-jit 4.2 ms (paired 1.31)
A second run under heavier load (load average ~5.6 from other work): cnn 137 / torch 155 ms
(paired 0.96), lstm 7.06 s / torch 448 ms (paired 15.3; the numpy RNN op suffers most from
contention), mlp 8.2 / torch 14.5 / jax 3.7 ms (paired 0.98 and 2.28). The MXNet ratios the
script prints are only meaningful on an otherwise idle machine.
Where symjit's step goes:
  cnn   95% native code inside the two compiled graphs: forward 38%, backward 62%. Forward:
        conv1 36%, conv0 17%, the two relus 23% (each a separate pass over BatchNorm's output,
        as long as BatchNorm itself), pooling 15%, BatchNorm 7%. Backward: conv1 weight grad
        25%, conv1 data grad 23%, conv0 weight grad 15% (3 input channels: K = 27), 2x2 pooling
        backward 17% (twice its forward), BatchNorm backward 7%, conv bias grads re-read the
        gradient BatchNorm backward just reduced (2%). Python, autograd, eager loss and the
        optimizer (one multi-tensor native call) are ~5%. The forward's kept activations come
        back as fresh arrays; glibc's default malloc policy unmapped and re-faulted them every
        step (1000-2700 page faults a step, varying run to run; in such runs the two relus,
        the first writers of those pages, took 7.5 and 5.8 ms against 0.9 and 0.6 ms, the
        forward 39 ms against 25 ms). `symjit.runtime.retain_freed_memory` (on by default
        since this benchmark) keeps freed memory mapped: ~0 faults a step.
  lstm  ~93% is the fused RNN op, which runs in numpy (float64) as Python nodes: its forward
        ~23%, then `_backward_RNN` recomputes the whole forward (~19%) before back-propagating
        through time (~42%), each step two small GEMMs. The Dense 5000 forward and backward
        GEMMs are ~7%; the eager loss (log_softmax over 1120x5000 in numpy) was ~9% (halved by
        this change: no full-size cast copies, bit-identical). The same network with only its
        children hybridized (the LSTM layer then unrolls into its compiled graph, 35 x 2 cells)
        takes 0.85 s a step against 8.4 s for the fused op, alternating in one process on a
        very busy machine (10x), after an 8 s first call.
  mlp   native forward 1.7 ms, backward 5.3 ms (per node the best of 8 windows). The backward's
        GEMM forms run far below the forward's (X W^T) form per FLOP: the first layer's weight
        gradient dY^T X takes 3.0 ms against 1.24 ms for its forward (same FLOPs), the second
        layer's data gradient dY W 1.67 ms against 0.46 ms for its forward. Per-step Python
        (eager loss ops and their recorded backward, tape, Trainer) ~1-1.5 ms of ~5.
CNN against MXNet 1.9.1 measured in the same run (`--mxnet /work/mxref/bin/python --symjit-ref
TREE`, TREE a build of the commit before the convolution-backward, pooling and BatchNorm-backward
kernels below; 2026-12, the 2-core machine under a load average of 12-14 from other work, so
wall figures are ~4-5x an idle machine's). Wall ratios swing from run to run under such load
(the scheduler shares the cores per thread: MXNet's process runs 8 threads, symjit's 4); the
CPU time per step (all threads of each process) is the steadier comparison:
    1 thread, 7 rounds:   symjit/mxnet 0.78 paired (CPU 60.7 against 76.6 ms a step),
                          symjit/before 0.71 (CPU 82.5 ms before)
    2 threads, 7 rounds:  symjit/mxnet 0.83 (CPU 50.2 against 67.0), symjit/before 0.77 (70.0)
    2 threads, 9 rounds:  symjit/mxnet 1.55 (wall 185 against 114 ms; CPU 51.5 against 58.1),
                          symjit/before 0.72 (CPU 67.9)
    a later pair of runs: 1 thread symjit/mxnet 1.005 (CPU 43.0 against 45.1), /before 0.77;
                          2 threads 1.69 (wall 162 against 90 ms, CPU 49.6 against 60.8), /before
                          0.72 -- symjit's 2-thread wall above its 1-thread one: under this load a
                          fork-join region waits for whichever of its threads is off the CPU
  The thread pool's dynamic mode (SYMJIT_DYNAMIC=1, on by default in these runs, now off by
  default: under a load average >= CPUs + threads every
  parallel_for runs its chunks on the caller alone; the ~26 parallel regions of a CNN step
  otherwise waited ~13 ms a step for a preempted worker, and with per-session CPU shares the
  2-thread process got no more CPU than a 1-thread one): 2 threads, 9 rounds, load 5-9, five
  runs against MXNet 1.9.1 and the tree before: symjit/mxnet 1.35, 0.80, 1.08, 0.75, 0.81
  (median 0.81; CPU 52.7-65.1 against 60.9-80.3 ms a step), symjit/before 1.05, 0.83, 0.89,
  0.90, 1.05. A control with the mode off (SYMJIT_DYNAMIC=0, otherwise the same code as the
  tree before) gave symjit/before 0.78 and 0.88 and symjit/mxnet 0.86 and 0.90: the in-process
  runtime is favoured over its subprocess peers by about that much under this load, so read
  the mode's own effect from bench_pool_dynamic.py (fresh processes, on/off alternating):
  median wall on/off 0.91 in one run of 6 pairs, 0.99 in the next; within the noise, hence off
  by default. Two final runs (load 9.5-9.8), mode off then on: symjit/mxnet 0.88 and 0.91 (CPU
  59.3 against 76.4, 55.9 against 68.7 ms), symjit/before 1.16 and 1.09 (the noise of a paired
  ratio under this load is about +-15%). 1 thread (the mode does not apply):
  symjit/mxnet 0.80 (CPU 60.7 against 74.7 ms), symjit/before 0.975.
  Per node (1 thread, best of 8 windows, same load; before -> after, ms): backward graph 133 ->
  51, forward 46 -> 31; conv0 weight gradient 19.9 -> 3.1, conv1 weight gradient 30.0 -> 11.7,
  conv1 data gradient 25.2 -> 14.2, first 2x2 pooling backward 17.9 -> 2.4, the two poolings'
  forward 9.4 -> 2.8, first BatchNorm backward 12.4 -> 6.1. The gradient kernels alone
  (bench_gemm_choices.py --section convbwd, CPU time, 1 thread): conv0 dW 5.6 -> 1.5 ms, conv1
  dW 8.5 -> 5.2, conv1 dX 6.9 -> 6.1. Now convolutions are ~60% of the step's native time, the
  memory-bound passes (BatchNorm, relu, pooling, bias gradient) ~25%, and Python (eager loss
  ops at ~40-50 us each against MXNet's ~25, tape, Trainer) the rest.
LSTM against MXNet 1.9.1 in the same run (`--symjit-worker --mxnet /work/mxref/bin/python
--symjit-ref TREE`, TREE the commit before the changes below; every runtime in its own
subprocess, so none is favoured by running in the parent; 2026-12, the 2-core machine under a
load average of 7-9 from other work: walls ~5x an idle machine's, CPU times inflated and noisy
too -- the same build measured 253 and 309 ms CPU a step in two runs):
    1 thread, 9 rounds of 4:  symjit/mxnet 1.047 (CPU 242 against 230 ms a step),
                              symjit/before 0.943 (CPU 242 against 251 ms)
    2 threads, 7 rounds of 4: symjit/mxnet 1.232 (CPU 253 against 240 ms a step),
                              symjit/before 0.965 (CPU 253 against 282 ms)
  Where the step goes (1 thread, CPU, each part alone, best of 5-10 alternating calls):
  the GEMMs dominate -- Dense 5000 forward 24 ms (31 before: its X W^T form now packs W and
  stores rows, see nn/gemm.c ngemm), backward data 26 and weight 26 ms (numpy's OpenBLAS: 22
  each), the fused LSTM forward ~22 ms and backward ~42 ms (its input projections 1120 x 256 by
  1024 now 4.2 ms, 6.4 before); the eager loss: log_softmax 10 ms (15: the row max is now a
  vectorized max), its backward 13 ms (21: `_backward_log_softmax` is one native two-pass kernel
  instead of exp, sum, multiply and subtract, and `_backward_pick` runs its native scatter
  instead of numpy zeros + add.at, which cost 21 ms inside a step from page faults on the fresh
  1120 x 5000 one-hot); the bias gradient 3.5 ms; Trainer 2.5 ms; the rest Python and autograd.
  Still ~2700 page faults a step: the 20-22 MB outputs of the compiled graphs and eager ops
  (dense output, RNN reserve, log_softmax, the loss gradients) are fresh numpy arrays, and the
  heap, fragmented by them, still grows (brk) in steady state: reusing those buffers across
  steps is the next step for the LM.
  Found next (perf: 18% of the step's samples in the kernel's clear_page_erms, huge-page faults
  from the compiled kernels' first stores; sys time 76-84 ms of ~320 ms CPU a step): the
  buffers were not fragmented but freed late. A recorded node held its outputs and each output's
  tape entry held the node, so a step's graph (outputs, the RNN reserve, kept activations,
  loss temporaries) was freed only by Python's cyclic collector, steps later; meanwhile every
  step's 20-22 MB arrays came from new heap (brk) that the kernel zeroes on first touch, and the
  trim threshold later returned it. A freed graph (backward without retain_graph) now holds
  untaped copies of its outputs (autograd._untaped): reference counting frees the step's
  arrays when the loop drops them, glibc reuses the same blocks next step, 0 page faults a step
  (the `faults` column), sys time 84 -> 0.3 ms a step. Then the fused LSTM's step products: the
  recurrent weights were row-major blocks with a power-of-two row pitch (G*jn = 512 floats),
  whose rows fall into a few L1 sets; packed in tile panels, the LSTM(256, 2) forward alone
  takes 22-23 ms CPU against 29-36 before (1 thread, alternating processes). Paired runs
  (`--symjit-worker --mxnet ... --symjit-ref <the tree before both>`, 5 rounds of 10 steps,
  torch in the parent process; load average 4.8-6.4):
    1 thread:  symjit/mxnet 0.930 (CPU 189 against 214 ms a step), symjit/before 0.864 (223),
               symjit/torch 0.999 (CPU 186); an earlier run with the first change only: 0.842,
               0.785, 1.248 (CPU 208 / 232 / 230 / 170)
    2 threads: symjit/mxnet 0.829 (CPU 218 against 250), symjit/before 1.142 (CPU 230; an
               earlier run with the first change only 0.889), symjit/torch 1.012 (CPU 199);
               the 2-thread wall ratios swing by +-20% under this load.
  Each part alone (CPU, 1 thread, same load): Dense 5000 forward / dX / dW GEMMs 24.8 / 22.2 /
  22.1 ms against numpy's OpenBLAS 21.4 / 22.4 / 22.8 (~130 GF/s: at the tile peak); what
  torch still does faster in the LSTM step is its LSTM backward (~40-48 ms CPU against ~70) and
  the loss (not part of this comparison's kernels).
Eager loss as one op, BatchNorm + relu fusion, lighter eager dispatch (2026-12, the same
machine, load average 4.6-7; `--symjit-worker --mxnet ... --symjit-ref <tree before>`, torch
and JAX in the parent): SoftmaxCrossEntropyLoss with sparse labels runs eagerly as one op
(`_log_softmax_nll`, bit for bit the four ops it replaces) and one gradient op where the
separate ops would run in numpy (inputs below the native kernels' size): the loss's forward
and backward 0.77-0.98 -> 0.34-0.43 ms CPU (64 x 10); training graphs fuse BatchNorm + relu
(passes/norm_relu.py; bench_bn_relu.py: the CNN's first stage 0.68-0.89 of the unfused time,
the second 0.84-1.0); eager ops ~10% less CPU each.
    mlp 1 thread:  symjit/before 0.785, /jax-jit 0.913 (CPU 4.18 against 3.62 ms), /torch 0.846,
                   /mxnet 0.462 (CPU 6.99); a second run (9 rounds): /before 0.863, /jax-jit
                   1.165 (CPU 5.13 against 4.44), /torch 0.966 -- JAX still takes ~12-15% less CPU
    mlp 2 threads: symjit/before 0.656, /jax-jit 1.076 (CPU 3.96 against 3.66 ms), /torch 0.401,
                   /mxnet 0.480
    cnn 1 thread:  symjit/mxnet 0.812 (CPU 50.6 against 61.9 ms), /torch 0.706, /jax-jit 0.308,
                   /before 1.185 (CPU 50.6 against 48.2: within this load's +-20% noise)
    cnn 2 threads: symjit/mxnet 1.091 (CPU 60.7 against 71.2 ms), /torch 0.573, /jax-jit 0.245,
                   /before 0.859 (CPU 60.7 against 64.9)
  Where the MLP step's CPU goes now (1 thread, perf): GEMM tiles ~45%, the SGD-momentum update
  kernel ~12% (5 streams over 2.7 MB of parameters: at this machine's ~18 GB/s), Python ~30%
  (a 3-layer MLP of width 8 steps in 0.6 ms CPU: forward call 0.07, loss 0.13, backward 0.18,
  Trainer 0.18, loss.mean().asscalar() 0.06).
Per-step frontend cost of the ordinary loop (2026-12, the same machine, load average 7-10 from
other work; `bench_step_overhead.py --ref <tree before>`: a 32-16-16-10 MLP whose kernels take a
few microseconds, CPU time per phase, 6 alternating rounds): the step's Python 543 -> 444 us
(paired 0.82); eager loss 128 -> 93 (0.73: the fused loss op gathers and writes its one-hot head
through flat indices instead of take_along_axis and a scatter-add, maps labels without np.clip
and np.all's wrappers), Trainer 118 -> 90 (0.77: the optimizer's native call plan -- kernel
groups, pointer lists, scalar array -- is kept with the Updater's prepared updates and reused;
prepared updates carry their buffer sets), backward 180 -> 156 (0.86), `mean().asscalar()` 54 ->
44 (eager elementwise expressions memoized per attributes, reductions through the ufuncs),
forward 61 -> 59. The 784-512-512-10 MLP in this script, same run conditions (`--symjit-worker
--mxnet ... --symjit-ref <tree before>`, 9 rounds):
    1 thread  (load 7.5, with the per-parameter Trainer changes too): symjit/jax-jit 0.931 (CPU
                          4.36 against 4.37 ms), /before 0.867 (CPU 4.86), /torch 0.938, /mxnet 0.486
    1 thread  (load 9.3): symjit/jax-jit 1.033 (CPU 3.21 against 3.95 ms), /before 0.937 (CPU 4.70),
                          /torch 0.778, /mxnet 0.489; an earlier run (load 6.5): /jax-jit 0.995
                          (CPU 3.19 against 3.11), /before 0.929 (3.49), /torch 0.892, /mxnet 0.509
    2 threads (load 9.5): symjit/jax-jit 1.267 (CPU 4.23 against 3.91 ms), /before 0.930 (4.57),
                          /torch 0.576, /mxnet 0.488; the 2-thread CPU is ~1 ms above the 1-thread
                          one: the pool's workers spin 100 us after each of the step's ~10 parallel
                          regions. SYMJIT_SPIN_US=0 gave symjit/jax-jit 0.917, 0.936 and 1.101 in
                          three runs against 1.138, 1.045 and 3.644 with the default (load ~10):
                          not conclusive under this load, to be measured on an idle machine.
  The CNN (1 thread, load 7.4-8.4, 5 rounds): symjit/mxnet 0.722 (CPU 42.3 against 52.9 ms),
  /before 1.03 (kernels unchanged), /torch 0.570. Per node at 2 threads the CNN's kernels take
  about their 1-thread time under this load (conv1 forward 9.4 against 8.9 ms, its data gradient
  10.3 against 9.2): with every CPU busy a fork-join region waits for its preempted worker, so
  2-thread scaling cannot be read on this machine now.
Next changes, by expected gain:
  1. LSTM: a native fused RNN op (one GEMM for every time step's input projection, one GEMM
     per step for the four gates, gate math fused, the recurrence a compiled loop; the forward
     keeps its gates so the backward does not recompute it; float32). The RNN op is >90% of
     the LM step: 2.1 s -> well under torch's 0.3 s is the size of the gain.
  2. Convolution tiles closer to sgemm's rate (~60-100 GF/s a core against OpenBLAS's ~117);
     BatchNorm passes at memory speed (a channel's rows are 4 KiB runs 128 KiB apart: the
     training forward takes ~3x a copy of the tensor).
  3. Training-pipeline fusions: the conv bias gradient folded into BatchNorm backward's dx
     pass (a full pass over the activation; BatchNorm + relu is fused now).
  4. The backward GEMM forms (dY W for data, dY^T X for weight gradients) at the forward
     GEMM's speed (MLP: about -3 ms of ~5.5 native+Python; the LM's Dense 5000 backward too).
  5. Per-step Python: the Trainer's prepared multi-tensor update reused across steps, the
     tape's backward for a single hybridized node plus one loss node without the general walk.
  6. Kept activations written into buffers the tape reuses across steps (CNN ~2-3%).
"""
from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time

import numpy as np

#: the source tree this file belongs to (its symjit, for --symjit-worker)
_TREE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: MXNet 1.9.1 step times in ms, measured separately (issue 24), not by this script's run
MXNET_191_MS = {"cnn": (24.0, 28.0), "lstm": (130.0, 130.0), "mlp": None}

WORKLOADS = ("cnn", "lstm", "mlp")
VOCAB, EMBED, HIDDEN, SEQ, BATCH_LM = 5000, 128, 256, 35, 32


def make_data(workload: str, seed: int = 0):
    """The fixed synthetic batch (inputs, integer labels) every runtime trains on."""
    rng = np.random.default_rng(seed)
    if workload == "cnn":
        return rng.standard_normal((64, 3, 32, 32)).astype(np.float32), rng.integers(0, 10, 64)
    if workload == "mlp":
        return rng.standard_normal((64, 784)).astype(np.float32), rng.integers(0, 10, 64)
    tokens = rng.integers(0, VOCAB, (SEQ + 1, BATCH_LM))
    return tokens[:-1], tokens[1:]


# ---- symjit (the ordinary Gluon loop) --------------------------------------------------------
def symjit_step(workload: str, x: np.ndarray, y: np.ndarray):
    """`step() -> loss (float)` running one Gluon training step under symjit, and the network."""
    import symjit
    return gluon_step(symjit, workload, x, y)


def gluon_step(mx, workload: str, x: np.ndarray, y: np.ndarray):
    """`step() -> loss (float)` running one Gluon training step, and the network: the same code
    for symjit and for MXNet 1.9.1 itself (`mx` is the imported package)."""
    autograd, gluon = mx.autograd, mx.gluon
    nn, rnn = gluon.nn, gluon.rnn

    mx.random.seed(0)
    if workload == "cnn":
        net = nn.HybridSequential()
        with net.name_scope():
            for ch in (32, 64):
                net.add(nn.Conv2D(ch, 3, padding=1), nn.BatchNorm(), nn.Activation("relu"), nn.MaxPool2D(2))
            net.add(nn.Dense(128, activation="relu"), nn.Dense(10))
        opt = {"learning_rate": 0.01, "momentum": 0.9}
    elif workload == "mlp":
        net = nn.HybridSequential()
        with net.name_scope():
            net.add(nn.Dense(512, activation="relu"), nn.Dense(512, activation="relu"), nn.Dense(10))
        opt = {"learning_rate": 0.05, "momentum": 0.9}
    else:
        class LM(gluon.HybridBlock):
            def __init__(self, **kw):
                super().__init__(**kw)
                with self.name_scope():
                    self.embed = nn.Embedding(VOCAB, EMBED)
                    self.lstm = rnn.LSTM(HIDDEN, 2, input_size=EMBED)
                    self.out = nn.Dense(VOCAB, flatten=False, in_units=HIDDEN)

            def hybrid_forward(self, F, tokens):
                return self.out(self.lstm(self.embed(tokens)))
        net = LM()
        opt = {"learning_rate": 0.1}
    net.initialize(mx.init.Xavier())
    net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", opt)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    data, label = mx.nd.array(x), mx.nd.array(y)
    batch = x.shape[0] if workload != "lstm" else x.shape[1]

    def step() -> float:
        with autograd.record():
            out = net(data)
            loss = loss_fn(out, label)
        loss.backward()
        trainer.step(batch)
        return float(loss.mean().asscalar())
    return step, net


# ---- PyTorch eager ---------------------------------------------------------------------------
def torch_step(workload: str, x: np.ndarray, y: np.ndarray):
    import torch
    from torch import nn
    torch.manual_seed(0)
    if workload == "cnn":
        net = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Flatten(), nn.Linear(64 * 8 * 8, 128), nn.ReLU(), nn.Linear(128, 10))
        opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    elif workload == "mlp":
        net = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
        opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    else:
        class LM(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(VOCAB, EMBED)
                self.lstm = nn.LSTM(EMBED, HIDDEN, 2)
                self.out = nn.Linear(HIDDEN, VOCAB)

            def forward(self, tokens):
                return self.out(self.lstm(self.embed(tokens))[0])
        net = LM()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
    net.train()
    loss_fn = nn.CrossEntropyLoss()
    data = torch.from_numpy(x if workload != "lstm" else x.astype(np.int64))
    label = torch.from_numpy(y.astype(np.int64))

    def step() -> float:
        opt.zero_grad(set_to_none=True)
        out = net(data)
        loss = loss_fn(out.reshape(-1, out.shape[-1]), label.reshape(-1))
        loss.backward()
        opt.step()
        return float(loss.detach())
    return step


# ---- JAX jit ---------------------------------------------------------------------------------
def jax_step(workload: str, x: np.ndarray, y: np.ndarray):
    import jax
    import jax.numpy as jnp
    key = iter(jax.random.split(jax.random.PRNGKey(0), 16))

    def glorot(shape, fan_in, fan_out):
        s = np.sqrt(6.0 / (fan_in + fan_out))
        return jax.random.uniform(next(key), shape, jnp.float32, -s, s)

    def dense(n_in, n_out):
        return {"w": glorot((n_in, n_out), n_in, n_out), "b": jnp.zeros((n_out,), jnp.float32)}

    def xent(logits, labels):
        logp = jax.nn.log_softmax(logits.reshape(-1, logits.shape[-1]))
        return -jnp.mean(jnp.take_along_axis(logp, labels.reshape(-1, 1), axis=1))

    state = {}
    if workload == "mlp":
        params = {"l0": dense(784, 512), "l1": dense(512, 512), "l2": dense(512, 10)}
        lr, mom = 0.05, 0.9

        def forward(p, s, xb):
            h = jax.nn.relu(xb @ p["l0"]["w"] + p["l0"]["b"])
            h = jax.nn.relu(h @ p["l1"]["w"] + p["l1"]["b"])
            return h @ p["l2"]["w"] + p["l2"]["b"], s
    elif workload == "cnn":
        params = {"c0": {"w": glorot((32, 3, 3, 3), 27, 288), "b": jnp.zeros((32,))},
                  "c1": {"w": glorot((64, 32, 3, 3), 288, 576), "b": jnp.zeros((64,))},
                  "bn0": {"g": jnp.ones((32,)), "b": jnp.zeros((32,))},
                  "bn1": {"g": jnp.ones((64,)), "b": jnp.zeros((64,))},
                  "d0": dense(64 * 8 * 8, 128), "d1": dense(128, 10)}
        state = {f"bn{i}": {"mean": jnp.zeros((c,)), "var": jnp.ones((c,))} for i, c in ((0, 32), (1, 64))}
        lr, mom = 0.01, 0.9

        def forward(p, s, xb):
            h, new = xb, {}
            for i in range(2):
                h = jax.lax.conv_general_dilated(h, p[f"c{i}"]["w"], (1, 1), "SAME",
                                                 dimension_numbers=("NCHW", "OIHW", "NCHW"))
                h = h + p[f"c{i}"]["b"][None, :, None, None]
                mean, var = h.mean(axis=(0, 2, 3)), h.var(axis=(0, 2, 3))
                new[f"bn{i}"] = {"mean": 0.9 * s[f"bn{i}"]["mean"] + 0.1 * mean,
                                 "var": 0.9 * s[f"bn{i}"]["var"] + 0.1 * var}
                h = (h - mean[None, :, None, None]) * jax.lax.rsqrt(var + 1e-5)[None, :, None, None]
                h = jax.nn.relu(h * p[f"bn{i}"]["g"][None, :, None, None] + p[f"bn{i}"]["b"][None, :, None, None])
                h = jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
            h = h.reshape(h.shape[0], -1)
            h = jax.nn.relu(h @ p["d0"]["w"] + p["d0"]["b"])
            return h @ p["d1"]["w"] + p["d1"]["b"], new
    else:
        params = {"embed": jax.random.normal(next(key), (VOCAB, EMBED)) * 0.05,
                  "out": dense(HIDDEN, VOCAB)}
        for layer, n_in in ((0, EMBED), (1, HIDDEN)):
            params[f"lstm{layer}"] = {"wx": glorot((n_in, 4 * HIDDEN), n_in, 4 * HIDDEN),
                                      "wh": glorot((HIDDEN, 4 * HIDDEN), HIDDEN, 4 * HIDDEN),
                                      "b": jnp.zeros((4 * HIDDEN,))}
        lr, mom = 0.1, 0.0

        def lstm_layer(p, seq):
            gx = seq @ p["wx"] + p["b"]                     # all time steps' input gates at once

            def cell(carry, g):
                h, c = carry
                i, f, gg, o = jnp.split(g + h @ p["wh"], 4, axis=-1)
                c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(gg)
                h = jax.nn.sigmoid(o) * jnp.tanh(c)
                return (h, c), h
            zero = jnp.zeros((seq.shape[1], HIDDEN), jnp.float32)
            return jax.lax.scan(cell, (zero, zero), gx)[1]

        def forward(p, s, xb):
            h = p["embed"][xb]
            h = lstm_layer(p["lstm1"], lstm_layer(p["lstm0"], h))
            return h @ p["out"]["w"] + p["out"]["b"], s

    def loss_of(p, s, xb, yb):
        logits, new = forward(p, s, xb)
        return xent(logits, yb), new

    @jax.jit
    def update(p, v, s, xb, yb):
        (loss, new), g = jax.value_and_grad(loss_of, has_aux=True)(p, s, xb, yb)
        v = jax.tree_util.tree_map(lambda vi, gi: mom * vi - lr * gi, v, g)
        p = jax.tree_util.tree_map(lambda pi, vi: pi + vi, p, v)
        return p, v, new, loss

    carry = [params, jax.tree_util.tree_map(jnp.zeros_like, params), state]
    xb, yb = jnp.asarray(x), jnp.asarray(y.astype(np.int32))

    def step() -> float:
        carry[0], carry[1], carry[2], loss = update(carry[0], carry[1], carry[2], xb, yb)
        return float(loss)       # blocks until the step is done
    return step


# ---- another process: MXNet 1.9.1, or symjit from another source tree ---------------------------
class GluonWorker:
    """The same Gluon step (`gluon_step`) run by this file in a subprocess of `python` with
    `package` imported (`mxnet` where MXNet 1.9.1 is installed -- symjit never imports it -- or
    `symjit` from the source tree `path`, e.g. a build of an earlier commit). The child inherits
    this process's CPU affinity and thread variables; `run_round(n)` has it run n steps and
    returns (seconds per step measured in the child, the losses), so the pipe's latency is not in
    the figure. Protocol: one line "n" in, one JSON line {"seconds", "losses"} out."""

    def __init__(self, python: str, package: str, workload: str, threads: int, path: str | None = None):
        import subprocess
        env = dict(os.environ)
        if path:
            env["PYTHONPATH"] = os.path.abspath(path)
        else:
            env.pop("PYTHONPATH", None)
        self.proc = subprocess.Popen([python, os.path.abspath(__file__), "--worker", workload, "--package", package,
                                      "--threads", str(threads)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        hello = self._read()
        self.version, self.where = hello["version"], hello["where"]

    def _read(self) -> dict:
        import json
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker exited (status {self.proc.wait()}); see its stderr above")
        return json.loads(line)

    def run_round(self, n: int):
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        reply = self._read()
        return reply["seconds"], reply["losses"], reply["cpu"], reply["faults"]

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def worker_main(workload: str, package: str, threads: int) -> None:
    """The child side of `GluonWorker`."""
    import importlib
    import json
    if package == "symjit":
        set_threads(threads)
    mod = importlib.import_module(package)
    step, _ = gluon_step(mod, workload, *make_data(workload))
    print(json.dumps({"version": getattr(mod, "__version__", "?"), "where": os.path.dirname(mod.__file__)}),
          flush=True)
    for line in sys.stdin:
        cpu = {}
        seconds, losses = timed_round(step, int(line), cpu)
        print(json.dumps({"seconds": seconds, "losses": losses, "cpu": cpu["seconds"], "faults": cpu["faults"]}),
              flush=True)


# ---- timing ----------------------------------------------------------------------------------
def timed_round(step, n: int, cpu: dict | None = None):
    """(seconds per step, losses) of n calls of `step`, or of `step.run_round(n)` for a
    runtime in another process; `cpu["seconds"]` gets the process CPU time per step (all its
    threads: the work done, less sensitive than wall time to other load on the machine) and
    `cpu["faults"]` its minor page faults per step (fresh memory touched every step: a step
    that keeps reusing its buffers takes none)."""
    if hasattr(step, "run_round"):
        seconds, losses, cpu_s, faults = step.run_round(n)
    else:
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        c0, t0 = time.process_time(), time.perf_counter()
        losses = [step() for _ in range(n)]
        seconds, cpu_s = (time.perf_counter() - t0) / n, (time.process_time() - c0) / n
        faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / n
    if cpu is not None:
        cpu["seconds"], cpu["faults"] = cpu_s, faults
    return seconds, losses


def alternate(steps: dict, rounds: int, per_round: int, warmup: int, cpu: dict | None = None):
    """Per runtime: its per-round seconds per step, and the losses seen (and in `cpu`, if
    given, its per-round CPU seconds per step, and under (runtime, "faults") its page faults per
    step). After `warmup` steps each, rounds alternate
    between the runtimes, the order reversed every round."""
    losses = {k: timed_round(f, warmup)[1] if warmup else [] for k, f in steps.items()}
    times = {k: [] for k in steps}
    order = list(steps)
    for r in range(rounds):
        for k in (order if r % 2 == 0 else order[::-1]):
            used = {}
            seconds, seen = timed_round(steps[k], per_round, used)
            times[k].append(seconds)
            losses[k].extend(seen)
            if cpu is not None:
                cpu.setdefault(k, []).append(used["seconds"])
                cpu.setdefault((k, "faults"), []).append(used["faults"])
    return times, losses


def print_rounds(times: dict, losses: dict, base_key: str, extra=lambda k: "") -> None:
    """One line per runtime: its median step time, its paired ratio against `base_key`'s
    (the median of the rounds' ratios), `extra(runtime)` and whether its loss fell."""
    base = times[base_key]
    for k, ts in times.items():
        ratio = "" if k == base_key else \
            f"{base_key}/{k} {statistics.median(b / t for b, t in zip(base, ts)):5.3f} (paired)"
        ok = "falls" if losses[k][-1] < losses[k][0] else "DOES NOT FALL"
        print(f"  {k:11s} {statistics.median(ts) * 1e3:9.2f} ms  {ratio:34s} {extra(k)}"
              f"loss {losses[k][0]:.4f} -> {losses[k][-1]:.4f} ({ok})")


def set_threads(n: int) -> None:
    os.environ.setdefault("XLA_FLAGS", f"--xla_cpu_multi_thread_eigen=true intra_op_parallelism_threads={n}")
    os.environ.setdefault("OMP_NUM_THREADS", str(n))
    # PyTorch's OpenMP workers spin after each op by default; on a machine with other load that
    # costs it up to 10x (MLP step 67 ms spinning against 6 ms passive), so they sleep instead
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    # and the process on n CPUs, which bounds every runtime whatever its pool size
    if hasattr(os, "sched_setaffinity") and len(os.sched_getaffinity(0)) > n:
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:n])
    from symjit import runtime
    runtime.set_num_threads(n)


def peers(workload: str, x, y) -> dict:
    found = {}
    for name, make, module in (("torch", torch_step, "torch"), ("jax-jit", jax_step, "jax")):
        try:
            __import__(module)
        except ImportError:
            print(f"  note: {module} is not installed; {name} skipped (pip install "
                  f"{'torch==2.13.0' if module == 'torch' else 'jax jaxlib'})")
            continue
        if module == "torch":
            import torch
            torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        found[name] = make(workload, x, y)
    return found


def run_workload(workload: str, args) -> None:
    x, y = make_data(workload)
    workers = {}
    if args.symjit_worker:
        # this tree's symjit in a subprocess too: every runtime under the same conditions
        sym_step = workers["symjit"] = GluonWorker(sys.executable, "symjit", workload, args.threads, _TREE)
    else:
        sym_step, _ = symjit_step(workload, x, y)
    steps = {"symjit": sym_step}
    if args.mxnet:
        workers["mxnet"] = GluonWorker(args.mxnet, "mxnet", workload, args.threads)
    if args.symjit_ref:
        workers["symjit-ref"] = GluonWorker(sys.executable, "symjit", workload, args.threads, args.symjit_ref)
    steps.update(workers)
    steps.update(peers(workload, x, y))
    load = os.getloadavg()
    cpu: dict = {}
    times, losses = alternate(steps, args.rounds, args.steps, args.warmup, cpu)
    print(f"== {workload}: median ms/step over {args.rounds} rounds of {args.steps} steps "
          f"({args.threads} threads; load average before {load[0]:.2f}, after {os.getloadavg()[0]:.2f})")
    print_rounds(times, losses, "symjit", lambda k: f"cpu {statistics.median(cpu[k]) * 1e3:7.2f} ms  "
                 f"faults {statistics.median(cpu[(k, 'faults')]):6.0f}  ")
    for name, w in workers.items():
        print(f"  ({name}: {w.where} ({w.version}), same script, its own process)")
        w.close()
    if "mxnet" not in workers and MXNET_191_MS[workload]:
        lo, hi = MXNET_191_MS[workload]
        base = statistics.median(times["symjit"]) * 1e3
        print(f"  mxnet-1.9.1 {lo:.0f}-{hi:.0f} ms  quoted (issue 24; --mxnet PYTHON measures it), "
              f"symjit/mxnet {base / hi:.2f}-{base / lo:.2f}")
    if args.profile:
        profile_symjit(workload, sym_step, args)


def profile_symjit(workload: str, step, args) -> None:
    """cProfile of symjit's step (Python time by function), then the per-node native times of
    the compiled forward and backward graphs of a second, identical network whose graphs are
    compiled with profiling (the backend's `compile_planned` wrapped with profile=True for this
    network only: the timers cost a little, so the timed network above is not profiled)."""
    import cProfile
    import pstats
    from symjit.codegen.llvm import backend
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(args.steps):
        step()
    pr.disable()
    print(f"-- {workload}: cProfile of {args.steps} symjit steps (cumulative, top 30)")
    pstats.Stats(pr, stream=sys.stdout).sort_stats("cumulative").print_stats(30)
    print(f"-- {workload}: cProfile (tottime, top 20)")
    pstats.Stats(pr, stream=sys.stdout).sort_stats("tottime").print_stats(20)

    compiled = []
    plain = backend.compile_planned

    def profiled(*a, **kw):
        cg = plain(*a, **{**kw, "profile": True})
        compiled.append(cg)
        return cg
    backend.compile_planned = profiled
    try:
        pstep, _ = symjit_step(workload, *make_data(workload))
        for _ in range(args.warmup):
            pstep()
    finally:
        backend.compile_planned = plain
    # per node, the fastest of several windows of steps: a busy machine deschedules threads
    # mid-node, which inflates whichever node runs then; the minimum over windows is robust
    best: dict = {}
    walls = []
    for _ in range(args.windows):
        for cg in compiled:
            cg.profile(reset=True)
        t0 = time.perf_counter()
        for _ in range(args.steps):
            pstep()
        walls.append((time.perf_counter() - t0) / args.steps)
        for gi, cg in enumerate(compiled):
            for n in cg.profile():
                key = (gi, n.node)
                per_step = n.seconds / args.steps
                if key not in best or per_step < best[key][0]:
                    best[key] = (per_step, n)
    wall = min(walls)
    print(f"-- {workload}: native time per step inside compiled graphs, per node the best of "
          f"{args.windows} windows of {args.steps} steps (profiled net: best window {wall * 1e3:.2f} ms/step)")
    total = 0.0
    for gi, cg in enumerate(compiled):
        rows = sorted((v for (g, _), v in best.items() if g == gi), key=lambda v: -v[0])
        graph_s = sum(t for t, _ in rows)
        total += graph_s
        print(f"  graph {cg.name!r}: {len(rows)} native nodes, {graph_s * 1e3:.2f} ms/step; top 10:")
        for t, n in rows[:10]:
            print(f"    {t * 1e3:8.3f} ms  {graph_s and t / graph_s * 100:5.1f}%  {n.node} ({n.op}, "
                  f"{n.calls // args.steps}/step)")
    print(f"  all compiled graphs: {total * 1e3:.2f} ms of {wall * 1e3:.2f} ms/step "
          f"(the rest: Python, autograd, Trainer, eager ops outside the graphs)")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="profile symjit's step (cProfile, per-node times)")
    ap.add_argument("--windows", type=int, default=5, help="--profile: windows of --steps steps per node")
    ap.add_argument("--mxnet", metavar="PYTHON", help="an interpreter with MXNet 1.9.1 (e.g. /work/mxref/bin/python): "
                    "the same workload run there in a subprocess, alternating with the others")
    ap.add_argument("--symjit-ref", metavar="DIR", help="a symjit source tree (built) to compare with, e.g. an "
                    "earlier commit's: run in a subprocess like --mxnet (paired ratio before/after)")
    ap.add_argument("--symjit-worker", action="store_true", help="run this tree's symjit in a subprocess as well "
                    "(like --mxnet and --symjit-ref), not in this process: no runtime is favoured by where it runs")
    ap.add_argument("--worker", choices=WORKLOADS, help=argparse.SUPPRESS)
    ap.add_argument("--package", default="mxnet", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.symjit_worker and args.profile:
        ap.error("--profile profiles the in-process symjit step: leave out --symjit-worker")
    if args.worker:
        return worker_main(args.worker, args.package, args.threads)
    set_threads(args.threads)
    for w in args.only:
        run_workload(w, args)


if __name__ == "__main__":
    main()
