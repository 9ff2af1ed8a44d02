/* The L2 flush buffer of each device, and the grid that reads it (see l2_flush.h). */
#include "l2_flush.h"
#include "device.h"
#include "errors.h"
#include "events.h" /* GP_MAX_DEVICES */

/* Enough resident threads to saturate DRAM: 8 blocks of 256 threads per SM (2048 per SM). */
#define GP_READ_BLOCKS_PER_SM 8

int
gp_read_blocks(int device)
{
    int sms = 0;
    GP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms * GP_READ_BLOCKS_PER_SM;
error:
    return -1;
}

/* The L2 flush buffer of each device: 2x the L2, allocated on first use and kept for the life of
 * the process (allocating it per benchmark cost nvbench up to 1.2 s per run, nvbench#100). The
 * sink word after it is where the read kernel would write (it never does: the buffer is zero). */
static struct {
    char *ptr;
    size_t bytes;
} flush_buf[GP_MAX_DEVICES];

int
gp_l2_flush_area(int device, char **ptr_out, size_t *bytes_out)
{
    if (flush_buf[device].ptr == NULL) {
        int l2 = 0;
        GP_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
        const size_t mib = (size_t)1 << 20;
        size_t bytes = 2 * (size_t)(l2 > 0 ? l2 : 1);
        bytes = (bytes + mib - 1) / mib * mib;
        char *ptr = NULL;
        cudaError_t err;
        GP_CUDA_CHECK(cudaMalloc((void **)&ptr, bytes + 256));
        Py_BEGIN_ALLOW_THREADS
        err = cudaMemset(ptr, 0, bytes + 256);
        Py_END_ALLOW_THREADS
        if (err != cudaSuccess) {
            (void)cudaFree(ptr);
            gp_set_cuda_error(err, "cudaMemset(L2 flush buffer)", __FILE__, __LINE__);
            return -1;
        }
        flush_buf[device].ptr = ptr;
        flush_buf[device].bytes = bytes;
    }
    *ptr_out = flush_buf[device].ptr;
    *bytes_out = flush_buf[device].bytes;
    return 0;
error:
    return -1;
}

