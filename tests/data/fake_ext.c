/* A tiny torch-free extension for judge tests: gemm(a, b) = a.float() @ b.float(), after spinning SPIN_US
   microseconds (so tests choose how slow "head" is) and WORK dependent multiply-adds (a cost in instructions, for
   the simulated cost), built by gcc in well under a second. -DCRASH aborts, -DHANG never returns, -DWRONG returns
   twice the product, -DLAZY_ON_VALGRIND skips the product when it runs under valgrind, -DENTRY=name exports it
   under another name, and -DONLOAD runs the Python in onload.h (ONLOAD_PY) from the module's init, as a hostile
   extension would. */
#include <Python.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef SPIN_US
#define SPIN_US 1000
#endif
#ifndef WORK
#define WORK 0
#endif

volatile float g_sink;

static void work(long n) {
  float x = 1.0f;
  for (long i = 0; i < n; ++i) x = x * 0.999999f + 1e-7f;
  g_sink = x;
}

static int on_valgrind(void) {
  const char* preload = getenv("LD_PRELOAD");
  return preload != NULL && strstr(preload, "valgrind") != NULL;
}

static void spin(long us) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do {
    clock_gettime(CLOCK_MONOTONIC, &t);
  } while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000L < us);
}

static PyObject* gemm(PyObject* self, PyObject* args) {
#if defined(CRASH)
  abort();
#elif defined(HANG)
  for (;;) spin(1000);
#endif
  PyObject *a, *b;
  if (!PyArg_ParseTuple(args, "OO", &a, &b)) return NULL;
  spin(SPIN_US);
  work(WORK);
#if defined(LAZY_ON_VALGRIND)
  if (on_valgrind()) {
    Py_INCREF(a);
    return PyObject_CallMethod(a, "float", NULL);
  }
#endif
  PyObject* af = PyObject_CallMethod(a, "float", NULL);
  PyObject* bf = af ? PyObject_CallMethod(b, "float", NULL) : NULL;
  PyObject* c = bf ? PyNumber_MatrixMultiply(af, bf) : NULL;
  Py_XDECREF(af);
  Py_XDECREF(bf);
#if defined(WRONG)
  if (c) {
    PyObject* two = PyLong_FromLong(2);
    PyObject* doubled = PyNumber_Multiply(c, two);
    Py_DECREF(two);
    Py_DECREF(c);
    c = doubled;
  }
#endif
  return c;
}

#ifndef ENTRY
#define ENTRY gemm
#endif
#define NAME_OF(x) #x
#define NAME(x) NAME_OF(x)

#ifdef ONLOAD
#include "onload.h"
#endif

static PyMethodDef methods[] = {{NAME(ENTRY), gemm, METH_VARARGS, "a @ b after a spin"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "opgate_ext", NULL, -1, methods};
PyMODINIT_FUNC PyInit_opgate_ext(void) {
#ifdef ONLOAD
  PyObject* globals = PyModule_GetDict(PyImport_AddModule("__main__"));
  PyObject* ran = PyRun_String(ONLOAD_PY, Py_file_input, globals, globals);
  if (ran == NULL) return NULL; /* its exception is the import's */
  Py_DECREF(ran);
#endif
  return PyModule_Create(&module);
}
