/*
 * module.c -- the CPython extension `symjit._runtime`.
 *
 * It exposes the runtime to Python and is the fast path from Python into compiled graphs:
 *   - Entry: holds a compiled graph's entry-point address, its static signature (names, shapes,
 *     dtypes of inputs, outputs and parameters), its parameters and a reusable 64-byte-aligned
 *     workspace. Calling it with numpy arrays validates them (count, shape, dtype, C-contiguity,
 *     alignment; before any native code runs), allocates outputs or checks the `out=` ones, and
 *     calls the entry directly (vectorcall + numpy C API: no ctypes, no per-call Python objects
 *     beyond the outputs), releasing the GIL when the graph moves enough data to be worth it.
 *   - symbols(): addresses of the runtime's C functions, for llvmlite's add_symbol.
 *   - thread-count control, arena allocation, error inspection, AOT descriptor reading, and
 *     helpers that run a kernel pointer over a range (used by the tests).
 * Every error is raised as the class installed with set_error_class (symjit.MXNetError once
 * symjit.runtime is imported; symjit._runtime.Error before that).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
/* The numpy C API this file is written against: numpy 1.23 (the oldest numpy pyproject.toml allows).
 * Built against numpy 2's headers (pyproject's build requirement), the extension then loads on every numpy
 * from 1.23 to 2.x; import_array() refuses an older numpy at run time with numpy's message. The target
 * must be stated: numpy's headers otherwise default to an older API (1.21 in numpy 2.2, the last numpy
 * for Python 3.10), which hides functions used here (PyDataMem_SetHandler, NEP 49, numpy 1.22) so that
 * they would compile as implicit declarations (errors in setup.py's flags). numpy 1.x's own headers
 * (a build without isolation in a numpy 1.x environment) ignore the target and lack PyDataType_ELSIZE,
 * numpy 2's accessor for a descriptor's item size: defined below for them, as numpy documents. */
#define NPY_TARGET_VERSION NPY_1_23_API_VERSION
#define NPY_NO_DEPRECATED_API NPY_1_23_API_VERSION
#include <numpy/arrayobject.h>
#if NPY_ABI_VERSION < 0x02000000
#define PyDataType_ELSIZE(descr) ((descr)->elsize)
#endif

#include <stdatomic.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "symjit_internal.h"

/* Graphs whose inputs+outputs move at least this many bytes run with the GIL released. */
#define GIL_RELEASE_BYTES ((npy_intp)1 << 16)
#define STACK_TENSORS 16
#define MAX_NDIM 64

static PyObject *error_class; /* strong reference */
static PyObject *default_error_class;

/* ------------------------------------------------------------------ helpers */

static void *as_pointer(PyObject *obj, const char *what) {
    void *ptr;
    if (obj == Py_None) return NULL;
    if (PyArray_Check(obj)) return PyArray_DATA((PyArrayObject *)obj);
    if (!PyLong_Check(obj)) {
        PyErr_Format(error_class, "%s: expected an int address, None or numpy.ndarray, got %s", what,
                     Py_TYPE(obj)->tp_name);
        return NULL;
    }
    ptr = PyLong_AsVoidPtr(obj);
    return ptr;
}

static void *require_address(PyObject *obj, const char *what) {
    void *ptr;
    if (!PyLong_Check(obj)) {
        PyErr_Format(error_class, "%s: expected an int address, got %s", what, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    ptr = PyLong_AsVoidPtr(obj);
    if (ptr == NULL && !PyErr_Occurred()) PyErr_Format(error_class, "%s: address is NULL", what);
    return ptr;
}

static PyObject *shape_tuple(int ndim, const npy_intp *dims) {
    PyObject *t = PyTuple_New(ndim);
    if (t == NULL) return NULL;
    for (int i = 0; i < ndim; i++) {
        PyObject *d = PyLong_FromSsize_t(dims[i]);
        if (d == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, d);
    }
    return t;
}

/* ------------------------------------------------------------------ tensor specs */

typedef struct {
    PyObject *name;       /* str */
    int ndim;
    npy_intp *shape;      /* ndim entries, PyMem-allocated (NULL when ndim == 0) */
    PyArray_Descr *descr; /* strong reference */
    npy_intp nbytes;
} TensorSpec;

static void spec_clear(TensorSpec *spec) {
    Py_CLEAR(spec->name);
    Py_CLEAR(spec->descr);
    PyMem_Free(spec->shape);
    spec->shape = NULL;
}

/* Fill `spec` from a name, a shape sequence and anything np.dtype() accepts. */
static int spec_init(TensorSpec *spec, PyObject *name, PyObject *shape, PyObject *dtype, const char *what) {
    PyObject *seq;
    Py_ssize_t ndim;
    npy_intp count = 1;
    if (!PyUnicode_Check(name)) {
        PyErr_Format(error_class, "%s: name must be a str, got %s", what, Py_TYPE(name)->tp_name);
        return -1;
    }
    seq = PySequence_Fast(shape, "shape must be a sequence of ints");
    if (seq == NULL) return -1;
    ndim = PySequence_Fast_GET_SIZE(seq);
    if (ndim > MAX_NDIM) {
        Py_DECREF(seq);
        PyErr_Format(error_class, "%s: at most %d dimensions are supported, got %zd", what, MAX_NDIM, ndim);
        return -1;
    }
    spec->shape = ndim ? PyMem_Calloc((size_t)ndim, sizeof(npy_intp)) : NULL;
    if (ndim && spec->shape == NULL) {
        Py_DECREF(seq);
        PyErr_NoMemory();
        return -1;
    }
    spec->ndim = (int)ndim;
    for (Py_ssize_t i = 0; i < ndim; i++) {
        Py_ssize_t d = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i), PyExc_OverflowError);
        if (d == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return -1;
        }
        if (d < 0) {
            Py_DECREF(seq);
            PyErr_Format(error_class, "%s: shape dimensions must be >= 0, got %R", what, shape);
            return -1;
        }
        spec->shape[i] = d;
        count *= d;
    }
    Py_DECREF(seq);
    if (!PyArray_DescrConverter(dtype, &spec->descr)) return -1;
    if (PyDataType_HASFIELDS(spec->descr) || PyDataType_HASSUBARRAY(spec->descr) ||
        PyDataType_REFCHK(spec->descr)) {
        PyErr_Format(error_class, "%s: dtype %S is not a plain numeric dtype", what, (PyObject *)spec->descr);
        return -1;
    }
    spec->nbytes = count * (npy_intp)PyDataType_ELSIZE(spec->descr);
    Py_INCREF(name);
    spec->name = name;
    return 0;
}

static PyObject *spec_as_tuple(const TensorSpec *spec) {
    PyObject *shape = shape_tuple(spec->ndim, spec->shape);
    if (shape == NULL) return NULL;
    return Py_BuildValue("(ONO)", spec->name, shape, (PyObject *)spec->descr);
}

/* ------------------------------------------------------------------ Entry */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    symjit_entry_fn fn;
    const char *(*last_error)(void);
    Py_ssize_t n_in, n_out, n_params;
    TensorSpec *specs;     /* inputs, then outputs, then params */
    PyObject *params;      /* tuple of the parameter arrays */
    PyObject *param_ptrs;  /* bytes holding n_params data pointers (stable while referenced) */
    symjit_arena workspace;
    size_t workspace_size;
    _Atomic int workspace_busy;
    int release_gil;
    PyObject *name;
    PyObject *owner;       /* keeps the code (JIT engine, shared library) alive */
    PyObject *weakreflist;
} EntryObject;

static const char *const ROLE[3] = {"input", "output", "param"};

/* Graph-call hook (set_call_hook): when set, every successful Entry call ends with
 * hook(entry, start_ns, end_ns), the native call's CLOCK_MONOTONIC bounds. NULL (the default)
 * costs one pointer test per call. */
static PyObject *call_hook = NULL; /* strong reference */

static int check_array(EntryObject *self, PyObject *obj, const TensorSpec *spec, int role, Py_ssize_t index) {
    PyArrayObject *a;
    int flags;
    if (!PyArray_Check(obj)) {
        PyErr_Format(error_class, "%U: %s %zd (%U) must be a numpy.ndarray, got %s", self->name, ROLE[role],
                     index, spec->name, Py_TYPE(obj)->tp_name);
        return -1;
    }
    a = (PyArrayObject *)obj;
    if (PyArray_NDIM(a) != spec->ndim ||
        (spec->ndim && memcmp(PyArray_DIMS(a), spec->shape, (size_t)spec->ndim * sizeof(npy_intp)) != 0)) {
        PyObject *want = shape_tuple(spec->ndim, spec->shape);
        PyObject *got = shape_tuple(PyArray_NDIM(a), PyArray_DIMS(a));
        if (want && got)
            PyErr_Format(error_class, "%U: %s %zd (%U) has the wrong shape: expected %R, got %R", self->name,
                         ROLE[role], index, spec->name, want, got);
        Py_XDECREF(want);
        Py_XDECREF(got);
        return -1;
    }
    if (PyArray_DESCR(a) != spec->descr && !PyArray_EquivTypes(PyArray_DESCR(a), spec->descr)) {
        PyErr_Format(error_class, "%U: %s %zd (%U) has the wrong dtype: expected %S, got %S", self->name, ROLE[role],
                     index, spec->name, (PyObject *)spec->descr, (PyObject *)PyArray_DESCR(a));
        return -1;
    }
    flags = PyArray_FLAGS(a);
    if ((flags & (NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED)) != (NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED)) {
        PyErr_Format(error_class, "%U: %s %zd (%U) must be C-contiguous and aligned (use numpy.ascontiguousarray)",
                     self->name, ROLE[role], index, spec->name);
        return -1;
    }
    if (role == 1 && !(flags & NPY_ARRAY_WRITEABLE)) {
        PyErr_Format(error_class, "%U: output %zd (%U) is read-only", self->name, index, spec->name);
        return -1;
    }
    return 0;
}

static int ranges_overlap(const char *a, npy_intp na, const char *b, npy_intp nb) {
    return na > 0 && nb > 0 && a < b + nb && b < a + na;
}

static PyObject *entry_failure(EntryObject *self, int32_t rc) {
    const char *message = self->last_error ? self->last_error() : "";
    if (message == NULL || message[0] == '\0') message = "the compiled graph reported an error";
    PyErr_Format(error_class, "%U: %s (symjit error code %d)", self->name, message, (int)rc);
    return NULL;
}

static PyObject *entry_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    EntryObject *self = (EntryObject *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *out = NULL, *result = NULL, *out_seq = NULL;
    void *stack_in[STACK_TENSORS], *stack_out[STACK_TENSORS];
    void **in_ptrs = stack_in, **out_ptrs = stack_out;
    void **param_ptrs;
    void *ws;
    int temp_ws = 0, busy = 0;
    int32_t rc;
    Py_ssize_t i;
    PyObject *hook = NULL;
    int64_t t_start = 0, t_end = 0;

    if (kwnames != NULL) {
        for (i = 0; i < PyTuple_GET_SIZE(kwnames); i++) {
            PyObject *kw = PyTuple_GET_ITEM(kwnames, i);
            if (PyUnicode_CompareWithASCIIString(kw, "out") != 0) {
                PyErr_Format(error_class, "%U: unexpected keyword argument %R", self->name, kw);
                return NULL;
            }
            out = args[nargs + i];
        }
        if (out == Py_None) out = NULL;
    }
    if (nargs != self->n_in) {
        PyErr_Format(error_class, "%U: expected %zd inputs, got %zd", self->name, self->n_in, nargs);
        return NULL;
    }
    if (self->n_in > STACK_TENSORS || self->n_out > STACK_TENSORS) {
        in_ptrs = PyMem_Malloc((size_t)(self->n_in + self->n_out + 1) * sizeof(void *));
        if (in_ptrs == NULL) return PyErr_NoMemory();
        out_ptrs = in_ptrs + self->n_in;
    }
    for (i = 0; i < nargs; i++) {
        if (check_array(self, args[i], &self->specs[i], 0, i) < 0) goto done;
        in_ptrs[i] = PyArray_DATA((PyArrayObject *)args[i]);
    }

    result = PyTuple_New(self->n_out);
    if (result == NULL) goto done;
    if (out == NULL) {
        for (i = 0; i < self->n_out; i++) {
            const TensorSpec *spec = &self->specs[self->n_in + i];
            PyObject *o;
            Py_INCREF(spec->descr);
            o = PyArray_NewFromDescr(&PyArray_Type, spec->descr, spec->ndim, spec->shape, NULL, NULL, 0, NULL);
            if (o == NULL) goto fail;
            PyTuple_SET_ITEM(result, i, o);
            out_ptrs[i] = PyArray_DATA((PyArrayObject *)o);
        }
    } else {
        if (PyArray_Check(out) && self->n_out == 1) {
            out_seq = PyTuple_Pack(1, out);
        } else if (PyTuple_Check(out) || PyList_Check(out)) {
            out_seq = PySequence_Tuple(out);
        } else {
            PyErr_Format(error_class, "%U: out must be a tuple or list of %zd numpy.ndarray, got %s", self->name,
                         self->n_out, Py_TYPE(out)->tp_name);
            goto fail;
        }
        if (out_seq == NULL) goto fail;
        if (PyTuple_GET_SIZE(out_seq) != self->n_out) {
            PyErr_Format(error_class, "%U: expected %zd output arrays in out, got %zd", self->name, self->n_out,
                         PyTuple_GET_SIZE(out_seq));
            goto fail;
        }
        for (i = 0; i < self->n_out; i++) {
            PyObject *o = PyTuple_GET_ITEM(out_seq, i);
            PyArrayObject *oa = (PyArrayObject *)o;
            if (o == Py_None) { /* this output only: a fresh array */
                const TensorSpec *spec = &self->specs[self->n_in + i];
                Py_INCREF(spec->descr);
                o = PyArray_NewFromDescr(&PyArray_Type, spec->descr, spec->ndim, spec->shape, NULL, NULL, 0, NULL);
                if (o == NULL) goto fail;
                PyTuple_SET_ITEM(result, i, o);
                out_ptrs[i] = PyArray_DATA((PyArrayObject *)o);
                continue;
            }
            if (check_array(self, o, &self->specs[self->n_in + i], 1, i) < 0) goto fail;
            for (Py_ssize_t j = 0; j < nargs; j++) {
                PyArrayObject *ia = (PyArrayObject *)args[j];
                if (ranges_overlap(PyArray_BYTES(oa), PyArray_NBYTES(oa), PyArray_BYTES(ia), PyArray_NBYTES(ia))) {
                    PyErr_Format(error_class, "%U: output %zd (%U) overlaps input %zd (%U)", self->name, i,
                                 self->specs[self->n_in + i].name, j, self->specs[j].name);
                    goto fail;
                }
            }
            for (Py_ssize_t j = 0; j < i; j++) {
                PyArrayObject *pa = (PyArrayObject *)PyTuple_GET_ITEM(out_seq, j);
                if ((PyObject *)pa == Py_None) continue;
                if (ranges_overlap(PyArray_BYTES(oa), PyArray_NBYTES(oa), PyArray_BYTES(pa), PyArray_NBYTES(pa))) {
                    PyErr_Format(error_class, "%U: outputs %zd and %zd overlap", self->name, j, i);
                    goto fail;
                }
            }
            for (Py_ssize_t j = 0; j < self->n_params; j++) {
                PyArrayObject *pa = (PyArrayObject *)PyTuple_GET_ITEM(self->params, j);
                if (ranges_overlap(PyArray_BYTES(oa), PyArray_NBYTES(oa), PyArray_BYTES(pa), PyArray_NBYTES(pa))) {
                    PyErr_Format(error_class, "%U: output %zd (%U) overlaps parameter %zd (%U)", self->name, i,
                                 self->specs[self->n_in + i].name, j,
                                 self->specs[self->n_in + self->n_out + j].name);
                    goto fail;
                }
            }
            Py_INCREF(o);
            PyTuple_SET_ITEM(result, i, o);
            out_ptrs[i] = PyArray_DATA(oa);
        }
    }

    /* The workspace is reused across calls; a concurrent call (GIL released) gets its own. */
    {
        int expected = 0;
        if (atomic_compare_exchange_strong(&self->workspace_busy, &expected, 1)) {
            ws = self->workspace.data;
            busy = 1;
        } else {
            ws = symjit_arena_alloc(self->workspace_size);
            if (ws == NULL) {
                PyErr_NoMemory();
                goto fail;
            }
            temp_ws = 1;
        }
    }
    param_ptrs = (void **)PyBytes_AS_STRING(self->param_ptrs);
    symjit_clear_error();
    hook = call_hook;
    if (hook != NULL) {
        Py_INCREF(hook); /* set_call_hook(None) while the GIL is released must not free it */
        t_start = symjit_profile_now_ns();
    }
    if (self->release_gil) {
        PyObject *params = self->params, *pptrs = self->param_ptrs; /* set_params may swap them meanwhile */
        Py_INCREF(params);
        Py_INCREF(pptrs);
        Py_BEGIN_ALLOW_THREADS
        rc = self->fn(in_ptrs, out_ptrs, param_ptrs, ws);
        Py_END_ALLOW_THREADS
        Py_DECREF(params);
        Py_DECREF(pptrs);
    } else {
        rc = self->fn(in_ptrs, out_ptrs, param_ptrs, ws);
    }
    if (hook != NULL) t_end = symjit_profile_now_ns();
    if (temp_ws) symjit_arena_free(ws);
    if (busy) atomic_store(&self->workspace_busy, 0);
    if (rc != SYMJIT_OK) {
        Py_XDECREF(hook);
        entry_failure(self, rc);
        goto fail;
    }
    if (hook != NULL) {
        PyObject *r = PyObject_CallFunction(hook, "OLL", (PyObject *)self, (long long)t_start, (long long)t_end);
        Py_DECREF(hook);
        if (r == NULL) goto fail;
        Py_DECREF(r);
    }
    goto done;

fail:
    Py_CLEAR(result);
done:
    Py_XDECREF(out_seq);
    if (in_ptrs != stack_in) PyMem_Free(in_ptrs);
    return result;
}

/* Build the tuple of parameter arrays and their pointer block, validating against the specs. */
static int entry_store_params(EntryObject *self, PyObject *arrays) {
    PyObject *tuple = PySequence_Tuple(arrays), *ptrs;
    void **raw;
    if (tuple == NULL) return -1;
    if (PyTuple_GET_SIZE(tuple) != self->n_params) {
        PyErr_Format(error_class, "%U: expected %zd parameters, got %zd", self->name, self->n_params,
                     PyTuple_GET_SIZE(tuple));
        Py_DECREF(tuple);
        return -1;
    }
    ptrs = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)((self->n_params + 1) * sizeof(void *)));
    if (ptrs == NULL) {
        Py_DECREF(tuple);
        return -1;
    }
    raw = (void **)PyBytes_AS_STRING(ptrs);
    for (Py_ssize_t i = 0; i < self->n_params; i++) {
        PyObject *a = PyTuple_GET_ITEM(tuple, i);
        if (check_array(self, a, &self->specs[self->n_in + self->n_out + i], 2, i) < 0) {
            Py_DECREF(tuple);
            Py_DECREF(ptrs);
            return -1;
        }
        raw[i] = PyArray_DATA((PyArrayObject *)a);
    }
    raw[self->n_params] = NULL;
    Py_XSETREF(self->params, tuple);
    Py_XSETREF(self->param_ptrs, ptrs);
    return 0;
}

static int parse_specs(EntryObject *self, PyObject *items, Py_ssize_t offset, Py_ssize_t count, int role) {
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(items, i);
        char what[96];
        PyOS_snprintf(what, sizeof what, "Entry %s %zd", ROLE[role], i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 3) {
            PyErr_Format(error_class, "%s: expected a (name, shape, dtype) tuple, got %R", what, item);
            return -1;
        }
        if (spec_init(&self->specs[offset + i], PyTuple_GET_ITEM(item, 0), PyTuple_GET_ITEM(item, 1),
                      PyTuple_GET_ITEM(item, 2), what) < 0)
            return -1;
    }
    return 0;
}

static PyObject *entry_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"address", "inputs", "outputs", "params", "workspace_size", "name", "owner",
                             "release_gil", "last_error", NULL};
    PyObject *address, *inputs, *outputs, *params = NULL, *name = NULL, *owner = Py_None;
    PyObject *release = Py_None, *last_error = NULL;
    Py_ssize_t workspace_size = 0;
    PyObject *in_seq = NULL, *out_seq = NULL, *param_seq = NULL, *param_arrays = NULL;
    EntryObject *self;
    npy_intp io_bytes = 0;

    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|OnUOOO:Entry", kwlist, &address, &inputs, &outputs, &params,
                                     &workspace_size, &name, &owner, &release, &last_error))
        return NULL;
    if (workspace_size < 0) {
        PyErr_Format(error_class, "Entry: workspace_size must be >= 0, got %zd", workspace_size);
        return NULL;
    }
    self = (EntryObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = entry_vectorcall;
    self->name = name ? name : PyUnicode_FromString("graph");
    if (name) Py_INCREF(name);
    if (self->name == NULL) goto fail;
    Py_INCREF(owner);
    self->owner = owner;

    self->fn = (symjit_entry_fn)require_address(address, "Entry address");
    if (self->fn == NULL) goto fail;
    if (last_error == NULL || last_error == Py_None) {
        self->last_error = symjit_last_error;
    } else {
        self->last_error = (const char *(*)(void))require_address(last_error, "Entry last_error");
        if (self->last_error == NULL) goto fail;
    }

    in_seq = PySequence_Fast(inputs, "Entry inputs must be a sequence of (name, shape, dtype)");
    out_seq = PySequence_Fast(outputs, "Entry outputs must be a sequence of (name, shape, dtype)");
    param_seq = params ? PySequence_Fast(params, "Entry params must be a sequence of (name, array)") : PyTuple_New(0);
    if (in_seq == NULL || out_seq == NULL || param_seq == NULL) goto fail;
    self->n_in = PySequence_Fast_GET_SIZE(in_seq);
    self->n_out = PySequence_Fast_GET_SIZE(out_seq);
    self->n_params = PySequence_Fast_GET_SIZE(param_seq);
    self->specs = PyMem_Calloc((size_t)(self->n_in + self->n_out + self->n_params + 1), sizeof(TensorSpec));
    if (self->specs == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    if (parse_specs(self, in_seq, 0, self->n_in, 0) < 0) goto fail;
    if (parse_specs(self, out_seq, self->n_in, self->n_out, 1) < 0) goto fail;

    param_arrays = PyTuple_New(self->n_params);
    if (param_arrays == NULL) goto fail;
    for (Py_ssize_t i = 0; i < self->n_params; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(param_seq, i), *shape;
        PyArrayObject *a;
        int rc;
        char what[64];
        PyOS_snprintf(what, sizeof what, "Entry param %zd", i);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 2 || !PyArray_Check(PyTuple_GET_ITEM(item, 1))) {
            PyErr_Format(error_class, "%s: expected a (name, numpy.ndarray) tuple, got %R", what, item);
            goto fail;
        }
        a = (PyArrayObject *)PyTuple_GET_ITEM(item, 1);
        shape = shape_tuple(PyArray_NDIM(a), PyArray_DIMS(a));
        if (shape == NULL) goto fail;
        rc = spec_init(&self->specs[self->n_in + self->n_out + i], PyTuple_GET_ITEM(item, 0), shape,
                       (PyObject *)PyArray_DESCR(a), what);
        Py_DECREF(shape);
        if (rc < 0) goto fail;
        Py_INCREF(a);
        PyTuple_SET_ITEM(param_arrays, i, (PyObject *)a);
    }
    if (entry_store_params(self, param_arrays) < 0) goto fail;

    self->workspace_size = (size_t)workspace_size;
    if (symjit_arena_reserve(&self->workspace, self->workspace_size) != SYMJIT_OK) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < self->n_in + self->n_out; i++) io_bytes += self->specs[i].nbytes;
    if (release == Py_None) {
        self->release_gil = io_bytes >= GIL_RELEASE_BYTES;
    } else {
        int truth = PyObject_IsTrue(release);
        if (truth < 0) goto fail;
        self->release_gil = truth;
    }
    Py_DECREF(in_seq);
    Py_DECREF(out_seq);
    Py_DECREF(param_seq);
    Py_DECREF(param_arrays);
    return (PyObject *)self; /* tp_alloc already made it tracked by the GC */

fail:
    Py_XDECREF(in_seq);
    Py_XDECREF(out_seq);
    Py_XDECREF(param_seq);
    Py_XDECREF(param_arrays);
    Py_DECREF(self);
    return NULL;
}

static int entry_traverse(EntryObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->params);
    Py_VISIT(self->owner);
    return 0;
}

static int entry_clear(EntryObject *self) {
    Py_CLEAR(self->params);
    Py_CLEAR(self->owner);
    return 0;
}

static void entry_dealloc(EntryObject *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) PyObject_ClearWeakRefs((PyObject *)self);
    entry_clear(self);
    Py_CLEAR(self->param_ptrs);
    Py_CLEAR(self->name);
    if (self->specs != NULL) {
        for (Py_ssize_t i = 0; i < self->n_in + self->n_out + self->n_params; i++) spec_clear(&self->specs[i]);
        PyMem_Free(self->specs);
    }
    symjit_arena_release(&self->workspace);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *entry_set_params(EntryObject *self, PyObject *arrays) {
    if (entry_store_params(self, arrays) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *specs_list(EntryObject *self, Py_ssize_t offset, Py_ssize_t count) {
    PyObject *list = PyList_New(count);
    if (list == NULL) return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *t = spec_as_tuple(&self->specs[offset + i]);
        if (t == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, t);
    }
    return list;
}

static PyObject *entry_get_inputs(EntryObject *self, void *c) { return specs_list(self, 0, self->n_in); }
static PyObject *entry_get_outputs(EntryObject *self, void *c) { return specs_list(self, self->n_in, self->n_out); }
static PyObject *entry_get_param_specs(EntryObject *self, void *c) {
    return specs_list(self, self->n_in + self->n_out, self->n_params);
}
static PyObject *entry_get_params(EntryObject *self, void *c) {
    return Py_NewRef(self->params ? self->params : Py_None);
}
static PyObject *entry_get_name(EntryObject *self, void *c) { return Py_NewRef(self->name); }
static PyObject *entry_get_owner(EntryObject *self, void *c) {
    return Py_NewRef(self->owner ? self->owner : Py_None);
}
static PyObject *entry_get_address(EntryObject *self, void *c) { return PyLong_FromVoidPtr((void *)self->fn); }
static PyObject *entry_get_workspace_size(EntryObject *self, void *c) {
    return PyLong_FromSize_t(self->workspace_size);
}
static PyObject *entry_get_release_gil(EntryObject *self, void *c) { return PyBool_FromLong(self->release_gil); }

static PyObject *entry_repr(EntryObject *self) {
    return PyUnicode_FromFormat("<symjit._runtime.Entry %R: %zd inputs, %zd outputs, %zd params, workspace %zu bytes>",
                                self->name, self->n_in, self->n_out, self->n_params, self->workspace_size);
}

static PyGetSetDef entry_getset[] = {
    {"name", (getter)entry_get_name, NULL, "graph name used in error messages", NULL},
    {"address", (getter)entry_get_address, NULL, "address of the entry function", NULL},
    {"inputs", (getter)entry_get_inputs, NULL, "list of (name, shape, dtype) of the inputs", NULL},
    {"outputs", (getter)entry_get_outputs, NULL, "list of (name, shape, dtype) of the outputs", NULL},
    {"param_specs", (getter)entry_get_param_specs, NULL, "list of (name, shape, dtype) of the parameters", NULL},
    {"params", (getter)entry_get_params, NULL, "tuple of the parameter arrays passed to every call", NULL},
    {"owner", (getter)entry_get_owner, NULL, "object kept alive with the entry (the code's owner)", NULL},
    {"workspace_size", (getter)entry_get_workspace_size, NULL, "workspace bytes handed to every call", NULL},
    {"release_gil", (getter)entry_get_release_gil, NULL, "whether calls release the GIL", NULL},
    {NULL},
};

static PyMethodDef entry_methods[] = {
    {"set_params", (PyCFunction)entry_set_params, METH_O,
     "set_params(arrays): replace the parameter arrays (same count, shapes and dtypes)."},
    {NULL},
};

static PyTypeObject EntryType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "symjit._runtime.Entry",
    .tp_basicsize = sizeof(EntryObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Entry(address, inputs, outputs, params=(), workspace_size=0, name='graph', owner=None,\n"
              "      release_gil=None, last_error=0)\n\n"
              "A compiled graph's entry point `int32_t entry(void **inputs, void **outputs, void **params,\n"
              "void *workspace)` with its static signature. inputs/outputs: sequences of (name, shape, dtype);\n"
              "params: sequence of (name, numpy.ndarray) passed to every call; owner: kept alive with the entry;\n"
              "release_gil: None chooses by data size; last_error: address of the error-message function of\n"
              "the code's runtime (default: this runtime's symjit_last_error).\n\n"
              "entry(*inputs, out=None) -> tuple of output arrays (fresh ones, or the arrays in out;\n"
              "a None in out stands for a fresh array for that output).",
    .tp_new = entry_new,
    .tp_dealloc = (destructor)entry_dealloc,
    .tp_traverse = (traverseproc)entry_traverse,
    .tp_clear = (inquiry)entry_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(EntryObject, vectorcall),
    .tp_weaklistoffset = offsetof(EntryObject, weakreflist),
    .tp_repr = (reprfunc)entry_repr,
    .tp_getset = entry_getset,
    .tp_methods = entry_methods,
};

/* ------------------------------------------------------------------ module functions */

static int add_address(PyObject *dict, const char *name, void *address) {
    PyObject *value = PyLong_FromVoidPtr(address);
    int rc;
    if (value == NULL) return -1;
    rc = PyDict_SetItemString(dict, name, value);
    Py_DECREF(value);
    return rc;
}

static PyObject *mod_symbols(PyObject *m, PyObject *unused) {
    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
#define ADD(sym) \
    if (add_address(d, #sym, (void *)sym) < 0) goto fail
    ADD(symjit_parallel_for);
    ADD(symjit_get_num_threads);
    ADD(symjit_set_num_threads);
    ADD(symjit_arena_alloc);
    ADD(symjit_arena_free);
    ADD(symjit_arena_reserve);
    ADD(symjit_arena_release);
    ADD(symjit_set_error);
    ADD(symjit_set_error_str);
    ADD(symjit_last_error_code);
    ADD(symjit_last_error);
    ADD(symjit_clear_error);
    ADD(symjit_abi_version);
    ADD(symjit_profile_start);
    ADD(symjit_profile_mark);
    ADD(symjit_profile_read);
#undef ADD
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

static PyObject *mod_test_symbols(PyObject *m, PyObject *unused) {
    PyObject *d = PyDict_New();
    if (d == NULL) return NULL;
    if (add_address(d, "kernel_count", (void *)symjit__test_kernel_count) < 0 ||
        add_address(d, "kernel_nested", (void *)symjit__test_kernel_nested) < 0 ||
        add_address(d, "kernel_fail", (void *)symjit__test_kernel_fail) < 0 ||
        add_address(d, "kernel_sleep", (void *)symjit__test_kernel_sleep) < 0 ||
        add_address(d, "kernel_noop", (void *)symjit__test_kernel_noop) < 0 ||
        add_address(d, "entry_axpy", (void *)symjit__test_entry_axpy) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

static PyObject *mod_set_call_hook(PyObject *m, PyObject *hook) {
    PyObject *previous;
    if (hook != Py_None && !PyCallable_Check(hook)) {
        PyErr_Format(PyExc_TypeError, "set_call_hook: expected a callable or None, got %s", Py_TYPE(hook)->tp_name);
        return NULL;
    }
    previous = call_hook ? call_hook : Py_NewRef(Py_None);
    call_hook = hook == Py_None ? NULL : Py_NewRef(hook);
    return previous; /* the reference the runtime held (or a new one to None) goes to the caller */
}

static PyObject *mod_get_num_threads(PyObject *m, PyObject *unused) {
    return PyLong_FromLong(symjit_get_num_threads());
}

static PyObject *mod_set_num_threads(PyObject *m, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    int32_t previous;
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n > INT32_MAX) n = INT32_MAX;
    if (n < INT32_MIN) n = 0;
    Py_BEGIN_ALLOW_THREADS
    previous = symjit_set_num_threads((int32_t)n);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(previous);
}

static PyObject *mod_set_dynamic(PyObject *m, PyObject *arg) {
    long mode = PyLong_AsLong(arg);
    if (mode == -1 && PyErr_Occurred()) return NULL;
    if (mode < 0 || mode > 2) {
        PyErr_Format(PyExc_ValueError, "set_dynamic: mode must be 0, 1 or 2, got %ld", mode);
        return NULL;
    }
    return PyLong_FromLong(symjit_set_dynamic((int32_t)mode));
}

/* Convert a sequence of addresses / None / arrays into a NULL-terminated pointer array. */
static void **pointer_array(PyObject *seq, const char *what) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    void **ptrs = PyMem_Calloc((size_t)n + 1, sizeof(void *));
    if (ptrs == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        ptrs[i] = as_pointer(PySequence_Fast_GET_ITEM(seq, i), what);
        if (ptrs[i] == NULL && PyErr_Occurred()) {
            PyMem_Free(ptrs);
            return NULL;
        }
    }
    return ptrs;
}

static PyObject *mod_parallel_for(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
    symjit_kernel_fn fn;
    long long n, grain;
    PyObject *seq;
    void **ptrs;
    int32_t rc;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "parallel_for(kernel_address, n, grain, args) takes 4 arguments");
        return NULL;
    }
    fn = (symjit_kernel_fn)require_address(args[0], "parallel_for kernel");
    if (fn == NULL) return NULL;
    n = PyLong_AsLongLong(args[1]);
    if (n == -1 && PyErr_Occurred()) return NULL;
    grain = PyLong_AsLongLong(args[2]);
    if (grain == -1 && PyErr_Occurred()) return NULL;
    seq = PySequence_Fast(args[3], "parallel_for args must be a sequence");
    if (seq == NULL) return NULL;
    ptrs = pointer_array(seq, "parallel_for args");
    if (ptrs == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = symjit_parallel_for(fn, (int64_t)n, (int64_t)grain, ptrs);
    Py_END_ALLOW_THREADS
    PyMem_Free(ptrs);
    Py_DECREF(seq);
    return PyLong_FromLong(rc);
}

/* One parallel_for over several tensors: index space = the tensors' sizes laid end to end; a
 * chunk [begin, end) runs the kernel on each tensor's part of it with that tensor's own args
 * (offsets[t] <= i < offsets[t + 1] is element i - offsets[t] of tensor t). */
typedef struct {
    symjit_kernel_fn fn;
    Py_ssize_t count;
    const int64_t *offsets; /* count + 1 prefix sums */
    void ***args;           /* per tensor: its NULL-terminated pointer array */
} MultiJob;

static void multi_task(int64_t begin, int64_t end, void **argv) {
    const MultiJob *job = (const MultiJob *)argv[0];
    Py_ssize_t lo = 0, hi = job->count - 1;
    while (lo < hi) { /* the last tensor whose range starts at or before `begin` */
        Py_ssize_t mid = (lo + hi + 1) / 2;
        if (job->offsets[mid] <= begin) lo = mid; else hi = mid - 1;
    }
    for (Py_ssize_t t = lo; t < job->count && begin < end; t++) {
        int64_t stop = end < job->offsets[t + 1] ? end : job->offsets[t + 1];
        if (stop > begin) job->fn(begin - job->offsets[t], stop - job->offsets[t], job->args[t]);
        begin = stop;
    }
}

static PyObject *mod_parallel_for_multi(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
    MultiJob job;
    long long grain;
    PyObject *sizes = NULL, *lists = NULL, *result = NULL;
    PyObject **held = NULL;
    int64_t *offsets = NULL;
    void ***tables = NULL;
    Py_ssize_t n = 0, t, made = 0;
    int32_t rc;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "parallel_for_multi(kernel_address, grain, sizes, arg_lists) takes 4 arguments");
        return NULL;
    }
    job.fn = (symjit_kernel_fn)require_address(args[0], "parallel_for_multi kernel");
    if (job.fn == NULL) return NULL;
    grain = PyLong_AsLongLong(args[1]);
    if (grain == -1 && PyErr_Occurred()) return NULL;
    sizes = PySequence_Fast(args[2], "parallel_for_multi sizes must be a sequence");
    if (sizes == NULL) return NULL;
    lists = PySequence_Fast(args[3], "parallel_for_multi arg_lists must be a sequence");
    if (lists == NULL) goto done;
    n = PySequence_Fast_GET_SIZE(sizes);
    if (PySequence_Fast_GET_SIZE(lists) != n) {
        PyErr_Format(error_class, "parallel_for_multi: %zd sizes but %zd argument lists", n,
                     PySequence_Fast_GET_SIZE(lists));
        goto done;
    }
    offsets = PyMem_Calloc((size_t)n + 1, sizeof(int64_t));
    tables = PyMem_Calloc((size_t)n + 1, sizeof(void **));
    held = PyMem_Calloc((size_t)n + 1, sizeof(PyObject *));
    if (offsets == NULL || tables == NULL || held == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (t = 0; t < n; t++) {
        long long size = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(sizes, t));
        if (size == -1 && PyErr_Occurred()) goto done;
        if (size < 0) {
            PyErr_Format(error_class, "parallel_for_multi: size %zd is negative (%lld)", t, size);
            goto done;
        }
        offsets[t + 1] = offsets[t] + (int64_t)size;
        held[t] = PySequence_Fast(PySequence_Fast_GET_ITEM(lists, t), "parallel_for_multi arg list must be a sequence");
        if (held[t] == NULL) goto done;
        made = t + 1;
        tables[t] = pointer_array(held[t], "parallel_for_multi args");
        if (tables[t] == NULL) goto done;
    }
    job.count = n;
    job.offsets = offsets;
    job.args = tables;
    if (n > 0 && offsets[n] > 0) {
        void *argv[2] = {&job, NULL};
        Py_BEGIN_ALLOW_THREADS
        rc = symjit_parallel_for(multi_task, offsets[n], (int64_t)grain, argv);
        Py_END_ALLOW_THREADS
    } else {
        rc = 0;
    }
    result = PyLong_FromLong(rc);
done:
    if (tables != NULL) {
        for (t = 0; t < n; t++) PyMem_Free(tables[t]);
        PyMem_Free(tables);
    }
    if (held != NULL) {
        for (t = 0; t < made; t++) Py_XDECREF(held[t]);
        PyMem_Free(held);
    }
    PyMem_Free(offsets);
    Py_XDECREF(lists);
    Py_DECREF(sizes);
    return result;
}

static PyObject *mod_call_kernel(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
    symjit_kernel_fn fn;
    long long begin, end;
    PyObject *seq;
    void **ptrs;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "call_kernel(kernel_address, begin, end, args) takes 4 arguments");
        return NULL;
    }
    fn = (symjit_kernel_fn)require_address(args[0], "call_kernel kernel");
    if (fn == NULL) return NULL;
    begin = PyLong_AsLongLong(args[1]);
    if (begin == -1 && PyErr_Occurred()) return NULL;
    end = PyLong_AsLongLong(args[2]);
    if (end == -1 && PyErr_Occurred()) return NULL;
    seq = PySequence_Fast(args[3], "call_kernel args must be a sequence");
    if (seq == NULL) return NULL;
    ptrs = pointer_array(seq, "call_kernel args");
    if (ptrs == NULL) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    fn((int64_t)begin, (int64_t)end, ptrs);
    Py_END_ALLOW_THREADS
    PyMem_Free(ptrs);
    Py_DECREF(seq);
    Py_RETURN_NONE;
}

static PyObject *mod_arena_alloc(PyObject *m, PyObject *arg) {
    Py_ssize_t size = PyNumber_AsSsize_t(arg, PyExc_OverflowError);
    void *ptr;
    if (size == -1 && PyErr_Occurred()) return NULL;
    if (size < 0) {
        PyErr_Format(error_class, "arena_alloc: size must be >= 0, got %zd", size);
        return NULL;
    }
    ptr = symjit_arena_alloc((size_t)size);
    if (ptr == NULL) return PyErr_NoMemory();
    return PyLong_FromVoidPtr(ptr);
}

static PyObject *mod_arena_free(PyObject *m, PyObject *arg) {
    void *ptr = as_pointer(arg, "arena_free");
    if (ptr == NULL && PyErr_Occurred()) return NULL;
    symjit_arena_free(ptr);
    Py_RETURN_NONE;
}

static PyObject *mod_last_error(PyObject *m, PyObject *unused) {
    return Py_BuildValue("(is)", (int)symjit_last_error_code(), symjit_last_error());
}

static PyObject *mod_fingerprint(PyObject *m, PyObject *const *args, Py_ssize_t nargs) {
    Py_buffer view;
    unsigned long long seed = 0;
    uint64_t out[2];
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "fingerprint(buffer, seed=0) takes 1 or 2 arguments");
        return NULL;
    }
    if (nargs == 2) {
        seed = PyLong_AsUnsignedLongLongMask(args[1]);
        if (seed == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
    }
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    Py_BEGIN_ALLOW_THREADS
    symjit_fingerprint(view.buf, (int64_t)view.len, (uint64_t)seed, out);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyBytes_FromStringAndSize((const char *)out, sizeof out);
}

static PyObject *mod_clear_error(PyObject *m, PyObject *unused) {
    symjit_clear_error();
    Py_RETURN_NONE;
}

static PyObject *mod_set_error_class(PyObject *m, PyObject *cls) {
    if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject *)cls, (PyTypeObject *)PyExc_Exception)) {
        PyErr_SetString(PyExc_TypeError, "set_error_class expects an Exception subclass");
        return NULL;
    }
    Py_INCREF(cls);
    Py_XSETREF(error_class, cls);
    Py_RETURN_NONE;
}

static const char *const DTYPE_NAMES[] = {"float32", "float64", "float16", "uint8",  "int32",  "int8",
                                          "int64",   "bool",    "int16",   "uint16", "uint32", "uint64"};
#define N_DTYPES ((int32_t)(sizeof DTYPE_NAMES / sizeof DTYPE_NAMES[0]))

static PyObject *tensor_descs(const symjit_tensor_desc *descs, int32_t count, const char *graph, const char *role) {
    PyObject *list;
    if (count < 0 || (count > 0 && descs == NULL)) {
        PyErr_Format(error_class, "AOT graph %s: invalid %s table", graph, role);
        return NULL;
    }
    list = PyList_New(count);
    if (list == NULL) return NULL;
    for (int32_t i = 0; i < count; i++) {
        const symjit_tensor_desc *t = &descs[i];
        PyObject *shape, *item;
        if (t->dtype < 0 || t->dtype >= N_DTYPES || t->ndim < 0 || t->ndim > MAX_NDIM ||
            (t->ndim > 0 && t->shape == NULL)) {
            PyErr_Format(error_class, "AOT graph %s: %s %d has an invalid dtype code %d or rank %d", graph, role,
                         (int)i, (int)t->dtype, (int)t->ndim);
            Py_DECREF(list);
            return NULL;
        }
        shape = PyTuple_New(t->ndim);
        if (shape == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        for (int32_t d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0) {
                PyErr_Format(error_class, "AOT graph %s: %s %d has a negative dimension", graph, role, (int)i);
                Py_DECREF(shape);
                Py_DECREF(list);
                return NULL;
            }
            PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(t->shape[d]));
        }
        item = Py_BuildValue("(sNs)", t->name ? t->name : "", shape, DTYPE_NAMES[t->dtype]);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* describe_graphs(address of `symjit_graphs`) -> list of dicts describing an AOT library's graphs. */
static PyObject *mod_describe_graphs(PyObject *m, PyObject *arg) {
    symjit_graphs_fn fn = (symjit_graphs_fn)require_address(arg, "describe_graphs");
    const symjit_graph_desc *graphs;
    int32_t count = -1;
    PyObject *list;
    if (fn == NULL) return NULL;
    graphs = fn(&count);
    if (count < 0 || (count > 0 && graphs == NULL)) {
        PyErr_SetString(error_class, "AOT library: symjit_graphs returned an invalid table");
        return NULL;
    }
    list = PyList_New(count);
    if (list == NULL) return NULL;
    for (int32_t g = 0; g < count; g++) {
        const symjit_graph_desc *d = &graphs[g];
        const char *name = d->name ? d->name : "graph";
        PyObject *ins, *outs, *params, *data, *item;
        if (d->abi_version != SYMJIT_ABI_VERSION) {
            PyErr_Format(error_class, "AOT graph %s was built for runtime ABI %u, this runtime has ABI %d", name,
                         d->abi_version, SYMJIT_ABI_VERSION);
            Py_DECREF(list);
            return NULL;
        }
        if (d->entry == NULL || d->workspace_size < 0) {
            PyErr_Format(error_class, "AOT graph %s has no entry function or a negative workspace size", name);
            Py_DECREF(list);
            return NULL;
        }
        ins = tensor_descs(d->inputs, d->n_inputs, name, "input");
        outs = tensor_descs(d->outputs, d->n_outputs, name, "output");
        params = tensor_descs(d->params, d->n_params, name, "param");
        if (d->param_data != NULL && params != NULL) {
            data = PyList_New(d->n_params);
            for (int32_t i = 0; data != NULL && i < d->n_params; i++)
                PyList_SET_ITEM(data, i, PyLong_FromVoidPtr((void *)d->param_data[i]));
        } else {
            data = Py_NewRef(Py_None);
        }
        if (ins == NULL || outs == NULL || params == NULL || data == NULL) {
            Py_XDECREF(ins);
            Py_XDECREF(outs);
            Py_XDECREF(params);
            Py_XDECREF(data);
            Py_DECREF(list);
            return NULL;
        }
        item = Py_BuildValue("{s:s,s:N,s:N,s:N,s:N,s:L,s:N,s:N}", "name", name, "inputs", ins, "outputs", outs,
                             "params", params, "param_data", data, "workspace_size", (long long)d->workspace_size,
                             "entry", PyLong_FromVoidPtr((void *)d->entry), "last_error",
                             d->last_error ? PyLong_FromVoidPtr((void *)d->last_error) : Py_NewRef(Py_None));
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, g, item);
    }
    return list;
}

/* ------------------------------------------------------------------ numpy data allocator
 *
 * numpy's own allocator returns 16-byte-aligned buffers (large ones at page + 16), so every
 * 64-byte vector load of a compiled kernel over an NDArray's buffer straddles two cache lines.
 * `use_aligned_numpy_allocator` installs (NEP 49, PyDataMem_SetHandler) a handler that aligns
 * every data buffer to SYMJIT_ALIGNMENT bytes. Invariants: the block malloc/calloc/realloc
 * returned starts at most SYMJIT_ALIGNMENT bytes before the aligned pointer, and the pointer
 * to that block is stored in the word just below the aligned pointer; calloc stays calloc (large
 * zeroed arrays keep their lazily mapped pages). Arrays remember the handler that made them,
 * so buffers allocated before or after a switch are always freed by their own allocator. */

#define NP_PAD ((size_t)SYMJIT_ALIGNMENT)

/* The aligned address inside a block from malloc (room for the block pointer below it). */
static void *np_aligned_in(void *raw) {
    return (void *)(((uintptr_t)raw + sizeof(void *) + NP_PAD - 1) & ~(uintptr_t)(NP_PAD - 1));
}

static void *np_align(void *raw) {
    void *p;
    if (raw == NULL) return NULL;
    p = np_aligned_in(raw);
    ((void **)p)[-1] = raw;
    return p;
}

/* Like numpy's default policy: blocks of 4 MiB and more ask for transparent huge pages (fewer
 * TLB misses and page faults when a large array is first written). Advice only: errors ignored. */
#define NP_HUGE_BYTES ((size_t)1 << 22)

static void np_advise_huge(void *block, size_t size) {
#ifdef MADV_HUGEPAGE
    uintptr_t first, last;
    if (block == NULL || size < NP_HUGE_BYTES) return;
    first = ((uintptr_t)block + 4095) & ~(uintptr_t)4095;
    last = ((uintptr_t)block + size) & ~(uintptr_t)4095;
    if (last > first) (void)madvise((void *)first, last - first, MADV_HUGEPAGE);
#else
    (void)block;
    (void)size;
#endif
}

/* A block for nelem * elsize bytes plus the alignment pad (zeroed: calloc), NULL on overflow. */
static void *np_block(size_t nelem, size_t elsize, int zeroed) {
    void *raw;
    if (elsize != 0 && nelem > (SIZE_MAX - NP_PAD) / elsize) return NULL;
    raw = zeroed ? calloc(1, nelem * elsize + NP_PAD) : malloc(nelem * elsize + NP_PAD);
    np_advise_huge(raw, nelem * elsize + NP_PAD);
    return raw;
}

/* realloc of the block under aligned pointer `ptr` to new_size bytes (+ pad); `keep` bytes of
 * data follow it to the new block's aligned address `aligned_in(block)`, whose block pointer is
 * written below it. NULL (old block untouched, as realloc's) on failure. */
static void *np_move_block(void *ptr, size_t new_size, size_t keep, void *(*aligned_in)(void *)) {
    void *raw = ((void **)ptr)[-1], *moved, *p;
    size_t offset = (size_t)((char *)ptr - (char *)raw); /* <= NP_PAD (np_*_in) */
    if (new_size > SIZE_MAX - NP_PAD || offset > NP_PAD) return NULL;
    moved = realloc(raw, new_size + NP_PAD);
    if (moved == NULL) return NULL;
    np_advise_huge(moved, new_size + NP_PAD);
    p = aligned_in(moved);                   /* may sit at another offset in the new block: */
    if ((char *)p != (char *)moved + offset) /* move the data first, then write the header */
        memmove(p, (char *)moved + offset, keep);
    ((void **)p)[-1] = moved;
    return p;
}

static void *np_aligned_malloc(void *ctx, size_t size) {
    (void)ctx;
    return np_align(np_block(size, 1, 0));
}

static void *np_aligned_calloc(void *ctx, size_t nelem, size_t elsize) {
    (void)ctx;
    return np_align(np_block(nelem, elsize, 1));
}

static void *np_aligned_realloc(void *ctx, void *ptr, size_t new_size) {
    if (ptr == NULL) return np_aligned_malloc(ctx, new_size);
    return np_move_block(ptr, new_size, new_size, np_aligned_in);
}

static void np_aligned_free(void *ctx, void *ptr, size_t size) {
    (void)ctx;
    (void)size;
    if (ptr != NULL) free(((void **)ptr)[-1]);
}

static PyDataMem_Handler aligned_numpy_handler = {
    "symjit_aligned64", 1,
    {NULL, np_aligned_malloc, np_aligned_calloc, np_aligned_realloc, np_aligned_free}};

/* Memory accounting (the profiler's profile_memory): a handler laid out as the aligned one, with
 * the buffer's size in the second word below the aligned pointer, that keeps atomic totals of the
 * live bytes, their peak and the allocation and free counts of the buffers it made. Buffers made
 * while it was installed are freed through it (arrays remember their handler), so the live
 * bytes stay exact after it is uninstalled. */
static _Atomic int64_t np_live_bytes, np_peak_bytes, np_alloc_count, np_free_count;
static PyObject *np_saved_handler = NULL; /* the handler installed before counting started */

static void np_count(int64_t delta, int is_alloc, int is_free) {
    int64_t live = atomic_fetch_add(&np_live_bytes, delta) + delta;
    int64_t peak = atomic_load(&np_peak_bytes);
    while (live > peak && !atomic_compare_exchange_weak(&np_peak_bytes, &peak, live)) {
    }
    if (is_alloc) atomic_fetch_add(&np_alloc_count, 1);
    if (is_free) atomic_fetch_add(&np_free_count, 1);
}

/* The aligned address inside a block (room for the block pointer and the size below it). */
static void *np_counted_in(void *raw) {
    return (void *)(((uintptr_t)raw + 2 * sizeof(void *) + NP_PAD - 1) & ~(uintptr_t)(NP_PAD - 1));
}

static void *np_counted_place(void *raw, size_t size) {
    void *p;
    if (raw == NULL) return NULL;
    p = np_counted_in(raw);
    ((void **)p)[-1] = raw;
    ((size_t *)p)[-2] = size;
    np_count((int64_t)size, 1, 0);
    return p;
}

static void *np_counted_malloc(void *ctx, size_t size) {
    (void)ctx;
    return np_counted_place(np_block(size, 1, 0), size);
}

static void *np_counted_calloc(void *ctx, size_t nelem, size_t elsize) {
    (void)ctx;
    return np_counted_place(np_block(nelem, elsize, 1), nelem * elsize);
}

static void *np_counted_realloc(void *ctx, void *ptr, size_t new_size) {
    size_t old_size;
    void *p;
    if (ptr == NULL) return np_counted_malloc(ctx, new_size);
    old_size = ((size_t *)ptr)[-2];
    p = np_move_block(ptr, new_size, old_size < new_size ? old_size : new_size, np_counted_in);
    if (p == NULL) return NULL;
    ((size_t *)p)[-2] = new_size;
    np_count((int64_t)new_size - (int64_t)old_size, 0, 0);
    return p;
}

static void np_counted_free(void *ctx, void *ptr, size_t size) {
    (void)ctx;
    (void)size;
    if (ptr == NULL) return;
    np_count(-(int64_t)((size_t *)ptr)[-2], 0, 1);
    free(((void **)ptr)[-1]);
}

static PyDataMem_Handler counting_numpy_handler = {
    "symjit_counted64", 1,
    {NULL, np_counted_malloc, np_counted_calloc, np_counted_realloc, np_counted_free}};

static PyObject *mod_count_numpy_memory(PyObject *self, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    if (on && np_saved_handler == NULL) {
        PyObject *handler = PyCapsule_New(&counting_numpy_handler, "mem_handler", NULL);
        if (handler == NULL) return NULL;
        np_saved_handler = PyDataMem_SetHandler(handler);
        Py_DECREF(handler);
        if (np_saved_handler == NULL) return NULL;
    } else if (!on && np_saved_handler != NULL) {
        PyObject *previous = PyDataMem_SetHandler(np_saved_handler);
        Py_CLEAR(np_saved_handler);
        if (previous == NULL) return NULL;
        Py_DECREF(previous);
    }
    Py_RETURN_NONE;
}

static PyObject *mod_numpy_memory(PyObject *self, PyObject *arg) {
    int reset_peak = PyObject_IsTrue(arg);
    int64_t live;
    if (reset_peak < 0) return NULL;
    live = atomic_load(&np_live_bytes);
    PyObject *result = Py_BuildValue("LLLL", (long long)live, (long long)atomic_load(&np_peak_bytes),
                                     (long long)atomic_load(&np_alloc_count), (long long)atomic_load(&np_free_count));
    if (reset_peak) atomic_store(&np_peak_bytes, live);
    return result;
}

static PyObject *mod_use_aligned_numpy_allocator(PyObject *self, PyObject *arg) {
    PyObject *handler, *old;
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    if (on) {
        handler = PyCapsule_New(&aligned_numpy_handler, "mem_handler", NULL);
        if (handler == NULL) return NULL;
    } else {
        handler = NULL;                      /* numpy's default policy */
    }
    old = PyDataMem_SetHandler(handler);
    Py_XDECREF(handler);
    return old;
}

static PyMethodDef module_methods[] = {
    {"symbols", mod_symbols, METH_NOARGS, "symbols() -> {name: address} of the runtime's C ABI functions."},
    {"test_symbols", mod_test_symbols, METH_NOARGS, "test_symbols() -> {name: address} of the built-in test kernels."},
    {"set_call_hook", mod_set_call_hook, METH_O,
     "set_call_hook(hook or None) -> previous hook: hook(entry, start_ns, end_ns) after every Entry call."},
    {"get_num_threads", mod_get_num_threads, METH_NOARGS, "get_num_threads() -> threads used by parallel_for."},
    {"set_num_threads", mod_set_num_threads, METH_O, "set_num_threads(n) -> previous count (n <= 0: default)."},
    {"set_dynamic", mod_set_dynamic, METH_O,
     "set_dynamic(mode) -> previous mode: 0 off (default), 1 jobs on the caller alone while the machine is\n"
     "oversubscribed (load average >= CPUs + threads), 2 every job on the caller alone."},
    {"parallel_for", (PyCFunction)(void (*)(void))mod_parallel_for, METH_FASTCALL,
     "parallel_for(kernel_address, n, grain, args) -> error code; args: ints, None or arrays."},
    {"parallel_for_multi", (PyCFunction)(void (*)(void))mod_parallel_for_multi, METH_FASTCALL,
     "parallel_for_multi(kernel_address, grain, sizes, arg_lists) -> error code: one parallel_for over\n"
     "the tensors' index ranges laid end to end, each part run with its tensor's args."},
    {"call_kernel", (PyCFunction)(void (*)(void))mod_call_kernel, METH_FASTCALL,
     "call_kernel(kernel_address, begin, end, args): run one kernel call on this thread."},
    {"use_aligned_numpy_allocator", mod_use_aligned_numpy_allocator, METH_O,
     "use_aligned_numpy_allocator(on) -> the previous handler: numpy data buffers allocated in this context from now "
     "on are SYMJIT_ALIGNMENT-byte aligned (on) or numpy's default (off)."},
    {"count_numpy_memory", mod_count_numpy_memory, METH_O,
     "count_numpy_memory(on): numpy data buffers allocated in this context from now on are counted (on), or\n"
     "are again made by the handler installed before (off)."},
    {"numpy_memory", mod_numpy_memory, METH_O,
     "numpy_memory(reset_peak) -> (live bytes, peak live bytes, allocations, frees) of the counted buffers;\n"
     "reset_peak: the peak restarts from the live bytes."},
    {"arena_alloc", mod_arena_alloc, METH_O, "arena_alloc(size) -> address of a 64-byte-aligned block."},
    {"arena_free", mod_arena_free, METH_O, "arena_free(address): free a block from arena_alloc."},
    {"last_error", mod_last_error, METH_NOARGS, "last_error() -> (code, message) of this thread."},
    {"fingerprint", (PyCFunction)(void (*)(void))mod_fingerprint, METH_FASTCALL,
     "fingerprint(buffer, seed=0) -> 16 bytes: a fast non-cryptographic 128-bit fingerprint of a contiguous\n"
     "buffer (detects accidental change, not forgery); releases the GIL while hashing."},
    {"clear_error", mod_clear_error, METH_NOARGS, "clear_error(): reset this thread's last error."},
    {"set_error_class", mod_set_error_class, METH_O, "set_error_class(cls): the exception class raised."},
    {"describe_graphs", mod_describe_graphs, METH_O,
     "describe_graphs(address of symjit_graphs) -> list of dicts describing an AOT library's graphs."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "symjit._runtime",
    "symjit's native runtime: thread pool, arena, entry-point ABI and the fast call binding.", -1, module_methods,
};

PyMODINIT_FUNC PyInit__runtime(void) {
    PyObject *m;
    import_array();
    if (PyType_Ready(&EntryType) < 0) return NULL;
    m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    default_error_class = PyErr_NewExceptionWithDoc("symjit._runtime.Error",
                                                    "Errors raised by the runtime before symjit.runtime installs "
                                                    "MXNetError.",
                                                    PyExc_RuntimeError, NULL);
    if (default_error_class == NULL) goto fail;
    error_class = Py_NewRef(default_error_class);
    if (PyModule_AddObjectRef(m, "Error", default_error_class) < 0) goto fail;
    if (PyModule_AddObjectRef(m, "Entry", (PyObject *)&EntryType) < 0) goto fail;
    if (PyModule_AddIntConstant(m, "ABI_VERSION", SYMJIT_ABI_VERSION) < 0 ||
        PyModule_AddIntConstant(m, "ALIGNMENT", SYMJIT_ALIGNMENT) < 0 ||
        PyModule_AddIntConstant(m, "OK", SYMJIT_OK) < 0 ||
        PyModule_AddIntConstant(m, "ERR_INVALID_ARGUMENT", SYMJIT_ERR_INVALID_ARGUMENT) < 0 ||
        PyModule_AddIntConstant(m, "ERR_OUT_OF_MEMORY", SYMJIT_ERR_OUT_OF_MEMORY) < 0 ||
        PyModule_AddIntConstant(m, "ERR_INDEX", SYMJIT_ERR_INDEX) < 0 ||
        PyModule_AddIntConstant(m, "ERR_UNSUPPORTED", SYMJIT_ERR_UNSUPPORTED) < 0 ||
        PyModule_AddIntConstant(m, "ERR_INTERNAL", SYMJIT_ERR_INTERNAL) < 0 ||
        PyModule_AddIntConstant(m, "GIL_RELEASE_BYTES", (long)GIL_RELEASE_BYTES) < 0)
        goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
