/* The activity record store: CUPTI's buffers, handed to us on CUPTI's thread (or inside a flush),
 * are parsed there into the compact structs below, under a mutex, and wait in C arrays until
 * Python takes them (`_activity_take`). Python reads them with the dtypes `_activity_layouts`
 * describes from these structs (no hand-kept mirrors). */
#ifndef GP_RECORDS_H
#define GP_RECORDS_H

#include <Python.h>
#include <cupti.h>
#include <stdint.h>

/* gpuprofile's external correlation kind (CUPTI offers CUSTOM0..2 for tools). */
#define GP_EXTERNAL_KIND CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0

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
 * when tracing started (its start event is not in the trace). A region on the CUPTI clock has
 * no events: its enter and exit are noted as `edge` GP_EDGE_ENTER and GP_EDGE_EXIT rows whose
 * `bound` is a correlation id (work enqueued by calls strictly between the two bounds ran
 * inside it); GP_EDGE_EVENTS rows take the bounds from the region's own event records. */
enum { GP_EDGE_EVENTS, GP_EDGE_ENTER, GP_EDGE_EXIT };
typedef struct {
    int64_t record;
    uint32_t device, stream;
    uint16_t before, edge;
    uint32_t bound;
} gp_region_stream_out;

/* Sizes fixed so that a change to a struct is a deliberate one (Python reads the layouts from
 * _activity_layouts, records.c). */
_Static_assert(sizeof(gp_kernel_out) == 88, "gp_kernel_out layout");
_Static_assert(sizeof(gp_memcpy_out) == 48, "gp_memcpy_out layout");
_Static_assert(sizeof(gp_memset_out) == 48, "gp_memset_out layout");
_Static_assert(sizeof(gp_memory_out) == 48, "gp_memory_out layout");
_Static_assert(sizeof(gp_extcorr_out) == 16, "gp_extcorr_out layout");
_Static_assert(sizeof(gp_region_stream_out) == 24, "gp_region_stream_out layout");

/* Bytes of one activity buffer: 8 MiB holds ~30k kernel records (0 dropped records for 50k
 * kernels in our measurements). */
#define GP_RECORDS_BUFFER_BYTES ((size_t)8 << 20)

/* Registers the buffer callbacks with CUPTI (at every session start, in case another tool
 * replaced them in between). 0 or -1 with CuptiError. */
int gp_records_register(void);
/* Whether the callbacks were ever registered: flushing means something. */
int gp_records_registered(void);
/* Buffers handed to CUPTI and not back yet, buffers refused (out of memory), buffers kept for
 * reuse. */
void gp_records_buffer_stats(unsigned long long *in_cupti, unsigned long long *refused, int *kept);

/* Notes where a region entered while tracing records its events (handed over with the next
 * take). Any thread; a full store counts the row as lost. */
void gp_records_note_region_stream(int64_t record, uint32_t device, uint32_t stream, int before,
                                   int edge, uint32_t bound);
/* Notes that CUDA call `correlation_id` ran inside region record `external_id - 1` (the
 * attribution handler, on the calling thread, without the GIL): the same record CUPTI's external
 * correlation would give, without CUPTI writing an API record for every call of the process. */
void gp_records_note_call(uint32_t correlation_id, uint64_t external_id);

/* Called with each RUNTIME and DRIVER API record as it is parsed (any thread, the store's lock
 * held: the hook must not call back into this file). Set by pylines.c at init, so that this file
 * does not depend on it. */
void gp_records_set_api_hook(void (*hook)(const CUpti_ActivityAPI *api));

/* _activity_take, _activity_layouts, _intern_kernel_names. */
int gp_records_init(PyObject *module);

#endif
