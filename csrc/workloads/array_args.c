/* Parsing of array arguments: CUDA Array Interface, DLPack, DeviceArray, buffer protocol. */
#include "array_args.h"
#include "device_array.h"
#include "dlpack.h"
#include "core/errors.h"
#include "core/streams.h"
#include "core/util.h"

#include <limits.h>
#include <string.h>

static void
set_dtype(gp_array *a, gp_dtype dtype, const char *desc)
{
    a->dtype = dtype;
    snprintf(a->dtype_desc, sizeof a->dtype_desc, "%s",
             dtype == GP_DTYPE_OTHER ? desc : gp_dtype_name(dtype));
}

/* Strides of dimensions of size 1 carry no information (and frameworks fill them freely). */
static void
normalize_strides(gp_array *a)
{
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] == 1)
            a->strides[i] = 0;
}

static void
contiguous_strides(gp_array *a)
{
    int64_t s = 1;
    for (int i = a->ndim - 1; i >= 0; i--) {
        a->strides[i] = s;
        s *= a->shape[i];
    }
}

/* Producers can claim any shape and strides: element counts and byte extents must fit well
 * inside 64 bits (GP_ARRAY_MAX_ELEMENTS leaves room for the element size), so that nothing
 * computed from them later (contiguous strides, extents, allocation sizes) overflows. */
#define GP_ARRAY_MAX_ELEMENTS (INT64_MAX / 16)

static int
check_shape(const gp_array *a, const char *name)
{
    int64_t count = 1;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] < 0) {
            PyErr_Format(PyExc_ValueError, "%s: dimension %d has negative size %lld (via %s)", name,
                         i, (long long)a->shape[i], a->via);
            return -1;
        }
    for (int i = 0; i < a->ndim; i++)
        if (__builtin_mul_overflow(count, a->shape[i], &count) || count > GP_ARRAY_MAX_ELEMENTS) {
            PyErr_Format(PyExc_ValueError,
                         "%s: shape has too many elements for 64-bit sizes (via %s)", name, a->via);
            return -1;
        }
    return 0;
}

/* After check_shape: the farthest element must be addressable too. */
static int
check_strides(const gp_array *a, const char *name)
{
    uint64_t span = 0;
    for (int i = 0; i < a->ndim; i++) {
        if (a->shape[i] == 0)
            return 0; /* empty: nothing is ever addressed */
        const int64_t s = a->strides[i];
        const uint64_t step = s < 0 ? 0 - (uint64_t)s : (uint64_t)s;
        uint64_t reach;
        if (__builtin_mul_overflow((uint64_t)(a->shape[i] - 1), step, &reach) ||
            __builtin_add_overflow(span, reach, &span) || span > GP_ARRAY_MAX_ELEMENTS) {
            PyErr_Format(PyExc_ValueError,
                         "%s: strides reach beyond 64-bit addresses (dimension %d, stride %lld, "
                         "via %s)",
                         name, i, (long long)s, a->via);
            return -1;
        }
    }
    return 0;
}

static int
check_ndim(int ndim, const char *name, const char *via)
{
    if (ndim < 0 || ndim > GP_ARRAY_MAX_DIM) {
        PyErr_Format(PyExc_ValueError, "%s: %d dimensions via %s; at most %d are supported", name,
                     ndim, via, GP_ARRAY_MAX_DIM);
        return -1;
    }
    return 0;
}

/* ---- CUDA Array Interface ------------------------------------------------------------------ */

/* An int entry of the interface; one beyond 64 bits is a ValueError (not OverflowError). */
static int
cai_int(PyObject *v, const char *what, const char *name, long long *out)
{
    int overflow = 0;
    *out = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (overflow) {
        PyErr_Format(PyExc_ValueError,
                     "%s.__cuda_array_interface__['%s'] holds an int beyond 64 bits", name, what);
        return -1;
    }
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static int
cai_int_tuple(PyObject *t, const char *what, const char *name, int64_t *out, int n)
{
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != n) {
        PyErr_Format(PyExc_ValueError,
                     "%s.__cuda_array_interface__['%s'] must be a tuple of %d "
                     "ints",
                     name, what, n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        long long v;
        if (cai_int(PyTuple_GET_ITEM(t, i), what, name, &v) < 0)
            return -1;
        out[i] = v;
    }
    return 0;
}

static gp_dtype
cai_dtype(const char *typestr)
{
    if (strlen(typestr) != 3 || (typestr[0] != '<' && typestr[0] != '=' && typestr[0] != '|'))
        return GP_DTYPE_OTHER;
    if (strcmp(typestr + 1, "f4") == 0)
        return GP_DTYPE_F32;
    if (strcmp(typestr + 1, "f2") == 0)
        return GP_DTYPE_F16;
    return GP_DTYPE_OTHER;
}

/* The interface's entries, each held by a strong reference: reading one may run the producer's
 * Python (an entry's __index__, a key's __eq__), which may change or empty the dict; a borrowed
 * value would then be freed under us. NULL for an entry that is absent. */
enum { CAI_SHAPE, CAI_TYPESTR, CAI_DATA, CAI_STRIDES, CAI_MASK, CAI_VERSION, CAI_STREAM, CAI_N };
static const char *const cai_keys[CAI_N] = {"shape", "typestr", "data",  "strides",
                                            "mask",  "version", "stream"};

static int
cai_take(PyObject *iface, PyObject *vals[CAI_N])
{
    for (int k = 0; k < CAI_N; k++) {
        PyObject *key = PyUnicode_FromString(cai_keys[k]);
        if (key == NULL)
            return -1;
        PyObject *v = PyDict_GetItemWithError(iface, key);
        vals[k] = Py_XNewRef(v); /* owned before anything else runs */
        Py_DECREF(key);
        if (v == NULL && PyErr_Occurred())
            return -1;
    }
    return 0;
}

static int
cai_stream(PyObject *const vals[CAI_N], const char *name, gp_array *a)
{
    long long v = 0;
    if (vals[CAI_VERSION] != NULL && cai_int(vals[CAI_VERSION], "version", name, &v) < 0)
        return -1;
    PyObject *stream = v >= 3 ? vals[CAI_STREAM] : NULL;
    if (stream == NULL || stream == Py_None)
        return 0;
    long long s;
    if (cai_int(stream, "stream", name, &s) < 0)
        return -1;
    if (s == 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s.__cuda_array_interface__['stream'] is 0, which the "
                     "interface forbids (1 is the legacy default stream)",
                     name);
        return -1;
    }
    a->has_stream = 1;
    a->stream = s == 1 ? (cudaStream_t)0 : (cudaStream_t)(uintptr_t)s;
    return 0;
}

static int
cai_strides(PyObject *strides, const char *name, gp_array *a)
{
    if (strides == NULL || strides == Py_None) {
        contiguous_strides(a);
        return 0;
    }
    if (cai_int_tuple(strides, "strides", name, a->strides, a->ndim) < 0)
        return -1;
    const int64_t item = a->dtype == GP_DTYPE_OTHER ? 1 : gp_dtype_size(a->dtype);
    for (int i = 0; i < a->ndim; i++) {
        if (a->strides[i] % item != 0) {
            PyErr_Format(PyExc_ValueError,
                         "%s: stride %lld bytes of dimension %d is not a "
                         "multiple of the element size",
                         name, (long long)a->strides[i], i);
            return -1;
        }
        a->strides[i] /= item;
    }
    return check_strides(a, name);
}

static int
cai_fields(PyObject *const vals[CAI_N], const char *name, gp_array *a)
{
    PyObject *shape = vals[CAI_SHAPE], *typestr = vals[CAI_TYPESTR], *data = vals[CAI_DATA];
    if (!shape || !typestr || !data || !PyTuple_Check(shape) || !PyUnicode_Check(typestr)) {
        PyErr_Format(PyExc_ValueError,
                     "%s.__cuda_array_interface__ needs 'shape' (tuple), "
                     "'typestr' (str) and 'data'",
                     name);
        return -1;
    }
    if (vals[CAI_MASK] != NULL && vals[CAI_MASK] != Py_None) {
        PyErr_Format(PyExc_ValueError, "%s: masked arrays are not supported", name);
        return -1;
    }
    if (check_ndim((int)Py_MIN(PyTuple_GET_SIZE(shape), INT_MAX), name, a->via) < 0)
        return -1;
    a->ndim = (int)PyTuple_GET_SIZE(shape);
    if (cai_int_tuple(shape, "shape", name, a->shape, a->ndim) < 0 || check_shape(a, name) < 0)
        return -1;
    const char *ts = PyUnicode_AsUTF8(typestr);
    if (ts == NULL)
        return -1;
    set_dtype(a, cai_dtype(ts), ts);
    int64_t ptr_ro[2];
    if (cai_int_tuple(data, "data", name, ptr_ro, 2) < 0)
        return -1;
    a->data = (void *)(uintptr_t)ptr_ro[0];
    a->readonly = ptr_ro[1] != 0;
    if (cai_strides(vals[CAI_STRIDES], name, a) < 0)
        return -1;
    return cai_stream(vals, name, a);
}

static int
parse_cai(PyObject *iface, const char *name, gp_array *a)
{
    a->via = "__cuda_array_interface__";
    a->on_device = 1;
    a->device = -1;
    if (!PyDict_Check(iface)) {
        PyErr_Format(PyExc_TypeError, "%s.__cuda_array_interface__ must be a dict", name);
        return -1;
    }
    PyObject *vals[CAI_N] = {NULL};
    int rc = cai_take(iface, vals) < 0 ? -1 : cai_fields(vals, name, a);
    for (int k = 0; k < CAI_N; k++)
        Py_XDECREF(vals[k]);
    return rc;
}

/* ---- DLPack ------------------------------------------------------------------------------- */

static gp_dtype
dl_dtype(gp_dl_dtype t, char *desc, size_t desc_size)
{
    static const char *const codes[] = {"int",    "uint",    "float", "opaque",
                                        "bfloat", "complex", "bool"};
    snprintf(desc, desc_size, "%s%d%s", t.code < 7 ? codes[t.code] : "code?", (int)t.bits,
             t.lanes == 1 ? "" : "xN");
    if (t.lanes != 1)
        return GP_DTYPE_OTHER;
    if (t.code == GP_DL_FLOAT && t.bits == 32)
        return GP_DTYPE_F32;
    if (t.code == GP_DL_FLOAT && t.bits == 16)
        return GP_DTYPE_F16;
    if (t.code == GP_DL_BFLOAT && t.bits == 16)
        return GP_DTYPE_BF16;
    return GP_DTYPE_OTHER;
}

/* obj.__dlpack__(stream=..., max_version=(1, 0)), or without max_version for producers older
 * than DLPack 1.0 (they raise TypeError for the unknown keyword). */
static PyObject *
call_dlpack(PyObject *obj, long long stream)
{
    PyObject *method = PyObject_GetAttrString(obj, "__dlpack__");
    if (method == NULL)
        return NULL;
    PyObject *empty = PyTuple_New(0);
    PyObject *kw = Py_BuildValue("{s:L,s:(ii)}", "stream", stream, "max_version",
                                 GP_DL_MAJOR_VERSION, GP_DL_MINOR_VERSION);
    PyObject *cap = empty && kw ? PyObject_Call(method, empty, kw) : NULL;
    if (cap == NULL && kw != NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        Py_DECREF(kw);
        kw = Py_BuildValue("{s:L}", "stream", stream);
        cap = kw ? PyObject_Call(method, empty, kw) : NULL;
    }
    Py_XDECREF(kw);
    Py_XDECREF(empty);
    Py_DECREF(method);
    return cap;
}

/* Takes ownership of the tensor in `cap` (renaming the capsule so that its destructor leaves it
 * alone); returns the DLTensor, or NULL with an exception and the capsule untouched. */
static gp_dl_tensor *
consume_capsule(PyObject *cap, const char *name, gp_array *a)
{
    if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
        gp_dl_managed_versioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
        if (m->version.major != GP_DL_MAJOR_VERSION) {
            PyErr_Format(PyExc_BufferError, "%s: DLPack version %u.%u is not supported (need 1.x)",
                         name, m->version.major, m->version.minor);
            return NULL;
        }
        if (PyCapsule_SetName(cap, "used_dltensor_versioned") < 0)
            return NULL;
        a->dl_managed = m;
        a->dl_versioned = 1;
        a->readonly = (m->flags & GP_DL_FLAG_READ_ONLY) != 0;
        return &m->dl_tensor;
    }
    if (PyCapsule_IsValid(cap, "dltensor")) {
        gp_dl_managed *m = PyCapsule_GetPointer(cap, "dltensor");
        if (PyCapsule_SetName(cap, "used_dltensor") < 0)
            return NULL;
        a->dl_managed = m;
        return &m->dl_tensor;
    }
    PyErr_Format(PyExc_TypeError, "%s.__dlpack__() did not return an unused DLPack capsule", name);
    return NULL;
}

/* obj.__dlpack__() for an array on CUDA device `device` (from __dlpack_device__, -1 if it did
 * not say). Producers export only from their own device: torch raises BufferError for a tensor
 * on device 1 while device 0 is current. So the call runs with the array's device current (the
 * caller's device is restored after it), and the handshake then names the legacy default
 * stream (DLPack's 1): the consumer's stream belongs to another device. Arrays that end up on
 * different devices are refused by the caller with its ValueError. */
static PyObject *
call_dlpack_on(PyObject *obj, int device, cudaStream_t consumer)
{
    int current = -1;
    if (device < 0 || cudaGetDevice(&current) != cudaSuccess || current == device ||
        cudaSetDevice(device) != cudaSuccess) {
        (void)cudaGetLastError();
        return call_dlpack(obj, gp_stream_protocol_value(consumer));
    }
    PyObject *cap = call_dlpack(obj, 1);
    if (cudaSetDevice(current) != cudaSuccess) {
        (void)cudaGetLastError();
        Py_XDECREF(cap); /* an unused capsule frees its tensor */
        PyErr_Format(PyExc_RuntimeError, "could not make device %d current again after "
                     "reading an array of device %d", current, device);
        return NULL;
    }
    return cap;
}

static int
parse_dlpack(PyObject *obj, const char *name, int device, cudaStream_t consumer, gp_array *a)
{
    a->via = "DLPack";
    a->on_device = 1;
    PyObject *cap = call_dlpack_on(obj, device, consumer);
    if (cap == NULL)
        return -1;
    gp_dl_tensor *t = consume_capsule(cap, name, a);
    Py_DECREF(cap); /* renamed: its destructor no longer owns the tensor */
    if (t == NULL)
        return -1;
    if (t->device.device_type != GP_DL_CUDA && t->device.device_type != GP_DL_CUDA_MANAGED) {
        PyErr_Format(PyExc_ValueError, "%s: DLPack device type %d is not CUDA", name,
                     (int)t->device.device_type);
        return -1;
    }
    a->device = t->device.device_id;
    a->ndim = t->ndim;
    if (check_ndim(a->ndim, name, a->via) < 0)
        return -1;
    /* In integers: a producer's offset may point anywhere (the driver then refuses it). */
    a->data = (void *)((uintptr_t)t->data + (uintptr_t)t->byte_offset);
    char desc[sizeof a->dtype_desc];
    set_dtype(a, dl_dtype(t->dtype, desc, sizeof desc), desc);
    if (a->ndim > 0 && t->shape == NULL) {
        PyErr_Format(PyExc_ValueError, "%s: DLPack tensor of %d dimensions has no shape (NULL)",
                     name, a->ndim);
        return -1;
    }
    for (int i = 0; i < a->ndim; i++)
        a->shape[i] = t->shape[i];
    if (check_shape(a, name) < 0)
        return -1;
    if (t->strides == NULL)
        contiguous_strides(a);
    else
        for (int i = 0; i < a->ndim; i++)
            a->strides[i] = t->strides[i];
    return check_strides(a, name);
}

/* ---- host buffers ------------------------------------------------------------------------- */

static gp_dtype
buffer_dtype(const char *fmt)
{
    if (fmt == NULL)
        return GP_DTYPE_OTHER;
    if (*fmt == '<' || *fmt == '=' || *fmt == '@')
        fmt++;
    if (strcmp(fmt, "f") == 0)
        return GP_DTYPE_F32;
    if (strcmp(fmt, "e") == 0)
        return GP_DTYPE_F16;
    return GP_DTYPE_OTHER;
}

/* NumPy's name for a struct-module format, for error messages. */
static const char *
buffer_format_name(const char *fmt)
{
    static const char *const names[][2] = {
        {"d", "float64"}, {"g", "longdouble"}, {"b", "int8"},       {"B", "uint8"},
        {"h", "int16"},   {"H", "uint16"},     {"i", "int32"},      {"I", "uint32"},
        {"l", "int64"},   {"L", "uint64"},     {"q", "int64"},      {"Q", "uint64"},
        {"?", "bool"},    {"Zf", "complex64"}, {"Zd", "complex128"}};
    if (*fmt == '<' || *fmt == '=' || *fmt == '@')
        fmt++;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(fmt, names[i][0]) == 0)
            return names[i][1];
    return NULL;
}

static int
parse_buffer(PyObject *obj, const char *name, gp_array *a)
{
    a->via = "buffer protocol";
    /* Read-only is asked for even for outputs: gp_array_parse names the problem itself. */
    if (PyObject_GetBuffer(obj, &a->view, PyBUF_RECORDS_RO) < 0)
        return -1;
    a->has_view = 1;
    a->data = a->view.buf;
    a->ndim = a->view.ndim;
    a->readonly = a->view.readonly;
    if (check_ndim(a->ndim, name, a->via) < 0)
        return -1;
    const char *fmt = a->view.format ? a->view.format : "B";
    const char *known = buffer_format_name(fmt);
    char desc[sizeof a->dtype_desc];
    snprintf(desc, sizeof desc, known ? "%s" : "format '%.16s'", known ? known : fmt);
    set_dtype(a, buffer_dtype(fmt), desc);
    for (int i = 0; i < a->ndim; i++) {
        a->shape[i] = a->view.shape[i];
        a->strides[i] = a->view.strides[i] / (a->view.itemsize ? a->view.itemsize : 1);
    }
    if (!PyBuffer_IsContiguous(&a->view, 'C')) {
        PyErr_Format(PyExc_ValueError, "%s: host arrays must be C-contiguous", name);
        return -1;
    }
    return 0;
}

/* ---- dispatch ----------------------------------------------------------------------------- */

/* 1 when obj.__dlpack_device__() names CUDA or CUDA managed memory, 0 for anything else (or no
 * such method), -1 on error. *device: the device id it names (-1 when it is not a small
 * non-negative int). */
static int
dlpack_on_cuda(PyObject *obj, int *device)
{
    *device = -1;
    PyObject *method;
    if (gp_optional_attr(obj, "__dlpack_device__", &method) <= 0)
        return PyErr_Occurred() ? -1 : 0;
    PyObject *dev = PyObject_CallNoArgs(method);
    Py_DECREF(method);
    if (dev == NULL)
        return -1;
    long type = -1, id = -1;
    int overflow = 0; /* a type or id beyond C long is no device we know */
    if (PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2) {
        type = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(dev, 0), &overflow);
        if (!(type == -1 && PyErr_Occurred()))
            id = PyLong_AsLongAndOverflow(PyTuple_GET_ITEM(dev, 1), &overflow);
    }
    Py_DECREF(dev);
    if ((type == -1 || id == -1) && PyErr_Occurred())
        return -1;
    if (id >= 0 && id <= INT_MAX)
        *device = (int)id;
    return type == GP_DL_CUDA || type == GP_DL_CUDA_MANAGED;
}

static int
parse_any(PyObject *obj, const char *name, int writable, cudaStream_t consumer, gp_array *a)
{
    if (gp_device_array_check(obj)) {
        gp_device_array_describe(obj, a);
        return 0;
    }
    /* DLPack first: it carries bfloat16 and its stream handshake, and torch's CAI property
     * raises for bfloat16. */
    int device;
    int cuda = dlpack_on_cuda(obj, &device);
    if (cuda < 0)
        return -1;
    if (cuda)
        return parse_dlpack(obj, name, device, consumer, a);
    PyObject *iface;
    if (gp_optional_attr(obj, "__cuda_array_interface__", &iface) < 0)
        return -1;
    if (iface != NULL) {
        int rc = parse_cai(iface, name, a);
        Py_DECREF(iface);
        return rc;
    }
    if (PyObject_CheckBuffer(obj))
        return parse_buffer(obj, name, a);
    PyErr_Format(PyExc_TypeError,
                 "%s must be a NumPy array or a CUDA array "
                 "(__cuda_array_interface__ or DLPack), got %.100s",
                 name, Py_TYPE(obj)->tp_name);
    return -1;
}

int
gp_array_parse(PyObject *obj, const char *name, int writable, cudaStream_t consumer, gp_array *out)
{
    memset(out, 0, sizeof *out);
    out->device = -1;
    if (parse_any(obj, name, writable, consumer, out) < 0) {
        gp_array_release(out);
        return -1;
    }
    if (writable && out->readonly) {
        PyErr_Format(PyExc_ValueError, "%s is read-only", name);
        gp_array_release(out);
        return -1;
    }
    normalize_strides(out);
    out->owner = Py_NewRef(obj);
    return 0;
}

int
gp_array_locate(gp_array *a, const char *name)
{
    if (!a->on_device || a->device >= 0)
        return 0;
    struct cudaPointerAttributes attr;
    cudaError_t err = cudaPointerGetAttributes(&attr, a->data);
    if (err != cudaSuccess) {
        gp_set_cuda_error(err, "cudaPointerGetAttributes", __FILE__, __LINE__);
        return -1;
    }
    if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) {
        PyErr_Format(PyExc_ValueError, "%s: the pointer given by %s is not CUDA device memory",
                     name, a->via);
        return -1;
    }
    a->device = attr.device;
    return 0;
}

int
gp_array_wait_producer(const gp_array *a, cudaStream_t stream)
{
    if (gp_device_array_check(a->owner))
        return gp_device_array_wait_ready(a->owner, stream);
    if (!a->has_stream || a->stream == stream)
        return 0;
    cudaEvent_t ev = NULL;
    GP_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    GP_CUDA_CHECK(cudaEventRecord(ev, a->stream));
    GP_CUDA_CHECK(cudaStreamWaitEvent(stream, ev, 0));
    GP_CUDA_CHECK(cudaEventDestroy(ev));
    return 0;
error:
    if (ev != NULL)
        (void)cudaEventDestroy(ev);
    return -1;
}
