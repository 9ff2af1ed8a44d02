/* Interning and demangling of kernel names. */
#include "kernel_names.h"
#include "core/demangle.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    char *mangled;
    char *demangled; /* NULL until asked for */
    size_t len;
    uint64_t hash;
} name_t;

static name_t *names;
static uint32_t n_names, cap_names;

/* Open addressing: slot holds id + 1, 0 = empty. Power-of-two size, at most half full. */
static uint32_t *slots;
static size_t n_slots;

/* CUPTI shares one name pointer among all records of a kernel, so most lookups hit this
 * pointer cache; a hit is still checked against the interned text, in case CUPTI freed the name
 * and reused its address for another. */
#define GP_PTR_CACHE 1024
static struct {
    const char *ptr;
    uint32_t id;
} ptr_cache[GP_PTR_CACHE];

static uint64_t
hash_name(const char *s, size_t *len)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    const char *p = s;
    for (; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    *len = (size_t)(p - s);
    return h;
}

static int
grow_slots(void)
{
    size_t n = n_slots ? 2 * n_slots : 256;
    uint32_t *s = calloc(n, sizeof *s);
    if (s == NULL)
        return -1;
    for (uint32_t id = 0; id < n_names; id++) {
        size_t k = names[id].hash & (n - 1);
        while (s[k] != 0)
            k = (k + 1) & (n - 1);
        s[k] = id + 1;
    }
    free(slots);
    slots = s;
    n_slots = n;
    return 0;
}

static uint32_t
add_name(const char *mangled, size_t len, uint64_t hash, size_t slot)
{
    if (n_names == cap_names) {
        uint32_t cap = cap_names ? 2 * cap_names : 64;
        name_t *grown = realloc(names, cap * sizeof *grown);
        if (grown == NULL)
            return GP_NAME_NONE;
        names = grown;
        cap_names = cap;
    }
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return GP_NAME_NONE;
    memcpy(copy, mangled, len + 1);
    uint32_t id = n_names++;
    names[id] = (name_t){.mangled = copy, .len = len, .hash = hash};
    slots[slot] = id + 1;
    return id;
}

uint32_t
gp_kernel_name_intern(const char *mangled)
{
    if (mangled == NULL)
        mangled = "<unknown kernel>";
    size_t c = ((uintptr_t)mangled >> 4) & (GP_PTR_CACHE - 1);
    if (ptr_cache[c].ptr == mangled) {
        const name_t *n = &names[ptr_cache[c].id];
        if (strncmp(n->mangled, mangled, n->len + 1) == 0)
            return ptr_cache[c].id;
    }
    if (2 * (n_names + 1) > n_slots && grow_slots() < 0)
        return GP_NAME_NONE;
    size_t len;
    uint64_t hash = hash_name(mangled, &len);
    size_t k = hash & (n_slots - 1);
    uint32_t id = GP_NAME_NONE;
    for (; slots[k] != 0; k = (k + 1) & (n_slots - 1)) {
        const name_t *n = &names[slots[k] - 1];
        if (n->hash == hash && n->len == len && memcmp(n->mangled, mangled, len) == 0) {
            id = slots[k] - 1;
            break;
        }
    }
    if (id == GP_NAME_NONE && (id = add_name(mangled, len, hash, k)) == GP_NAME_NONE)
        return GP_NAME_NONE;
    ptr_cache[c].ptr = mangled;
    ptr_cache[c].id = id;
    return id;
}

uint32_t
gp_kernel_name_count(void)
{
    return n_names;
}

const char *
gp_kernel_name_mangled(uint32_t id)
{
    return id < n_names ? names[id].mangled : NULL;
}

const char *
gp_kernel_name_demangled(uint32_t id)
{
    if (id >= n_names)
        return NULL;
    name_t *n = &names[id];
    if (n->demangled == NULL)
        n->demangled = gp_demangle_cstr(n->mangled);
    return n->demangled;
}
