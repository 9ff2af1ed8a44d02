/* The activity record store: CUPTI's buffers, handed to us on CUPTI's thread (or inside a flush),
 * are parsed there into the compact structs of record_kinds.h, under a mutex, and wait in C
 * arrays, one per record kind, until Python takes them (`_activity_take`). */
#ifndef GP_RECORDS_H
#define GP_RECORDS_H

#include "record_kinds.h"

#include <Python.h>
#include <cupti.h>
#include <stdint.h>

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

/* _activity_take, _intern_kernel_names and RECORD_KINDS. */
int gp_records_init(PyObject *module);

#endif
