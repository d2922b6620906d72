/*
 * nrt_experimental.h - Neuron Runtime C API: model tensor information, model
 * info, implicit-async execution hooks, tracing and helpers. Experimental,
 * subject to change.
 *
 * Part of the nrt-capi library, a reimplementation of the libnrt 2.31 public
 * C interface.
 */

#ifndef NRT_NRT_EXPERIMENTAL_H_INCLUDED
#define NRT_NRT_EXPERIMENTAL_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include "nrt/nrt_status.h"
#include "nrt/nrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Role of a tensor in a NEFF. */
typedef enum nrt_tensor_usage {
    NRT_TENSOR_USAGE_INPUT = 0,
    NRT_TENSOR_USAGE_OUTPUT = 1
} nrt_tensor_usage_t;

#define NRT_TENSOR_NAME_MAX 256

/* One input or output of a model (sizeof 296 on LP64). */
typedef struct nrt_tensor_info {
    char name[NRT_TENSOR_NAME_MAX];     /* NUL-terminated tensor name */
    nrt_tensor_usage_t usage;
    size_t size;                        /* bytes */
    nrt_dtype_t dtype;
    uint32_t *shape;                    /* ndim dimensions, owned by the array */
    uint32_t ndim;
} nrt_tensor_info_t;

/* Result of nrt_get_model_tensor_info (8-byte header + tensor_count entries). */
typedef struct nrt_tensor_info_array {
    uint64_t tensor_count;
#if defined(__cplusplus) && defined(__GNUC__)
    __extension__ nrt_tensor_info_t tensor_array[];  /* flexible array members are a GNU extension in C++ */
#else
    nrt_tensor_info_t tensor_array[];
#endif
} nrt_tensor_info_array_t;

/* Called on completion of each execution in implicit async mode. */
typedef void (*NRT_ASYNC_EXEC_STATUS_CALLBACK)(void *params, uint32_t model_id, uint32_t vnc, uint64_t job_id, NRT_STATUS status);

/** Allocates and returns the model's input/output descriptions; release them
 * with nrt_free_model_tensor_info() only. */
NRT_STATUS nrt_get_model_tensor_info(nrt_model_t *model, nrt_tensor_info_array_t **tensor_info);

/** Suggested number of concurrent nrt_execute callers (deprecated). */
NRT_STATUS nrt_get_model_instance_count(nrt_model_t *model, uint32_t *instance_count);

NRT_STATUS nrt_free_model_tensor_info(nrt_tensor_info_array_t *tensor_info);

/** Starts tracing on all visible VNCs; trace_mem also records allocations. */
NRT_STATUS nrt_trace_start(bool trace_mem);

/** Stops tracing and writes the trace to filename. */
NRT_STATUS nrt_trace_stop(const char *filename);

/** Handle of the NCCL network plugin used by collectives (internal). */
void *nrt_get_libnccl_net(int *err, char *err_msg, size_t err_msg_size);

/* A microcode image. */
typedef struct nrt_ucode_img {
    uint8_t *bin;
    size_t size;
} nrt_ucode_img;

/* Pooling-engine microcode images. */
typedef struct nrt_ucode_info {
    nrt_ucode_img iram;
    nrt_ucode_img dram;
} nrt_ucode_info;

/** Selects the pooling-engine microcode loaded by nrt_init(); must be called
 * before nrt_init(). */
NRT_STATUS nrt_set_pool_eng_ucode(const nrt_ucode_info *ucode_info);

/** Copies size bytes to memory-mapped device memory at dest. */
NRT_STATUS nrt_memcpy_to_device(void *dest, const void *src, size_t size);

/** Registers (or replaces) the implicit-async completion callback; params is
 * passed back to it and may be NULL. */
NRT_STATUS nrt_register_async_exec_callback(NRT_ASYNC_EXEC_STATUS_CALLBACK callback, void *params);

/** Barrier across all workers (a small all-reduce). */
NRT_STATUS nrt_barrier(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count);

/** All-gather of rank_input_size bytes per worker into output
 * (g_device_count * rank_input_size bytes). */
NRT_STATUS nrt_all_gather(int32_t vnc, uint32_t g_device_id, uint32_t g_device_count,
                          uint32_t rank_input_size, void *input, void *output);

/** Blocks until every queued implicit-async execution on vnc has finished. */
NRT_STATUS nrt_async_drain_queued_execs(int32_t vnc);

/* Versioned struct (sizeof 4): fields are only appended. */
typedef struct nrt_model_info {
    uint32_t vnc;
} nrt_model_info_t;

/** Information about a loaded model. info_size_in: sizeof the caller's
 * struct; *info_size_out: bytes written by the library. */
NRT_STATUS nrt_get_model_info(const nrt_model_t *model, nrt_model_info_t *info, size_t info_size_in, size_t *info_size_out);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_EXPERIMENTAL_H_INCLUDED */
