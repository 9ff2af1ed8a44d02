/* A uint64 -> uint32 map (open addressing, linear probing) for interning tables, and a helper
 * that grows plain arrays. Key 0 is never used. A key may repeat (e.g. a hash standing for a
 * longer value): gp_intmap_find's `same(value, ctx)` says whether an entry is the one sought.
 * Not thread-safe: callers serialize (the GIL). */
#ifndef GP_INTMAP_H
#define GP_INTMAP_H

#include <stddef.h>
#include <stdint.h>

#define GP_INTMAP_NONE UINT32_MAX

typedef struct {
    uint64_t *keys;
    uint32_t *vals;
    size_t cap, n;
} gp_intmap;

/* The value of `key` (the first for which `same` holds, when given), or GP_INTMAP_NONE. */
uint32_t gp_intmap_find(const gp_intmap *m, uint64_t key, int (*same)(uint32_t, const void *),
                        const void *ctx);
/* Adds key -> val (grows at half full). 0, or -1 when out of memory (the map is unchanged). */
int gp_intmap_put(gp_intmap *m, uint64_t key, uint32_t val);
void gp_intmap_clear(gp_intmap *m);

/* Grows *data (capacity *cap elements of `elem` bytes) so that it holds n + 1. 0 or -1. */
int gp_reserve(void **data, size_t *cap, size_t n, size_t elem);

#endif
