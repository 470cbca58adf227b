"""MXNet 1.9.1's `_npx_*` / `_npi_*` spellings of operators registered under their legacy names
(`_npx_activation` is `Activation`, `_npx__image_crop` is `_image_crop`, ...). MXNet's JSON
writes the legacy name, but graphs may name any of them, and `mx.sym.load_json` accepts both.
Registered after every operator module (see `_load_all`), as aliases sharing the op instance."""
from __future__ import annotations

from .registry import OPS

#: alias -> the registered operator it names (MXNet 1.9.1's alias table)
NP_ALIASES = {
    "_npi_Custom": "Custom", "_npi_cvimdecode": "_cvimdecode", "_npi_cvimread": "_cvimread",
    "_npi_cvimresize": "_cvimresize", "_npx_activation": "Activation", "_npx_arange_like": "_contrib_arange_like",
    "_npx_batch_dot": "batch_dot", "_npx_batch_flatten": "Flatten", "_npx_batch_norm": "BatchNorm",
    "_npx_cast": "Cast", "_npx_convolution": "Convolution", "_npx_deconvolution": "Deconvolution",
    "_npx_dropout": "Dropout", "_npx_embedding": "Embedding", "_npx_erf": "erf", "_npx_erfinv": "erfinv",
    "_npx_fully_connected": "FullyConnected", "_npx_gamma": "gamma", "_npx_gammaln": "gammaln",
    "_npx_gather_nd": "gather_nd", "_npx_layer_norm": "LayerNorm", "_npx_leaky_relu": "LeakyReLU",
    "_npx_log_softmax": "log_softmax", "_npx_multibox_detection": "_contrib_MultiBoxDetection",
    "_npx_multibox_prior": "_contrib_MultiBoxPrior", "_npx_multibox_target": "_contrib_MultiBoxTarget",
    "_npx_one_hot": "one_hot", "_npx_pick": "pick", "_npx_pooling": "Pooling", "_npx_reshape_like": "reshape_like",
    "_npx_rnn": "RNN", "_npx_roi_pooling": "ROIPooling", "_npx_sequence_mask": "SequenceMask",
    "_npx_shape_array": "shape_array", "_npx_slice": "slice", "_npx_smooth_l1": "smooth_l1",
    "_npx_softmax": "softmax", "_npx_topk": "topk",
    **{f"_npx__image_{n}": f"_image_{n}" for n in (
        "adjust_lighting", "crop", "flip_left_right", "flip_top_bottom", "normalize", "random_brightness",
        "random_color_jitter", "random_contrast", "random_flip_left_right", "random_flip_top_bottom",
        "random_hue", "random_lighting", "random_saturation", "resize", "to_tensor")},
}


def register_aliases(table: dict = NP_ALIASES) -> list:
    """Register each alias of `table` whose target is registered and which is still free; the
    aliases registered (a target symjit lacks leaves its alias unregistered)."""
    done = []
    for alias, target in table.items():
        op = OPS.get(target)
        if op is None or OPS.get(alias) is op:
            continue
        if alias in OPS:
            raise RuntimeError(f"operator {alias!r} registered twice")
        OPS[alias] = op
        type(op).aliases = tuple(type(op).aliases) + (alias,)
        done.append(alias)
    return done
