/*
 * nrt_sys_trace.h - Neuron Runtime system trace: per-NeuronCore ring
 * buffers of runtime events (model load and unload, executions submitted,
 * started and completed, tensor reads, writes and copies, errors), and the
 * call that hands the captured events to the application as JSON.
 *
 * Part of the nrt-capi library, a reimplementation of the libnrt 2.31 public
 * C interface. The event types and the JSON layout are listed in
 * docs/PROFILING.md.
 */

#ifndef NRT_NRT_SYS_TRACE_H_INCLUDED
#define NRT_NRT_SYS_TRACE_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "nrt/nrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- capture ------------------------------------------------------------ */

/* Opaque capture options. */
typedef struct nrt_sys_trace_config nrt_sys_trace_config_t;

/* Creates an options object with the defaults: every NeuronCore and event
 * type captured, 1,000,000 events per NeuronCore. */
NRT_STATUS nrt_sys_trace_config_allocate(nrt_sys_trace_config_t **options);

/* Resets every option to its default. */
void nrt_sys_trace_config_set_defaults(nrt_sys_trace_config_t *options);

/* Releases an options object. */
void nrt_sys_trace_config_free(nrt_sys_trace_config_t *options);

/* Sets each NeuronCore's ring capacity in events; when a ring is full the
 * oldest event is overwritten (and counted as dropped). */
void nrt_sys_trace_config_set_max_events_per_nc(nrt_sys_trace_config_t *options, uint64_t max_events_per_nc);

/* Turns capture of one NeuronCore on or off (no ring exists for a core that
 * is off). */
void nrt_sys_trace_config_set_capture_enabled_for_nc(nrt_sys_trace_config_t *options, uint32_t nc_idx, bool enabled);

/* Turns capture of one event type on or off; the type is a name from
 * nrt_sys_trace_get_event_types. */
NRT_STATUS nrt_sys_trace_config_set_capture_enabled_for_event_type(nrt_sys_trace_config_t *options, const char *event_type, bool enabled);

/* Returns a malloc'ed array of malloc'ed event type names; release with
 * nrt_sys_trace_free_event_types (or free() each name, then the array). */
NRT_STATUS nrt_sys_trace_get_event_types(const char ***event_types, size_t *count);

/* Releases an array returned by nrt_sys_trace_get_event_types or
 * nrt_sys_trace_config_get_enabled_event_types. */
void nrt_sys_trace_free_event_types(const char **event_types, size_t count);

/* As nrt_sys_trace_get_event_types, for the types `options` captures. */
NRT_STATUS nrt_sys_trace_config_get_enabled_event_types(nrt_sys_trace_config_t *options, const char ***event_types, size_t *count);

/* Starts capture with `options` (NULL: the defaults). */
NRT_STATUS nrt_sys_trace_start(nrt_sys_trace_config_t *options);

/* Ends capture and discards the events not fetched. */
NRT_STATUS nrt_sys_trace_stop();

/* ---- fetch -------------------------------------------------------------- */

/* Opaque fetch options. */
typedef struct nrt_sys_trace_fetch_options nrt_sys_trace_fetch_options_t;

/* Creates fetch options with the defaults: every NeuronCore, every event. */
NRT_STATUS nrt_sys_trace_fetch_options_allocate(nrt_sys_trace_fetch_options_t **options);

/* Resets fetch options to the defaults. */
void nrt_sys_trace_fetch_options_set_defaults(nrt_sys_trace_fetch_options_t *options);

/* Releases fetch options. */
void nrt_sys_trace_fetch_options_free(nrt_sys_trace_fetch_options_t *options);

/* Fetches at most this many events (the oldest) of each NeuronCore. */
void nrt_sys_trace_fetch_options_set_max_events_per_nc(nrt_sys_trace_fetch_options_t *options, uint64_t max_events_per_nc);

/* Fetches the events of this NeuronCore only. */
void nrt_sys_trace_fetch_options_set_nc_idx(nrt_sys_trace_fetch_options_t *options, uint64_t nc_idx);

/* Removes the selected events from the rings and returns them as a
 * NUL-terminated JSON text in a new buffer (*buffer; *written_size is its
 * length without the NUL). Release it with nrt_sys_trace_buffer_free. An
 * event is returned once. `options` may be NULL (the defaults). */
NRT_STATUS nrt_sys_trace_fetch_events(char **buffer, size_t *written_size, const nrt_sys_trace_fetch_options_t *options);

/* Releases a buffer returned by nrt_sys_trace_fetch_events. */
void nrt_sys_trace_buffer_free(char *buffer);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_SYS_TRACE_H_INCLUDED */
