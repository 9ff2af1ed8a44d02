/* The DLPack ABI (https://dmlc.github.io/dlpack/latest/c_api.html), the part gpuprofile uses:
 * tensors exchanged through PyCapsules named "dltensor" (DLManagedTensor, unversioned) or
 * "dltensor_versioned" (DLManagedTensorVersioned, DLPack >= 1.0). A consumer renames the capsule
 * to "used_dltensor" / "used_dltensor_versioned" and becomes responsible for calling the deleter;
 * an unconsumed capsule's destructor calls it. Written from the specification. */
#ifndef GP_DLPACK_H
#define GP_DLPACK_H

#include <stdint.h>

enum { GP_DL_CPU = 1, GP_DL_CUDA = 2, GP_DL_CUDA_HOST = 3, GP_DL_CUDA_MANAGED = 13 };
enum { GP_DL_INT = 0, GP_DL_UINT = 1, GP_DL_FLOAT = 2, GP_DL_BFLOAT = 4 };
#define GP_DL_FLAG_READ_ONLY (1ULL << 0)
#define GP_DL_MAJOR_VERSION 1
#define GP_DL_MINOR_VERSION 0

typedef struct {
    int32_t device_type;
    int32_t device_id;
} gp_dl_device;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} gp_dl_dtype;

typedef struct {
    void *data;
    gp_dl_device device;
    int32_t ndim;
    gp_dl_dtype dtype;
    int64_t *shape;
    int64_t *strides; /* elements; NULL: compact row-major */
    uint64_t byte_offset;
} gp_dl_tensor;

typedef struct gp_dl_managed {
    gp_dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct gp_dl_managed *self);
} gp_dl_managed;

typedef struct {
    uint32_t major;
    uint32_t minor;
} gp_dl_version;

typedef struct gp_dl_managed_versioned {
    gp_dl_version version;
    void *manager_ctx;
    void (*deleter)(struct gp_dl_managed_versioned *self);
    uint64_t flags;
    gp_dl_tensor dl_tensor;
} gp_dl_managed_versioned;

#endif
