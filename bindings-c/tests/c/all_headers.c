/* Includes every public header of the library and takes the address of every function they
 * declare, so that compiling it (C11 and C++17, -Wall -Werror) proves the headers are
 * well-formed together and linking it proves that every declared function is exported.
 *
 * nrt/nrt_profile.h and nrt/nrt_sys_trace.h are included, and their functions listed, only
 * when they exist (__has_include): they are delivered separately.
 *
 * run_c_tests.sh also checks that this list names every function the installed headers
 * declare. Running the program prints how many addresses it took. */
#include <stdio.h>

#include <nrt/nrt.h>
#include <nrt/nrt_async.h>
#include <nrt/nrt_async_sendrecv.h>
#include <nrt/nrt_experimental.h>
#include <nrt/nrt_status.h>
#include <nrt/nrt_version.h>
#include <nrt/nec.h>
#include <nrt/ndebug_stream.h>
#include <nrt/nds/neuron_ds.h>
#if defined(__has_include)
#if __has_include(<nrt/nrt_profile.h>)
#include <nrt/nrt_profile.h>
#define HAVE_NRT_PROFILE_H 1
#endif
#if __has_include(<nrt/nrt_sys_trace.h>)
#include <nrt/nrt_sys_trace.h>
#define HAVE_NRT_SYS_TRACE_H 1
#endif
#endif

/* Layouts (LP64) of the structs the new headers' functions exchange. */
#include <stddef.h>
#ifdef __cplusplus
#define LAYOUT(cond) static_assert(cond, #cond)
#else
#define LAYOUT(cond) _Static_assert(cond, #cond)
#endif
LAYOUT(sizeof(nrta_error_t) == 16 && offsetof(nrta_error_t, error_code) == 8);
LAYOUT(sizeof(ndebug_stream_event_header_t) == 64);
LAYOUT(offsetof(ndebug_stream_event_header_t, type) == 8);
LAYOUT(offsetof(ndebug_stream_payload_debug_tensor_read_t, logical_nc_id) == 512);
LAYOUT(offsetof(ndebug_stream_payload_debug_tensor_read_t, tensor_shape) == 536);
LAYOUT(offsetof(ndebug_stream_payload_debug_tensor_read_t, tensor_data) == 1024);
LAYOUT(sizeof(nec_version_info_t) == 56 && offsetof(nec_version_info_t, git_hash) == 32);
LAYOUT(offsetof(nec_version_info_t, compatibility_version) == 48);
LAYOUT(sizeof(enc_host_mem_t) == 32);
LAYOUT(sizeof(nds_model_node_info_t) == 284 && offsetof(nds_model_node_info_t, nc_index) == 280);
LAYOUT(sizeof(nds_mem_usage_info_t) == 16);
LAYOUT(sizeof(nds_model_node_mem_usage_info_t) == 384);
LAYOUT(sizeof(nds_version_info_t) == 8);
LAYOUT(sizeof(nds_process_info_t) == 60 && offsetof(nds_process_info_t, framework_version) == 36);
LAYOUT(sizeof(nds_process_info_ext_t) == 256);
LAYOUT(NDEBUG_STREAM_EVENT_TYPE_DEBUG_TENSOR_READ == 1 && NEC_POD_TYPE_INVALID == 3);
LAYOUT(OBJECT_TYPE_PROCESS_INFO_EXT == 2 && NDS_DMA_MEM_USAGE_SLOT_COUNT == 12);
LAYOUT(BIT_INDEX_COUNT == 2 && ENC_RDH_NUM_EVENT_TYPE == 52);

typedef void (*any_fn)(void);
/* A C-style cast to void (*)(void) is valid in C and C++ and exempt from -Wcast-function-type. */
#define FN(f) ((any_fn)(f))

static const any_fn functions[] = {
    /* nrt/nrt.h */
    FN(nrt_add_tensor_to_tensor_set),
    FN(nrt_allocate_tensor_set),
    FN(nrt_build_global_comm),
    FN(nrt_cc_global_comm_init),
    FN(nrt_close),
    FN(nrt_destroy_tensor_set),
    FN(nrt_execute),
    FN(nrt_execute_repeat),
    FN(nrt_get_attached_efa_bdf),
    FN(nrt_get_dmabuf_fd),
    FN(nrt_get_hbm_mmap_va),
    FN(nrt_get_instance_info),
    FN(nrt_get_model_nc_count),
    FN(nrt_get_model_vnc_count),
    FN(nrt_get_tensor_from_tensor_set),
    FN(nrt_get_total_nc_count),
    FN(nrt_get_total_vnc_count),
    FN(nrt_get_visible_nc_count),
    FN(nrt_get_visible_vnc_count),
    FN(nrt_get_vnc_memory_stats),
    FN(nrt_host_device_id_get),
    FN(nrt_host_device_id_rid_map_get),
    FN(nrt_init),
    FN(nrt_load),
    FN(nrt_load_collectives),
    FN(nrt_tensor_allocate),
    FN(nrt_tensor_allocate_empty),
    FN(nrt_tensor_allocate_slice),
    FN(nrt_tensor_attach_buffer),
    FN(nrt_tensor_check_output_completion),
    FN(nrt_tensor_copy),
    FN(nrt_tensor_free),
    FN(nrt_tensor_get_device_allocation_info),
    FN(nrt_tensor_get_size),
    FN(nrt_tensor_get_va),
    FN(nrt_tensor_memset),
    FN(nrt_tensor_read),
    FN(nrt_tensor_read_batch),
    FN(nrt_tensor_reset_output_completion),
    FN(nrt_tensor_write),
    FN(nrt_tensor_write_batch),
    FN(nrt_unload),
    /* nrt/nrt_experimental.h */
    FN(nrt_all_gather),
    FN(nrt_async_drain_queued_execs),
    FN(nrt_barrier),
    FN(nrt_free_model_tensor_info),
    FN(nrt_get_libnccl_net),
    FN(nrt_get_model_info),
    FN(nrt_get_model_instance_count),
    FN(nrt_get_model_tensor_info),
    FN(nrt_memcpy_to_device),
    FN(nrt_register_async_exec_callback),
    FN(nrt_set_pool_eng_ucode),
    FN(nrt_trace_start),
    FN(nrt_trace_stop),
    /* nrt/nrt_status.h */
    FN(nrt_get_status_as_str),
    /* nrt/nrt_version.h */
    FN(nrt_get_version),
    /* nrt/nrt_async.h */
    FN(nrta_cc_prepare),
    FN(nrta_cc_schedule),
    FN(nrta_error_tracker_create),
    FN(nrta_error_tracker_destroy),
    FN(nrta_error_tracker_get_list),
    FN(nrta_execute_schedule),
    FN(nrta_get_completion_handle),
    FN(nrta_get_sequence),
    FN(nrta_is_completed),
    FN(nrta_tensor_copy),
    FN(nrta_tensor_read),
    FN(nrta_tensor_write),
    /* nrt/nrt_async_sendrecv.h */
    FN(nrt_async_sendrecv_accept),
    FN(nrt_async_sendrecv_close),
    FN(nrt_async_sendrecv_connect),
    FN(nrt_async_sendrecv_flush),
    FN(nrt_async_sendrecv_get_max_num_communicators_per_lnc),
    FN(nrt_async_sendrecv_get_max_num_pending_request),
    FN(nrt_async_sendrecv_init),
    FN(nrt_async_sendrecv_recv_tensor),
    FN(nrt_async_sendrecv_send_tensor),
    FN(nrt_async_sendrecv_test_comm),
    FN(nrt_async_sendrecv_test_request),
    /* nrt/nec.h */
    FN(nec_build_port_and_rid_map),
    FN(nec_get_device_count),
    FN(nec_get_device_pci_bdf),
    FN(nec_get_dynamic_recv_offset_bytes),
    FN(nec_get_dynamic_send_offset_bytes),
    FN(nec_get_dynamic_send_size_bytes),
    FN(nec_get_p2p_pod_peer_node),
    FN(nec_get_peer_mla_idx),
    FN(nec_get_version_info),
    FN(nec_get_virtual_core_size),
    FN(nec_inc_semaphore),
    FN(nec_is_mla_available),
    FN(nec_mla_idx_to_rid),
    FN(nec_ndl_printk),
    FN(nec_pod_node_can_access_peer_node),
    FN(nec_rid_to_mla_idx),
    FN(nec_set_recv_size_bytes),
    /* nrt/ndebug_stream.h */
    FN(nrt_debug_client_connect),
    FN(nrt_debug_client_connect_close),
    FN(nrt_debug_client_read_one_event),
    /* nrt/nds/neuron_ds.h */
    FN(nds_close),
    FN(nds_decrement_nc_counter),
    FN(nds_decrement_nd_counter),
    FN(nds_get_nc_counter),
    FN(nds_get_nd_counter),
    FN(nds_increment_nc_counter),
    FN(nds_increment_nd_counter),
    FN(nds_obj_commit),
    FN(nds_obj_delete),
    FN(nds_obj_handle_to_model_node_info),
    FN(nds_obj_handle_to_model_node_mem_usage),
    FN(nds_obj_handle_to_process_info),
    FN(nds_obj_handle_to_process_info_ext),
    FN(nds_obj_new),
    FN(nds_open),
    FN(nds_or_nd_counter),
    FN(nds_read_all_model_nodes),
    FN(nds_read_process_info),
    FN(nds_read_process_info_ext),
    FN(nds_set_nc_counter),
    FN(nds_set_nd_counter),
#ifdef HAVE_NRT_PROFILE_H
    /* nrt/nrt_profile.h */
    FN(nrt_inspect_begin),
    FN(nrt_inspect_begin_with_options),
    FN(nrt_inspect_config_allocate),
    FN(nrt_inspect_config_free),
    FN(nrt_inspect_config_free_activity_types),
    FN(nrt_inspect_config_get_all_activity_types),
    FN(nrt_inspect_config_get_enabled_activity_types),
    FN(nrt_inspect_config_set_activity),
    FN(nrt_inspect_config_set_capture_enabled_for_event_type_string),
    FN(nrt_inspect_config_set_capture_enabled_for_nc),
    FN(nrt_inspect_config_set_defaults),
    FN(nrt_inspect_config_set_enable_inspect),
    FN(nrt_inspect_config_set_enable_inspect_on_fail),
    FN(nrt_inspect_config_set_output_dir),
    FN(nrt_inspect_config_set_session_id),
    FN(nrt_inspect_config_set_sys_trace_max_events_per_nc),
    FN(nrt_inspect_stop),
    FN(nrt_profile_continuous_options_allocate),
    FN(nrt_profile_continuous_options_free),
    FN(nrt_profile_continuous_options_set_output_dir),
    FN(nrt_profile_continuous_save),
    FN(nrt_profile_continuous_start),
    FN(nrt_profile_continuous_stop),
    FN(nrt_profile_start),
    FN(nrt_profile_stop),
#endif
#ifdef HAVE_NRT_SYS_TRACE_H
    /* nrt/nrt_sys_trace.h */
    FN(nrt_sys_trace_buffer_free),
    FN(nrt_sys_trace_config_allocate),
    FN(nrt_sys_trace_config_free),
    FN(nrt_sys_trace_config_get_enabled_event_types),
    FN(nrt_sys_trace_config_set_capture_enabled_for_event_type),
    FN(nrt_sys_trace_config_set_capture_enabled_for_nc),
    FN(nrt_sys_trace_config_set_defaults),
    FN(nrt_sys_trace_config_set_max_events_per_nc),
    FN(nrt_sys_trace_fetch_events),
    FN(nrt_sys_trace_fetch_options_allocate),
    FN(nrt_sys_trace_fetch_options_free),
    FN(nrt_sys_trace_fetch_options_set_defaults),
    FN(nrt_sys_trace_fetch_options_set_max_events_per_nc),
    FN(nrt_sys_trace_fetch_options_set_nc_idx),
    FN(nrt_sys_trace_free_event_types),
    FN(nrt_sys_trace_get_event_types),
    FN(nrt_sys_trace_start),
    FN(nrt_sys_trace_stop),
#endif
};

int main(void) {
    size_t n = sizeof functions / sizeof functions[0];
    for (size_t i = 0; i < n; i++) {
        if (functions[i] == NULL) {
            fprintf(stderr, "function %zu has no address\n", i);
            return 1;
        }
    }
    printf("all_headers: %zu function addresses\n", n);
    return 0;
}
