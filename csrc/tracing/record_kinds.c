/* The record kinds (record_kinds.h): how each CUPTI record becomes its struct (the parsers, on
 * CUPTI's thread with the store's lock held), the struct's layout for NumPy, and the table that
 * ties them together. */
#include "record_kinds.h"
#include "core/layout.h"
#include "kernel_names.h"

#include <cupti.h>
#include <stddef.h>

/* ---- parsers -------------------------------------------------------------------------------- */

static void
add_kernel(const CUpti_Activity *rec)
{
    const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
    gp_kernel_out *o = gp_records_push(GP_REC_KERNELS);
    if (o == NULL)
        return;
    o->start = k->start;
    o->end = k->end;
    o->correlation_id = k->correlationId;
    o->name_id = gp_kernel_name_intern(k->name);
    o->device = k->deviceId;
    o->context = k->contextId;
    o->stream = k->streamId;
    o->grid[0] = k->gridX;
    o->grid[1] = k->gridY;
    o->grid[2] = k->gridZ;
    o->block[0] = k->blockX;
    o->block[1] = k->blockY;
    o->block[2] = k->blockZ;
    o->static_smem = k->staticSharedMemory;
    o->dynamic_smem = k->dynamicSharedMemory;
    o->local_mem_per_thread = k->localMemoryPerThread;
    o->smem_executed = k->sharedMemoryExecuted;
    o->graph_id = k->graphId;
    o->registers_per_thread = k->registersPerThread;
    o->launch_type = k->launchType;
}

static void
add_memcpy(const CUpti_Activity *rec)
{
    const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
    gp_memcpy_out *o = gp_records_push(GP_REC_MEMCPY);
    if (o == NULL)
        return;
    o->start = m->start;
    o->end = m->end;
    o->bytes = m->bytes;
    o->correlation_id = m->correlationId;
    o->runtime_correlation_id = m->runtimeCorrelationId;
    o->device = m->deviceId;
    o->context = m->contextId;
    o->stream = m->streamId;
    o->copy_kind = m->copyKind;
    o->src_kind = m->srcKind;
    o->dst_kind = m->dstKind;
    o->flags = m->flags;
}

static void
add_memset(const CUpti_Activity *rec)
{
    const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
    gp_memset_out *o = gp_records_push(GP_REC_MEMSET);
    if (o == NULL)
        return;
    o->start = m->start;
    o->end = m->end;
    o->bytes = m->bytes;
    o->correlation_id = m->correlationId;
    o->device = m->deviceId;
    o->context = m->contextId;
    o->stream = m->streamId;
    o->value = m->value;
    o->memory_kind = m->memoryKind;
    o->flags = m->flags;
}

static void
add_memory(const CUpti_Activity *rec)
{
    const CUpti_ActivityMemory4 *m = (const CUpti_ActivityMemory4 *)rec;
    gp_memory_out *o = gp_records_push(GP_REC_MEMORY);
    if (o == NULL)
        return;
    o->timestamp = m->timestamp;
    o->address = m->address;
    o->bytes = m->bytes;
    o->correlation_id = m->correlationId;
    o->device = m->deviceId;
    o->context = m->contextId;
    o->stream = m->streamId;
    o->operation = (uint8_t)m->memoryOperationType;
    o->memory_kind = (uint8_t)m->memoryKind;
    o->is_async = m->isAsync != 0;
}

static void
add_extcorr(const CUpti_Activity *rec)
{
    const CUpti_ActivityExternalCorrelation *e = (const CUpti_ActivityExternalCorrelation *)rec;
    if (e->externalKind != GP_EXTERNAL_KIND)
        return; /* another tool's ids */
    gp_extcorr_out *o = gp_records_push(GP_REC_EXTCORR);
    if (o == NULL)
        return;
    o->external_id = e->externalId;
    o->correlation_id = e->correlationId;
}

/* ---- layouts and the table ------------------------------------------------------------------ */

#define GP_F(type, field) GP_LAYOUT_FIELD(type, field)
#define GP_AT(type, name, member)                                                                  \
    {                                                                                              \
        name, GP_LAYOUT_FORMAT(((type *)0)->member), offsetof(type, member)                        \
    }
#define GP_FIELDS(fields) fields, sizeof fields / sizeof fields[0]

static const gp_layout_field kernel_fields[] = {GP_F(gp_kernel_out, start),
                                                GP_F(gp_kernel_out, end),
                                                GP_F(gp_kernel_out, correlation_id),
                                                GP_F(gp_kernel_out, name_id),
                                                GP_F(gp_kernel_out, device),
                                                GP_F(gp_kernel_out, context),
                                                GP_F(gp_kernel_out, stream),
                                                GP_AT(gp_kernel_out, "grid_x", grid[0]),
                                                GP_AT(gp_kernel_out, "grid_y", grid[1]),
                                                GP_AT(gp_kernel_out, "grid_z", grid[2]),
                                                GP_AT(gp_kernel_out, "block_x", block[0]),
                                                GP_AT(gp_kernel_out, "block_y", block[1]),
                                                GP_AT(gp_kernel_out, "block_z", block[2]),
                                                GP_F(gp_kernel_out, static_smem),
                                                GP_F(gp_kernel_out, dynamic_smem),
                                                GP_F(gp_kernel_out, local_mem_per_thread),
                                                GP_F(gp_kernel_out, smem_executed),
                                                GP_F(gp_kernel_out, graph_id),
                                                GP_F(gp_kernel_out, registers_per_thread),
                                                GP_F(gp_kernel_out, launch_type)};
static const gp_layout_field memcpy_fields[] = {GP_F(gp_memcpy_out, start),
                                                GP_F(gp_memcpy_out, end),
                                                GP_F(gp_memcpy_out, bytes),
                                                GP_F(gp_memcpy_out, correlation_id),
                                                GP_F(gp_memcpy_out, runtime_correlation_id),
                                                GP_F(gp_memcpy_out, device),
                                                GP_F(gp_memcpy_out, context),
                                                GP_F(gp_memcpy_out, stream),
                                                GP_F(gp_memcpy_out, copy_kind),
                                                GP_F(gp_memcpy_out, src_kind),
                                                GP_F(gp_memcpy_out, dst_kind),
                                                GP_F(gp_memcpy_out, flags)};
static const gp_layout_field memset_fields[] = {
    GP_F(gp_memset_out, start),       GP_F(gp_memset_out, end),
    GP_F(gp_memset_out, bytes),       GP_F(gp_memset_out, correlation_id),
    GP_F(gp_memset_out, device),      GP_F(gp_memset_out, context),
    GP_F(gp_memset_out, stream),      GP_F(gp_memset_out, value),
    GP_F(gp_memset_out, memory_kind), GP_F(gp_memset_out, flags)};
static const gp_layout_field memory_fields[] = {
    GP_F(gp_memory_out, timestamp),   GP_F(gp_memory_out, address),
    GP_F(gp_memory_out, bytes),       GP_F(gp_memory_out, correlation_id),
    GP_F(gp_memory_out, device),      GP_F(gp_memory_out, context),
    GP_F(gp_memory_out, stream),      GP_F(gp_memory_out, operation),
    GP_F(gp_memory_out, memory_kind), GP_F(gp_memory_out, is_async)};
static const gp_layout_field extcorr_fields[] = {GP_F(gp_extcorr_out, external_id),
                                                 GP_F(gp_extcorr_out, correlation_id)};
static const gp_layout_field region_stream_fields[] = {
    GP_F(gp_region_stream_out, record), GP_F(gp_region_stream_out, device),
    GP_F(gp_region_stream_out, stream), GP_F(gp_region_stream_out, before),
    GP_F(gp_region_stream_out, edge),   GP_F(gp_region_stream_out, bound)};

const char *const gp_activity_bit_names[GP_N_ACT_BITS] = {"kernels", "memcpy",  "memset",
                                                          "memory",  "regions", "api"};
_Static_assert(GP_ACT_KERNEL == 1 && GP_ACT_API == 1 << (GP_N_ACT_BITS - 1), "bit k at [k]");

#define NONE CUPTI_ACTIVITY_KIND_INVALID
const gp_record_kind gp_record_kinds[GP_N_RECORD_KINDS] = {
    [GP_REC_KERNELS] = {"kernels",
                        GP_ACT_KERNEL,
                        CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                        {CUPTI_ACTIVITY_KIND_KERNEL, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
                        add_kernel,
                        "start",
                        "end",
                        sizeof(gp_kernel_out),
                        GP_FIELDS(kernel_fields)},
    [GP_REC_MEMCPY] = {"memcpy",
                       GP_ACT_MEMCPY,
                       CUPTI_ACTIVITY_KIND_MEMCPY,
                       {CUPTI_ACTIVITY_KIND_MEMCPY, NONE},
                       add_memcpy,
                       "start",
                       "end",
                       sizeof(gp_memcpy_out),
                       GP_FIELDS(memcpy_fields)},
    [GP_REC_MEMSET] = {"memset",
                       GP_ACT_MEMSET,
                       CUPTI_ACTIVITY_KIND_MEMSET,
                       {CUPTI_ACTIVITY_KIND_MEMSET, NONE},
                       add_memset,
                       "start",
                       "end",
                       sizeof(gp_memset_out),
                       GP_FIELDS(memset_fields)},
    [GP_REC_MEMORY] = {"memory",
                       GP_ACT_MEMORY,
                       CUPTI_ACTIVITY_KIND_MEMORY2,
                       {CUPTI_ACTIVITY_KIND_MEMORY2, NONE},
                       add_memory,
                       "timestamp",
                       "timestamp",
                       sizeof(gp_memory_out),
                       GP_FIELDS(memory_fields)},
    /* Regions: no CUPTI kind is enabled. The calls attribution reads (launches, copies, sets,
     * event records, allocations) are watched by callback id; attribution.c's handler notes each
     * with the calling thread's innermost region (gp_records_note_call), as CUPTI's external
     * correlation records did, but those need the RUNTIME and DRIVER kinds on, a record for
     * every CUDA call of the process: +12 % on a transformer training step (H200, 2026-11-25),
     * even with every call outside the set turned off by id. Another tool's external
     * correlation records are still parsed (and ignored by their kind). */
    [GP_REC_EXTCORR] = {"extcorr",
                        GP_ACT_REGIONS,
                        NONE,
                        {CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, NONE},
                        add_extcorr,
                        NULL,
                        NULL,
                        sizeof(gp_extcorr_out),
                        GP_FIELDS(extcorr_fields)},
    /* noted by the regions wing when a traced region records its events (or enters and exits
     * on the CUPTI clock): gp_records_note_region_stream */
    [GP_REC_REGION_STREAMS] = {"region_streams",
                               GP_ACT_REGIONS,
                               NONE,
                               {NONE, NONE},
                               NULL,
                               NULL,
                               NULL,
                               sizeof(gp_region_stream_out),
                               GP_FIELDS(region_stream_fields)},
};
#undef NONE

PyObject *
gp_record_kinds_export(void)
{
    PyObject *rows = PyTuple_New(GP_N_RECORD_KINDS);
    for (int r = 0; rows != NULL && r < GP_N_RECORD_KINDS; r++) {
        const gp_record_kind *k = &gp_record_kinds[r];
        PyObject *row = Py_BuildValue("{s:s,s:I,s:z,s:z,s:N}", "name", k->name, "bit", k->bit,
                                      "start", k->start, "end", k->end, "layout",
                                      gp_layout_dtype(k->fields, k->n_fields, k->size));
        if (row == NULL)
            Py_CLEAR(rows);
        else
            PyTuple_SET_ITEM(rows, r, row);
    }
    return rows;
}

PyObject *
gp_activity_bits_export(void)
{
    PyObject *bits = PyDict_New();
    for (int k = 0; bits != NULL && k < GP_N_ACT_BITS; k++) {
        PyObject *bit = PyLong_FromUnsignedLong(1ul << k);
        if (bit == NULL || PyDict_SetItemString(bits, gp_activity_bit_names[k], bit) < 0)
            Py_CLEAR(bits);
        Py_XDECREF(bit);
    }
    return bits;
}
