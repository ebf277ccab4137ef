/* kiln._kiln: the C extension under the `kiln` Python package (docs/PYTHON.md).
 *
 * An Engine wraps one kn_model (read-only once built, shared by every thread)
 * and a small pool of kn_contexts: a run takes a context from the pool (or
 * creates one), binds the inputs, runs with the GIL released and copies the
 * outputs into new numpy arrays before handing the context back.  The pool
 * is only touched while the GIL is held, so it needs no lock of its own;
 * several Python threads running one Engine each get their own context.
 *
 * Inputs are borrowed without a copy when they are C-contiguous, aligned,
 * native-endian arrays of the input's dtype; other arrays are converted
 * once when numpy can cast them safely (int32 to int64, a strided view),
 * else handed to kiln as they are so that kiln's own check names the
 * mismatch.  Errors raise the kiln.Error subclass of the kn_status with
 * kiln's one-line message.
 *
 * Module-level state: the exception classes (created once at import, as
 * CPython extensions keep them) and numpy's C API table (import_array). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#include <kiln.h>

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

/* Contexts kept for reuse per engine; more threads than this still run,
 * their extra contexts are freed after the run. */
#define KP_POOL_MAX 16
/* Inputs handled on the stack; more take a heap buffer. */
#define KP_STACK_INPUTS 16

/* ---- errors ------------------------------------------------------------ */

static const char *const kp_error_names[] = {
    [KN_OK] = NULL,
    [KN_ERR_INVALID_ARG] = "InvalidArgumentError",
    [KN_ERR_IO] = "FileError",
    [KN_ERR_PARSE] = "ParseError",
    [KN_ERR_UNSUPPORTED] = "UnsupportedError",
    [KN_ERR_SHAPE] = "ShapeError",
    [KN_ERR_DTYPE] = "DtypeError",
    [KN_ERR_MISSING] = "MissingError",
    [KN_ERR_LIMIT] = "LimitError",
    [KN_ERR_OOM] = "OutOfMemoryError",
    [KN_ERR_INTERNAL] = "InternalError",
    [KN_ERR_CANCELLED] = "CancelledError",
};
#define KP_N_STATUS ((int)(sizeof kp_error_names / sizeof kp_error_names[0]))

static PyObject *kp_error_base;            /* kiln.Error */
static PyObject *kp_errors[KP_N_STATUS];   /* by kn_status */

static PyObject *kp_raise(kn_status st, const char *msg) {
  PyObject *type = st > 0 && st < KP_N_STATUS ? kp_errors[st] : kp_error_base;
  PyObject *args = Py_BuildValue("(s)", msg);
  if (!args) return NULL;
  PyObject *e = PyObject_Call(type, args, NULL);
  Py_DECREF(args);
  if (!e) return NULL;
  PyObject *code = PyLong_FromLong((long)st);
  if (code) {
    PyObject_SetAttrString(e, "status", code);
    Py_DECREF(code);
  }
  PyErr_SetObject(type, e);
  Py_DECREF(e);
  return NULL;
}

static PyObject *kp_raise_err(const kn_error *err) {
  return kp_raise(err->status ? err->status : KN_ERR_INTERNAL,
                  err->msg[0] ? err->msg : "kiln: unknown error");
}

__attribute__((format(printf, 2, 3))) static PyObject *kp_raisef(kn_status st, const char *fmt,
                                                                 ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return kp_raise(st, msg);
}

/* ---- dtypes ------------------------------------------------------------ */

/* numpy type number of a kiln dtype; -1 when numpy has none (bf16). */
static int kp_npy_type(kn_dtype d) {
  switch (d) {
  case KN_DTYPE_F32: return NPY_FLOAT32;
  case KN_DTYPE_U8: return NPY_UINT8;
  case KN_DTYPE_I8: return NPY_INT8;
  case KN_DTYPE_U16: return NPY_UINT16;
  case KN_DTYPE_I16: return NPY_INT16;
  case KN_DTYPE_I32: return NPY_INT32;
  case KN_DTYPE_I64: return NPY_INT64;
  case KN_DTYPE_STRING: return NPY_OBJECT;
  case KN_DTYPE_BOOL: return NPY_BOOL;
  case KN_DTYPE_F16: return NPY_FLOAT16;
  case KN_DTYPE_F64: return NPY_FLOAT64;
  case KN_DTYPE_U32: return NPY_UINT32;
  case KN_DTYPE_U64: return NPY_UINT64;
  default: return -1;
  }
}

/* kiln dtype of a numpy dtype (by kind and size: int64 is NPY_LONG or
 * NPY_LONGLONG depending on the platform); UNDEFINED when kiln has none. */
static kn_dtype kp_kn_dtype(const PyArray_Descr *d) {
  int sz = (int)d->elsize;
  switch (d->kind) {
  case 'f':
    return sz == 4 ? KN_DTYPE_F32 : sz == 8 ? KN_DTYPE_F64 : sz == 2 ? KN_DTYPE_F16
                                                                      : KN_DTYPE_UNDEFINED;
  case 'i':
    return sz == 1 ? KN_DTYPE_I8 : sz == 2 ? KN_DTYPE_I16 : sz == 4 ? KN_DTYPE_I32
           : sz == 8 ? KN_DTYPE_I64 : KN_DTYPE_UNDEFINED;
  case 'u':
    return sz == 1 ? KN_DTYPE_U8 : sz == 2 ? KN_DTYPE_U16 : sz == 4 ? KN_DTYPE_U32
           : sz == 8 ? KN_DTYPE_U64 : KN_DTYPE_UNDEFINED;
  case 'b': return KN_DTYPE_BOOL;
  default: return KN_DTYPE_UNDEFINED;
  }
}

static PyObject *kp_dtype_object(kn_dtype d) {
  int t = kp_npy_type(d);
  if (t < 0) {
    Py_RETURN_NONE;
  }
  return (PyObject *)PyArray_DescrFromType(t);
}

/* ---- the engine -------------------------------------------------------- */

typedef struct kp_io {
  PyObject *name;    /* str */
  char *cname;       /* owned by the model */
  kn_dtype dtype;
  PyArray_Descr *descr; /* numpy dtype, NULL when none */
} kp_io;

typedef struct kp_engine {
  PyObject_HEAD
  kn_model *model;
  PyObject *path;    /* str: what was loaded */
  int32_t nin, nout;
  kp_io *in, *out;
  int32_t threads;   /* per context; 0: the library's default */
  int32_t is_engine; /* loaded from an engine file */
  double load_ms, build_ms;
  kn_context *pool[KP_POOL_MAX];
  int32_t n_pool;
  PyObject *weakrefs;
  PyObject *budget;  /* dict: the accuracy-budget search that built it, or NULL */
} kp_engine;

static PyTypeObject kp_engine_type;

static double kp_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void kp_engine_dealloc(kp_engine *self) {
  if (self->weakrefs) PyObject_ClearWeakRefs((PyObject *)self);
  for (int32_t i = 0; i < self->n_pool; i++) kn_context_free(self->pool[i]);
  for (int32_t i = 0; self->in && i < self->nin; i++) {
    Py_XDECREF(self->in[i].name);
    Py_XDECREF(self->in[i].descr);
  }
  for (int32_t i = 0; self->out && i < self->nout; i++) {
    Py_XDECREF(self->out[i].name);
    Py_XDECREF(self->out[i].descr);
  }
  PyMem_Free(self->in);
  PyMem_Free(self->out);
  kn_model_free(self->model);
  Py_XDECREF(self->path);
  Py_XDECREF(self->budget);
  Py_TYPE(self)->tp_free((PyObject *)self);
}

static int kp_fill_io(kp_engine *e) {
  e->nin = kn_model_input_count(e->model);
  e->nout = kn_model_output_count(e->model);
  e->in = PyMem_Calloc((size_t)e->nin + 1, sizeof *e->in);
  e->out = PyMem_Calloc((size_t)e->nout + 1, sizeof *e->out);
  if (!e->in || !e->out) {
    PyErr_NoMemory();
    return -1;
  }
  for (int pass = 0; pass < 2; pass++) {
    int32_t n = pass ? e->nout : e->nin;
    kp_io *io = pass ? e->out : e->in;
    for (int32_t i = 0; i < n; i++) {
      kn_value_info vi;
      kn_status st = pass ? kn_model_output_info(e->model, i, &vi)
                          : kn_model_input_info(e->model, i, &vi);
      if (st) {
        kp_raisef(st, "kiln: cannot read %s %d of the model", pass ? "output" : "input", i);
        return -1;
      }
      io[i].name = PyUnicode_FromString(vi.name);
      if (!io[i].name) return -1;
      io[i].cname = (char *)vi.name;
      io[i].dtype = vi.dtype;
      int t = kp_npy_type(vi.dtype);
      io[i].descr = t >= 0 ? PyArray_DescrFromType(t) : NULL;
    }
  }
  return 0;
}

/* Wraps a loaded (and built) model; steals it. */
static PyObject *kp_engine_new(PyTypeObject *type, kn_model *m, PyObject *path, double load_ms,
                               double build_ms) {
  kp_engine *e = (kp_engine *)type->tp_alloc(type, 0);
  if (!e) {
    kn_model_free(m);
    return NULL;
  }
  e->model = m;
  e->path = path;
  Py_INCREF(path);
  e->nin = e->nout = 0;
  e->in = e->out = NULL;
  e->threads = 0;
  e->is_engine = kn_model_format_version(m) != 0;
  e->load_ms = load_ms;
  e->build_ms = build_ms;
  e->n_pool = 0;
  e->weakrefs = NULL;
  e->budget = NULL;
  if (kp_fill_io(e) < 0) {
    Py_DECREF(e);
    return NULL;
  }
  return (PyObject *)e;
}

/* A context for one run, with the engine's thread count: from the pool,
 * else a new one (created with the GIL released).  NULL with an exception
 * set on failure. */
static kn_context *kp_ctx_get(kp_engine *e, int32_t threads) {
  kn_context *c = NULL;
  kn_error err = {0};
  kn_status st = KN_OK;
  if (e->n_pool > 0) {
    c = e->pool[--e->n_pool];
  } else {
    Py_BEGIN_ALLOW_THREADS
    st = kn_context_create(e->model, &c, &err);
    Py_END_ALLOW_THREADS
    if (st) {
      kp_raise_err(&err);
      return NULL;
    }
  }
  if (threads > 0 && kn_context_threads(c) != threads) {
    Py_BEGIN_ALLOW_THREADS
    st = kn_context_set_threads(c, threads, &err);
    Py_END_ALLOW_THREADS
    if (st) {
      kn_context_free(c);
      kp_raise_err(&err);
      return NULL;
    }
  }
  return c;
}

static void kp_ctx_put(kp_engine *e, kn_context *c) {
  if (e->n_pool < KP_POOL_MAX) e->pool[e->n_pool++] = c;
  else kn_context_free(c);
}

static const char *kp_label(const kp_engine *e) {
  const char *s = PyUnicode_AsUTF8(e->path);
  if (!s) {
    PyErr_Clear();
    s = "model";
  }
  return s;
}

/* The inputs of one run: held[i] a reference to the array whose data t[i]
 * borrows. */
typedef struct kp_feed {
  int32_t n;
  PyObject **held;
  kn_tensor *t;
  PyObject *held_stack[KP_STACK_INPUTS];
  kn_tensor t_stack[KP_STACK_INPUTS];
} kp_feed;

static void kp_feed_release(kp_feed *f) {
  for (int32_t i = 0; i < f->n; i++) Py_XDECREF(f->held[i]);
  if (f->held != f->held_stack) {
    PyMem_Free(f->held);
    PyMem_Free(f->t);
  }
  f->n = 0;
}

/* One input's array as kiln takes it: a new reference to `obj` itself or a
 * converted copy; NULL with an exception set. */
static PyObject *kp_input_array(const kp_engine *e, const kp_io *io, PyObject *obj) {
  if (!PyArray_Check(obj))
    return kp_raisef(KN_ERR_INVALID_ARG,
                     "%s: input '%s': expected a numpy.ndarray, got %s (convert it with "
                     "numpy.asarray(x, dtype='%s'))",
                     kp_label(e), io->cname, Py_TYPE(obj)->tp_name,
                     kn_dtype_name(io->dtype) ? kn_dtype_name(io->dtype) : "float32");
  PyArrayObject *a = (PyArrayObject *)obj;
  PyArray_Descr *d = PyArray_DESCR(a);
  kn_dtype have = kp_kn_dtype(d);
  bool plain = PyArray_IS_C_CONTIGUOUS(a) && PyArray_ISALIGNED(a) && PyArray_ISNOTSWAPPED(a);
  if (io->dtype == KN_DTYPE_STRING)
    return kp_raisef(KN_ERR_UNSUPPORTED,
                     "%s: input '%s': string inputs are not supported by the Python binding",
                     kp_label(e), io->cname);
  bool same = have != KN_DTYPE_UNDEFINED && (have == io->dtype || io->dtype == KN_DTYPE_UNDEFINED);
  if (!same && io->descr && PyArray_CanCastTypeTo(d, io->descr, NPY_SAFE_CASTING)) {
    /* a cast that keeps every value (int32 to int64, float16 to float32) */
    Py_INCREF(io->descr);
    return PyArray_FromAny(obj, io->descr, 0, 0,
                           NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_FORCECAST,
                           NULL);
  }
  if (have == KN_DTYPE_UNDEFINED)
    return kp_raisef(KN_ERR_DTYPE, "%s: input '%s': expected %s, got a numpy array of dtype %s",
                     kp_label(e), io->cname, kn_dtype_name(io->dtype), d->typeobj->tp_name);
  /* the right dtype, or one that would lose information (float64 to
   * float32), which kiln then refuses with its own message */
  if (plain) {
    Py_INCREF(obj);
    return obj;
  }
  PyArray_Descr *nd = PyArray_DescrNewByteorder(d, NPY_NATIVE);
  if (!nd) return NULL;
  return PyArray_FromAny(obj, nd, 0, 0, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED, NULL);
}

/* t borrows the data of arr (from kp_input_array for input i).  -1 with an
 * exception set. */
static int kp_array_tensor(const kp_engine *e, int32_t i, PyObject *arr, kn_tensor *t) {
  PyArrayObject *a = (PyArrayObject *)arr;
  int rank = PyArray_NDIM(a);
  if (rank > KN_MAX_RANK) {
    kp_raisef(KN_ERR_LIMIT, "%s: input '%s': %d dims, more than kiln's %d", kp_label(e),
              e->in[i].cname, rank, KN_MAX_RANK);
    return -1;
  }
  t->dtype = kp_kn_dtype(PyArray_DESCR(a));
  t->rank = rank;
  const npy_intp *dims = PyArray_DIMS(a);
  for (int d = 0; d < rank; d++) t->dims[d] = (int64_t)dims[d];
  t->data = PyArray_DATA(a);
  t->nbytes = (size_t)PyArray_NBYTES(a);
  t->owned = 0;
  return 0;
}

/* Reads `feed` ({name: array}) into f and binds it to c.  -1 with an
 * exception set. */
static int kp_bind(kp_engine *e, PyObject *feed, kn_context *c, kp_feed *f) {
  f->n = 0;
  f->held = f->held_stack;
  f->t = f->t_stack;
  if (!PyDict_Check(feed)) {
    kp_raisef(KN_ERR_INVALID_ARG, "%s: inputs must be a dict {name: numpy.ndarray}, got %s",
              kp_label(e), Py_TYPE(feed)->tp_name);
    return -1;
  }
  if (e->nin > KP_STACK_INPUTS) {
    f->held = PyMem_Calloc((size_t)e->nin, sizeof *f->held);
    f->t = PyMem_Calloc((size_t)e->nin, sizeof *f->t);
    if (!f->held || !f->t) {
      PyMem_Free(f->held);
      PyMem_Free(f->t);
      f->held = f->held_stack;
      PyErr_NoMemory();
      return -1;
    }
  }
  Py_ssize_t found = 0;
  for (int32_t i = 0; i < e->nin; i++) {
    PyObject *obj = PyDict_GetItemWithError(feed, e->in[i].name);
    if (!obj) {
      if (!PyErr_Occurred())
        kp_raisef(KN_ERR_MISSING, "%s: input '%s' (%d) was not given", kp_label(e),
                  e->in[i].cname, i);
      return -1;
    }
    found++;
    PyObject *arr = kp_input_array(e, &e->in[i], obj);
    if (!arr) return -1;
    f->held[f->n++] = arr;
    kn_tensor *t = &f->t[i];
    if (kp_array_tensor(e, i, arr, t) < 0) return -1;
    kn_error err = {0};
    if (kn_context_set_input(c, i, t, &err)) {
      kp_raise_err(&err);
      return -1;
    }
  }
  if (PyDict_Size(feed) != found) {
    PyObject *key, *val;
    Py_ssize_t pos = 0;
    while (PyDict_Next(feed, &pos, &key, &val)) {
      bool known = false;
      for (int32_t i = 0; i < e->nin && !known; i++) {
        int eq = PyObject_RichCompareBool(key, e->in[i].name, Py_EQ);
        if (eq < 0) return -1;
        known = eq;
      }
      if (!known) {
        PyObject *r = PyObject_Repr(key);
        const char *rs = r ? PyUnicode_AsUTF8(r) : NULL;
        kp_raisef(KN_ERR_INVALID_ARG, "%s: the model has no input named %s", kp_label(e),
                  rs ? rs : "?");
        Py_XDECREF(r);
        return -1;
      }
    }
  }
  return 0;
}

/* Output `i` of the last run of c as a new array owning its memory. */
static PyObject *kp_output(kp_engine *e, kn_context *c, int32_t i) {
  const kn_tensor *t = kn_context_output(c, i);
  if (!t)
    return kp_raisef(KN_ERR_UNSUPPORTED,
                     "%s: output '%s' is not a tensor (sequences and optionals are not "
                     "supported by the Python binding)",
                     kp_label(e), e->out[i].cname);
  int typ = kp_npy_type(t->dtype);
  if (typ < 0)
    return kp_raisef(KN_ERR_UNSUPPORTED, "%s: output '%s': dtype %s has no numpy equivalent",
                     kp_label(e), e->out[i].cname, kn_dtype_name(t->dtype));
  npy_intp dims[KN_MAX_RANK];
  for (int32_t d = 0; d < t->rank; d++) dims[d] = (npy_intp)t->dims[d];
  PyObject *arr = PyArray_SimpleNew(t->rank, dims, typ);
  if (!arr) return NULL;
  int64_t n = kn_tensor_numel(t);
  if (t->dtype == KN_DTYPE_STRING) {
    PyObject **dst = PyArray_DATA((PyArrayObject *)arr);
    char *const *src = t->data;
    for (int64_t k = 0; k < n; k++) {
      PyObject *s = PyUnicode_DecodeUTF8(src[k] ? src[k] : "", src[k] ? (Py_ssize_t)strlen(src[k]) : 0,
                                         "replace");
      if (!s) {
        Py_DECREF(arr);
        return NULL;
      }
      Py_XSETREF(dst[k], s);
    }
  } else if (n > 0) {
    memcpy(PyArray_DATA((PyArrayObject *)arr), t->data, (size_t)n * kn_dtype_size(t->dtype));
  }
  return arr;
}

/* One run: outputs as a dict (as_dict) or a tuple in output order. */
static PyObject *kp_run(kp_engine *e, PyObject *feed, bool as_dict) {
  kn_context *c = kp_ctx_get(e, e->threads);
  if (!c) return NULL;
  kp_feed f;
  PyObject *res = NULL;
  if (kp_bind(e, feed, c, &f) < 0) goto done;
  kn_error err = {0};
  kn_status st;
  Py_BEGIN_ALLOW_THREADS
  st = kn_context_run(c, &err);
  Py_END_ALLOW_THREADS
  if (st) {
    kp_raise_err(&err);
    goto done;
  }
  res = as_dict ? PyDict_New() : PyTuple_New(e->nout);
  if (!res) goto done;
  for (int32_t i = 0; i < e->nout; i++) {
    PyObject *a = kp_output(e, c, i);
    if (!a) {
      Py_CLEAR(res);
      goto done;
    }
    if (as_dict) {
      int r = PyDict_SetItem(res, e->out[i].name, a);
      Py_DECREF(a);
      if (r < 0) {
        Py_CLEAR(res);
        goto done;
      }
    } else {
      PyTuple_SET_ITEM(res, i, a);
    }
  }
done:
  kp_feed_release(&f);
  kp_ctx_put(e, c);
  return res;
}

static PyObject *kp_engine_run(kp_engine *self, PyObject *feed) {
  return kp_run(self, feed, true);
}

static PyObject *kp_engine_run_tuple(kp_engine *self, PyObject *feed) {
  return kp_run(self, feed, false);
}

/* ---- timing loops for bench() and profile() ----------------------------
 * The statistics are computed in kiln/__init__.py with the CLI's
 * definitions (docs/PYTHON.md); here only the runs, timed as `kiln bench`
 * and `kiln profile` time them, with the GIL released. */

static PyObject *kp_engine_time_runs(kp_engine *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"feed", "runs", "duration", "warmup", "threads", "min_runs",
                           "min_seconds", NULL};
  PyObject *feed;
  long long runs = 0, warmup = 3, min_runs = 10;
  double duration = 0, min_seconds = 1.0;
  int threads = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|LdLiLd", kwlist, &feed, &runs, &duration,
                                   &warmup, &threads, &min_runs, &min_seconds))
    return NULL;
  if (runs < 0 || warmup < 0 || threads < 0 || duration < 0)
    return kp_raisef(KN_ERR_INVALID_ARG, "kiln: bench: runs, warmup, threads and duration must "
                                         "not be negative");
  kn_context *c = kp_ctx_get(self, threads ? threads : self->threads);
  if (!c) return NULL;
  kp_feed f;
  PyObject *res = NULL;
  double *ms = NULL;
  int64_t n = 0, cap = 0;
  double first_ms = 0, wall = 0;
  kn_status st = KN_OK;
  kn_error err = {0};
  bool oom = false;
  if (kp_bind(self, feed, c, &f) < 0) goto done;
  Py_BEGIN_ALLOW_THREADS
  for (long long w = 0; w < warmup && !st; w++) {
    double a = kp_now_s();
    st = kn_context_run(c, &err);
    if (w == 0) first_ms = (kp_now_s() - a) * 1e3;
  }
  double start = kp_now_s();
  for (int64_t k = 0; !st; k++) {
    double elapsed = kp_now_s() - start;
    if (runs ? k >= runs
             : duration > 0 ? k > 0 && elapsed >= duration
                            : k >= min_runs && elapsed >= min_seconds)
      break;
    double a = kp_now_s();
    st = kn_context_run(c, &err);
    double b = kp_now_s();
    if (n == cap) {
      int64_t nc = cap ? cap * 2 : 256;
      double *g = realloc(ms, (size_t)nc * sizeof *g);
      if (!g) {
        oom = true;
        break;
      }
      ms = g;
      cap = nc;
    }
    ms[n++] = (b - a) * 1e3;
  }
  wall = kp_now_s() - start;
  Py_END_ALLOW_THREADS
  if (oom) {
    PyErr_NoMemory();
    goto done;
  }
  if (st) {
    kp_raise_err(&err);
    goto done;
  }
  npy_intp dn = (npy_intp)n;
  PyObject *arr = PyArray_SimpleNew(1, &dn, NPY_FLOAT64);
  if (!arr) goto done;
  if (n) memcpy(PyArray_DATA((PyArrayObject *)arr), ms, (size_t)n * sizeof *ms);
  res = Py_BuildValue("{s:N,s:d,s:d,s:i}", "ms", arr, "first_run_ms", first_ms, "wall_s", wall,
                      "threads", (int)kn_context_threads(c));
done:
  free(ms);
  kp_feed_release(&f);
  kp_ctx_put(self, c);
  return res;
}

static PyObject *kp_engine_profile_runs(kp_engine *self, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"feed", "runs", "warmup", "threads", NULL};
  PyObject *feed;
  long long runs = 20, warmup = 3;
  int threads = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|LLi", kwlist, &feed, &runs, &warmup, &threads))
    return NULL;
  if (runs < 1 || warmup < 0 || threads < 0)
    return kp_raisef(KN_ERR_INVALID_ARG, "kiln: profile: runs must be at least 1, warmup and "
                                         "threads not negative");
  kp_feed f = {.n = 0, .held = NULL};
  kn_context *c = kp_ctx_get(self, threads ? threads : self->threads);
  if (!c) return NULL;
  PyObject *res = NULL;
  double *run_ms = calloc((size_t)runs, sizeof *run_ms);
  kn_step_span *spans = NULL;
  int64_t *span_run = NULL;
  int64_t n_spans = 0, cap = 0;
  kn_status st = KN_OK;
  kn_error err = {0};
  bool oom = !run_ms;
  if (oom) {
    PyErr_NoMemory();
    goto done;
  }
  if (kp_bind(self, feed, c, &f) < 0) goto done;
  Py_BEGIN_ALLOW_THREADS
  for (long long w = 0; w < warmup && !st; w++) st = kn_context_run(c, &err);
  if (!st) st = kn_context_set_profiling(c, 1, &err);
  for (long long r = 0; r < runs && !st && !oom; r++) {
    double a = kp_now_s();
    st = kn_context_run(c, &err);
    run_ms[r] = (kp_now_s() - a) * 1e3;
    if (st) break;
    const kn_step_span *sp;
    int32_t n = kn_context_spans(c, &sp);
    if (n_spans + n > cap) {
      int64_t nc = (n_spans + n) * 2;
      kn_step_span *g = realloc(spans, (size_t)nc * sizeof *g);
      int64_t *h = g ? realloc(span_run, (size_t)nc * sizeof *h) : NULL;
      if (g) spans = g;
      if (h) span_run = h;
      if (!g || !h) {
        oom = true;
        break;
      }
      cap = nc;
    }
    memcpy(spans + n_spans, sp, (size_t)n * sizeof *sp);
    for (int32_t k = 0; k < n; k++) span_run[n_spans + k] = r;
    n_spans += n;
  }
  kn_error err2 = {0};
  if (kn_context_set_profiling(c, 0, &err2) && !st) {
    st = err2.status;
    err = err2;
  }
  Py_END_ALLOW_THREADS
  if (oom) {
    PyErr_NoMemory();
    goto done;
  }
  if (st) {
    kp_raise_err(&err);
    goto done;
  }
  /* spans as columns: run, step, thread, start_ns, end_ns, heap_bytes */
  npy_intp dims[2] = {(npy_intp)n_spans, 6};
  PyObject *sa = PyArray_SimpleNew(2, dims, NPY_INT64);
  if (!sa) goto done;
  int64_t *o = PyArray_DATA((PyArrayObject *)sa);
  for (int64_t k = 0; k < n_spans; k++) {
    o[6 * k + 0] = span_run[k];
    o[6 * k + 1] = spans[k].step;
    o[6 * k + 2] = spans[k].thread;
    o[6 * k + 3] = spans[k].start_ns;
    o[6 * k + 4] = spans[k].end_ns;
    o[6 * k + 5] = (int64_t)spans[k].heap_bytes;
  }
  npy_intp rn = (npy_intp)runs;
  PyObject *ra = PyArray_SimpleNew(1, &rn, NPY_FLOAT64);
  if (!ra) {
    Py_DECREF(sa);
    goto done;
  }
  memcpy(PyArray_DATA((PyArrayObject *)ra), run_ms, (size_t)runs * sizeof *run_ms);
  res = Py_BuildValue("{s:N,s:N,s:i}", "run_ms", ra, "spans", sa, "threads",
                      (int)kn_context_threads(c));
done:
  free(run_ms);
  free(spans);
  free(span_run);
  if (f.held) kp_feed_release(&f);
  kp_ctx_put(self, c);
  return res;
}

/* ---- model information -------------------------------------------------- */

static PyObject *kp_value_info(const kn_value_info *vi) {
  PyObject *shape;
  if (vi->rank < 0) {
    shape = Py_None;
    Py_INCREF(shape);
  } else {
    shape = PyTuple_New(vi->rank);
    if (!shape) return NULL;
    for (int32_t d = 0; d < vi->rank; d++) {
      PyObject *x;
      if (vi->dims[d] >= 0) {
        x = PyLong_FromLongLong(vi->dims[d]);
      } else {
        x = Py_None;
        Py_INCREF(x);
      }
      if (!x) {
        Py_DECREF(shape);
        return NULL;
      }
      PyTuple_SET_ITEM(shape, d, x);
    }
  }
  PyObject *params = PyTuple_New(vi->rank > 0 ? vi->rank : 0);
  if (!params) {
    Py_DECREF(shape);
    return NULL;
  }
  for (int32_t d = 0; d < vi->rank; d++) {
    PyObject *x = vi->dims[d] < 0 && vi->dim_params[d] ? PyUnicode_FromString(vi->dim_params[d])
                                                       : (Py_INCREF(Py_None), Py_None);
    if (!x) {
      Py_DECREF(shape);
      Py_DECREF(params);
      return NULL;
    }
    PyTuple_SET_ITEM(params, d, x);
  }
  return Py_BuildValue("(sNNsN)", vi->name, kp_dtype_object(vi->dtype), shape,
                       kn_dtype_name(vi->dtype) ? kn_dtype_name(vi->dtype) : "undefined",
                       params);
}

/* [(name, numpy dtype, shape with None for dynamic dims, kiln dtype name,
 *   dim_params)] */
static PyObject *kp_engine_io(kp_engine *self, PyObject *arg) {
  int outputs = PyObject_IsTrue(arg);
  if (outputs < 0) return NULL;
  int32_t n = outputs ? self->nout : self->nin;
  PyObject *l = PyList_New(n);
  if (!l) return NULL;
  for (int32_t i = 0; i < n; i++) {
    kn_value_info vi;
    kn_status st = outputs ? kn_model_output_info(self->model, i, &vi)
                           : kn_model_input_info(self->model, i, &vi);
    PyObject *x = st ? kp_raisef(st, "kiln: cannot read value info %d", i) : kp_value_info(&vi);
    if (!x) {
      Py_DECREF(l);
      return NULL;
    }
    PyList_SET_ITEM(l, i, x);
  }
  return l;
}

static PyObject *kp_engine_save(kp_engine *self, PyObject *arg) {
  PyObject *b = NULL;
  if (!PyUnicode_FSConverter(arg, &b)) return NULL;
  const char *path = PyBytes_AS_STRING(b);
  kn_error err = {0};
  kn_status st;
  Py_BEGIN_ALLOW_THREADS
  st = kn_model_save(self->model, path, &err);
  Py_END_ALLOW_THREADS
  Py_DECREF(b);
  if (st) return kp_raise_err(&err);
  Py_RETURN_NONE;
}

static PyObject *kp_engine_stats(kp_engine *self, PyObject *Py_UNUSED(ignored)) {
  kn_model_stats s;
  kn_error err = {0};
  if (kn_model_stats_get(self->model, &s, &err)) return kp_raise_err(&err);
  return Py_BuildValue("{s:L,s:L,s:K,s:K,s:K,s:L,s:L,s:d,s:L,s:L}", "nodes", (long long)s.nodes,
                       "onnx_nodes", (long long)s.onnx_nodes, "arena_bytes",
                       (unsigned long long)s.arena_bytes, "lower_bound_bytes",
                       (unsigned long long)s.lower_bound_bytes, "naive_activation_bytes",
                       (unsigned long long)s.naive_activation_bytes, "params",
                       (long long)s.params, "param_bytes", (long long)s.param_bytes, "flops",
                       s.flops, "ir_version", (long long)s.ir_version, "opset",
                       (long long)s.opset);
}

/* step_info(index, threads) -> dict of kn_step_info and kn_step_io */
static PyObject *kp_engine_step_info(kp_engine *self, PyObject *args) {
  int index, threads;
  if (!PyArg_ParseTuple(args, "ii", &index, &threads)) return NULL;
  kn_step_info si;
  kn_step_io io;
  if (kn_model_step_info(self->model, index, &si) ||
      kn_model_step_io(self->model, index, threads, &io))
    return kp_raisef(KN_ERR_INVALID_ARG, "%s: step %d is out of range (%d steps)",
                     kp_label(self), index, kn_model_step_count(self->model));
  const char *pn = kn_precision_name(si.precision);
  return Py_BuildValue("{s:s,s:s,s:s,s:s,s:s,s:s,s:d,s:K,s:K,s:K,s:s,s:d,s:s,s:d,s:s}", "name",
                       si.name, "op", si.op, "domain", si.domain ? si.domain : "", "covers",
                       si.covers ? si.covers : "", "tactic", si.tactic ? si.tactic : "reference",
                       "tiling", si.tiling, "flops", si.flops, "bytes_read",
                       (unsigned long long)si.bytes_read, "bytes_written",
                       (unsigned long long)si.bytes_written, "arena_live_bytes",
                       (unsigned long long)si.arena_live_bytes, "precision", pn ? pn : "fp32",
                       "predicted_us", io.predicted_us, "bound", io.bound ? io.bound : "",
                       "intensity", io.intensity, "layout", io.layout ? io.layout : "");
}

static PyObject *kp_engine_get_threads(kp_engine *self, void *Py_UNUSED(closure)) {
  if (self->threads > 0) return PyLong_FromLong(self->threads);
  Py_RETURN_NONE;
}

static int kp_engine_set_threads(kp_engine *self, PyObject *v, void *Py_UNUSED(closure)) {
  if (!v || v == Py_None) {
    self->threads = 0;
    return 0;
  }
  long n = PyLong_AsLong(v);
  if (n == -1 && PyErr_Occurred()) return -1;
  if (n < 1 || n > 1024) {
    kp_raisef(KN_ERR_INVALID_ARG, "kiln: threads must be in 1..1024 or None, got %ld", n);
    return -1;
  }
  self->threads = (int32_t)n;
  return 0;
}

static PyObject *kp_engine_get_path(kp_engine *self, void *Py_UNUSED(closure)) {
  Py_INCREF(self->path);
  return self->path;
}

static PyObject *kp_engine_get_is_engine(kp_engine *self, void *Py_UNUSED(closure)) {
  return PyBool_FromLong(self->is_engine);
}

static PyObject *kp_engine_get_times(kp_engine *self, void *Py_UNUSED(closure)) {
  return Py_BuildValue("{s:d,s:d}", "load_ms", self->load_ms, "build_ms", self->build_ms);
}

static PyObject *kp_engine_get_budget(kp_engine *self, void *Py_UNUSED(closure)) {
  if (!self->budget) Py_RETURN_NONE;
  Py_INCREF(self->budget);
  return self->budget;
}

static PyObject *kp_engine_get_steps(kp_engine *self, void *Py_UNUSED(closure)) {
  return PyLong_FromLong(kn_model_step_count(self->model));
}

static PyObject *kp_engine_repr(kp_engine *self) {
  return PyUnicode_FromFormat("<kiln.Engine %R: %d input%s, %d output%s>", self->path,
                              (int)self->nin, self->nin == 1 ? "" : "s", (int)self->nout,
                              self->nout == 1 ? "" : "s");
}

static PyMethodDef kp_engine_methods[] = {
    {"run", (PyCFunction)kp_engine_run, METH_O,
     "run(feed) -> dict\n\nRuns the model on feed ({input name: numpy.ndarray}) and returns\n"
     "{output name: numpy.ndarray}.  Inputs that are C-contiguous arrays of the input's dtype\n"
     "are read in place; others are converted once when numpy can cast them safely, else\n"
     "refused with kiln's message.  The outputs own their memory.  The GIL is released\n"
     "during the run; several threads may run one Engine at once."},
    {"_run_tuple", (PyCFunction)kp_engine_run_tuple, METH_O,
     "_run_tuple(feed) -> tuple: run(), outputs in the model's order"},
    {"_io", (PyCFunction)kp_engine_io, METH_O,
     "_io(outputs) -> [(name, dtype, shape, kiln dtype name, dim_params)]"},
    {"save", (PyCFunction)kp_engine_save, METH_O,
     "save(path)\n\nWrites the built model as a kiln engine file (docs/ENGINE_FORMAT.md)."},
    {"_time_runs", (PyCFunction)(void (*)(void))kp_engine_time_runs, METH_VARARGS | METH_KEYWORDS,
     "_time_runs(feed, runs=0, duration=0, warmup=3, threads=0, min_runs=10, min_seconds=1.0)"},
    {"_profile_runs", (PyCFunction)(void (*)(void))kp_engine_profile_runs,
     METH_VARARGS | METH_KEYWORDS, "_profile_runs(feed, runs=20, warmup=3, threads=0)"},
    {"stats", (PyCFunction)kp_engine_stats, METH_NOARGS,
     "stats() -> dict\n\nkn_model_stats: nodes, arena bytes, parameters, FLOPs, opset."},
    {"_step_info", (PyCFunction)kp_engine_step_info, METH_VARARGS,
     "_step_info(index, threads) -> dict of the step and the IO model's prediction"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef kp_engine_getset[] = {
    {"threads", (getter)kp_engine_get_threads, (setter)kp_engine_set_threads,
     "Threads of each run (None: KILN_NUM_THREADS, else the CPUs this process may use).", NULL},
    {"path", (getter)kp_engine_get_path, NULL, "The file the engine was loaded or built from.",
     NULL},
    {"is_engine", (getter)kp_engine_get_is_engine, NULL,
     "True when loaded from a kiln engine file, False for an ONNX model built in memory.", NULL},
    {"_times", (getter)kp_engine_get_times, NULL, "load_ms and build_ms", NULL},
    {"step_count", (getter)kp_engine_get_steps, NULL, "Steps of the built model.", NULL},
    {"_budget", (getter)kp_engine_get_budget, NULL,
     "The accuracy-budget search that built it (a dict), or None", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject kp_engine_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "kiln._kiln.Engine",
    .tp_basicsize = sizeof(kp_engine),
    .tp_dealloc = (destructor)kp_engine_dealloc,
    .tp_repr = (reprfunc)kp_engine_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A built kiln model, ready to run (kiln.build, kiln.load).",
    .tp_weaklistoffset = offsetof(kp_engine, weakrefs),
    .tp_methods = kp_engine_methods,
    .tp_getset = kp_engine_getset,
};

/* ---- load and build ---------------------------------------------------- */

/* A list of str from a sequence (NULL/None: empty); *strs points into the
 * bytes objects kept in *keep. */
static int kp_strings(PyObject *seq, const char *what, PyObject **keep, const char ***strs,
                      int32_t *n) {
  *keep = NULL;
  *strs = NULL;
  *n = 0;
  if (!seq || seq == Py_None) return 0;
  PyObject *fast = PySequence_Fast(seq, what);
  if (!fast) return -1;
  Py_ssize_t len = PySequence_Fast_GET_SIZE(fast);
  PyObject *list = PyList_New(len);
  const char **s = PyMem_Calloc((size_t)len + 1, sizeof *s);
  if (!list || !s) {
    Py_DECREF(fast);
    Py_XDECREF(list);
    PyMem_Free(s);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < len; i++) {
    PyObject *it = PySequence_Fast_GET_ITEM(fast, i);
    PyObject *b = PyUnicode_Check(it) ? PyUnicode_AsUTF8String(it) : NULL;
    if (!b) {
      if (!PyErr_Occurred())
        kp_raisef(KN_ERR_INVALID_ARG, "kiln: %s: expected str items, got %s", what,
                  Py_TYPE(it)->tp_name);
      Py_DECREF(fast);
      Py_DECREF(list);
      PyMem_Free(s);
      return -1;
    }
    s[i] = PyBytes_AS_STRING(b);
    PyList_SET_ITEM(list, i, b);
  }
  Py_DECREF(fast);
  *keep = list;
  *strs = s;
  *n = (int32_t)len;
  return 0;
}

/* ---- accuracy: samples, reports ---------------------------------------------
 * kiln.validate and kiln.build's accuracy budgets (kn_validate,
 * kn_model_build_budgeted): the samples given as a sequence of
 * {input name: array} (converted as run() converts its inputs), labels as a
 * sequence of ints, and the reports as dicts that kiln/__init__.py wraps. */

typedef struct kp_data {
  int32_t count, nin;
  kn_tensor *t;     /* count * nin, borrowing the arrays in held */
  PyObject **held;
  PyObject *labels; /* int64 array, or NULL */
  kn_samples s;
} kp_data;

static void kp_data_release(kp_data *d) {
  for (int64_t k = 0; d->held && k < (int64_t)d->count * d->nin; k++) Py_XDECREF(d->held[k]);
  PyMem_Free(d->held);
  PyMem_Free(d->t);
  Py_XDECREF(d->labels);
  memset(d, 0, sizeof *d);
}

/* data (None, a dict for one sample, or a sequence of dicts) and labels for
 * the inputs of e; d->s ready for the library.  -1 with an exception set. */
static int kp_data_read(const kp_engine *e, PyObject *data, PyObject *labels, uint64_t seed,
                        kp_data *d) {
  memset(d, 0, sizeof *d);
  kn_samples_init(&d->s);
  d->s.seed = seed;
  d->nin = e->nin;
  if (labels && labels != Py_None) {
    d->labels =
        PyArray_FROMANY(labels, NPY_INT64, 1, 1, NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED);
    if (!d->labels) return -1;
    d->s.labels = PyArray_DATA((PyArrayObject *)d->labels);
    d->s.n_labels = (int64_t)PyArray_SIZE((PyArrayObject *)d->labels);
    if (d->s.n_labels == 0) {
      kp_raisef(KN_ERR_INVALID_ARG, "kiln: labels is empty");
      return -1;
    }
  }
  if (!data || data == Py_None) return 0;
  PyObject *seq = PyDict_Check(data) ? PyTuple_Pack(1, data)
                                     : PySequence_Fast(data, "kiln: data must be a list of "
                                                             "{input name: numpy.ndarray}");
  if (!seq) return -1;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  int rc = -1;
  if (n == 0 || n > INT32_MAX) {
    kp_raisef(KN_ERR_INVALID_ARG, "kiln: data holds %zd samples: give at least one (or None "
                                  "for a generated sample)", n);
    goto done;
  }
  d->count = (int32_t)n;
  d->t = PyMem_Calloc((size_t)n * (size_t)e->nin + 1, sizeof *d->t);
  d->held = PyMem_Calloc((size_t)n * (size_t)e->nin + 1, sizeof *d->held);
  if (!d->t || !d->held) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t k = 0; k < n; k++) {
    PyObject *feed = PySequence_Fast_GET_ITEM(seq, k);
    if (!PyDict_Check(feed)) {
      kp_raisef(KN_ERR_INVALID_ARG, "kiln: data[%zd]: expected a dict {input name: "
                                    "numpy.ndarray}, got %s", k, Py_TYPE(feed)->tp_name);
      goto done;
    }
    Py_ssize_t found = 0;
    for (int32_t i = 0; i < e->nin; i++) {
      PyObject *obj = PyDict_GetItemWithError(feed, e->in[i].name);
      if (!obj) {
        if (!PyErr_Occurred())
          kp_raisef(KN_ERR_MISSING, "%s: data[%zd]: input '%s' (%d) was not given", kp_label(e),
                    k, e->in[i].cname, i);
        goto done;
      }
      found++;
      PyObject *arr = kp_input_array(e, &e->in[i], obj);
      if (!arr) goto done;
      d->held[k * e->nin + i] = arr;
      if (kp_array_tensor(e, i, arr, &d->t[k * e->nin + i]) < 0) goto done;
    }
    if (PyDict_Size(feed) != found) {
      kp_raisef(KN_ERR_INVALID_ARG, "%s: data[%zd] names an input the model does not have "
                                    "(its inputs: %d)", kp_label(e), k, (int)e->nin);
      goto done;
    }
  }
  d->s.count = d->count;
  d->s.n_inputs = e->nin;
  d->s.tensors = d->t;
  rc = 0;
done:
  Py_DECREF(seq);
  return rc;
}

/* A float option: None leaves *has 0; else *has 1 and *v its value. */
static int kp_opt_double(PyObject *o, const char *what, int32_t *has, double *v) {
  *has = 0;
  if (!o || o == Py_None) return 0;
  double x = PyFloat_AsDouble(o);
  if (x == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    kp_raisef(KN_ERR_INVALID_ARG, "kiln: %s must be a number or None, got %s", what,
              Py_TYPE(o)->tp_name);
    return -1;
  }
  *has = 1;
  *v = x;
  return 0;
}

/* None for a value that is not finite (JSON's null). */
static PyObject *kp_num(double v) {
  if (isfinite(v)) return PyFloat_FromDouble(v);
  if (isnan(v)) Py_RETURN_NONE;
  return PyFloat_FromDouble(v);
}

static PyObject *kp_validate_dict(const kn_validate_report *r) {
  PyObject *outs = PyList_New(r->n_outputs), *gates = PyList_New(KN_GATE_COUNT), *lat = NULL;
  if (!outs || !gates) goto fail;
  for (int32_t o = 0; o < r->n_outputs; o++) {
    const kn_output_accuracy *a = &r->outputs[o];
    PyObject *shape = PyTuple_New(a->compared && a->rank > 0 ? a->rank : 0);
    if (!shape) goto fail;
    for (int32_t d = 0; a->compared && d < a->rank; d++)
      PyTuple_SET_ITEM(shape, d, PyLong_FromLongLong(a->dims[d]));
    const char *dn = a->compared ? kn_dtype_name(a->dtype) : NULL;
    PyObject *x = Py_BuildValue("{s:s,s:O,s:z,s:N,s:N,s:N,s:N,s:i,s:i}", "name", a->name,
                                "compared", a->compared ? Py_True : Py_False, "dtype", dn,
                                "shape", shape, "max_abs_error", kp_num(a->max_abs_error),
                                "max_rel_error", kp_num(a->max_rel_error), "cosine",
                                kp_num(a->cosine), "worst_abs_sample", a->worst_abs_sample,
                                "worst_cosine_sample", a->worst_cosine_sample);
    if (!x) goto fail;
    PyList_SET_ITEM(outs, o, x);
  }
  for (int i = 0; i < KN_GATE_COUNT; i++) {
    const kn_gate *g = &r->gates[i];
    PyObject *x = Py_BuildValue("{s:s,s:O,s:O,s:O,s:N,s:N,s:N,s:i,s:i}", "name", g->name,
                                "given", g->given ? Py_True : Py_False, "pass",
                                g->pass ? Py_True : Py_False, "upper",
                                g->upper ? Py_True : Py_False, "measured", kp_num(g->measured),
                                "limit", kp_num(g->limit), "margin", kp_num(g->margin),
                                "output", g->output, "sample", g->sample);
    if (!x) goto fail;
    PyList_SET_ITEM(gates, i, x);
  }
  npy_intp n = (npy_intp)r->runs;
  lat = PyArray_SimpleNew(1, &n, NPY_FLOAT64);
  if (!lat) goto fail;
  if (n) memcpy(PyArray_DATA((PyArrayObject *)lat), r->latency_ms, (size_t)n * sizeof(double));
  return Py_BuildValue(
      "{s:O,s:i,s:i,s:L,s:L,s:s,s:N,s:N,s:N,s:N,s:N,s:{s:d,s:d,s:d,s:d,s:d,s:d},s:K,s:L,s:d,"
      "s:d}",
      "pass", r->pass ? Py_True : Py_False, "samples", r->samples, "threads", r->threads,
      "runs", (long long)r->runs, "warmup", (long long)r->warmup, "inputs", r->inputs,
      "outputs", outs, "gates", gates, "max_abs_error", kp_num(r->max_abs_error), "min_cosine",
      kp_num(r->min_cosine), "latency_runs_ms", lat, "latency_ms", "min", r->latency_min_ms,
      "mean", r->latency_mean_ms, "p50", r->latency_p50_ms, "p90", r->latency_p90_ms, "p99",
      r->latency_p99_ms, "max", r->latency_max_ms, "peak_rss_bytes",
      (unsigned long long)r->peak_rss, "top1_rows", (long long)r->top1_rows, "top1", r->top1,
      "reference_top1", r->reference_top1);
fail:
  Py_XDECREF(outs);
  Py_XDECREF(gates);
  Py_XDECREF(lat);
  return NULL;
}

static const char *const kp_trial_phases[] = {"requested", "all_fp32", "sensitivity", "bisect",
                                              "refine"};

/* The steps flagged in fp32 (n_steps flags) as a list of names. */
static PyObject *kp_step_list(const kn_budget_report *r, const uint8_t *fp32) {
  PyObject *l = PyList_New(0);
  for (int32_t i = 0; l && fp32 && i < r->n_steps; i++) {
    if (!fp32[i]) continue;
    PyObject *x = PyUnicode_FromString(r->steps[i]);
    if (!x || PyList_Append(l, x) < 0) {
      Py_XDECREF(x);
      Py_CLEAR(l);
      break;
    }
    Py_DECREF(x);
  }
  return l;
}

static PyObject *kp_budget_dict(const kn_budget_report *r) {
  PyObject *steps = PyList_New(r->n_steps), *trials = PyList_New(r->n_trials), *order = NULL;
  if (!steps || !trials) goto fail;
  for (int32_t i = 0; i < r->n_steps; i++) {
    const char *pn = kn_precision_name(r->precisions[i]);
    PyObject *x = Py_BuildValue("{s:s,s:s,s:s}", "name", r->steps[i], "precision",
                                pn ? pn : "?", "pattern", r->patterns[i]);
    if (!x) goto fail;
    PyList_SET_ITEM(steps, i, x);
  }
  for (int32_t k = 0; k < r->n_trials; k++) {
    const kn_budget_trial *t = &r->trials[k];
    PyObject *fp32 = kp_step_list(r, t->fp32);
    if (!fp32) goto fail;
    const char *step = t->step >= 0 && t->step < r->n_steps ? r->steps[t->step] : NULL;
    PyObject *x = Py_BuildValue(
        "{s:s,s:z,s:N,s:N,s:N,s:N,s:d,s:N,s:O}", "phase",
        t->phase >= 0 && t->phase <= KN_TRIAL_REFINE ? kp_trial_phases[t->phase] : "?", "step",
        step, "fp32", fp32, "cosine", kp_num(t->cosine), "max_abs_error",
        kp_num(t->max_abs_error), "top1", t->top1 >= 0 ? PyFloat_FromDouble(t->top1)
                                                     : (Py_INCREF(Py_None), Py_None),
        "top1_drop", t->top1_drop, "used", kp_num(t->used), "pass",
        t->pass ? Py_True : Py_False);
    if (!x) goto fail;
    PyList_SET_ITEM(trials, k, x);
  }
  order = PyList_New(0);
  for (int32_t i = 0; order && r->order && i < r->n_steps; i++) {
    PyObject *x = PyUnicode_FromString(r->steps[r->order[i]]);
    if (!x || PyList_Append(order, x) < 0) {
      Py_XDECREF(x);
      goto fail;
    }
    Py_DECREF(x);
  }
  if (!order) goto fail;
  PyObject *kept = kp_step_list(r, r->fp32);
  if (!kept) goto fail;
  return Py_BuildValue("{s:N,s:N,s:N,s:N,s:O,s:d,s:d,s:d,s:d,s:i,s:d}", "steps", steps,
                       "trials", trials, "order", order, "kept_fp32", kept, "pass",
                       r->pass ? Py_True : Py_False, "reference_top1", r->reference_top1,
                       "ms_requested", r->ms_requested, "ms_found", r->ms_found, "ms_fp32",
                       r->ms_fp32, "builds", r->builds, "seconds", r->seconds);
fail:
  Py_XDECREF(steps);
  Py_XDECREF(trials);
  Py_XDECREF(order);
  return NULL;
}

/* _load(path, build, shapes, profiles, precision, workspace, disabled,
 *       optimize, reference_kernels, tactics, threads, timing_cache, cls,
 *       layer_precisions, calibration, min_cosine, max_abs_error,
 *       max_accuracy_drop, data, labels, seed, search, reverse): with a bound
 * of an accuracy budget, kn_model_build_budgeted (the search's report in
 * the Engine's _budget). */
static PyObject *kp_load(PyObject *Py_UNUSED(mod), PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"path", "build", "shapes", "profiles", "precision", "workspace",
                           "disable_passes", "optimize", "reference_kernels", "tactics",
                           "threads", "timing_cache", "cls", "layer_precisions", "calibration",
                           "min_cosine", "max_abs_error", "max_accuracy_drop", "data", "labels",
                           "seed", "search", "reverse", NULL};
  PyObject *path_obj, *shapes = NULL, *profiles = NULL, *disabled = NULL, *layer_prec = NULL;
  PyObject *min_cos = NULL, *max_abs = NULL, *max_drop = NULL, *data = NULL, *labels = NULL;
  int build = 1, optimize = 1, reference = 0, threads = 0, reverse = 0;
  const char *precision = NULL, *tactics = NULL, *timing_cache = NULL, *calib_path = NULL;
  const char *search = NULL;
  unsigned long long workspace = 0, seed = 1;
  PyTypeObject *cls = &kp_engine_type;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O|pOOzKOppzizO!OzOOOOOKzp", kwlist, &path_obj,
                                   &build, &shapes, &profiles, &precision, &workspace, &disabled,
                                   &optimize, &reference, &tactics, &threads, &timing_cache,
                                   &PyType_Type, &cls, &layer_prec, &calib_path, &min_cos,
                                   &max_abs, &max_drop, &data, &labels, &seed, &search,
                                   &reverse))
    return NULL;
  if (!PyType_IsSubtype(cls, &kp_engine_type)) {
    PyErr_SetString(PyExc_TypeError, "cls must be a subclass of kiln._kiln.Engine");
    return NULL;
  }
  PyObject *path_b = NULL, *path_s = NULL;
  if (!PyUnicode_FSConverter(path_obj, &path_b)) return NULL;
  path_s = PyUnicode_DecodeFSDefault(PyBytes_AS_STRING(path_b));
  PyObject *keep_s = NULL, *keep_p = NULL, *keep_d = NULL, *keep_l = NULL, *res = NULL;
  const char **s = NULL, **p = NULL, **d = NULL, **l = NULL;
  int32_t ns = 0, np = 0, nd = 0, nl = 0;
  kn_calibration *cal = NULL;
  kn_budget_search_options so;
  kn_budget_search_options_init(&so);
  kn_accuracy_budget *b = &so.budget;
  if (!path_s || kp_strings(shapes, "shapes", &keep_s, &s, &ns) < 0 ||
      kp_strings(profiles, "profiles", &keep_p, &p, &np) < 0 ||
      kp_strings(disabled, "disable_passes", &keep_d, &d, &nd) < 0 ||
      kp_strings(layer_prec, "layer_precisions", &keep_l, &l, &nl) < 0 ||
      kp_opt_double(min_cos, "min_cosine", &b->has_min_cosine, &b->min_cosine) < 0 ||
      kp_opt_double(max_abs, "max_abs_error", &b->has_max_abs_error, &b->max_abs_error) < 0 ||
      kp_opt_double(max_drop, "max_accuracy_drop", &b->has_max_accuracy_drop,
                    &b->max_accuracy_drop) < 0)
    goto done;
  bool budget = b->has_min_cosine || b->has_max_abs_error || b->has_max_accuracy_drop;
  kn_build_options bo;
  kn_build_options_init(&bo);
  bo.shapes = s;
  bo.n_shapes = ns;
  bo.profiles = p;
  bo.n_profiles = np;
  bo.disabled_passes = d;
  bo.n_disabled_passes = nd;
  bo.layer_precisions = l;
  bo.n_layer_precisions = nl;
  bo.workspace = workspace;
  bo.no_optimize = !optimize;
  bo.reference_kernels = reference;
  bo.threads = threads;
  bo.timing_cache = timing_cache;
  if (precision) {
    int32_t pr = kn_precision_from_name(precision);
    if (pr < 0 || pr == KN_PRECISION_FP16_WEIGHTS || pr == KN_PRECISION_INT8_WEIGHTS) {
      kp_raisef(KN_ERR_INVALID_ARG,
                "kiln: precision '%s': expected fp32, bf16, fp16, int8 or best", precision);
      goto done;
    }
    if (pr == KN_PRECISION_INT8 && !calib_path) {
      kp_raisef(KN_ERR_MISSING, "kiln: precision 'int8' needs a calibration: pass "
                                "calibration=FILE (made by `kiln calibrate`)");
      goto done;
    }
    bo.precision = pr;
  }
  if (tactics) {
    if (!strcmp(tactics, "timed")) bo.tactics = KN_TACTICS_TIMED;
    else if (!strcmp(tactics, "heuristic")) bo.tactics = KN_TACTICS_HEURISTIC;
    else {
      kp_raisef(KN_ERR_INVALID_ARG, "kiln: tactics is 'timed' or 'heuristic', got '%s'", tactics);
      goto done;
    }
  }
  if (search) {
    if (!strcmp(search, "sensitivity")) so.search = KN_SEARCH_SENSITIVITY;
    else if (!strcmp(search, "bisect")) so.search = KN_SEARCH_BISECT;
    else {
      kp_raisef(KN_ERR_INVALID_ARG, "kiln: search is 'sensitivity' or 'bisect', got '%s'",
                search);
      goto done;
    }
  }
  so.reverse = reverse;
  so.threads = threads;
  so.label = "kiln.build";
  {
    kn_error err = {0};
    kn_status st = KN_OK;
    if (calib_path) {
      Py_BEGIN_ALLOW_THREADS
      st = kn_calibration_load(calib_path, &cal, &err);
      Py_END_ALLOW_THREADS
      if (st) {
        kp_raise_err(&err);
        goto done;
      }
      bo.calibration = cal;
    }
  }
  const char *path = PyBytes_AS_STRING(path_b);
  if (budget) {
    /* the model's inputs, to read data as run() reads its inputs */
    kn_model *probe = NULL;
    kn_error err = {0};
    kn_status st;
    Py_BEGIN_ALLOW_THREADS
    st = kn_model_load(path, &probe, &err);
    Py_END_ALLOW_THREADS
    if (st) {
      kp_raise_err(&err);
      goto done;
    }
    PyObject *io = kp_engine_new(&kp_engine_type, probe, path_s, 0, 0);
    if (!io) goto done;
    kp_data dat;
    if (kp_data_read((kp_engine *)io, data, labels, seed, &dat) < 0) {
      Py_DECREF(io);
      kp_data_release(&dat);
      goto done;
    }
    kn_budget_report rep;
    kn_model *m = NULL;
    double t0 = 0, t1 = 0;
    Py_BEGIN_ALLOW_THREADS
    t0 = kp_now_s();
    st = kn_model_build_budgeted(path, &bo, &dat.s, &so, &m, &rep, &err);
    t1 = kp_now_s();
    Py_END_ALLOW_THREADS
    kp_data_release(&dat);
    Py_DECREF(io);
    PyObject *report = kp_budget_dict(&rep);
    kn_budget_report_release(&rep);
    if (st) {
      kn_model_free(m);
      kp_raise_err(&err);
      if (report) {
        /* the exception carries what the search measured */
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyErr_NormalizeException(&et, &ev, &tb);
        if (ev) PyObject_SetAttrString(ev, "report", report);
        PyErr_Restore(et, ev, tb);
        Py_DECREF(report);
      }
      goto done;
    }
    if (!report) {
      kn_model_free(m);
      goto done;
    }
    res = kp_engine_new(cls, m, path_s, 0, (t1 - t0) * 1e3);
    if (res) ((kp_engine *)res)->budget = report;
    else Py_DECREF(report);
    goto done;
  }
  {
    kn_model *m = NULL;
    kn_error err = {0};
    kn_status st;
    double t0, t1, t2;
    int is_engine = 0;
    Py_BEGIN_ALLOW_THREADS
    t0 = kp_now_s();
    st = kn_model_load(path, &m, &err);
    t1 = kp_now_s();
    if (!st) is_engine = kn_model_format_version(m) != 0;
    /* an engine is built already; an ONNX model is built even when no
     * option is given, as `kiln run` does */
    if (!st && build && !is_engine) st = kn_model_build(m, &bo, &err);
    t2 = kp_now_s();
    Py_END_ALLOW_THREADS
    if (st) {
      kn_model_free(m);
      kp_raise_err(&err);
      goto done;
    }
    if (is_engine && (ns || np || nd || nl || precision || workspace || !optimize || reference ||
                      calib_path)) {
      kn_model_free(m);
      kp_raisef(KN_ERR_INVALID_ARG,
                "%s: an engine file is built already; build options apply to ONNX models",
                path);
      goto done;
    }
    res = kp_engine_new(cls, m, path_s, (t1 - t0) * 1e3, (t2 - t1) * 1e3);
  }
done:
  kn_calibration_free(cal);
  Py_XDECREF(path_b);
  Py_XDECREF(path_s);
  Py_XDECREF(keep_s);
  Py_XDECREF(keep_p);
  Py_XDECREF(keep_d);
  Py_XDECREF(keep_l);
  PyMem_Free(s);
  PyMem_Free(p);
  PyMem_Free(d);
  PyMem_Free(l);
  return res;
}

/* _validate(engine, model, data=None, labels=None, seed=1, shapes=None,
 *           runs=20, warmup=3, threads=0, max_p99_ms=None, max_rss=None,
 *           max_abs_error=None, min_cosine=None, max_accuracy_drop=None)
 * -> dict of kn_validate_report */
static PyObject *kp_validate(PyObject *Py_UNUSED(mod), PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"engine", "model", "data", "labels", "seed", "shapes", "runs",
                           "warmup", "threads", "max_p99_ms", "max_rss", "max_abs_error",
                           "min_cosine", "max_accuracy_drop", NULL};
  PyObject *engine, *model_obj, *data = NULL, *labels = NULL, *shapes = NULL;
  PyObject *p99 = NULL, *rss = NULL, *max_abs = NULL, *min_cos = NULL, *max_drop = NULL;
  unsigned long long seed = 1;
  long long runs = 20, warmup = 3;
  int threads = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O|OOKOLLiOOOOO", kwlist, &kp_engine_type,
                                   &engine, &model_obj, &data, &labels, &seed, &shapes, &runs,
                                   &warmup, &threads, &p99, &rss, &max_abs, &min_cos, &max_drop))
    return NULL;
  kp_engine *e = (kp_engine *)engine;
  PyObject *model_b = NULL, *keep_s = NULL, *res = NULL;
  const char **s = NULL;
  int32_t ns = 0;
  kp_data dat;
  memset(&dat, 0, sizeof dat);
  kn_validate_options o;
  kn_validate_options_init(&o);
  kn_accuracy_budget *b = &o.accuracy;
  double rss_v = 0;
  if (!PyUnicode_FSConverter(model_obj, &model_b) ||
      kp_strings(shapes, "shapes", &keep_s, &s, &ns) < 0 ||
      kp_opt_double(p99, "max_p99_ms", &o.has_max_p99_ms, &o.max_p99_ms) < 0 ||
      kp_opt_double(rss, "max_rss", &o.has_max_rss, &rss_v) < 0 ||
      kp_opt_double(max_abs, "max_abs_error", &b->has_max_abs_error, &b->max_abs_error) < 0 ||
      kp_opt_double(min_cos, "min_cosine", &b->has_min_cosine, &b->min_cosine) < 0 ||
      kp_opt_double(max_drop, "max_accuracy_drop", &b->has_max_accuracy_drop,
                    &b->max_accuracy_drop) < 0)
    goto done;
  if (o.has_max_rss && !(rss_v >= 0 && rss_v < 1.8e19)) {
    kp_raisef(KN_ERR_INVALID_ARG, "kiln: max_rss must be a byte count >= 0, got %g", rss_v);
    goto done;
  }
  o.max_rss = (uint64_t)rss_v;
  o.label = kp_label(e);
  o.shapes = s;
  o.n_shapes = ns;
  o.runs = runs;
  o.warmup = warmup;
  o.threads = threads ? threads : e->threads;
  if (kp_data_read(e, data, labels, seed, &dat) < 0) goto done;
  {
    kn_validate_report r;
    kn_error err = {0};
    kn_status st;
    const char *model = PyBytes_AS_STRING(model_b);
    Py_BEGIN_ALLOW_THREADS
    st = kn_validate(e->model, model, &dat.s, &o, &r, &err);
    Py_END_ALLOW_THREADS
    if (st) kp_raise_err(&err);
    else res = kp_validate_dict(&r);
    kn_validate_report_release(&r);
  }
done:
  kp_data_release(&dat);
  Py_XDECREF(model_b);
  Py_XDECREF(keep_s);
  PyMem_Free(s);
  return res;
}

/* read_tensor(path) -> (array, name or None) */
static PyObject *kp_read_tensor(PyObject *Py_UNUSED(mod), PyObject *arg) {
  PyObject *b = NULL;
  if (!PyUnicode_FSConverter(arg, &b)) return NULL;
  kn_tensor t;
  memset(&t, 0, sizeof t);
  char *name = NULL;
  kn_error err = {0};
  kn_status st;
  Py_BEGIN_ALLOW_THREADS
  st = kn_tensor_read_file(PyBytes_AS_STRING(b), &t, &name, &err);
  Py_END_ALLOW_THREADS
  Py_DECREF(b);
  if (st) return kp_raise_err(&err);
  PyObject *res = NULL, *arr = NULL;
  int typ = kp_npy_type(t.dtype);
  if (typ < 0) {
    kp_raisef(KN_ERR_UNSUPPORTED, "kiln: read_tensor: dtype %s has no numpy equivalent",
              kn_dtype_name(t.dtype));
    goto done;
  }
  npy_intp dims[KN_MAX_RANK];
  for (int32_t d = 0; d < t.rank; d++) dims[d] = (npy_intp)t.dims[d];
  arr = PyArray_SimpleNew(t.rank, dims, typ);
  if (!arr) goto done;
  int64_t n = kn_tensor_numel(&t);
  if (t.dtype == KN_DTYPE_STRING) {
    PyObject **dst = PyArray_DATA((PyArrayObject *)arr);
    char *const *src = t.data;
    for (int64_t k = 0; k < n; k++) {
      PyObject *s = PyUnicode_DecodeUTF8(src[k] ? src[k] : "",
                                         src[k] ? (Py_ssize_t)strlen(src[k]) : 0, "replace");
      if (!s) {
        Py_CLEAR(arr);
        goto done;
      }
      Py_XSETREF(dst[k], s);
    }
  } else if (n > 0) {
    memcpy(PyArray_DATA((PyArrayObject *)arr), t.data, (size_t)n * kn_dtype_size(t.dtype));
  }
  res = Py_BuildValue("(Nz)", arr, name);
done:
  free(name);
  kn_tensor_release(&t);
  return res;
}

static PyObject *kp_peak_rss(PyObject *Py_UNUSED(mod), PyObject *Py_UNUSED(ignored)) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return PyLong_FromLong(0);
  return PyLong_FromUnsignedLongLong((unsigned long long)ru.ru_maxrss * 1024ull);
}

static PyMethodDef kp_methods[] = {
    {"_load", (PyCFunction)(void (*)(void))kp_load, METH_VARARGS | METH_KEYWORDS,
     "_load(path, build=True, shapes=None, profiles=None, precision=None, workspace=0,\n"
     "      disable_passes=None, optimize=True, reference_kernels=False, tactics=None,\n"
     "      threads=0, timing_cache=None, cls=Engine, layer_precisions=None,\n"
     "      calibration=None, min_cosine=None, max_abs_error=None, max_accuracy_drop=None,\n"
     "      data=None, labels=None, seed=1, search=None, reverse=False) -> Engine"},
    {"_validate", (PyCFunction)(void (*)(void))kp_validate, METH_VARARGS | METH_KEYWORDS,
     "_validate(engine, model, data=None, labels=None, seed=1, shapes=None, runs=20,\n"
     "          warmup=3, threads=0, max_p99_ms=None, max_rss=None, max_abs_error=None,\n"
     "          min_cosine=None, max_accuracy_drop=None) -> dict (kn_validate)"},
    {"_read_tensor", kp_read_tensor, METH_O,
     "_read_tensor(path) -> (numpy.ndarray, name or None): an ONNX TensorProto (.pb) or .npy"},
    {"_peak_rss", kp_peak_rss, METH_NOARGS, "this process's peak RSS in bytes"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef kp_module = {
    PyModuleDef_HEAD_INIT, .m_name = "kiln._kiln",
    .m_doc = "The C extension of the kiln package: import kiln instead.", .m_size = -1,
    .m_methods = kp_methods};

PyMODINIT_FUNC PyInit__kiln(void) {
  import_array();
  if (PyType_Ready(&kp_engine_type) < 0) return NULL;
  PyObject *m = PyModule_Create(&kp_module);
  if (!m) return NULL;
  kp_error_base = PyErr_NewExceptionWithDoc(
      "kiln.Error", "A kiln failure; .status is the kn_status number, str(e) kiln's message.",
      NULL, NULL);
  if (!kp_error_base || PyModule_AddObjectRef(m, "Error", kp_error_base) < 0) goto fail;
  for (int s = 1; s < KP_N_STATUS; s++) {
    char full[64];
    snprintf(full, sizeof full, "kiln.%s", kp_error_names[s]);
    /* argument errors are ValueErrors too, files OSErrors, so that code
     * catching the builtin families keeps working */
    PyObject *extra = s == KN_ERR_INVALID_ARG || s == KN_ERR_SHAPE || s == KN_ERR_DTYPE ||
                              s == KN_ERR_MISSING
                          ? PyExc_ValueError
                      : s == KN_ERR_OOM ? PyExc_MemoryError
                      : s == KN_ERR_UNSUPPORTED ? PyExc_NotImplementedError
                                                : NULL;
    PyObject *bases = extra ? PyTuple_Pack(2, kp_error_base, extra) : PyTuple_Pack(1, kp_error_base);
    if (!bases) goto fail;
    kp_errors[s] = PyErr_NewException(full, bases, NULL);
    Py_DECREF(bases);
    if (!kp_errors[s] || PyModule_AddObjectRef(m, kp_error_names[s], kp_errors[s]) < 0) goto fail;
  }
  if (PyModule_AddObjectRef(m, "Engine", (PyObject *)&kp_engine_type) < 0 ||
      PyModule_AddStringConstant(m, "__version__", KN_VERSION_STRING) < 0 ||
      PyModule_AddIntConstant(m, "ENGINE_FORMAT_VERSION", (long)kn_engine_format_version()) < 0)
    goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
