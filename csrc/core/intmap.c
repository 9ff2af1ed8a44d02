/* A uint64 -> uint32 open-addressing map and a growable-array helper (intmap.h). */
#include "intmap.h"

#include <stdlib.h>
#include <string.h>

uint32_t
gp_intmap_find(const gp_intmap *m, uint64_t key, int (*same)(uint32_t, const void *),
               const void *ctx)
{
    if (m->cap == 0)
        return GP_INTMAP_NONE;
    for (size_t i = (size_t)(key * 0x9E3779B97F4A7C15ull) & (m->cap - 1);;
         i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == 0)
            return GP_INTMAP_NONE;
        if (m->keys[i] == key && (same == NULL || same(m->vals[i], ctx)))
            return m->vals[i];
    }
}

int
gp_intmap_put(gp_intmap *m, uint64_t key, uint32_t val)
{
    if (2 * (m->n + 1) > m->cap) {
        gp_intmap grown = {calloc(m->cap ? 2 * m->cap : 256, sizeof(uint64_t)),
                           calloc(m->cap ? 2 * m->cap : 256, sizeof(uint32_t)),
                           m->cap ? 2 * m->cap : 256, 0};
        if (grown.keys == NULL || grown.vals == NULL) {
            free(grown.keys);
            free(grown.vals);
            return -1;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i] != 0)
                (void)gp_intmap_put(&grown, m->keys[i], m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = grown;
    }
    size_t i = (size_t)(key * 0x9E3779B97F4A7C15ull) & (m->cap - 1);
    while (m->keys[i] != 0)
        i = (i + 1) & (m->cap - 1);
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
    return 0;
}

void
gp_intmap_clear(gp_intmap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* Grows a plain array to hold n + 1 elements of `elem` bytes; -1 when out of memory. */
int
gp_reserve(void **data, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t grown_cap = *cap ? 2 * *cap : 256, bytes;
    if (__builtin_mul_overflow(grown_cap, elem, &bytes))
        return -1;
    void *grown = realloc(*data, bytes);
    if (grown == NULL)
        return -1;
    *data = grown;
    *cap = grown_cap;
    return 0;
}
