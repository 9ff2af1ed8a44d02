/* C++ symbol names (kernel names from CUPTI) made readable with the C++ runtime's demangler. */
#ifndef GP_DEMANGLE_H
#define GP_DEMANGLE_H

#include <Python.h>

/* A new str: the demangled form of `name`, or `name` itself when it is not a mangled C++ name.
 * NULL (with an exception) only on memory errors; a NULL `name` gives "?". */
PyObject *gp_demangled(const char *name);

int gp_demangle_init(PyObject *module);

#endif
