/* Reading the calling thread's Python frames (pyframes.h). */
#include <Python.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000 &&                                 \
    __has_include(<internal/pycore_frame.h>)
#define GP_FRAMES_NOGIL 1
#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
#else
#define GP_FRAMES_NOGIL 0
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h> /* PyFrame_GetBack and the frame struct: not in Python.h before 3.11 */
#endif
#endif

#include "pyframes.h"

int
gp_pyframes_nogil(void)
{
    return GP_FRAMES_NOGIL;
}

#if GP_FRAMES_NOGIL

int
gp_pyframes_read(gp_pyframe *out, int max)
{
    PyThreadState *ts = PyGILState_GetThisThreadState();
    if (ts == NULL || ts->cframe == NULL)
        return 0;
    int n = 0;
    for (_PyInterpreterFrame *f = ts->cframe->current_frame; f != NULL && n < max;
         f = f->previous) {
#if PY_VERSION_HEX >= 0x030C0000
        if (f->owner == FRAME_OWNED_BY_CSTACK)
            continue; /* the C stack's entry shims carry no user code */
#endif
        if (_PyFrame_IsIncomplete(f))
            continue;
        out[n].code = f->f_code;
        out[n].lasti = _PyInterpreterFrame_LASTI(f) * (int)sizeof(_Py_CODEUNIT);
        out[n].line = -1;
        n++;
    }
    return n;
}

int
gp_pyframe_line(gp_pyframe *frame)
{
    if (frame->line < 0)
        frame->line = PyCode_Addr2Line(frame->code, frame->lasti);
    return frame->line;
}

#else

/* Other versions: the public API, which needs the GIL (it may create frame objects). */
int
gp_pyframes_read(gp_pyframe *out, int max)
{
    if (!PyGILState_Check())
        return 0;
    int n = 0;
    PyFrameObject *f = PyThreadState_GetFrame(PyThreadState_Get());
    while (f != NULL && n < max) {
        PyCodeObject *code = PyFrame_GetCode(f);
        Py_DECREF(code); /* the frame keeps it alive */
        out[n].code = code;
        /* The offset is what the capture cache compares (pylines.c): a constant would make every
         * line of a function hit the first one's entry. */
#if PY_VERSION_HEX >= 0x030B0000
        out[n].lasti = PyFrame_GetLasti(f);
#else
        out[n].lasti = f->f_lasti * (int)sizeof(_Py_CODEUNIT);
#endif
        out[n].line = PyFrame_GetLineNumber(f);
        n++;
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    Py_XDECREF(f);
    return n;
}

int
gp_pyframe_line(gp_pyframe *frame)
{
    return frame->line;
}

#endif
