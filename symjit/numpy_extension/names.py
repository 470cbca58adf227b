"""Which registered operator each `mx.npx` operator function writes (MXNet 1.9.1's choices, as
they appear in exported symbol JSON). Shared by `mx.npx` (arrays) and `mx.sym.npx` (symbols);
the function name is also the automatic node-name hint (`relu0`, `batch_flatten0`)."""
from __future__ import annotations

#: npx function name -> operator name; the function takes the operator's inputs then its
#: attributes, with the operator's argument names
NPX_OPS: dict[str, str] = {
    "activation": "Activation",
    "arange_like": "_contrib_arange_like",
    "batch_dot": "batch_dot",
    "batch_flatten": "Flatten",
    "batch_norm": "BatchNorm",
    "cast": "Cast",
    "convolution": "Convolution",
    "deconvolution": "Deconvolution",
    "dropout": "Dropout",
    "embedding": "Embedding",
    "erf": "erf",
    "erfinv": "erfinv",
    "fully_connected": "FullyConnected",
    "gamma": "gamma",
    "gammaln": "gammaln",
    "gather_nd": "gather_nd",
    "layer_norm": "LayerNorm",
    "leaky_relu": "LeakyReLU",
    "log_softmax": "log_softmax",
    "multibox_detection": "_contrib_MultiBoxDetection",
    "multibox_prior": "_contrib_MultiBoxPrior",
    "multibox_target": "_contrib_MultiBoxTarget",
    "one_hot": "one_hot",
    "pick": "pick",
    "pooling": "Pooling",
    "relu": "_npx_relu",
    "reshape_like": "reshape_like",
    "rnn": "RNN",
    "roi_pooling": "ROIPooling",
    "sequence_mask": "SequenceMask",
    "shape_array": "shape_array",
    "sigmoid": "_npx_sigmoid",
    "slice": "slice",
    "smooth_l1": "smooth_l1",
    "softmax": "softmax",
    "topk": "topk",
}
