/*
 * nds/neuron_ds.h - the Neuron datastore: per-process counters and records
 * (loaded model nodes, process information) that monitoring tools read.
 *
 * Part of the nrt-capi library, a reimplementation of the libnrt 2.31 public
 * C interface. See docs/C_API.md for what each call does on each backend.
 *
 * Unlike the rest of the runtime API these calls return int: 0 on success,
 * non-zero on failure; the object accessors return NULL on failure.
 *
 * libnrt's copy includes <ndl/ndl.h> for ndl_device_t. This library does not
 * ship ndl.h; the datastore only needs the device as an opaque pointer, so
 * ndl_device_t is declared opaque here (the same typedef as ndl.h's, so both
 * headers may be included together).
 */

#ifndef NRT_NDS_NEURON_DS_H_INCLUDED
#define NRT_NDS_NEURON_DS_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/** A datastore object (model node, process info, ...). */
typedef void *nds_obj_handle_t;

/* Object types, for nds_obj_new(). */
#define OBJECT_TYPE_MODEL_NODE_INFO (0)
#define OBJECT_TYPE_PROCESS_INFO (1)
#define OBJECT_TYPE_PROCESS_INFO_EXT (2)

/* Memory locations a model node's usage is split into (host, device). */
#define MODEL_MEM_USAGE_LOCATION_COUNT 2

/* Memory usage categories (slots) of a model node; the slot count is part of
 * the datastore format and fixed at 12. */
enum {
    NDS_DMA_MEM_USAGE_SLOT_CODE,
    NDS_DMA_MEM_USAGE_SLOT_TENSORS,
    NDS_DMA_MEM_USAGE_SLOT_CONSTANTS,
    NDS_DMA_MEM_USAGE_SLOT_SCRATCHPAD,
    NDS_DMA_MEM_USAGE_SLOT_MISC,
    NDS_DMA_MEM_USAGE_SLOT_COUNT = 12
};

/* sizeof 16: the chunks of one category and location, summed. */
typedef struct nds_mem_usage_info {
    size_t total_size;
    uint32_t chunk_count;
} nds_mem_usage_info_t;

/* sizeof 284: one loaded model node (a model's subgraph on one core). */
typedef struct nds_model_node_info {
    uint32_t model_id;
    uint32_t model_node_id;
    char name[256];      /* NUL-terminated */
    char uuid[16];
    uint8_t nc_index;
    uint8_t sg_index;
} nds_model_node_info_t;

/* sizeof 384: memory of a model node per location and category. */
typedef struct nds_model_node_mem_usage_info {
    nds_mem_usage_info_t model_mem_usage[MODEL_MEM_USAGE_LOCATION_COUNT][NDS_DMA_MEM_USAGE_SLOT_COUNT];
} nds_model_node_mem_usage_info_t;

/* sizeof 8. */
typedef struct nds_version_info {
    uint8_t major;
    uint8_t minor;
    uint32_t build;
} nds_version_info_t;

/* sizeof 60: who runs the runtime in this process. */
typedef struct nds_process_info {
    int8_t framework_type;
    char tag[32];
    nds_version_info_t framework_version;
    nds_version_info_t fal_version;
    nds_version_info_t runtime_version;
} nds_process_info_t;

/* sizeof 256. */
typedef struct nds_process_info_ext {
    char tag[256];
} nds_process_info_ext_t;

/** An open datastore (opaque). */
typedef struct nds_instance nds_instance_t;
/** A Neuron device as the driver library knows it (opaque here). */
typedef struct ndl_device ndl_device_t;

/* Bits of the feature bitmap counter. */
typedef enum feature_bitmap_bit_index {
    BIT_INDEX_TEST_FEATURE = 0,
    BIT_INDEX_MULTICORE_FEATURE = 1,

    BIT_INDEX_COUNT = BIT_INDEX_MULTICORE_FEATURE + 1
} feature_bitmap_bit_index_t;

/** Opens the datastore of device for process pid: pid 0 means this process,
 * writable; another pid opens that process's datastore read-only. */
int nds_open(ndl_device_t *device, pid_t pid, nds_instance_t **inst);

/** Closes inst and frees it (even when it reports an error). */
int nds_close(nds_instance_t *inst);

/* Per-NeuronCore counters (pnc_index: physical core of the device). */
int nds_increment_nc_counter(nds_instance_t *inst, int pnc_index, uint32_t counter_index, uint64_t increment);
int nds_decrement_nc_counter(nds_instance_t *inst, int pnc_index, uint32_t counter_index, uint64_t decrement);
int nds_get_nc_counter(nds_instance_t *inst, int pnc_index, uint32_t counter_index, uint64_t *value);
int nds_set_nc_counter(nds_instance_t *inst, int pnc_index, uint32_t counter_index, uint64_t *value);

/* Per-device counters (they wrap around on overflow). */
int nds_increment_nd_counter(nds_instance_t *inst, uint32_t counter_index, uint64_t increment);
int nds_decrement_nd_counter(nds_instance_t *inst, uint32_t counter_index, uint64_t decrement);
/** ORs bit_index (a mask such as 1ull << BIT_INDEX_TEST_FEATURE) into the counter. */
int nds_or_nd_counter(nds_instance_t *inst, uint32_t counter_index, uint64_t bit_index);
int nds_get_nd_counter(nds_instance_t *inst, uint32_t counter_index, uint64_t *value);
int nds_set_nd_counter(nds_instance_t *inst, uint32_t counter_index, uint64_t *value);

/* Objects: created locally with nds_obj_new, filled through an accessor,
 * published with nds_obj_commit, removed with nds_obj_delete. */

/** Publishes obj's contents to the datastore. */
int nds_obj_commit(nds_obj_handle_t obj);
/** A new, empty object of type type (an OBJECT_TYPE_* value); NULL on failure. */
nds_obj_handle_t nds_obj_new(nds_instance_t *inst, int type);
/** Removes obj from the datastore and frees it. */
int nds_obj_delete(nds_obj_handle_t obj);

/* Typed views of an object (NULL when obj is of another type). */
nds_model_node_info_t *nds_obj_handle_to_model_node_info(nds_obj_handle_t obj);
nds_model_node_mem_usage_info_t *nds_obj_handle_to_model_node_mem_usage(nds_obj_handle_t obj);

/** Reads every committed model node: *models gets a malloc'ed array of *count
 * handles; the caller deletes each handle (nds_obj_delete on a handle read
 * this way only frees it) and frees the array. */
int nds_read_all_model_nodes(nds_instance_t *inst, nds_obj_handle_t **models, size_t *count);

nds_process_info_t *nds_obj_handle_to_process_info(nds_obj_handle_t obj);
nds_process_info_ext_t *nds_obj_handle_to_process_info_ext(nds_obj_handle_t obj);

/** The committed process information as a new object; NULL on failure. */
nds_obj_handle_t nds_read_process_info(nds_instance_t *inst);
/** The committed extended process information as a new object; NULL on failure. */
nds_obj_handle_t nds_read_process_info_ext(nds_instance_t *inst);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NDS_NEURON_DS_H_INCLUDED */
