/* Demangling through libstdc++'s __cxa_demangle (the extension links libstdc++). */
#include "demangle.h"

#include <stdlib.h>
#include <string.h>

/* From the Itanium C++ ABI; declared here because <cxxabi.h> is C++. */
extern char *__cxa_demangle(const char *mangled, char *buffer, size_t *length, int *status);

static PyObject *
decode(const char *s)
{
    return PyUnicode_DecodeUTF8(s, (Py_ssize_t)strlen(s), "replace");
}

char *
gp_demangle_cstr(const char *name)
{
    if (strncmp(name, "_Z", 2) == 0) {
        int status = 0;
        char *plain = __cxa_demangle(name, NULL, NULL, &status);
        if (status == 0 && plain != NULL)
            return plain;
        free(plain);
    }
    /* Not a C++ symbol (an extern "C" kernel) or an unknown mangling: keep it as is. */
    return strdup(name);
}

PyObject *
gp_demangled(const char *name)
{
    if (name == NULL)
        return PyUnicode_FromString("?");
    char *plain = gp_demangle_cstr(name);
    if (plain == NULL)
        return PyErr_NoMemory();
    PyObject *out = decode(plain);
    free(plain);
    return out;
}

/* _demangle(name) -> str. */
static PyObject *
demangle(PyObject *module, PyObject *arg)
{
    const char *s = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    if (s == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "_demangle(name): name must be a str");
        return NULL;
    }
    return gp_demangled(s);
}

static PyMethodDef demangle_methods[] = {
    {"_demangle", demangle, METH_O, "Demangle a C++ symbol name."},
    {NULL, NULL, 0, NULL},
};

int
gp_demangle_init(PyObject *module)
{
    return PyModule_AddFunctions(module, demangle_methods);
}
