/* C++ symbol names (kernel names from CUPTI) made readable with the C++ runtime's demangler. */
#ifndef GP_DEMANGLE_H
#define GP_DEMANGLE_H

#include <Python.h>

/* A new str: the demangled form of `name`, or `name` itself when it is not a mangled C++ name.
 * NULL (with an exception) only on memory errors; a NULL `name` gives "?". */
PyObject *gp_demangled(const char *name);

/* A malloc'd copy of the demangled form of `name`, or of `name` itself when it is not a mangled
 * C++ name; NULL only when out of memory. The caller frees it. No Python involved (safe on any
 * thread). */
char *gp_demangle_cstr(const char *name);

int gp_demangle_init(PyObject *module);

#endif
