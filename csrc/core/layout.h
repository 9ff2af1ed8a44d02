/* Record layouts handed to NumPy, so that a C struct is the one description of the records
 * Python reads as raw bytes (np.frombuffer): no hand-kept dtype mirrors in Python.
 *
 *     static const gp_layout_field fields[] = {GP_LAYOUT_FIELD(my_out, start), ...};
 *     return gp_layout_dtype(fields, sizeof fields / sizeof fields[0], sizeof(my_out));
 *
 * gives NumPy's dtype dict form {"names", "formats", "offsets", "itemsize"}; Python calls
 * np.dtype() on it. Field formats come from the field's C type, so changing a type in the
 * struct changes the dtype with it. */
#ifndef GP_LAYOUT_H
#define GP_LAYOUT_H

#include <Python.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gp_layout formats are little-endian"
#endif

typedef struct {
    const char *name;
    const char *format; /* NumPy's, e.g. "<u8" */
    size_t offset;
} gp_layout_field;

/* A field of an unsupported type (a plain char, an array) does not compile. */
#define GP_LAYOUT_FORMAT(x)                                                                        \
    _Generic((x), int8_t                                                                           \
             : "i1", uint8_t                                                                       \
             : "u1", int16_t                                                                       \
             : "<i2", uint16_t                                                                     \
             : "<u2", int32_t                                                                      \
             : "<i4", uint32_t                                                                     \
             : "<u4", int64_t                                                                      \
             : "<i8", uint64_t                                                                     \
             : "<u8", float                                                                        \
             : "<f4", double                                                                       \
             : "<f8")

#define GP_LAYOUT_FIELD(type, field)                                                               \
    {                                                                                              \
#field, GP_LAYOUT_FORMAT(((type *)0)->field), offsetof(type, field)                        \
    }

/* The dtype dict of `n` fields in a struct of `itemsize` bytes; NULL with MemoryError. */
PyObject *gp_layout_dtype(const gp_layout_field *fields, size_t n, size_t itemsize);

#endif
