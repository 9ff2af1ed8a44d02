/* The kinds of activity record: one table, as Kineto's ActivityType, of every record the store
 * (records.c) keeps, with the struct each is kept as. The table itself, the parsers and the
 * layouts are in record_kinds.c. */
#ifndef GP_RECORD_KINDS_H
#define GP_RECORD_KINDS_H

#include "core/layout.h"

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
 * RECORD_KINDS, record_kinds.c). */
_Static_assert(sizeof(gp_kernel_out) == 88, "gp_kernel_out layout");
_Static_assert(sizeof(gp_memcpy_out) == 48, "gp_memcpy_out layout");
_Static_assert(sizeof(gp_memset_out) == 48, "gp_memset_out layout");
_Static_assert(sizeof(gp_memory_out) == 48, "gp_memory_out layout");
_Static_assert(sizeof(gp_extcorr_out) == 16, "gp_extcorr_out layout");
_Static_assert(sizeof(gp_region_stream_out) == 24, "gp_region_stream_out layout");

/* What a consumer asks activity.c for: a mask of these bits, reference-counted per bit. */
enum {
    GP_ACT_KERNEL = 1,   /* CONCURRENT_KERNEL */
    GP_ACT_MEMCPY = 2,   /* MEMCPY */
    GP_ACT_MEMSET = 4,   /* MEMSET */
    GP_ACT_MEMORY = 8,   /* MEMORY2: allocations and frees */
    GP_ACT_REGIONS = 16, /* attribution: callbacks of the calls it reads (attribution.c) */
    GP_ACT_API = 32      /* RUNTIME and DRIVER records of launches (Python lines: activity.c) */
};
#define GP_N_ACT_BITS 6 /* activity.c keeps a user count per bit */
#define GP_ACT_ALL ((1 << GP_N_ACT_BITS) - 1)
/* The bits by name, GP_N_ACT_BITS of them, bit k at [k] (exported as _C.ACTIVITY_BITS). */
extern const char *const gp_activity_bit_names[GP_N_ACT_BITS];

/* ---- the record kinds: one table (what Kineto's ActivityType is) -------------------------- *
 *
 * Every kind of record the store keeps is one row of gp_record_kinds (record_kinds.c): its name
 * (the key of _activity_take's dict and the field of tracing.activity.Chunk), the activity bit that
 * asks for it (below), the CUPTI kind enabled for it and the CUPTI kinds parsed into it,
 * the parser, the columns a time window clips on, and its layout. activity.c enables kinds
 * from it, _activity_take hands every store over by it, and the table itself is exported as
 * _C.RECORD_KINDS, from which Python builds its dtypes and its Chunk. A new kind is its struct
 * and enum entry here, a parser, a layout and a row in record_kinds.c, and a bit here if it is
 * asked for alone. */
enum {
    GP_REC_KERNELS,
    GP_REC_MEMCPY,
    GP_REC_MEMSET,
    GP_REC_MEMORY,
    GP_REC_EXTCORR,
    GP_REC_REGION_STREAMS,
    GP_N_RECORD_KINDS
};

typedef struct {
    const char *name;
    unsigned bit;                /* the GP_ACT_ bit whose users keep it coming */
    CUpti_ActivityKind enable;   /* enabled for it; CUPTI_ACTIVITY_KIND_INVALID: none (noted by
                                  * gpuprofile's own callbacks, or parsed only) */
    CUpti_ActivityKind parse[2]; /* CUPTI record kinds parsed into it (INVALID: unused slot) */
    void (*add)(const CUpti_Activity *rec); /* parse one record (store_lock held); NULL: none */
    const char *start, *end; /* the columns a time window clips on; NULL: never clipped */
    size_t size;             /* sizeof the record struct */
    const gp_layout_field *fields;
    size_t n_fields;
} gp_record_kind;

extern const gp_record_kind gp_record_kinds[GP_N_RECORD_KINDS];

/* A zeroed slot at the end of the store of record kind `kind` (records.c), or NULL (the record is
 * counted as lost). The store's lock held: for parsers and notes. */
void *gp_records_push(int kind);

/* RECORD_KINDS, the table for Python: a tuple of {name, bit, start, end, layout} (layout is a
 * NumPy dtype dict, core/layout.h; start and end None where a window does not clip). */
PyObject *gp_record_kinds_export(void);
/* ACTIVITY_BITS: {name: bit} from gp_activity_bit_names. */
PyObject *gp_activity_bits_export(void);

#endif
