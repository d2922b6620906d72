/* Every function of nrt_profile.h and nrt_sys_trace.h, with its exact type: each is assigned
 * to a pointer of the declared type (a mismatch does not compile, as C11 or C++17) and the
 * program links against libnrt, so every one is exported. Prints how many it checked. */
#include <stdio.h>

#include <nrt/nrt_profile.h>
#include <nrt/nrt_sys_trace.h>

int main(void) {
    int n = 0;
    { NRT_STATUS (*volatile f)(nrt_model_t *, const char *) = nrt_profile_start; n += f != NULL; }
    { NRT_STATUS (*volatile f)(const char *) = nrt_profile_stop; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_profile_continuous_options_t **) = nrt_profile_continuous_options_allocate; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_profile_continuous_options_t *) = nrt_profile_continuous_options_free; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_profile_continuous_options_t *, const char *) = nrt_profile_continuous_options_set_output_dir; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_profile_continuous_options_t *) = nrt_profile_continuous_start; n += f != NULL; }
    { NRT_STATUS (*volatile f)(uint32_t, nrt_profile_continuous_options_t *) = nrt_profile_continuous_save; n += f != NULL; }
    { NRT_STATUS (*volatile f)(void) = nrt_profile_continuous_stop; n += f != NULL; }
    { NRT_STATUS (*volatile f)(void) = nrt_inspect_begin; n += f != NULL; }
    { NRT_STATUS (*volatile f)(void) = nrt_inspect_stop; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_inspect_config_t **) = nrt_inspect_config_allocate; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_inspect_config_t *) = nrt_inspect_config_set_defaults; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_inspect_config_t *) = nrt_inspect_config_free; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_inspect_config_t *, int) = nrt_inspect_config_set_session_id; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_inspect_config_t *, const char *) = nrt_inspect_config_set_output_dir; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_inspect_config_t *, uint64_t) = nrt_inspect_config_set_sys_trace_max_events_per_nc; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_inspect_config_t *, uint32_t, bool) = nrt_inspect_config_set_capture_enabled_for_nc; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_inspect_config_t *, const char *, bool) = nrt_inspect_config_set_capture_enabled_for_event_type_string; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_inspect_config_t *, bool) = nrt_inspect_config_set_enable_inspect; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_inspect_config_t *, bool) = nrt_inspect_config_set_enable_inspect_on_fail; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_inspect_config_t *) = nrt_inspect_begin_with_options; n += f != NULL; }
    { NRT_STATUS (*volatile f)(const char ***, size_t *) = nrt_inspect_config_get_all_activity_types; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_inspect_config_t *, const char ***, size_t *) = nrt_inspect_config_get_enabled_activity_types; n += f != NULL; }
    { void (*volatile f)(const char **, size_t) = nrt_inspect_config_free_activity_types; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_inspect_config_t *, const char *, bool) = nrt_inspect_config_set_activity; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_sys_trace_config_t **) = nrt_sys_trace_config_allocate; n += f != NULL; }
    { void (*volatile f)(nrt_sys_trace_config_t *) = nrt_sys_trace_config_set_defaults; n += f != NULL; }
    { void (*volatile f)(nrt_sys_trace_config_t *) = nrt_sys_trace_config_free; n += f != NULL; }
    { void (*volatile f)(nrt_sys_trace_config_t *, uint64_t) = nrt_sys_trace_config_set_max_events_per_nc; n += f != NULL; }
    { void (*volatile f)(nrt_sys_trace_config_t *, uint32_t, bool) = nrt_sys_trace_config_set_capture_enabled_for_nc; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_sys_trace_config_t *, const char *, bool) = nrt_sys_trace_config_set_capture_enabled_for_event_type; n += f != NULL; }
    { NRT_STATUS (*volatile f)(const char ***, size_t *) = nrt_sys_trace_get_event_types; n += f != NULL; }
    { void (*volatile f)(const char **, size_t) = nrt_sys_trace_free_event_types; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_sys_trace_config_t *, const char ***, size_t *) = nrt_sys_trace_config_get_enabled_event_types; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_sys_trace_config_t *) = nrt_sys_trace_start; n += f != NULL; }
    { NRT_STATUS (*volatile f)(void) = nrt_sys_trace_stop; n += f != NULL; }
    { NRT_STATUS (*volatile f)(nrt_sys_trace_fetch_options_t **) = nrt_sys_trace_fetch_options_allocate; n += f != NULL; }
    { void (*volatile f)(nrt_sys_trace_fetch_options_t *) = nrt_sys_trace_fetch_options_set_defaults; n += f != NULL; }
    { void (*volatile f)(nrt_sys_trace_fetch_options_t *) = nrt_sys_trace_fetch_options_free; n += f != NULL; }
    { void (*volatile f)(nrt_sys_trace_fetch_options_t *, uint64_t) = nrt_sys_trace_fetch_options_set_max_events_per_nc; n += f != NULL; }
    { void (*volatile f)(nrt_sys_trace_fetch_options_t *, uint64_t) = nrt_sys_trace_fetch_options_set_nc_idx; n += f != NULL; }
    { NRT_STATUS (*volatile f)(char **, size_t *, const nrt_sys_trace_fetch_options_t *) = nrt_sys_trace_fetch_events; n += f != NULL; }
    { void (*volatile f)(char *) = nrt_sys_trace_buffer_free; n += f != NULL; }
    printf("profile_headers: %d functions OK\n", n);
    return n == 43 ? 0 : 1;
}
