/* flowgen._fast: the CUDA path's launch calls without ctypes' argument
 * conversion, which is most of the Python side of a call (0.77 of 0.84 us
 * for flowrt_sample's six arguments on a 2-core Xeon; this call: 0.07).
 * The runtime's functions come by address (ctypes finds them in
 * libflowgen.so), the arguments as Python ints and a float; the GIL is
 * released around the call (a first launch may compile a variant).
 * Optional: where it was not built (no Python headers, Python 3.9), the
 * package calls through ctypes.  The stable ABI: one build serves every
 * Python from 3.10. */
#ifndef Py_LIMITED_API
#define Py_LIMITED_API 0x030A0000
#endif
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* flowrt_sample and flowrt_sample_cond (include/flowrt.h); the error is a
 * flowgen_error the caller owns, given by address. */
typedef int (*plain_fn)(void *sampler, uint64_t x0, uint64_t x, int64_t batch, void *stream,
                        void *err);
typedef int (*cond_fn)(void *sampler, uint64_t x0, uint64_t x, uint64_t cond, uint64_t null_cond,
                       float guidance, int64_t batch, void *stream, void *err);

static int count(const char *name, Py_ssize_t n, Py_ssize_t want) {
  if (n == want) return 0;
  PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", name, want, n);
  return -1;
}

/* None or an int, as a pointer. */
static void *pointer(PyObject *o) { return o == Py_None ? NULL : PyLong_AsVoidPtr(o); }

/* plain(fn, sampler, x0, x, batch, stream, err) -> status */
static PyObject *plain(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  (void)self;
  if (count("plain", n, 7)) return NULL;
  plain_fn fn = (plain_fn)pointer(args[0]);
  void *sampler = pointer(args[1]);
  uint64_t x0 = PyLong_AsUnsignedLongLong(args[2]), x = PyLong_AsUnsignedLongLong(args[3]);
  int64_t batch = PyLong_AsLongLong(args[4]);
  void *stream = pointer(args[5]), *err = pointer(args[6]);
  if (PyErr_Occurred()) return NULL;
  if (!fn || !err) {
    PyErr_SetString(PyExc_ValueError, "plain: a null function or error");
    return NULL;
  }
  int status;
  Py_BEGIN_ALLOW_THREADS
  status = fn(sampler, x0, x, batch, stream, err);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(status);
}

/* cond(fn, sampler, x0, x, cond, null_cond, guidance, batch, stream, err)
 * -> status */
static PyObject *cond(PyObject *self, PyObject *const *args, Py_ssize_t n) {
  (void)self;
  if (count("cond", n, 10)) return NULL;
  cond_fn fn = (cond_fn)pointer(args[0]);
  void *sampler = pointer(args[1]);
  uint64_t x0 = PyLong_AsUnsignedLongLong(args[2]), x = PyLong_AsUnsignedLongLong(args[3]);
  uint64_t c = PyLong_AsUnsignedLongLong(args[4]), null_cond = PyLong_AsUnsignedLongLong(args[5]);
  double guidance = PyFloat_AsDouble(args[6]);
  int64_t batch = PyLong_AsLongLong(args[7]);
  void *stream = pointer(args[8]), *err = pointer(args[9]);
  if (PyErr_Occurred()) return NULL;
  if (!fn || !err) {
    PyErr_SetString(PyExc_ValueError, "cond: a null function or error");
    return NULL;
  }
  int status;
  Py_BEGIN_ALLOW_THREADS
  status = fn(sampler, x0, x, c, null_cond, (float)guidance, batch, stream, err);
  Py_END_ALLOW_THREADS
  return PyLong_FromLong(status);
}

static PyMethodDef methods[] = {
    {"plain", (PyCFunction)(void (*)(void))plain, METH_FASTCALL,
     "plain(fn, sampler, x0, x, batch, stream, err): flowrt_sample at address fn"},
    {"cond", (PyCFunction)(void (*)(void))cond, METH_FASTCALL,
     "cond(fn, sampler, x0, x, cond, null_cond, guidance, batch, stream, err): "
     "flowrt_sample_cond at address fn"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "flowgen._fast", "The CUDA path's launch calls, without ctypes.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fast(void) { return PyModule_Create(&module); }
