"""symjit.passes — one file per pass over `symjit.ir` graphs (see DESIGN.md).

Each pass is a function `Graph -> (Graph, stats)` whose docstring states its guarantee:
  infer.py           infer_types: shape and dtype inference (partial shapes, errors naming the node)
  autodiff.py        autodiff: the backward graph from the ops' gradient rules
  training_graph.py  the joint forward + backward graph of a training step
  fold_constants.py  bind_constants, fold_constants: known inputs become constants, then folded
  inference.py       inference_rewrites: the ops' `inference_rewrite` (Dropout, loss heads),
                     BatchNorm folded into the layer before or made elementwise
  simplify.py        simplify: local algebraic rewrites driven by op traits, to a fixpoint
  cse.py             eliminate_common_subexpressions
  dce.py             eliminate_dead_code
  fusion.py          fuse: elementwise groups, then epilogues of `epilogue_host` ops
  conv_pool.py       fuse_conv_pool: convolution + max pooling (llvm targets only)
  blocked_layout.py  blocked_layout: NCHW16c chains (llvm targets with the AVX-512 kernels)
  inplace.py         plan_inplace: outputs reuse dying inputs' buffers
  concat_in_place.py plan_concat_in_place: concatenations written in place by their producers
  memory_plan.py     plan_memory: one arena (arena.py packs the liveness intervals)
`manager.py` runs the named pipelines for a `symjit.ir.target.Target`: a pass marked
`only_for` some targets is skipped for the others. `rewrite.py` holds the graph-editing
helpers the passes share.
"""
from .infer import InferStats, infer_types  # noqa: F401
from .autodiff import AutodiffStats, autodiff  # noqa: F401
