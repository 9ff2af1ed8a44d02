/* The region observer behind region(name, metrics=...).
 *
 * enter: if the region being entered has `metrics`, call
 *        gpuprofile.counters.metrics._region_enter(name, metrics, record); an exception aborts
 *        the enter.
 * exit:  for a record whose enter hook succeeded, call
 *        gpuprofile.counters.metrics._region_exit(record).
 * Python installs both (through lazy wrappers in gpuprofile/__init__.py) at import.
 *        The exit hook reports its own failures (stored with the region's results); anything
 *        it still raises is unraisable, since an observer's exit cannot fail. */
#include "region_metrics.h"
#include "core/errors.h"
#include "regions/regions.h"
#include "core/util.h"

#define GP_MAX_OPEN 64

static PyObject *enter_hook, *exit_hook;
static int64_t open_records[GP_MAX_OPEN];
static int n_open;
static int registered;

static int
load_hooks(void)
{
    if (enter_hook != NULL)
        return 0;
    /* C never imports Python by name: `import gpuprofile` installs the hooks. */
    PyErr_SetString(gp_GpuProfileError, "region(metrics=...) needs the hooks that `import "
                                        "gpuprofile` installs (_C._set_region_metrics_hooks)");
    return -1;
}

/* The exit hook for `record`; what it raises is unraisable (an observer's exit cannot fail), and
 * the exception in flight, if any, is kept. */
static void
call_exit_hook(int64_t record)
{
    gp_exc_state saved;
    gp_exc_save(&saved);
    PyObject *hook = Py_NewRef(exit_hook); /* named below even if it replaced itself */
    PyObject *r = PyObject_CallFunction(hook, "L", (long long)record);
    if (r == NULL)
        PyErr_WriteUnraisable(hook);
    Py_DECREF(hook);
    Py_XDECREF(r);
    gp_exc_restore(&saved);
}

static int
observe_enter(int64_t record, void *userdata)
{
    PyObject *metrics = gp_region_innermost_metrics();
    if (metrics == NULL)
        return 0;
    if (n_open == GP_MAX_OPEN) {
        PyErr_SetString(gp_GpuProfileError, "too many open regions with metrics");
        return -1;
    }
    if (load_hooks() < 0)
        return -1;
    PyObject *name = gp_region_record_name(record);
    PyObject *hook = Py_NewRef(enter_hook); /* the hook may install others while it runs */
    PyObject *r =
        PyObject_CallFunction(hook, "OOL", name ? name : Py_None, metrics, (long long)record);
    Py_DECREF(hook);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    if (n_open == GP_MAX_OPEN) { /* checked again: the hook may have opened regions itself */
        call_exit_hook(record);
        PyErr_SetString(gp_GpuProfileError, "too many open regions with metrics");
        return -1;
    }
    open_records[n_open++] = record;
    return 0;
}

static void
observe_exit(int64_t record, void *userdata)
{
    if (n_open == 0 || open_records[n_open - 1] != record)
        return;
    n_open--;
    call_exit_hook(record);
}

static const gp_region_observer observer = {observe_enter, observe_exit, NULL};

static int
enable(void)
{
    if (registered)
        return 0;
    if (gp_regions_add_observer(&observer) < 0)
        return -1;
    registered = 1;
    return 0;
}

/* _set_region_metrics_hooks(enter, exit): installed by gpuprofile/__init__.py at import. */
static PyObject *
set_hooks(PyObject *module, PyObject *args)
{
    PyObject *enter, *exit;
    if (!PyArg_ParseTuple(args, "OO:_set_region_metrics_hooks", &enter, &exit))
        return NULL;
    if (!PyCallable_Check(enter) || !PyCallable_Check(exit)) {
        PyErr_SetString(PyExc_TypeError, "region metrics hooks must be callable");
        return NULL;
    }
    Py_XSETREF(enter_hook, Py_NewRef(enter));
    Py_XSETREF(exit_hook, Py_NewRef(exit));
    Py_RETURN_NONE;
}

static PyMethodDef hook_methods[] = {
    {"_set_region_metrics_hooks", set_hooks, METH_VARARGS, "Install region(metrics=...) hooks."},
    {NULL, NULL, 0, NULL},
};

int
gp_region_metrics_init(PyObject *module)
{
    gp_regions_set_metrics_hook(enable);
    return PyModule_AddFunctions(module, hook_methods);
}
