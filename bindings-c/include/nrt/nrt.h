/*
 * nrt.h - Neuron Runtime C API: lifecycle, models, execution, tensors and
 * tensor sets.
 *
 * Part of the nrt-capi library, a reimplementation of the libnrt 2.31 public
 * C interface (source and link compatible). Enum values and struct layouts
 * are ABI: existing values never change and struct fields are only appended.
 *
 * Unless stated otherwise every function returns NRT_SUCCESS on success and
 * another NRT_STATUS value on failure.
 */

#ifndef NRT_NRT_H_INCLUDED
#define NRT_NRT_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
/* Quoted includes for nrt headers including nrt headers (bazel-friendly). */
#include "nrt/nrt_status.h"
#include "ndl/neuron_driver_shared_tensor_batch_op.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Major and minor version of the runtime API. */
#define NRT_MAJOR_VERSION 2
#define NRT_MINOR_VERSION 0

/* ------------------------------------------------------------------------ */
/* Opaque handles                                                            */
/* ------------------------------------------------------------------------ */

typedef struct nrt_model nrt_model_t;
typedef struct nrt_tensor nrt_tensor_t;
typedef struct nrt_cc_context nrt_cc_context_t;

/** A container of named tensors, passed to nrt_execute(). */
typedef void nrt_tensor_set_t;

/* ------------------------------------------------------------------------ */
/* Enumerations (values are ABI; only append)                                */
/* ------------------------------------------------------------------------ */

typedef enum {
    NRT_TENSOR_PLACEMENT_DEVICE = 0,  /* device memory of a NeuronCore */
    NRT_TENSOR_PLACEMENT_HOST = 1,    /* host memory (deprecated) */
    NRT_TENSOR_PLACEMENT_VIRTUAL = 2  /* caller-visible host buffer */
} nrt_tensor_placement_t;

typedef enum {
    NRT_FRAMEWORK_TYPE_INVALID = 0,
    NRT_FRAMEWORK_TYPE_NO_FW = 1,      /* application calls the runtime directly */
    NRT_FRAMEWORK_TYPE_TENSORFLOW = 2,
    NRT_FRAMEWORK_TYPE_PYTORCH = 3,
    NRT_FRAMEWORK_TYPE_MXNET = 4,
    NRT_FRAMEWORK_TYPE_PRECHECK = 5
} nrt_framework_type_t;

/* Instance families, reported in nrt_instance_info_t::family. */
enum {
    NRT_INSTANCE_UNKNOWN = 0,
    NRT_INSTANCE_INF1 = 1,
    NRT_INSTANCE_TRN1 = 2,
    NRT_INSTANCE_TRN1N = 3,
    NRT_INSTANCE_INF2 = 4,
    NRT_INSTANCE_TRN2 = 5,
    NRT_INSTANCE_TRN2N = 6,
    NRT_INSTANCE_INF2E = 7,
    NRT_INSTANCE_TRN2P = 8,
    NRT_INSTANCE_TRN2U = 9,
    NRT_INSTANCE_TRN2E = 10,
    NRT_INSTANCE_TRN2EU = 11,
    NRT_INSTANCE_TRN2AC = 12,
    NRT_INSTANCE_TRN2UAC = 13,
    NRT_INSTANCE_TRN3 = 14,
    NRT_INSTANCE_TRN3PDS98 = 15
};

/* Instance sizes, reported in nrt_instance_info_t::size. New sizes are
 * inserted before NRT_INSTANCE_SIZE_UNKNOWN. */
enum {
    NRT_INSTANCE_SIZE_1XL = 0,
    NRT_INSTANCE_SIZE_2XL = 1,
    NRT_INSTANCE_SIZE_4XL = 2,
    NRT_INSTANCE_SIZE_6XL = 3,
    NRT_INSTANCE_SIZE_8XL = 4,
    NRT_INSTANCE_SIZE_24XL = 5,
    NRT_INSTANCE_SIZE_32XL = 6,
    NRT_INSTANCE_SIZE_48XL = 7,
    NRT_INSTANCE_SIZE_3XL = 8,
    NRT_INSTANCE_SIZE_UNKNOWN = 9,
    NRT_INSTANCE_SIZE_NUM = NRT_INSTANCE_SIZE_UNKNOWN
};

/* Reduction operations of collectives. */
typedef enum nrt_op_type {
    NRT_OP_ADD = 0x0,
    NRT_OP_FMA = 0x1,
    NRT_OP_MAX = 0x2,
    NRT_OP_MIN = 0x3,
    NRT_OP_INVALID = 0xF
} nrt_op_type_t;

/* Element data types (hardware codes, not sequential). */
typedef enum nrt_dtype {
    NRT_DTYPE_UNKNOWN = 0x0,
    NRT_DTYPE_INVALID = 0x0,
    NRT_DTYPE_UINT64 = 0x1,
    NRT_DTYPE_INT8 = 0x2,
    NRT_DTYPE_UINT8 = 0x3,
    NRT_DTYPE_INT16 = 0x4,
    NRT_DTYPE_UINT16 = 0x5,
    NRT_DTYPE_BFLOAT16 = 0x6,
    NRT_DTYPE_FLOAT16 = 0x7,
    NRT_DTYPE_INT32 = 0x8,
    NRT_DTYPE_UINT32 = 0x9,
    NRT_DTYPE_FLOAT32 = 0xA,
    NRT_DTYPE_FP32R = 0xB,
    NRT_DTYPE_INT64 = 0xC,
    NRT_DTYPE_FP8_E3 = 0xD,
    NRT_DTYPE_FP8_E4 = 0xE,
    NRT_DTYPE_FP8_E5 = 0xF
} nrt_dtype_t;

/* Collective operations. */
typedef enum nrt_cc_op_type {
    NRT_CC_ALLGATHER = 0,
    NRT_CC_ALLREDUCE = 1,
    NRT_CC_REDUCESCATTER = 2
} nrt_cc_op_type_t;

/* ------------------------------------------------------------------------ */
/* Lifecycle, topology and instance                                          */
/* ------------------------------------------------------------------------ */

/* Versioned struct (sizeof 32): pass sizeof(nrt_instance_info_t) as
 * instance_info_len. Fields are only appended. */
typedef struct nrt_instance_info {
    uint32_t family;            /* NRT_INSTANCE_* */
    uint32_t size;              /* NRT_INSTANCE_SIZE_* */
    char arch_name[16];
    char device_revision[8];
} nrt_instance_info_t;

NRT_STATUS nrt_get_instance_info(nrt_instance_info_t *info, size_t instance_info_len);

/** Initializes the runtime; must precede other nrt_* calls (the count queries
 * below are exempt). Direct callers pass NRT_FRAMEWORK_TYPE_NO_FW, "", "". */
NRT_STATUS nrt_init(nrt_framework_type_t framework, const char *fw_version, const char *fal_version);

/** Releases all devices and runtime state. Most calls fail afterwards. */
void nrt_close();

/** Loads a NEFF image. vnc: virtual NeuronCore index, -1 for the first free
 * one; vnc_count: deprecated, pass -1. */
NRT_STATUS nrt_load(const void *neff_bytes, size_t size, int32_t vnc, int32_t vnc_count, nrt_model_t **model);

/** Loads a NEFF that uses collectives; ctx_device_id/ctx_device_count place
 * this worker among the devices taking part in the NEFF. */
NRT_STATUS nrt_load_collectives(const void *neff_bytes, size_t size, int32_t vnc, int32_t vnc_count,
                                uint32_t ctx_device_id, uint32_t ctx_device_count, nrt_model_t **model);

/** Unloads a model; the handle is invalid afterwards (like free()). */
NRT_STATUS nrt_unload(nrt_model_t *model);

/** Number of VNCs a loaded model uses (both deprecated). */
NRT_STATUS nrt_get_model_nc_count(const nrt_model_t *model, uint32_t *vnc_count);
NRT_STATUS nrt_get_model_vnc_count(const nrt_model_t *model, uint32_t *vnc_count);

/** VNC counts of the instance / visible to this process. May be called
 * before nrt_init(). The *_nc_* forms are deprecated aliases. */
NRT_STATUS nrt_get_total_nc_count(uint32_t *vnc_count);
NRT_STATUS nrt_get_total_vnc_count(uint32_t *vnc_count);
NRT_STATUS nrt_get_visible_nc_count(uint32_t *vnc_count);
NRT_STATUS nrt_get_visible_vnc_count(uint32_t *vnc_count);

/* ------------------------------------------------------------------------ */
/* Tensor sets                                                               */
/* ------------------------------------------------------------------------ */

NRT_STATUS nrt_allocate_tensor_set(nrt_tensor_set_t **result);

/** Destroys a set (not the tensors in it) and sets *tensor_set to NULL. */
void nrt_destroy_tensor_set(nrt_tensor_set_t **tensor_set);

/** Adds or replaces the tensor stored under tensor_name. The tensor must stay
 * valid until the set is destroyed. */
NRT_STATUS nrt_add_tensor_to_tensor_set(nrt_tensor_set_t *tensor_set, const char *tensor_name, nrt_tensor_t *tensor);

NRT_STATUS nrt_get_tensor_from_tensor_set(nrt_tensor_set_t *tensor_set, const char *tensor_name, nrt_tensor_t **tensor);

/* ------------------------------------------------------------------------ */
/* Execution                                                                 */
/* ------------------------------------------------------------------------ */

/** Runs the model once; sets are keyed by the model's input/output names. */
NRT_STATUS nrt_execute(nrt_model_t *model, const nrt_tensor_set_t *input_set, nrt_tensor_set_t *output_set);

/** Runs the model repeat_count times (needs a NEFF built for it). */
NRT_STATUS nrt_execute_repeat(nrt_model_t *model, const nrt_tensor_set_t *input_set, nrt_tensor_set_t *output_set, int repeat_count);

/** Sets up the global collectives communicator. */
NRT_STATUS nrt_build_global_comm(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count);

/* ------------------------------------------------------------------------ */
/* Tensors                                                                   */
/* ------------------------------------------------------------------------ */

/** Allocates a tensor of `size` bytes. vnc: -1 for host placement. name is
 * optional (may be NULL) and only used in log messages. */
NRT_STATUS nrt_tensor_allocate(nrt_tensor_placement_t tensor_placement, int vnc, size_t size, const char *name, nrt_tensor_t **tensor);

/** Frees a tensor and sets *tensor to NULL. */
void nrt_tensor_free(nrt_tensor_t **tensor);

NRT_STATUS nrt_tensor_read(const nrt_tensor_t *tensor, void *buf, size_t offset, size_t size);
NRT_STATUS nrt_tensor_write(nrt_tensor_t *tensor, const void *buf, size_t offset, size_t size);

/* All operations on one tensor of a batched read or write (sizeof 24). */
typedef struct nrt_tensor_batch {
    const nrt_tensor_t *tensor;
    const nrt_tensor_batch_op_t *ops;   /* num_ops entries */
    uint32_t num_ops;
} nrt_tensor_batch_t;

/** Batched reads/writes over several tensors; unsafe skips tensor tracking. */
NRT_STATUS nrt_tensor_read_batch(const nrt_tensor_batch_t *batches, uint64_t num_batches, bool unsafe);
NRT_STATUS nrt_tensor_write_batch(const nrt_tensor_batch_t *batches, uint64_t num_batches, bool unsafe);

/** Copies between tensors; two device tensors must be on the same core. */
NRT_STATUS nrt_tensor_copy(const nrt_tensor_t *src, size_t src_offset, nrt_tensor_t *dst, size_t dst_offset, size_t size);

/** Returns the tensor's size in bytes (the value itself, not a status). */
size_t nrt_tensor_get_size(const nrt_tensor_t *tensor);

NRT_STATUS nrt_tensor_memset(nrt_tensor_t *tensor, uint64_t offset, int value, size_t size);

/** Allocates a tensor without storage (see nrt_tensor_attach_buffer). */
NRT_STATUS nrt_tensor_allocate_empty(const char *name, nrt_tensor_t **tensor);

/** Uses a caller-owned buffer as the tensor's storage (placement becomes
 * VIRTUAL). The buffer must outlive the tensor and is never freed by it. */
NRT_STATUS nrt_tensor_attach_buffer(nrt_tensor_t *tensor, void *buffer, size_t size);

/** Creates a tensor viewing [offset, offset+size) of tensor_source (no copy). */
NRT_STATUS nrt_tensor_allocate_slice(const nrt_tensor_t *tensor_source, size_t offset, size_t size, const char *name, nrt_tensor_t **tensor_slice);

/** Returns the tensor's virtual address, or NULL on failure. */
void *nrt_tensor_get_va(const nrt_tensor_t *tensor);

/* Device placement of a tensor (sizeof 24). */
typedef struct nrt_tensor_device_allocation_info {
    uint64_t physical_address;
    size_t size;                /* allocation size, may exceed the tensor size */
    int hbm_index;              /* HBM holding the tensor */
} nrt_tensor_device_allocation_info_t;

NRT_STATUS nrt_tensor_get_device_allocation_info(const nrt_tensor_t *tensor, nrt_tensor_device_allocation_info_t *alloc_info);

/** Waits until an output tensor's completion count reaches
 * expected_completion_count. timeout in microseconds; negative = no bound.
 * NRT_TIMEOUT if not reached in time. */
NRT_STATUS nrt_tensor_check_output_completion(const nrt_tensor_t *output_tensor, int64_t timeout, uint64_t expected_completion_count);

/** Resets an output tensor's completion count to 0. */
NRT_STATUS nrt_tensor_reset_output_completion(nrt_tensor_t *output_tensor);

/** dma-buf file descriptor of a device memory region. */
NRT_STATUS nrt_get_dmabuf_fd(uint64_t va, uint64_t size, int *fd);

/** Host device id of a (possibly container-relative) device id. */
NRT_STATUS nrt_host_device_id_get(int neuron_dev, uint32_t *host_device_id);

/** Routing ids indexed by host device id; *count is in/out. */
NRT_STATUS nrt_host_device_id_rid_map_get(uint32_t *count, uint32_t *host_did_to_rid_map);

/** Maps HBM region hbm_idx of a device. NRT_INVALID_HANDLE when no more
 * regions exist, NRT_INVALID when unsupported. */
NRT_STATUS nrt_get_hbm_mmap_va(int device_id, int hbm_idx, void **addr, size_t *size);

/* Versioned struct (sizeof 16): fields are only appended. */
typedef struct nrt_vnc_memory_stats {
    size_t bytes_used;
    size_t bytes_limit;
} nrt_vnc_memory_stats_t;

/** Memory statistics of a VNC. stats_size_in: sizeof the caller's struct;
 * *stats_size_out: bytes written by the library. */
NRT_STATUS nrt_get_vnc_memory_stats(uint32_t vnc, nrt_vnc_memory_stats_t *stats, size_t stats_size_in, size_t *stats_size_out);

/** PCI BDF of the EFA device attached to the Neuron device holding `va`.
 * *len: in, buffer length including NUL; out, string length without NUL. */
NRT_STATUS nrt_get_attached_efa_bdf(const void *va, char *efa_bdf, size_t *len);

/* ------------------------------------------------------------------------ */
/* Host-driven collectives                                                   */
/* ------------------------------------------------------------------------ */

/* sizeof 32 */
typedef struct nrt_cc_comm {
    uint32_t *replica_group;    /* participants */
    uint32_t rank;              /* own rank in replica_group */
    uint32_t rank_n;            /* size of replica_group */
    uint32_t ctx_device_id;
    uint32_t ctx_device_count;
    uint32_t vnc;
} nrt_cc_comm_t;

/* sizeof 16 */
typedef struct nrt_tensor_list {
    nrt_tensor_t **tensors;
    size_t num_tensors;
} nrt_tensor_list_t;

NRT_STATUS nrt_cc_global_comm_init(uint32_t vnc, uint32_t g_device_id, uint32_t g_device_count);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_H_INCLUDED */
