/* Kernel names as CUPTI reports them (mangled), interned to small integer ids so that a kernel
 * record carries 4 bytes instead of a string, and demangled once per name with the C++ runtime's
 * __cxa_demangle (libstdc++ is linked).
 *
 * Not thread-safe: every call must hold the activity lock (activity.c), because interning runs
 * on CUPTI's buffer-completion thread while Python reads the names. */
#ifndef GP_KERNEL_NAMES_H
#define GP_KERNEL_NAMES_H

#include <Python.h>
#include <stdint.h>

#define GP_NAME_NONE UINT32_MAX

/* Id of `mangled` (interned on first sight); GP_NAME_NONE when out of memory. */
uint32_t gp_kernel_name_intern(const char *mangled);

/* Number of names interned so far; ids are 0 .. count-1 and never change. */
uint32_t gp_kernel_name_count(void);

/* Mangled name of `id` and its demangled form (the mangled one when it is not a C++ name). The
 * demangled form is computed on first request; NULL when out of memory. */
const char *gp_kernel_name_mangled(uint32_t id);
const char *gp_kernel_name_demangled(uint32_t id);

#endif
