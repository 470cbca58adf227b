"""Golden values of MXNet 1.9.1's sparse-storage operators (CSRNDArray, RowSparseNDArray).

Run with the MXNet 1.9.1 reference environment (never imported by the tests):

    /work/mxref/bin/python tests/golden/make_sparse.py

Writes tests/golden/data/sparse_<group>.npz (see golden_ops_io.py for the layout). Inputs are
small float32 matrices of fixed seeds with about a third of their entries stored.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mxnet as mx  # noqa: E402
from golden_ops_io import DATA_DIR, Case, record, save_cases  # noqa: E402

RNG = np.random.default_rng(20261207)


def sparse_matrix(rows: int, cols: int, density: float = 0.35, empty_rows=()) -> np.ndarray:
    """A float32 matrix with about `density` of its entries non-zero, the rows `empty_rows` zero."""
    m = RNG.standard_normal((rows, cols)).astype(np.float32)
    m[RNG.random((rows, cols)) > density] = 0
    m[list(empty_rows)] = 0
    return m


def dense(*shape) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def case(name, fn, inputs, stypes, attrs=None, **kw) -> Case:
    return record(mx, Case(name=name, fn=fn, inputs=list(inputs), in_stypes=list(stypes), attrs=attrs or {}, **kw))


def dot_cases() -> list:
    a = sparse_matrix(6, 5, empty_rows=(2,))
    a[:, 3] = 0   # an empty column: csr.T . dense leaves its row out
    b, bt, v = dense(5, 4), dense(4, 5), dense(5)
    d, dt_ = dense(3, 6), dense(6, 3)
    cases = [
        case("dot_csr_dense", "sparse.dot", [a, b], ["csr", "default"]),
        case("dot_csr_dense_tb", "sparse.dot", [a, bt], ["csr", "default"], {"transpose_b": True}),
        case("dot_csr_vector", "sparse.dot", [a, v], ["csr", "default"]),
        case("dot_csrT_dense", "sparse.dot", [a, dense(6, 4)], ["csr", "default"], {"transpose_a": True}),
        case("dot_csrT_dense_fwd_default", "sparse.dot", [a, dense(6, 4)], ["csr", "default"],
             {"transpose_a": True, "forward_stype": "default"}),
        case("dot_csr_dense_fwd_rsp", "sparse.dot", [a, b], ["csr", "default"], {"forward_stype": "row_sparse"}),
        case("dot_dense_csr", "sparse.dot", [d, a], ["default", "csr"]),
        case("dot_denseT_csr", "sparse.dot", [dt_, a], ["default", "csr"], {"transpose_a": True}),
        case("dot_dense_csrT", "sparse.dot", [dense(3, 5), a], ["default", "csr"], {"transpose_b": True}),
        case("dot_denseT_csrT", "sparse.dot", [dense(5, 3), a], ["default", "csr"],
             {"transpose_a": True, "transpose_b": True}),
        case("dot_dense_csr_fwd_default", "sparse.dot", [d, a], ["default", "csr"], {"forward_stype": "default"}),
        case("dot_rsp_dense", "sparse.dot", [a, b], ["row_sparse", "default"]),
        case("dot_rspT_dense", "sparse.dot", [a, dense(6, 4)], ["row_sparse", "default"], {"transpose_a": True}),
        case("dot_csr_dense_grad", "sparse.dot", [a, b], ["csr", "default"], grad_of=[1]),
        case("dot_csr_dense_grad_rsp", "sparse.dot", [a, b], ["csr", "default"], grad_of=[1],
             grad_stypes=["row_sparse"]),
        case("dot_csrT_dense_grad", "sparse.dot", [a, dense(6, 4)], ["csr", "default"], {"transpose_a": True},
             grad_of=[1]),
        case("nd_dot_csr_dense", "dot", [a, b], ["csr", "default"]),
    ]
    return cases


def storage_cases() -> list:
    m = sparse_matrix(5, 4, empty_rows=(1, 3))
    return [
        case("cast_dense_csr", "cast_storage", [m], ["default"], {"stype": "csr"}),
        case("cast_dense_rsp", "cast_storage", [m], ["default"], {"stype": "row_sparse"}),
        case("cast_csr_dense", "cast_storage", [m], ["csr"], {"stype": "default"}),
        case("cast_rsp_dense", "cast_storage", [m], ["row_sparse"], {"stype": "default"}),
        case("cast_csr_rsp_via_dense", "sparse.cast_storage", [m], ["csr"], {"stype": "default"}),
        case("retain_rsp", "sparse.retain", [m, np.array([0, 2, 3], np.int64)], ["row_sparse", "default"]),
        case("retain_rsp_unstored", "sparse.retain", [m, np.array([1, 4], np.int64)], ["row_sparse", "default"]),
        case("slice_csr_rows", "slice", [m], ["csr"], {"begin": (1,), "end": (4,)}),
        case("slice_csr_rows_cols", "slice", [m], ["csr"], {"begin": (0, 1), "end": (5, 3)}),
        case("getnnz_all", "contrib.getnnz", [m], ["csr"]),
        case("getnnz_axis0_refused", "contrib.getnnz", [m], ["csr"], {"axis": 0}),
        case("getnnz_axis1", "contrib.getnnz", [m], ["csr"], {"axis": 1}),
        case("zeros_like_csr", "zeros_like", [m], ["csr"]),
        case("zeros_like_rsp", "zeros_like", [m], ["row_sparse"]),
    ]


def elementwise_cases() -> list:
    x, y = sparse_matrix(4, 5, empty_rows=(0,)), sparse_matrix(4, 5, empty_rows=(2,))
    d = dense(4, 5)
    cases = []
    for op in ("elemwise_add", "elemwise_sub", "elemwise_mul"):
        for sa, sb in (("csr", "csr"), ("row_sparse", "row_sparse"), ("default", "csr"), ("csr", "default"),
                       ("row_sparse", "default"), ("default", "row_sparse")):
            cases.append(case(f"{op}_{sa}_{sb}", op, [x, d if sb == "default" else y] if sa != "default"
                              else [d, y], [sa, sb]))
    cases.append(case("elemwise_div_csr_dense", "elemwise_div", [x, np.abs(d) + 1], ["csr", "default"]))
    cases.append(case("sparse_add_rsp_rsp", "sparse.add", [x, y], ["row_sparse", "row_sparse"]))
    cases.append(case("sparse_multiply_csr_dense", "sparse.multiply", [x, d], ["csr", "default"]))
    cases.append(case("add_n_rsp", "add_n", [x, y, x], ["row_sparse"] * 3))
    cases.append(case("elemwise_add_rsp_grad", "elemwise_add", [x, y], ["row_sparse", "row_sparse"],
                      grad_of=[0, 1]))
    col, row = dense(4, 1), dense(1, 5)
    cases.append(case("broadcast_mul_csr_col", "broadcast_mul", [x, col], ["csr", "default"]))
    cases.append(case("broadcast_mul_csr_row", "broadcast_mul", [x, row], ["csr", "default"]))
    cases.append(case("broadcast_div_csr_row", "broadcast_div", [x, np.abs(row) + 1], ["csr", "default"]))
    cases.append(case("broadcast_add_csr_col", "broadcast_add", [x, col], ["csr", "default"]))
    cases.append(case("broadcast_plus_csr_col", "broadcast_plus", [x, col], ["csr", "default"]))
    for op in ("abs", "sign", "square", "relu", "sin", "tanh", "negative", "floor", "expm1", "log1p"):
        for st in ("csr", "row_sparse"):
            cases.append(case(f"{op}_{st}", op, [x if op not in ("log1p",) else np.abs(x)], [st]))
    cases.append(case("sqrt_csr", "sqrt", [np.abs(x)], ["csr"]))
    cases.append(case("exp_csr", "exp", [x], ["csr"]))
    cases.append(case("mul_scalar_csr", "_internal._mul_scalar", [x], ["csr"], {"scalar": 2.5}))
    cases.append(case("div_scalar_rsp", "_internal._div_scalar", [x], ["row_sparse"], {"scalar": 4.0}))
    cases.append(case("plus_scalar_csr", "_internal._plus_scalar", [x], ["csr"], {"scalar": 1.0}))
    cases.append(case("clip_csr", "clip", [x], ["csr"], {"a_min": -0.5, "a_max": 0.5}))
    cases.append(case("clip_csr_positive", "clip", [x], ["csr"], {"a_min": 0.1, "a_max": 0.5}))
    cases.append(case("cast_csr_f64", "Cast", [x], ["csr"], {"dtype": "float64"}))
    cases.append(case("square_grad_rsp", "square", [x], ["row_sparse"], grad_of=[0]))
    return cases


def reduce_cases() -> list:
    x = sparse_matrix(5, 6, empty_rows=(1,))
    cond = (RNG.random((5, 6)) > 0.6).astype(np.float32)
    cases = []
    for fn in ("sum", "mean"):
        for axis in (0, 1):
            cases.append(case(f"{fn}_csr_axis{axis}", fn, [x], ["csr"], {"axis": axis}))
            cases.append(case(f"{fn}_csr_axis{axis}_keepdims", fn, [x], ["csr"], {"axis": axis, "keepdims": True}))
    cases.append(case("sum_csr_all", "sum", [x], ["csr"]))
    cases.append(case("sum_rsp_axis0", "sum", [x], ["row_sparse"], {"axis": 0}))
    cases.append(case("norm_csr", "norm", [x], ["csr"]))
    cases.append(case("norm_rsp", "norm", [x], ["row_sparse"]))
    cases.append(case("where_csr", "where", [cond, dense(5, 6), dense(5, 6)], ["csr", "default", "default"]))
    for axis in (0, 1):
        cases.append(case(f"square_sum_rsp_axis{axis}", "_internal._square_sum", [x], ["row_sparse"],
                          {"axis": axis}))
        cases.append(case(f"square_sum_rsp_axis{axis}_keepdims", "_internal._square_sum", [x], ["row_sparse"],
                          {"axis": axis, "keepdims": True}))
    a, b, c = dense(3, 4), dense(2, 4), dense(5, 4)
    cases.append(case("khatri_rao_2", "khatri_rao", [a, b], ["default"] * 2))
    cases.append(case("khatri_rao_3", "khatri_rao", [a, b, c], ["default"] * 3))
    return cases


def embedding_and_update_cases() -> list:
    idx = np.array([[1, 4], [4, 0], [6, 1]], np.float32)
    w = dense(8, 3)
    cases = [
        case("embedding_sparse_grad", "Embedding", [idx, w], ["default", "default"],
             {"input_dim": 8, "output_dim": 3, "sparse_grad": True}, grad_of=[1], grad_stypes=["row_sparse"]),
        case("sparse_embedding_grad", "contrib.SparseEmbedding", [idx, w], ["default", "default"],
             {"input_dim": 8, "output_dim": 3}, grad_of=[1], grad_stypes=["row_sparse"]),
    ]
    weight = dense(6, 3)
    grad = sparse_matrix(6, 3, density=0.9, empty_rows=(0, 3, 4))
    state = np.abs(dense(6, 3))
    common = {"lr": 0.1, "wd": 0.01, "rescale_grad": 0.5}
    updates = [
        ("sgd_lazy", "sgd_update", [weight, grad], dict(common, lazy_update=True), [0]),
        ("sgd_not_lazy", "sgd_update", [weight, grad], dict(common, lazy_update=False), [0]),
        ("sgd_mom_lazy", "sgd_mom_update", [weight, grad, dense(6, 3)], dict(common, momentum=0.9,
                                                                              lazy_update=True), [0, 2]),
        ("adam_lazy", "adam_update", [weight, grad, dense(6, 3), state], dict(common, lazy_update=True), [0, 2, 3]),
        ("adam_not_lazy", "adam_update", [weight, grad, dense(6, 3), state], dict(common, lazy_update=False),
         [0, 2, 3]),
        ("adagrad_sparse", "sparse.adagrad_update", [weight, grad, state], {"lr": 0.1, "rescale_grad": 0.5,
                                                                             "epsilon": 1e-7}, [0, 2]),
        ("ftrl_sparse", "ftrl_update", [weight, grad, dense(6, 3), state], {"lr": 0.1, "lamda1": 0.01,
                                                                             "beta": 1.0, "wd": 0.01}, [0, 2, 3]),
    ]
    for name, fn, inputs, attrs, mutated in updates:
        stypes = ["default", "row_sparse"] + ["default"] * (len(inputs) - 2)
        cases.append(case(name, fn, inputs, stypes, attrs, mode="update", mutated=mutated))
        if name in ("sgd_lazy", "adam_lazy", "ftrl_sparse", "sgd_mom_lazy"):   # a row_sparse weight, updated in place
            stypes = ["row_sparse", "row_sparse"] + ["default"] * (len(inputs) - 2)
            cases.append(case(name + "_rsp_weight", fn, inputs, stypes, attrs, mode="update", mutated=mutated))
        if len(inputs) > 2:   # weight and states row_sparse: MXNet's lazy kernels
            cases.append(case(name + "_all_rsp", fn, inputs, ["row_sparse"] * len(inputs), attrs, mode="update",
                              mutated=mutated))
    cases.append(case("row_sparse_pull", "", [sparse_matrix(7, 3, density=0.8), np.array([0, 2, 5], np.int64)],
                      ["row_sparse", "default"], mode="row_sparse_pull"))
    cases.append(case("row_sparse_pull_unsorted_ids", "", [sparse_matrix(7, 3, density=0.8),
                                                            np.array([6, 1, 1], np.int64)],
                      ["row_sparse", "default"], mode="row_sparse_pull"))
    return cases


def main() -> None:
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    groups = {"dot": dot_cases, "storage": storage_cases, "elemwise": elementwise_cases,
              "reduce": reduce_cases, "update": embedding_and_update_cases}
    for group, make in groups.items():
        path = DATA_DIR / f"sparse_{group}.npz"
        cases = make()
        save_cases(path, cases)
        print(f"{path.name}: {len(cases)} cases, {path.stat().st_size} bytes")


if __name__ == "__main__":
    main()
