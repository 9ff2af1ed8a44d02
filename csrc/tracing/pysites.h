/* The tables behind Python lines (pylines.h): code objects seen (by address, checked against
 * their file name object and first line so that a new code object at a dead one's address is not
 * taken for it; names copied as UTF-8, and whether each is user code), sites (code, line),
 * stacks (runs of sites, innermost first) and the notes not yet taken. Nothing here holds a
 * Python reference, so the launch callback can use it without the GIL: callers hold
 * gp_pysites_lock, except for reset and take, which take it themselves (GIL held). */
#ifndef GP_PYSITES_H
#define GP_PYSITES_H

#include <Python.h>
#include "autograd.h"
#include "pyframes.h"
#include <pthread.h>
#include <stdint.h>

/* 32 bytes: CUDA call `correlation_id` was made from site `site` (UINT32_MAX: none) with stack
 * `stack` (UINT32_MAX: not recorded), in autograd's pass `pass` (GP_PASS_*, autograd.h): in the
 * forward, `seq` is the thread's next autograd sequence number; in the backward, the sequence
 * number of the node being evaluated; `thread` is torch's id of the forward thread. */
typedef struct {
    uint64_t seq;
    uint32_t correlation_id, site, stack, thread;
    uint8_t pass, pad[7];
} gp_pyline_out;
_Static_assert(sizeof(gp_pyline_out) == 32, "gp_pyline_out layout");

/* 32 bytes: a runtime or driver API call that launches work, from CUPTI's API records: kernel
 * records of a runtime launch carry the runtime call's id, while the notes carry the id of the
 * driver call inside it; a driver record inside a runtime record of the same thread ties them. */
typedef struct {
    uint64_t start, end;
    uint32_t correlation_id, thread;
    uint8_t runtime, pad[7];
} gp_pyapi_out;
_Static_assert(sizeof(gp_pyapi_out) == 32, "gp_pyapi_out layout");

extern pthread_mutex_t gp_pysites_lock;

/* Indices, UINT32_MAX when out of memory. `code` must be alive (a frame holds it). */
uint32_t gp_pysites_code(PyCodeObject *code, int *user);
uint32_t gp_pysites_site(uint32_t code, int line);
/* The site of a frame of code `code`, its line read once per instruction offset. */
uint32_t gp_pysites_site_at(uint32_t code, gp_pyframe *frame);
uint32_t gp_pysites_stack(const uint32_t *ids, size_t n);
void gp_pysites_note(uint32_t correlation_id, uint32_t site, uint32_t stack,
                     const gp_autograd_mark *mark);
void gp_pysites_api(const gp_pyapi_out *api);

/* Empties the tables and sets the file prefixes that are not user code (a tuple of str). 0, or
 * -1 with TypeError/MemoryError. */
int gp_pysites_reset(PyObject *prefix_tuple);

/* {"notes": bytes, "api": bytes, "sites": [(file, line, function, user)], "stacks": [tuple of
 * site ids], "lost": int}: the notes and API records since the last take (cleared), and every
 * site and stack so far. */
PyObject *gp_pysites_take(void);

#endif
