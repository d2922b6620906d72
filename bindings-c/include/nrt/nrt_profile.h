/*
 * nrt_profile.h - Neuron Runtime profiling: per-model device profiles,
 * continuous profiling of every model, and "inspect" capture (system trace
 * plus device profiles written to an output directory).
 *
 * Part of the nrt-capi library, a reimplementation of the libnrt 2.31 public
 * C interface. On the simulator a device profile is the simulated
 * per-engine timeline of each execution, written as Chrome/Perfetto
 * trace-event JSON (drawn by `nrt trace render`) with a summary of each
 * execution; see docs/PROFILING.md for the files written. On the Linux
 * backend these functions return NRT_UNSUPPORTED.
 */

#ifndef NRT_NRT_PROFILE_H_INCLUDED
#define NRT_NRT_PROFILE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "nrt/nrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- one model ---------------------------------------------------------- */

/* Starts recording every execution of `model`; the profile is written by
 * nrt_profile_stop(filename) with the same `filename`. */
NRT_STATUS nrt_profile_start(nrt_model_t *model, const char *filename);

/* Stops the recording started with `filename` and writes it there (the file
 * is replaced if it exists). */
NRT_STATUS nrt_profile_stop(const char *filename);

/* ---- continuous profiling ----------------------------------------------- */

/* Opaque options of continuous profiling; create with
 * nrt_profile_continuous_options_allocate (output directory "./output"). */
typedef struct nrt_profile_continuous_options nrt_profile_continuous_options_t;

/* Creates an options object with the defaults. */
NRT_STATUS nrt_profile_continuous_options_allocate(nrt_profile_continuous_options_t **options);

/* Releases an options object. */
NRT_STATUS nrt_profile_continuous_options_free(nrt_profile_continuous_options_t *options);

/* Sets the directory nrt_profile_continuous_save writes into (the string is
 * copied). */
NRT_STATUS nrt_profile_continuous_options_set_output_dir(nrt_profile_continuous_options_t *options, const char *output_dir);

/* Profiles every execution of every model, keeping only the latest one per
 * NeuronCore in memory until nrt_profile_continuous_save is called. Refused
 * while inspect capture or implicit asynchronous execution is on. */
NRT_STATUS nrt_profile_continuous_start(nrt_profile_continuous_options_t *options);

/* Writes the latest execution kept for NeuronCore `vnc` into the options'
 * output directory, under a name chosen so that files never collide.
 * Profiling continues. */
NRT_STATUS nrt_profile_continuous_save(uint32_t vnc, nrt_profile_continuous_options_t *options);

/* Ends continuous profiling without writing anything. */
NRT_STATUS nrt_profile_continuous_stop();

/* ---- inspect capture ---------------------------------------------------- */

/* Starts capture as the environment says: NEURON_RT_INSPECT_ENABLE,
 * NEURON_RT_INSPECT_OUTPUT_DIR (default ./output),
 * NEURON_RT_INSPECT_SYSTEM_PROFILE, NEURON_RT_INSPECT_DEVICE_PROFILE,
 * NEURON_RT_INSPECT_ON_FAIL. */
NRT_STATUS nrt_inspect_begin();

/* Ends capture and writes what is still held to the output directory. */
NRT_STATUS nrt_inspect_stop();

/* Opaque options of nrt_inspect_begin_with_options. */
typedef struct nrt_inspect_config nrt_inspect_config_t;

/* Creates an options object with the defaults (see
 * nrt_inspect_config_set_defaults). */
NRT_STATUS nrt_inspect_config_allocate(nrt_inspect_config_t **options);

/* Resets every option: session 1, output directory ./output, every activity
 * type, every NeuronCore and event type captured, capture of executions and
 * of failing executions both off. The environment is not consulted. */
NRT_STATUS nrt_inspect_config_set_defaults(nrt_inspect_config_t *options);

/* Releases an options object. */
NRT_STATUS nrt_inspect_config_free(nrt_inspect_config_t *options);

/* Sets the session id (a number in the output's names). */
NRT_STATUS nrt_inspect_config_set_session_id(nrt_inspect_config_t *options, int session_id);

/* Sets the output directory (non-empty; the string is copied). */
NRT_STATUS nrt_inspect_config_set_output_dir(nrt_inspect_config_t *options, const char *output_dir);

/* Sets the ring capacity, in events, of each NeuronCore's system trace. */
NRT_STATUS nrt_inspect_config_set_sys_trace_max_events_per_nc(nrt_inspect_config_t *options, uint64_t sys_trace_max_events_per_nc);

/* Turns system-trace capture of one NeuronCore on or off. */
NRT_STATUS nrt_inspect_config_set_capture_enabled_for_nc(nrt_inspect_config_t *options, uint32_t nc_idx, bool enabled);

/* Turns capture of one event type (a name from nrt_sys_trace_get_event_types)
 * on or off. */
NRT_STATUS nrt_inspect_config_set_capture_enabled_for_event_type_string(nrt_inspect_config_t *options, const char *event_type, bool enabled);

/* Whether every execution is captured. */
NRT_STATUS nrt_inspect_config_set_enable_inspect(nrt_inspect_config_t *options, bool enable_inspect);

/* Whether failing executions are captured. */
NRT_STATUS nrt_inspect_config_set_enable_inspect_on_fail(nrt_inspect_config_t *options, bool enable_inspect_on_fail);

/* Starts capture with `options` (NULL: the defaults); the environment is
 * not consulted. */
NRT_STATUS nrt_inspect_begin_with_options(nrt_inspect_config_t *options);

/* Returns a malloc'ed array of malloc'ed names of every activity type;
 * release with nrt_inspect_config_free_activity_types. */
NRT_STATUS nrt_inspect_config_get_all_activity_types(const char ***activity_types, size_t *count);

/* As above, for the activity types `options` enables. */
NRT_STATUS nrt_inspect_config_get_enabled_activity_types(nrt_inspect_config_t *options, const char ***activity_types, size_t *count);

/* Releases an array returned by the two functions above. */
void nrt_inspect_config_free_activity_types(const char **activity_types, size_t count);

/* Enables or disables one activity type: "system_profile",
 * "device_profile", "host_memory", "cpu_util", or "all". */
NRT_STATUS nrt_inspect_config_set_activity(nrt_inspect_config_t *options, const char *activity_type, bool enabled);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_PROFILE_H_INCLUDED */
