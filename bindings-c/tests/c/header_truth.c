/*
 * header_truth.c - checks the installed nrt headers against the libnrt 2.31
 * ABI facts (docs reference: shared/reference/nrt-c-api.md, sections 1, 2
 * and 5.3).
 *
 * Almost everything is a compile-time assertion: struct sizes and field
 * offsets (LP64), the numeric value of every enum constant and macro, and the
 * exact type of every declared function. The file compiles as C11 and as
 * C++ (which also proves the extern "C" guards and gives exact,
 * enum-sensitive signature checks via decltype). main() adds a few runtime
 * checks of the macros; it references no library symbol, so the program
 * links and runs without libnrt.
 *
 * See README.md in this directory for how it is built.
 */

#include <nrt/nrt.h>
#include <nrt/nrt_status.h>
#include <nrt/nrt_experimental.h>
#include <nrt/nrt_version.h>
#include <nrt/nrt_async.h>
#include <ndl/neuron_driver_shared_tensor_batch_op.h>

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
#include <type_traits>
#define HT_ASSERT(cond, msg) static_assert(cond, msg)
/* Exact function type (return and parameter types, enums distinct). */
#define HT_SIG(fn, ret, params) \
    static_assert(std::is_same<decltype(fn), ret params>::value, "signature of " #fn)
#else
#define HT_ASSERT(cond, msg) _Static_assert(cond, msg)
/* Type compatibility (C cannot tell an enum from its underlying integer
 * type; the C++ build of this file is exact). &fn is not evaluated. */
#define HT_SIG(fn, ret, params) \
    _Static_assert(_Generic(&(fn), ret(*) params: 1, default: 0), "signature of " #fn)
#endif

#define HT_SIZE(type, n) HT_ASSERT(sizeof(type) == (n), "sizeof(" #type ") == " #n)
#define HT_OFF(type, field, n) \
    HT_ASSERT(offsetof(type, field) == (n), "offsetof(" #type ", " #field ") == " #n)
#define HT_VAL(name, v) HT_ASSERT((long long)(name) == (long long)(v), #name " == " #v)

/* The reference values are for LP64 (x86-64 / aarch64 Linux). */
HT_ASSERT(sizeof(void *) == 8 && sizeof(long) == 8 && sizeof(int) == 4, "LP64 target required");

/* ---------------------------------------------------------------- macros */
HT_VAL(NRT_MAJOR_VERSION, 2);
HT_VAL(NRT_MINOR_VERSION, 0);
HT_VAL(NRT_TENSOR_NAME_MAX, 256);
HT_VAL(RT_VERSION_DETAIL_LEN, 128);
HT_VAL(GIT_HASH_LEN, 64);
HT_ASSERT(NRTA_SEQ_NUM_MAX == 0xFFFFFFFFFFFFull, "NRTA_SEQ_NUM_MAX == 2^48 - 1");
HT_ASSERT(NRTA_SEQ_GET_SEQ_NUM(0x0003000000000005ull) == 5, "NRTA_SEQ_GET_SEQ_NUM");
HT_ASSERT(NRTA_SEQ_GET_XU_ID(0x0003000000000005ull) == 3, "NRTA_SEQ_GET_XU_ID");
HT_ASSERT(NRTA_SEQ_GET_XU_ID(0xFFFF000000000000ull) == 0xFFFF, "NRTA_SEQ_GET_XU_ID top");
HT_ASSERT(NRTA_SEQ_GET_SEQ_NUM(0xFFFFFFFFFFFFFFFFull) == NRTA_SEQ_NUM_MAX, "NRTA_SEQ_GET_SEQ_NUM max");

/* ------------------------------------------------------------ NRT_STATUS */
HT_SIZE(NRT_STATUS, 4);
HT_VAL(NRT_SUCCESS, 0);
HT_VAL(NRT_FAILURE, 1);
HT_VAL(NRT_INVALID, 2);
HT_VAL(NRT_INVALID_HANDLE, 3);
HT_VAL(NRT_RESOURCE, 4);
HT_VAL(NRT_TIMEOUT, 5);
HT_VAL(NRT_HW_ERROR, 6);
HT_VAL(NRT_QUEUE_FULL, 7);
HT_VAL(NRT_LOAD_NOT_ENOUGH_NC, 9);
HT_VAL(NRT_UNSUPPORTED_NEFF_VERSION, 10);
HT_VAL(NRT_FAIL_HOST_MEM_ALLOC, 11);
HT_VAL(NRT_UNINITIALIZED, 13);
HT_VAL(NRT_CLOSED, 14);
HT_VAL(NRT_QUEUE_EMPTY, 15);
HT_VAL(NRT_EXEC_UNIT_UNRECOVERABLE, 101);
HT_VAL(NRT_EXEC_BAD_INPUT, 1002);
HT_VAL(NRT_EXEC_COMPLETED_WITH_NUM_ERR, 1003);
HT_VAL(NRT_EXEC_COMPLETED_WITH_ERR, 1004);
HT_VAL(NRT_EXEC_NC_BUSY, 1005);
HT_VAL(NRT_EXEC_OOB, 1006);
HT_VAL(NRT_COLL_PENDING, 1100);
HT_VAL(NRT_EXEC_HW_ERR_COLLECTIVES, 1200);
HT_VAL(NRT_EXEC_HW_ERR_HBM_UE, 1201);
HT_VAL(NRT_EXEC_HW_ERR_NC_UE, 1202);
HT_VAL(NRT_EXEC_HW_ERR_DMA_ABORT, 1203);
HT_VAL(NRT_EXEC_SW_NQ_OVERFLOW, 1204);
HT_VAL(NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE, 1205);
HT_VAL(NRT_NETWORK_PROXY_FAILURE, 1206);

/* ------------------------------------------------- nrt_framework_type_t */
HT_SIZE(nrt_framework_type_t, 4);
HT_VAL(NRT_FRAMEWORK_TYPE_INVALID, 0);
HT_VAL(NRT_FRAMEWORK_TYPE_NO_FW, 1);
HT_VAL(NRT_FRAMEWORK_TYPE_TENSORFLOW, 2);
HT_VAL(NRT_FRAMEWORK_TYPE_PYTORCH, 3);
HT_VAL(NRT_FRAMEWORK_TYPE_MXNET, 4);
HT_VAL(NRT_FRAMEWORK_TYPE_PRECHECK, 5);

/* ------------------------------- nrt_tensor_placement_t, nrt_tensor_usage_t */
HT_SIZE(nrt_tensor_placement_t, 4);
HT_VAL(NRT_TENSOR_PLACEMENT_DEVICE, 0);
HT_VAL(NRT_TENSOR_PLACEMENT_HOST, 1);
HT_VAL(NRT_TENSOR_PLACEMENT_VIRTUAL, 2);
HT_SIZE(nrt_tensor_usage_t, 4);
HT_VAL(NRT_TENSOR_USAGE_INPUT, 0);
HT_VAL(NRT_TENSOR_USAGE_OUTPUT, 1);

/* ----------------------------------------------------------- nrt_dtype_t */
HT_SIZE(nrt_dtype_t, 4);
HT_VAL(NRT_DTYPE_UNKNOWN, 0x0);
HT_VAL(NRT_DTYPE_INVALID, 0x0);
HT_VAL(NRT_DTYPE_UINT64, 0x1);
HT_VAL(NRT_DTYPE_INT8, 0x2);
HT_VAL(NRT_DTYPE_UINT8, 0x3);
HT_VAL(NRT_DTYPE_INT16, 0x4);
HT_VAL(NRT_DTYPE_UINT16, 0x5);
HT_VAL(NRT_DTYPE_BFLOAT16, 0x6);
HT_VAL(NRT_DTYPE_FLOAT16, 0x7);
HT_VAL(NRT_DTYPE_INT32, 0x8);
HT_VAL(NRT_DTYPE_UINT32, 0x9);
HT_VAL(NRT_DTYPE_FLOAT32, 0xA);
HT_VAL(NRT_DTYPE_FP32R, 0xB);
HT_VAL(NRT_DTYPE_INT64, 0xC);
HT_VAL(NRT_DTYPE_FP8_E3, 0xD);
HT_VAL(NRT_DTYPE_FP8_E4, 0xE);
HT_VAL(NRT_DTYPE_FP8_E5, 0xF);

/* ----------------------------------------- nrt_op_type_t, nrt_cc_op_type_t */
HT_SIZE(nrt_op_type_t, 4);
HT_VAL(NRT_OP_ADD, 0x0);
HT_VAL(NRT_OP_FMA, 0x1);
HT_VAL(NRT_OP_MAX, 0x2);
HT_VAL(NRT_OP_MIN, 0x3);
HT_VAL(NRT_OP_INVALID, 0xF);
HT_SIZE(nrt_cc_op_type_t, 4);
HT_VAL(NRT_CC_ALLGATHER, 0);
HT_VAL(NRT_CC_ALLREDUCE, 1);
HT_VAL(NRT_CC_REDUCESCATTER, 2);

/* ------------------------------------------ instance families and sizes */
HT_VAL(NRT_INSTANCE_UNKNOWN, 0);
HT_VAL(NRT_INSTANCE_INF1, 1);
HT_VAL(NRT_INSTANCE_TRN1, 2);
HT_VAL(NRT_INSTANCE_TRN1N, 3);
HT_VAL(NRT_INSTANCE_INF2, 4);
HT_VAL(NRT_INSTANCE_TRN2, 5);
HT_VAL(NRT_INSTANCE_TRN2N, 6);
HT_VAL(NRT_INSTANCE_INF2E, 7);
HT_VAL(NRT_INSTANCE_TRN2P, 8);
HT_VAL(NRT_INSTANCE_TRN2U, 9);
HT_VAL(NRT_INSTANCE_TRN2E, 10);
HT_VAL(NRT_INSTANCE_TRN2EU, 11);
HT_VAL(NRT_INSTANCE_TRN2AC, 12);
HT_VAL(NRT_INSTANCE_TRN2UAC, 13);
HT_VAL(NRT_INSTANCE_TRN3, 14);
HT_VAL(NRT_INSTANCE_TRN3PDS98, 15);
HT_VAL(NRT_INSTANCE_SIZE_1XL, 0);
HT_VAL(NRT_INSTANCE_SIZE_2XL, 1);
HT_VAL(NRT_INSTANCE_SIZE_4XL, 2);
HT_VAL(NRT_INSTANCE_SIZE_6XL, 3);
HT_VAL(NRT_INSTANCE_SIZE_8XL, 4);
HT_VAL(NRT_INSTANCE_SIZE_24XL, 5);
HT_VAL(NRT_INSTANCE_SIZE_32XL, 6);
HT_VAL(NRT_INSTANCE_SIZE_48XL, 7);
HT_VAL(NRT_INSTANCE_SIZE_3XL, 8);
HT_VAL(NRT_INSTANCE_SIZE_UNKNOWN, 9);
HT_VAL(NRT_INSTANCE_SIZE_NUM, 9);

/* ------------------------------------------------------------- nrta_xu_t */
HT_SIZE(nrta_xu_t, 4);
HT_VAL(NRTA_XU_TENSOR_OP, 0);
HT_VAL(NRTA_XU_COMPUTE, 1);
HT_VAL(NRTA_XU_COLLECTIVES, 2);
HT_VAL(NRTA_XU_TYPE_NUM, 3);
HT_SIZE(nrta_seq_t, 8);
HT_SIZE(nrta_xu_id_t, 2);
HT_ASSERT((nrta_seq_t)-1 > 0, "nrta_seq_t is unsigned");
HT_ASSERT((nrta_xu_id_t)-1 > 0, "nrta_xu_id_t is unsigned");

/* ------------------------------------------------------------- structs */
HT_SIZE(nrt_tensor_info_t, 296);
HT_OFF(nrt_tensor_info_t, name, 0);
HT_OFF(nrt_tensor_info_t, usage, 256);
HT_OFF(nrt_tensor_info_t, size, 264);
HT_OFF(nrt_tensor_info_t, dtype, 272);
HT_OFF(nrt_tensor_info_t, shape, 280);
HT_OFF(nrt_tensor_info_t, ndim, 288);
HT_ASSERT(sizeof(((nrt_tensor_info_t *)0)->name) == 256, "nrt_tensor_info_t::name[256]");

HT_SIZE(nrt_tensor_info_array_t, 8);
HT_OFF(nrt_tensor_info_array_t, tensor_count, 0);
HT_OFF(nrt_tensor_info_array_t, tensor_array, 8);

HT_SIZE(nrt_version_t, 224);
HT_OFF(nrt_version_t, rt_major, 0);
HT_OFF(nrt_version_t, rt_minor, 8);
HT_OFF(nrt_version_t, rt_patch, 16);
HT_OFF(nrt_version_t, rt_maintenance, 24);
HT_OFF(nrt_version_t, rt_detail, 32);
HT_OFF(nrt_version_t, git_hash, 160);

HT_SIZE(nrt_instance_info_t, 32);
HT_OFF(nrt_instance_info_t, family, 0);
HT_OFF(nrt_instance_info_t, size, 4);
HT_OFF(nrt_instance_info_t, arch_name, 8);
HT_OFF(nrt_instance_info_t, device_revision, 24);

HT_SIZE(nrt_model_info_t, 4);
HT_OFF(nrt_model_info_t, vnc, 0);

HT_SIZE(nrt_vnc_memory_stats_t, 16);
HT_OFF(nrt_vnc_memory_stats_t, bytes_used, 0);
HT_OFF(nrt_vnc_memory_stats_t, bytes_limit, 8);

HT_SIZE(nrt_tensor_device_allocation_info_t, 24);
HT_OFF(nrt_tensor_device_allocation_info_t, physical_address, 0);
HT_OFF(nrt_tensor_device_allocation_info_t, size, 8);
HT_OFF(nrt_tensor_device_allocation_info_t, hbm_index, 16);

HT_SIZE(nrt_tensor_batch_op_t, 24);
HT_OFF(nrt_tensor_batch_op_t, offset, 0);
HT_OFF(nrt_tensor_batch_op_t, size, 8);
HT_OFF(nrt_tensor_batch_op_t, buffer, 16);

HT_SIZE(nrt_tensor_batch_t, 24);
HT_OFF(nrt_tensor_batch_t, tensor, 0);
HT_OFF(nrt_tensor_batch_t, ops, 8);
HT_OFF(nrt_tensor_batch_t, num_ops, 16);

HT_SIZE(nrt_cc_comm_t, 32);
HT_OFF(nrt_cc_comm_t, replica_group, 0);
HT_OFF(nrt_cc_comm_t, rank, 8);
HT_OFF(nrt_cc_comm_t, rank_n, 12);
HT_OFF(nrt_cc_comm_t, ctx_device_id, 16);
HT_OFF(nrt_cc_comm_t, ctx_device_count, 20);
HT_OFF(nrt_cc_comm_t, vnc, 24);

HT_SIZE(nrt_tensor_list_t, 16);
HT_OFF(nrt_tensor_list_t, tensors, 0);
HT_OFF(nrt_tensor_list_t, num_tensors, 8);

HT_SIZE(nrt_ucode_img, 16);
HT_OFF(nrt_ucode_img, bin, 0);
HT_OFF(nrt_ucode_img, size, 8);
HT_SIZE(nrt_ucode_info, 32);
HT_OFF(nrt_ucode_info, iram, 0);
HT_OFF(nrt_ucode_info, dram, 16);

/* Struct tags are part of the public names too. */
HT_SIZE(struct nrt_tensor_info, 296);
HT_SIZE(struct nrt_tensor_info_array, 8);
HT_SIZE(struct nrt_version, 224);
HT_SIZE(struct nrt_instance_info, 32);
HT_SIZE(struct nrt_model_info, 4);
HT_SIZE(struct nrt_vnc_memory_stats, 16);
HT_SIZE(struct nrt_tensor_device_allocation_info, 24);
HT_SIZE(struct nrt_tensor_batch_op, 24);
HT_SIZE(struct nrt_tensor_batch, 24);
HT_SIZE(struct nrt_cc_comm, 32);
HT_SIZE(struct nrt_tensor_list, 16);
HT_SIZE(struct nrt_ucode_img, 16);
HT_SIZE(struct nrt_ucode_info, 32);

/* ------------------------------------------------------ field types (C++) */
#ifdef __cplusplus
#define HT_FIELD(type, field, ftype) \
    static_assert(std::is_same<decltype(((type *)0)->field), ftype>::value, #type "::" #field " type")
HT_FIELD(nrt_tensor_info_t, name, char[256]);
HT_FIELD(nrt_tensor_info_t, usage, nrt_tensor_usage_t);
HT_FIELD(nrt_tensor_info_t, size, size_t);
HT_FIELD(nrt_tensor_info_t, dtype, nrt_dtype_t);
HT_FIELD(nrt_tensor_info_t, shape, uint32_t *);
HT_FIELD(nrt_tensor_info_t, ndim, uint32_t);
HT_FIELD(nrt_tensor_info_array_t, tensor_count, uint64_t);
HT_FIELD(nrt_version_t, rt_major, uint64_t);
HT_FIELD(nrt_version_t, rt_detail, char[128]);
HT_FIELD(nrt_version_t, git_hash, char[64]);
HT_FIELD(nrt_instance_info_t, family, uint32_t);
HT_FIELD(nrt_instance_info_t, size, uint32_t);
HT_FIELD(nrt_instance_info_t, arch_name, char[16]);
HT_FIELD(nrt_instance_info_t, device_revision, char[8]);
HT_FIELD(nrt_model_info_t, vnc, uint32_t);
HT_FIELD(nrt_vnc_memory_stats_t, bytes_used, size_t);
HT_FIELD(nrt_vnc_memory_stats_t, bytes_limit, size_t);
HT_FIELD(nrt_tensor_device_allocation_info_t, physical_address, uint64_t);
HT_FIELD(nrt_tensor_device_allocation_info_t, size, size_t);
HT_FIELD(nrt_tensor_device_allocation_info_t, hbm_index, int);
HT_FIELD(nrt_tensor_batch_op_t, offset, uint64_t);
HT_FIELD(nrt_tensor_batch_op_t, size, uint64_t);
HT_FIELD(nrt_tensor_batch_op_t, buffer, void *);
HT_FIELD(nrt_tensor_batch_t, tensor, const nrt_tensor_t *);
HT_FIELD(nrt_tensor_batch_t, ops, const nrt_tensor_batch_op_t *);
HT_FIELD(nrt_tensor_batch_t, num_ops, uint32_t);
HT_FIELD(nrt_cc_comm_t, replica_group, uint32_t *);
HT_FIELD(nrt_cc_comm_t, rank, uint32_t);
HT_FIELD(nrt_cc_comm_t, vnc, uint32_t);
HT_FIELD(nrt_tensor_list_t, tensors, nrt_tensor_t **);
HT_FIELD(nrt_tensor_list_t, num_tensors, size_t);
HT_FIELD(nrt_ucode_img, bin, uint8_t *);
HT_FIELD(nrt_ucode_img, size, size_t);
HT_FIELD(nrt_ucode_info, iram, nrt_ucode_img);
HT_FIELD(nrt_ucode_info, dram, nrt_ucode_img);
static_assert(std::is_same<nrt_tensor_set_t, void>::value, "nrt_tensor_set_t is void");
static_assert(std::is_same<nrta_seq_t, uint64_t>::value, "nrta_seq_t is uint64_t");
static_assert(std::is_same<nrta_xu_id_t, uint16_t>::value, "nrta_xu_id_t is uint16_t");
static_assert(std::is_same<nrt_tensor_batch_offset_t, uint64_t>::value, "batch offset type");
static_assert(std::is_same<nrt_tensor_batch_size_t, uint64_t>::value, "batch size type");
static_assert(std::is_same<NRT_ASYNC_EXEC_STATUS_CALLBACK,
                           void (*)(void *, uint32_t, uint32_t, uint64_t, NRT_STATUS)>::value,
              "NRT_ASYNC_EXEC_STATUS_CALLBACK type");
#else
/* In C, the opaque handles are incomplete struct types and the set is void. */
HT_ASSERT(_Generic((nrt_tensor_set_t *)0, void *: 1, default: 0), "nrt_tensor_set_t is void");
HT_ASSERT(_Generic((nrt_model_t *)0, struct nrt_model *: 1, default: 0), "nrt_model_t");
HT_ASSERT(_Generic((nrt_tensor_t *)0, struct nrt_tensor *: 1, default: 0), "nrt_tensor_t");
HT_ASSERT(_Generic((nrt_cc_context_t *)0, struct nrt_cc_context *: 1, default: 0), "nrt_cc_context_t");
HT_ASSERT(_Generic((NRT_ASYNC_EXEC_STATUS_CALLBACK)0,
                   void (*)(void *, uint32_t, uint32_t, uint64_t, NRT_STATUS): 1, default: 0),
          "NRT_ASYNC_EXEC_STATUS_CALLBACK type");
#endif

/* ------------------------------------------------ function signatures */
/* nrt_status.h */
HT_SIG(nrt_get_status_as_str, const char *, (NRT_STATUS));
/* nrt_version.h */
HT_SIG(nrt_get_version, NRT_STATUS, (nrt_version_t *, size_t));
/* nrt.h: lifecycle, topology, instance */
HT_SIG(nrt_init, NRT_STATUS, (nrt_framework_type_t, const char *, const char *));
#ifdef __cplusplus
HT_SIG(nrt_close, void, ());
#else
HT_SIG(nrt_close, void, (void));
#endif
HT_SIG(nrt_get_instance_info, NRT_STATUS, (nrt_instance_info_t *, size_t));
HT_SIG(nrt_get_total_nc_count, NRT_STATUS, (uint32_t *));
HT_SIG(nrt_get_total_vnc_count, NRT_STATUS, (uint32_t *));
HT_SIG(nrt_get_visible_nc_count, NRT_STATUS, (uint32_t *));
HT_SIG(nrt_get_visible_vnc_count, NRT_STATUS, (uint32_t *));
HT_SIG(nrt_host_device_id_get, NRT_STATUS, (int, uint32_t *));
HT_SIG(nrt_host_device_id_rid_map_get, NRT_STATUS, (uint32_t *, uint32_t *));
HT_SIG(nrt_get_vnc_memory_stats, NRT_STATUS, (uint32_t, nrt_vnc_memory_stats_t *, size_t, size_t *));
/* nrt.h: models */
HT_SIG(nrt_load, NRT_STATUS, (const void *, size_t, int32_t, int32_t, nrt_model_t **));
HT_SIG(nrt_load_collectives, NRT_STATUS,
       (const void *, size_t, int32_t, int32_t, uint32_t, uint32_t, nrt_model_t **));
HT_SIG(nrt_unload, NRT_STATUS, (nrt_model_t *));
HT_SIG(nrt_get_model_nc_count, NRT_STATUS, (const nrt_model_t *, uint32_t *));
HT_SIG(nrt_get_model_vnc_count, NRT_STATUS, (const nrt_model_t *, uint32_t *));
HT_SIG(nrt_build_global_comm, NRT_STATUS, (int32_t, uint32_t, uint32_t));
HT_SIG(nrt_cc_global_comm_init, NRT_STATUS, (uint32_t, uint32_t, uint32_t));
/* nrt.h: execute */
HT_SIG(nrt_execute, NRT_STATUS, (nrt_model_t *, const nrt_tensor_set_t *, nrt_tensor_set_t *));
HT_SIG(nrt_execute_repeat, NRT_STATUS, (nrt_model_t *, const nrt_tensor_set_t *, nrt_tensor_set_t *, int));
/* nrt.h: tensors */
HT_SIG(nrt_tensor_allocate, NRT_STATUS, (nrt_tensor_placement_t, int, size_t, const char *, nrt_tensor_t **));
HT_SIG(nrt_tensor_free, void, (nrt_tensor_t **));
HT_SIG(nrt_tensor_read, NRT_STATUS, (const nrt_tensor_t *, void *, size_t, size_t));
HT_SIG(nrt_tensor_write, NRT_STATUS, (nrt_tensor_t *, const void *, size_t, size_t));
HT_SIG(nrt_tensor_read_batch, NRT_STATUS, (const nrt_tensor_batch_t *, uint64_t, bool));
HT_SIG(nrt_tensor_write_batch, NRT_STATUS, (const nrt_tensor_batch_t *, uint64_t, bool));
HT_SIG(nrt_tensor_copy, NRT_STATUS, (const nrt_tensor_t *, size_t, nrt_tensor_t *, size_t, size_t));
HT_SIG(nrt_tensor_get_size, size_t, (const nrt_tensor_t *));
HT_SIG(nrt_tensor_memset, NRT_STATUS, (nrt_tensor_t *, uint64_t, int, size_t));
HT_SIG(nrt_tensor_allocate_empty, NRT_STATUS, (const char *, nrt_tensor_t **));
HT_SIG(nrt_tensor_attach_buffer, NRT_STATUS, (nrt_tensor_t *, void *, size_t));
HT_SIG(nrt_tensor_allocate_slice, NRT_STATUS, (const nrt_tensor_t *, size_t, size_t, const char *, nrt_tensor_t **));
HT_SIG(nrt_tensor_get_va, void *, (const nrt_tensor_t *));
HT_SIG(nrt_tensor_get_device_allocation_info, NRT_STATUS,
       (const nrt_tensor_t *, nrt_tensor_device_allocation_info_t *));
HT_SIG(nrt_tensor_check_output_completion, NRT_STATUS, (const nrt_tensor_t *, int64_t, uint64_t));
HT_SIG(nrt_tensor_reset_output_completion, NRT_STATUS, (nrt_tensor_t *));
HT_SIG(nrt_get_dmabuf_fd, NRT_STATUS, (uint64_t, uint64_t, int *));
HT_SIG(nrt_get_hbm_mmap_va, NRT_STATUS, (int, int, void **, size_t *));
HT_SIG(nrt_get_attached_efa_bdf, NRT_STATUS, (const void *, char *, size_t *));
/* nrt.h: tensor sets */
HT_SIG(nrt_allocate_tensor_set, NRT_STATUS, (nrt_tensor_set_t **));
HT_SIG(nrt_destroy_tensor_set, void, (nrt_tensor_set_t **));
HT_SIG(nrt_add_tensor_to_tensor_set, NRT_STATUS, (nrt_tensor_set_t *, const char *, nrt_tensor_t *));
HT_SIG(nrt_get_tensor_from_tensor_set, NRT_STATUS, (nrt_tensor_set_t *, const char *, nrt_tensor_t **));
/* nrt_experimental.h */
HT_SIG(nrt_get_model_tensor_info, NRT_STATUS, (nrt_model_t *, nrt_tensor_info_array_t **));
HT_SIG(nrt_get_model_instance_count, NRT_STATUS, (nrt_model_t *, uint32_t *));
HT_SIG(nrt_free_model_tensor_info, NRT_STATUS, (nrt_tensor_info_array_t *));
HT_SIG(nrt_trace_start, NRT_STATUS, (bool));
HT_SIG(nrt_trace_stop, NRT_STATUS, (const char *));
HT_SIG(nrt_get_libnccl_net, void *, (int *, char *, size_t));
HT_SIG(nrt_set_pool_eng_ucode, NRT_STATUS, (const nrt_ucode_info *));
HT_SIG(nrt_memcpy_to_device, NRT_STATUS, (void *, const void *, size_t));
HT_SIG(nrt_register_async_exec_callback, NRT_STATUS, (NRT_ASYNC_EXEC_STATUS_CALLBACK, void *));
HT_SIG(nrt_barrier, NRT_STATUS, (int32_t, uint32_t, uint32_t));
HT_SIG(nrt_all_gather, NRT_STATUS, (int32_t, uint32_t, uint32_t, uint32_t, void *, void *));
HT_SIG(nrt_async_drain_queued_execs, NRT_STATUS, (int32_t));
HT_SIG(nrt_get_model_info, NRT_STATUS, (const nrt_model_t *, nrt_model_info_t *, size_t, size_t *));
/* nrt_async.h (v3) */
HT_SIG(nrta_tensor_write, NRT_STATUS,
       (nrt_tensor_t *, const void *, uint64_t, uint64_t, int, NRT_STATUS *, nrta_seq_t *));
HT_SIG(nrta_tensor_read, NRT_STATUS,
       (void *, nrt_tensor_t *, uint64_t, uint64_t, int, NRT_STATUS *, nrta_seq_t *));
HT_SIG(nrta_tensor_copy, NRT_STATUS,
       (nrt_tensor_t *, uint64_t, nrt_tensor_t *, uint64_t, uint64_t, int, NRT_STATUS *, nrta_seq_t *));
HT_SIG(nrta_execute_schedule, NRT_STATUS,
       (nrt_model_t *, const nrt_tensor_set_t *, nrt_tensor_set_t *, int, NRT_STATUS *, nrta_seq_t *));
HT_SIG(nrta_cc_prepare, NRT_STATUS,
       (nrt_cc_comm_t *, nrt_tensor_list_t *, nrt_tensor_list_t *, nrt_dtype_t, nrt_op_type_t,
        nrt_cc_op_type_t, nrt_cc_context_t **));
HT_SIG(nrta_cc_schedule, NRT_STATUS, (nrt_cc_context_t **, int, NRT_STATUS *, nrta_seq_t *));
HT_SIG(nrta_is_completed, NRT_STATUS, (nrta_seq_t, bool *));
HT_SIG(nrta_get_sequence, NRT_STATUS, (uint32_t, nrta_xu_t, int, nrta_seq_t *));

/* ------------------------------------------------------- runtime checks */
static int failures;

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "header_truth: FAILED: %s\n", what);
        failures++;
    }
}

int main(void)
{
    /* The seq macros must parenthesize their argument and work on runtime
     * values of any integer type. */
    volatile nrta_seq_t seq = ((nrta_seq_t)7 << 48) | 42u;
    nrta_seq_t base = 40;
    check(NRTA_SEQ_GET_SEQ_NUM(seq) == 42, "NRTA_SEQ_GET_SEQ_NUM(runtime)");
    check(NRTA_SEQ_GET_XU_ID(seq) == 7, "NRTA_SEQ_GET_XU_ID(runtime)");
    check(NRTA_SEQ_GET_SEQ_NUM(base + 2) == 42, "NRTA_SEQ_GET_SEQ_NUM(expr)");
    check(NRTA_SEQ_GET_XU_ID(base | ((nrta_seq_t)9 << 48)) == 9, "NRTA_SEQ_GET_XU_ID(expr)");
    check((nrta_xu_id_t)NRTA_SEQ_GET_XU_ID(seq) == 7, "xu id fits nrta_xu_id_t");

    /* Flexible array stride: entry i of tensor_array starts at 8 + 296 * i. */
    {
        static uint64_t storage[(8 + 3 * 296) / 8];
        nrt_tensor_info_array_t *a = (nrt_tensor_info_array_t *)(void *)storage;
        unsigned char *base_ptr = (unsigned char *)a;
        check((unsigned char *)&a->tensor_array[2] - base_ptr == 8 + 2 * 296,
              "tensor_array stride");
        check((unsigned char *)a->tensor_array[1].name - base_ptr == 8 + 296,
              "tensor_array[1].name offset");
    }

    /* Designated/positional initialization in declaration order. */
    {
        nrt_tensor_batch_op_t op = {16, 32, NULL};
        nrt_tensor_batch_t batch = {NULL, &op, 1};
        check(batch.ops->offset == 16 && batch.ops->size == 32 && batch.num_ops == 1,
              "batch field order");
        nrt_instance_info_t ii = {NRT_INSTANCE_TRN2, NRT_INSTANCE_SIZE_48XL, "trn2", "r1"};
        check(ii.family == 5 && ii.size == 7, "instance info field order");
    }

    if (failures) {
        return 1;
    }
    printf("header_truth: OK\n");
    return 0;
}
