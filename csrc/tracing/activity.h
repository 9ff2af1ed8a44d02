/* CUPTI activity tracing: kernels, memory copies and sets, device memory allocations and frees,
 * and the external correlation records that tie them to gpuprofile regions.
 *
 * Kinds are reference-counted, so that a profile, a memory tracker and memory=True regions can
 * overlap: a CUPTI kind is enabled when its first user acquires it and disabled when its last
 * user releases it. Records arrive in large buffers on CUPTI's thread (or inside a flush), are
 * parsed there into the compact structs below, under a mutex, and wait in C arrays until Python
 * takes them (`_activity_take`): gpuprofile/_activity.py mirrors these layouts as NumPy dtypes.
 *
 * CUPTI is process-global; the loader (cupti_loader.c) owns it, and before enabling any kind
 * this file claims the process's one subscriber, so that another holder (torch.profiler,
 * proton, Nsight) is reported as an error instead of having its buffers silently stolen. */
#ifndef GP_ACTIVITY_H
#define GP_ACTIVITY_H

#include <Python.h>
#include <stdint.h>

enum {
    GP_ACT_KERNEL = 1,  /* CONCURRENT_KERNEL */
    GP_ACT_MEMCPY = 2,  /* MEMCPY */
    GP_ACT_MEMSET = 4,  /* MEMSET */
    GP_ACT_MEMORY = 8,  /* MEMORY2: allocations and frees */
    GP_ACT_REGIONS = 16 /* EXTERNAL_CORRELATION (+ the RUNTIME and DRIVER records it needs) */
};
#define GP_ACT_ALL 31

/* 88 bytes. Times in CUPTI's timestamp domain (ns). */
typedef struct {
    uint64_t start, end;
    uint32_t correlation_id, name_id;
    uint32_t device, context, stream;
    int32_t grid[3], block[3];
    int32_t static_smem, dynamic_smem;
    uint32_t local_mem_per_thread;
    uint32_t smem_executed; /* shared memory size the driver configured per SM */
    uint32_t graph_id;
    uint16_t registers_per_thread;
    uint8_t launch_type, pad0;
    uint32_t pad1;
} gp_kernel_out;

/* 48 bytes. */
typedef struct {
    uint64_t start, end, bytes;
    uint32_t correlation_id, runtime_correlation_id;
    uint32_t device, context, stream;
    uint8_t copy_kind, src_kind, dst_kind, flags;
} gp_memcpy_out;

/* 48 bytes. */
typedef struct {
    uint64_t start, end, bytes;
    uint32_t correlation_id, device, context, stream;
    uint32_t value;
    uint16_t memory_kind, flags;
} gp_memset_out;

/* 48 bytes. operation: 1 allocation, 2 release (CUpti_ActivityMemoryOperationType). */
typedef struct {
    uint64_t timestamp, address, bytes;
    uint32_t correlation_id, device, context, stream;
    uint8_t operation, memory_kind, is_async, pad0;
    uint32_t pad1;
} gp_memory_out;

/* 16 bytes: CUDA API call `correlation_id` ran while region record `external_id - 1` was the
 * innermost pushed region of its thread. */
typedef struct {
    uint64_t external_id;
    uint32_t correlation_id, pad;
} gp_extcorr_out;

/* 24 bytes: region record `record` records its events on CUPTI stream `stream` of device
 * `device` (UINT32_MAX: CUPTI could not name the stream). `before`: the region was already open
 * when tracing started (its start event is not in the trace). */
typedef struct {
    int64_t record;
    uint32_t device, stream, before, pad;
} gp_region_stream_out;

/* gpuprofile/_activity.py mirrors these sizes and field offsets. */
_Static_assert(sizeof(gp_kernel_out) == 88, "gp_kernel_out layout");
_Static_assert(sizeof(gp_memcpy_out) == 48, "gp_memcpy_out layout");
_Static_assert(sizeof(gp_memset_out) == 48, "gp_memset_out layout");
_Static_assert(sizeof(gp_memory_out) == 48, "gp_memory_out layout");
_Static_assert(sizeof(gp_extcorr_out) == 16, "gp_extcorr_out layout");
_Static_assert(sizeof(gp_region_stream_out) == 24, "gp_region_stream_out layout");

/* Enable the kinds in `mask` for one more user (claims CUPTI on first use). GIL held; 0 or -1
 * with CuptiError/NoDeviceError, nothing acquired. */
int gp_activity_acquire(unsigned mask);
/* Drop one user of each kind in `mask`, disabling kinds nobody uses. GIL held; -1 with an
 * exception if CUPTI refused to disable one (the counts are dropped regardless). */
int gp_activity_release(unsigned mask);

/* gpuprofile's external correlation kind (CUPTI offers CUSTOM0..2 for tools). */
#define GP_EXTERNAL_KIND CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0

/* Called with 1 when the REGIONS kind is enabled (-1 fails the enable) and 0 when it is
 * disabled. Set by attribution.c at init, so that this file does not depend on it. */
void gp_activity_set_regions_hook(int (*hook)(int on));

/* Notes where a region entered while tracing records its events (handed over with the next take).
 * Any thread; a full store counts the row as lost. */
void gp_activity_note_region_stream(int64_t record, uint32_t device, uint32_t stream, int before);

int gp_activity_init(PyObject *module);

#endif
