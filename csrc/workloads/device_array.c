/* The DeviceArray type: owned device memory, exported through CAI v3 and DLPack.
 *
 * Attention results come from gpuprofile's stream-ordered pool (cudaMallocFromPoolAsync on the
 * launch stream) and go back to it without synchronizing: at dealloc, gpuprofile's free stream
 * waits for the last write (`ready`) and the last read by our kernels (`read`), then frees. An
 * array read on two streams whose reads may overlap, or handed to another framework (DLPack,
 * __cuda_array_interface__: its later use on any stream is unknown), waits for the whole device
 * first, as cudaFree always does. Other arrays (to_device, empty) use cudaMalloc/cudaFree. */
#include "device_array.h"
#include "device_array_impl.h"
#include "core/device.h"
#include "core/device_memory.h"
#include "core/errors.h"
#include "core/streams.h"
#include "core/util.h"

#include <cuda_runtime_api.h>
#include <string.h>

static PyTypeObject *DeviceArrayType;

int
gp_device_array_check(PyObject *obj)
{
    return obj != NULL && DeviceArrayType != NULL && Py_IS_TYPE(obj, DeviceArrayType);
}

void
gp_device_array_strides(const DeviceArray *a, int64_t *strides)
{
    int64_t s = 1;
    for (int i = a->ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= a->shape[i];
    }
}

/* The size in bytes of a C-contiguous array of `shape`: 0, or -1 with ValueError when a
 * dimension is negative or the size does not fit 64 bits (a wrapped product would be a small
 * allocation that kernels then write past). */
static int
array_nbytes(int ndim, const int64_t *shape, gp_dtype dtype, size_t *out)
{
    int64_t count = 1;
    int over = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            PyErr_Format(PyExc_ValueError, "shape: dimension %d has negative size %lld", i,
                         (long long)shape[i]);
            return -1;
        }
        over |= gp_mul_i64(count, shape[i], &count);
    }
    int64_t bytes;
    if (over || gp_mul_i64(count, gp_dtype_size(dtype), &bytes)) {
        char dims[GP_ARRAY_MAX_DIM * 22 + 4] = "(";
        for (int i = 0; i < ndim; i++)
            snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s%lld", i ? ", " : "",
                     (long long)shape[i]);
        snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%s)", ndim == 1 ? "," : "");
        PyErr_Format(PyExc_ValueError,
                     "shape %s of %s is too large: its size in bytes does not fit 64 bits", dims,
                     gp_dtype_name(dtype));
        return -1;
    }
    *out = (size_t)bytes;
    return 0;
}

/* The object without its memory (data NULL). */
static DeviceArray *
array_object(int ndim, const int64_t *shape, gp_dtype dtype, int device)
{
    size_t nbytes;
    if (array_nbytes(ndim, shape, dtype, &nbytes) < 0)
        return NULL;
    DeviceArray *a = PyObject_New(DeviceArray, DeviceArrayType);
    if (a == NULL)
        return NULL;
    a->data = NULL;
    a->ndim = ndim;
    memcpy(a->shape, shape, sizeof(int64_t) * ndim);
    a->dtype = dtype;
    a->device = device;
    a->nbytes = nbytes;
    a->ready = a->read = NULL;
    a->written = a->read_on = a->free_on = (cudaStream_t)0;
    a->pooled = a->sync_free = 0;
    return a;
}

PyObject *
gp_device_array_new(int ndim, const int64_t *shape, gp_dtype dtype, int device)
{
    DeviceArray *a = array_object(ndim, shape, dtype, device);
    if (a == NULL)
        return NULL;
    /* cudaMalloc of 0 bytes gives NULL, which is fine: nothing reads it. */
    if (a->nbytes > 0)
        GP_CUDA_CHECK(cudaMalloc(&a->data, a->nbytes));
    gp_mark_cuda_used();
    return (PyObject *)a;
error:
    Py_DECREF(a);
    return NULL;
}

PyObject *
gp_device_array_new_pooled(int ndim, const int64_t *shape, gp_dtype dtype, int device,
                           cudaStream_t stream)
{
    DeviceArray *a = array_object(ndim, shape, dtype, device);
    PyObject *obj = (PyObject *)a;
    if (a == NULL || a->nbytes == 0)
        return obj; /* an empty array holds nothing to pool */
    gp_mark_cuda_used();
    cudaMemPool_t pool;
    if (gp_device_pool(device, &pool) < 0 || gp_device_free_stream(device, &a->free_on) < 0)
        goto error;
    a->pooled = 1;
    cudaError_t err;
    Py_BEGIN_ALLOW_THREADS
    err = cudaMallocFromPoolAsync(&a->data, a->nbytes, pool, stream);
    Py_END_ALLOW_THREADS
    if (err != cudaSuccess) {
        char call[96];
        snprintf(call, sizeof call, "cudaMallocFromPoolAsync(%.3f GiB for the result)",
                 (double)a->nbytes / (1 << 30));
        a->data = NULL;
        gp_set_cuda_error(err, call, __FILE__, __LINE__);
        goto error;
    }
    return obj;
error:
    Py_DECREF(obj);
    return NULL;
}

int
gp_device_array_note_read(PyObject *obj, cudaStream_t stream)
{
    DeviceArray *a = (DeviceArray *)obj;
    if (!a->pooled)
        return 0;
    if (a->read == NULL) {
        GP_CUDA_CHECK(cudaEventCreateWithFlags(&a->read, cudaEventDisableTiming));
    } else if (a->read_on != stream && cudaEventQuery(a->read) != cudaSuccess) {
        /* a read on another stream may still run: one event cannot cover both */
        (void)cudaGetLastError();
        a->sync_free = 1;
    }
    GP_CUDA_CHECK(cudaEventRecord(a->read, stream));
    a->read_on = stream;
    return 0;
error:
    return -1;
}

void
gp_device_array_note_export(PyObject *obj)
{
    ((DeviceArray *)obj)->sync_free = 1;
}

void
gp_device_array_describe(PyObject *obj, gp_array *out)
{
    const DeviceArray *a = (const DeviceArray *)obj;
    out->data = a->data;
    out->ndim = a->ndim;
    memcpy(out->shape, a->shape, sizeof(int64_t) * a->ndim);
    gp_device_array_strides(a, out->strides);
    out->dtype = a->dtype;
    snprintf(out->dtype_desc, sizeof out->dtype_desc, "%s", gp_dtype_name(a->dtype));
    out->on_device = 1;
    out->device = a->device;
    out->readonly = 0;
    out->via = "DeviceArray";
}

int
gp_device_array_set_ready(PyObject *obj, cudaStream_t stream)
{
    DeviceArray *a = (DeviceArray *)obj;
    if (a->ready == NULL)
        GP_CUDA_CHECK(cudaEventCreateWithFlags(&a->ready, cudaEventDisableTiming));
    GP_CUDA_CHECK(cudaEventRecord(a->ready, stream));
    a->written = stream;
    return 0;
error:
    return -1;
}

int
gp_device_array_wait_ready(PyObject *obj, cudaStream_t stream)
{
    DeviceArray *a = (DeviceArray *)obj;
    if (a->ready != NULL)
        GP_CUDA_CHECK(cudaStreamWaitEvent(stream, a->ready, 0));
    return 0;
error:
    return -1;
}

/* Pooled memory back to the pool once its last write and read are done (the device is current;
 * GIL released; errors dropped). */
static void
free_pooled(DeviceArray *a)
{
    cudaStream_t fs = a->free_on;
    if (!a->sync_free && a->ready != NULL && cudaStreamWaitEvent(fs, a->ready, 0) == cudaSuccess &&
        (a->read == NULL || cudaStreamWaitEvent(fs, a->read, 0) == cudaSuccess) &&
        cudaFreeAsync(a->data, fs) == cudaSuccess)
        return;
    /* as cudaFree: after everything on the device */
    (void)cudaDeviceSynchronize();
    (void)cudaFreeAsync(a->data, (cudaStream_t)0);
}

static void
DeviceArray_dealloc(DeviceArray *a)
{
    if (a->ready != NULL || a->data != NULL) {
        /* Freeing waits for the device; other Python threads may run meanwhile. Errors (a sticky
         * context, a runtime already unloaded at exit) are dropped: dealloc never raises. */
        gp_exc_state saved;
        gp_exc_save(&saved);
        Py_BEGIN_ALLOW_THREADS
        int previous = -1;
        if (cudaGetDevice(&previous) == cudaSuccess && previous != a->device)
            (void)cudaSetDevice(a->device);
        if (a->pooled && a->data != NULL)
            free_pooled(a);
        else if (a->data != NULL)
            (void)cudaFree(a->data);
        if (a->ready != NULL)
            (void)cudaEventDestroy(a->ready);
        if (a->read != NULL)
            (void)cudaEventDestroy(a->read);
        if (previous >= 0 && previous != a->device)
            (void)cudaSetDevice(previous);
        (void)cudaGetLastError();
        Py_END_ALLOW_THREADS
        gp_exc_restore(&saved);
    }
    PyTypeObject *type = Py_TYPE(a);
    PyObject_Free(a);
    Py_DECREF(type);
}

static PyObject *
shape_tuple(const DeviceArray *a)
{
    PyObject *t = PyTuple_New(a->ndim);
    if (t == NULL)
        return NULL;
    for (int i = 0; i < a->ndim; i++) {
        PyObject *v = PyLong_FromLongLong(a->shape[i]);
        if (v == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

static PyObject *
get_shape(DeviceArray *a, void *closure)
{
    return shape_tuple(a);
}

static PyObject *
get_dtype(DeviceArray *a, void *closure)
{
    return PyUnicode_FromString(gp_dtype_name(a->dtype));
}

static PyObject *
get_device(DeviceArray *a, void *closure)
{
    return PyLong_FromLong(a->device);
}

static PyObject *
get_nbytes(DeviceArray *a, void *closure)
{
    return PyLong_FromSize_t(a->nbytes);
}

static PyObject *
get_ptr(DeviceArray *a, void *closure)
{
    return PyLong_FromVoidPtr(a->data);
}

/* CAI v3. bfloat16 has no type string in the interface: AttributeError, so that consumers
 * probing with hasattr() move on to DLPack. */
static PyObject *
get_cai(DeviceArray *a, void *closure)
{
    if (a->dtype == GP_DTYPE_BF16) {
        PyErr_SetString(PyExc_AttributeError,
                        "bfloat16 has no __cuda_array_interface__ type string; use DLPack "
                        "(torch.from_dlpack(x), cupy.from_dlpack(x))");
        return NULL;
    }
    PyObject *shape = shape_tuple(a);
    if (shape == NULL)
        return NULL;
    a->sync_free = 1; /* the consumer's streams are unknown from here on */
    const char *typestr = a->dtype == GP_DTYPE_F32 ? "<f4" : "<f2";
    long long stream = a->ready != NULL ? gp_stream_protocol_value(a->written) : 0;
    PyObject *d = Py_BuildValue("{s:N,s:s,s:(NO),s:O,s:i,s:O}", "shape", shape, "typestr", typestr,
                                "data", PyLong_FromVoidPtr(a->data), Py_False, "strides", Py_None,
                                "version", 3, "stream", Py_None);
    if (d != NULL && stream != 0) {
        PyObject *s = PyLong_FromLongLong(stream);
        if (s == NULL || PyDict_SetItemString(d, "stream", s) < 0)
            Py_CLEAR(d);
        Py_XDECREF(s);
    }
    return d;
}

/* ---- host copies ---------------------------------------------------------------------------- */

/* Copies the array to host memory `dst` (nbytes), after its ready event. GIL released. */
static int
copy_to_host(DeviceArray *a, void *dst)
{
    if (a->nbytes == 0)
        return 0;
    gp_device_guard g;
    if (gp_device_guard_enter(&g, a->device) < 0)
        return -1;
    cudaError_t err = cudaSuccess;
    const char *call = "cudaEventSynchronize";
    Py_BEGIN_ALLOW_THREADS
    if (a->ready != NULL)
        err = cudaEventSynchronize(a->ready);
    if (err == cudaSuccess) {
        call = "cudaMemcpy";
        err = cudaMemcpy(dst, a->data, a->nbytes, cudaMemcpyDeviceToHost);
    }
    Py_END_ALLOW_THREADS
    gp_device_guard_exit(&g);
    if (err != cudaSuccess) {
        gp_set_cuda_error(err, call, __FILE__, __LINE__);
        return -1;
    }
    return 0;
}

static PyObject *
DeviceArray_numpy(DeviceArray *a, PyObject *unused)
{
    PyObject *np = PyImport_ImportModule("numpy");
    if (np == NULL)
        return NULL;
    PyObject *shape = shape_tuple(a);
    const char *np_dtype = a->dtype == GP_DTYPE_F16 ? "float16" : "float32";
    PyObject *arr = shape ? PyObject_CallMethod(np, "empty", "Os", shape, np_dtype) : NULL;
    Py_XDECREF(shape);
    Py_DECREF(np);
    if (arr == NULL)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(arr, &view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        Py_DECREF(arr);
        return NULL;
    }
    int rc;
    if (a->dtype == GP_DTYPE_BF16) {
        uint16_t *tmp = PyMem_RawMalloc(a->nbytes ? a->nbytes : 1);
        rc = tmp ? copy_to_host(a, tmp) : (PyErr_NoMemory(), -1);
        if (rc == 0)
            gp_bf16_to_f32(tmp, view.buf, a->nbytes / 2);
        PyMem_RawFree(tmp);
    } else {
        rc = copy_to_host(a, view.buf);
    }
    PyBuffer_Release(&view);
    if (rc < 0)
        Py_CLEAR(arr);
    return arr;
}

static PyObject *
DeviceArray_repr(DeviceArray *a)
{
    PyObject *shape = shape_tuple(a);
    if (shape == NULL)
        return NULL;
    PyObject *r = PyUnicode_FromFormat("DeviceArray(shape=%R, dtype=%s, device=%d)", shape,
                                       gp_dtype_name(a->dtype), a->device);
    Py_DECREF(shape);
    return r;
}

/* ---- module functions ----------------------------------------------------------------------- */

/* A new array on the current device from a C-contiguous host buffer that already holds the
 * target dtype's bytes (bfloat16 as uint16 bit patterns). */
static PyObject *
device_array_from_host(PyObject *module, PyObject *args)
{
    PyObject *buf_obj, *dtype_obj;
    gp_dtype dtype;
    if (!PyArg_ParseTuple(args, "OO:_device_array_from_host", &buf_obj, &dtype_obj) ||
        gp_dtype_from_object(dtype_obj, &dtype) < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(buf_obj, &view, PyBUF_ND | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    PyObject *arr = NULL;
    int device;
    if (view.ndim > GP_ARRAY_MAX_DIM || view.itemsize != gp_dtype_size(dtype)) {
        PyErr_Format(PyExc_ValueError,
                     "_device_array_from_host: %d-d buffer of %zd-byte items "
                     "does not hold %s",
                     view.ndim, view.itemsize, gp_dtype_name(dtype));
        goto done;
    }
    if (gp_require_device() < 0 || cudaGetDevice(&device) != cudaSuccess) {
        if (!PyErr_Occurred())
            PyErr_SetString(gp_CudaError, "cudaGetDevice failed");
        goto done;
    }
    int64_t shape[GP_ARRAY_MAX_DIM];
    for (int i = 0; i < view.ndim; i++)
        shape[i] = view.shape[i];
    arr = gp_device_array_new(view.ndim, shape, dtype, device);
    if (arr == NULL)
        goto done;
    DeviceArray *a = (DeviceArray *)arr;
    cudaError_t err = cudaSuccess;
    Py_BEGIN_ALLOW_THREADS
    if (a->nbytes > 0)
        err = cudaMemcpy(a->data, view.buf, a->nbytes, cudaMemcpyHostToDevice);
    Py_END_ALLOW_THREADS
    if (err != cudaSuccess) {
        gp_set_cuda_error(err, "cudaMemcpy", __FILE__, __LINE__);
        Py_CLEAR(arr);
    } else if (gp_device_array_set_ready(arr, (cudaStream_t)0) < 0) {
        /* A pageable-memory copy may still be in flight on the legacy stream after return. */
        Py_CLEAR(arr);
    }
done:
    PyBuffer_Release(&view);
    return arr;
}

static PyObject *
device_array_empty(PyObject *module, PyObject *args)
{
    PyObject *shape_obj, *dtype_obj;
    gp_dtype dtype;
    if (!PyArg_ParseTuple(args, "OO:_device_array_empty", &shape_obj, &dtype_obj) ||
        gp_dtype_from_object(dtype_obj, &dtype) < 0)
        return NULL;
    /* A tuple of our own: an element's __index__ may change a list it was read from. */
    PyObject *seq = PySequence_Tuple(shape_obj);
    if (seq == NULL)
        return NULL;
    const Py_ssize_t ndim = PyTuple_GET_SIZE(seq);
    int64_t shape[GP_ARRAY_MAX_DIM];
    int bad = ndim > GP_ARRAY_MAX_DIM;
    for (Py_ssize_t i = 0; !bad && i < ndim; i++) {
        shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(seq, i));
        bad = shape[i] < 0;
    }
    Py_DECREF(seq);
    if (bad) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "shape must be at most %d non-negative ints",
                         GP_ARRAY_MAX_DIM);
        return NULL;
    }
    size_t nbytes; /* checked before asking for a device: a bad shape is a bad shape anywhere */
    if (array_nbytes((int)ndim, shape, dtype, &nbytes) < 0)
        return NULL;
    int device;
    if (gp_require_device() < 0)
        return NULL;
    GP_CUDA_CHECK(cudaGetDevice(&device));
    return gp_device_array_new((int)ndim, shape, dtype, device);
error:
    return NULL;
}

static PyMethodDef DeviceArray_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))gp_device_array_dlpack,
     METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"
     "A DLPack capsule of the array; `stream` waits for the array's last write."},
    {"__dlpack_device__", (PyCFunction)gp_device_array_dlpack_device, METH_NOARGS,
     "(2, device): CUDA memory on `device`."},
    {"numpy", (PyCFunction)DeviceArray_numpy, METH_NOARGS,
     "A NumPy copy, after the array's last write (bfloat16 widens exactly to float32)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef DeviceArray_getset[] = {
    {"shape", (getter)get_shape, NULL, "tuple of ints", NULL},
    {"dtype", (getter)get_dtype, NULL, "'float32', 'float16' or 'bfloat16'", NULL},
    {"device", (getter)get_device, NULL, "CUDA device ordinal", NULL},
    {"nbytes", (getter)get_nbytes, NULL, "size in bytes", NULL},
    {"ptr", (getter)get_ptr, NULL, "device address of the first element", NULL},
    {"__cuda_array_interface__", (getter)get_cai, NULL, "CUDA Array Interface, version 3", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot DeviceArray_slots[] = {
    {Py_tp_dealloc, DeviceArray_dealloc},
    {Py_tp_repr, DeviceArray_repr},
    {Py_tp_methods, DeviceArray_methods},
    {Py_tp_getset, DeviceArray_getset},
    {Py_tp_doc, (void *)"A C-contiguous array in CUDA device memory owned by gpuprofile. "
                        "torch.as_tensor / torch.from_dlpack / cupy.asarray take it without a "
                        "copy; .numpy() copies it to the host."},
    {0, NULL},
};

static PyType_Spec DeviceArray_spec = {
    .name = "gpuprofile.kernels.DeviceArray",
    .basicsize = sizeof(DeviceArray),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .slots = DeviceArray_slots,
};

static PyMethodDef module_methods[] = {
    {"_device_array_from_host", device_array_from_host, METH_VARARGS,
     "_device_array_from_host(buffer, dtype): a DeviceArray holding the buffer's bytes."},
    {"_device_array_empty", device_array_empty, METH_VARARGS,
     "_device_array_empty(shape, dtype): an uninitialized DeviceArray on the current device."},
    {NULL, NULL, 0, NULL},
};

int
gp_device_array_init(PyObject *module)
{
    DeviceArrayType = (PyTypeObject *)PyType_FromModuleAndSpec(module, &DeviceArray_spec, NULL);
    if (DeviceArrayType == NULL ||
        PyModule_AddObjectRef(module, "DeviceArray", (PyObject *)DeviceArrayType) < 0)
        return -1;
    return PyModule_AddFunctions(module, module_methods);
}
