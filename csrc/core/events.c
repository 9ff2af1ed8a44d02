/* Per-device event pools. All callers hold the GIL, which serializes access. */
#include "events.h"
#include "errors.h"

#include <stdlib.h>

typedef struct {
    cudaEvent_t *free;
    size_t nfree, cap;
    size_t created;
} pool_t;

static pool_t pools[GP_MAX_DEVICES];

static int
reserve(pool_t *p, size_t need)
{
    if (need <= p->cap)
        return 0;
    size_t cap = p->cap ? p->cap : 256;
    while (cap < need)
        cap *= 2;
    cudaEvent_t *mem = realloc(p->free, cap * sizeof *mem);
    if (mem == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    p->free = mem;
    p->cap = cap;
    return 0;
}

int
gp_event_pool_take(int device, int n, cudaEvent_t *out)
{
    pool_t *p = &pools[device];
    if (p->nfree < (size_t)n)
        return 1;
    for (int i = 0; i < n; i++)
        out[i] = p->free[--p->nfree];
    return 0;
}

void
gp_event_pool_give(int device, int n, const cudaEvent_t *events)
{
    pool_t *p = &pools[device];
    /* The free list's capacity always covers every event ever created, so this cannot fail. */
    for (int i = 0; i < n; i++)
        p->free[p->nfree++] = events[i];
}

int
gp_current_device(void)
{
    int device = 0;
    GP_CUDA_CHECK(cudaGetDevice(&device));
    if (device < 0 || device >= GP_MAX_DEVICES) {
        PyErr_Format(gp_GpuProfileError, "device %d beyond gpuprofile's limit of %d", device,
                     GP_MAX_DEVICES);
        return -1;
    }
    return device;
error:
    return -1;
}

int
gp_event_pool_grow(int device, int n)
{
    pool_t *p = &pools[device];
    int previous = -1, switched = 0, rc = -1;
    if (reserve(p, p->created + (size_t)n) < 0)
        return -1;
    GP_CUDA_CHECK(cudaGetDevice(&previous));
    if (previous != device) {
        GP_CUDA_CHECK(cudaSetDevice(device));
        switched = 1;
    }
    for (int i = 0; i < n; i++) {
        cudaEvent_t ev;
        GP_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDefault));
        p->free[p->nfree++] = ev;
        p->created++;
    }
    rc = 0;
error:
    if (switched) {
        cudaError_t err = cudaSetDevice(previous);
        if (err != cudaSuccess && rc == 0) {
            gp_set_cuda_error(err, "cudaSetDevice(previous)", __FILE__, __LINE__);
            rc = -1;
        }
    }
    return rc;
}

size_t
gp_event_pool_created(int device)
{
    return pools[device].created;
}

size_t
gp_event_pool_free(int device)
{
    return pools[device].nfree;
}
