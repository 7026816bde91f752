/* A tiny torch-free extension whose entry writes into an argument and returns nothing, as most production ops do:
   mul(A, B, C, s, workspace) writes C = (A @ B) * s in place; workspace is scratch that must arrive zeroed (as a
   lock array does) and is left zeroed. Its body is Python run at module init, so gcc builds it in well under a
   second. -DUNWRITTEN_LAST leaves C's last element unwritten, -DRETURNS writes nothing and returns the right
   answer instead, -DREBIND points C at a fresh tensor holding the right answer instead of writing the one it was
   given. */
#include <Python.h>

#if defined(UNWRITTEN_LAST)
#define BODY "    C.view(-1)[:-1].copy_(out.view(-1)[:-1])\n"
#elif defined(RETURNS)
#define BODY "    return out\n"
#elif defined(REBIND)
#define BODY "    C.set_(out.contiguous())\n"
#else
#define BODY "    C.copy_(out)\n"
#endif

static const char* SOURCE =
    "import torch\n"
    "def mul(A, B, C, s, workspace):\n"
    "    if int(workspace.abs().sum()) != 0:\n"
    "        raise RuntimeError('workspace must arrive zeroed')\n"
    "    workspace.fill_(1)\n"
    "    out = (A.float() @ B.float()) * s.float()\n"
    "    workspace.zero_()\n" BODY;

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "opgate_ext", NULL, -1, NULL};

PyMODINIT_FUNC PyInit_opgate_ext(void) {
  PyObject* m = PyModule_Create(&module);
  if (m == NULL) return NULL;
  PyObject* globals = PyModule_GetDict(m);
  if (PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) < 0) return NULL;
  PyObject* ran = PyRun_String(SOURCE, Py_file_input, globals, globals);
  if (ran == NULL) return NULL; /* its exception is the import's */
  Py_DECREF(ran);
  return m;
}
