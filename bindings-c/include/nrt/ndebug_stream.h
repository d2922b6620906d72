/*
 * ndebug_stream.h - debug events of a logical NeuronCore (device prints,
 * debug tensor reads, ...) streamed to the process that owns the core.
 *
 * Part of the nrt-capi library, a reimplementation of the libnrt 2.31 public
 * C interface. See docs/C_API.md for what each call does on each backend.
 *
 * A client connects to one core's stream and gets a file descriptor that it
 * may only poll (poll/select/epoll); it becomes readable when an event is
 * waiting. Events are taken one at a time with
 * nrt_debug_client_read_one_event(). One client per core at a time; events
 * emitted while no client is connected are dropped, and so are events that
 * overflow the stream's buffer (NEURON_RT_DEBUG_STREAM_BUFFER_SIZE events,
 * 65536 by default). Streams are not shared between processes, and one
 * stream must not be used by several threads at once.
 */

#ifndef NRT_NDEBUG_STREAM_H_INCLUDED
#define NRT_NDEBUG_STREAM_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "nrt/nrt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ndebug_stream_event_type {
    NDEBUG_STREAM_EVENT_TYPE_INVALID = 0,
    NDEBUG_STREAM_EVENT_TYPE_DEBUG_TENSOR_READ = 1,
} ndebug_stream_event_type_t;

/* sizeof 64: what follows it, and how many bytes (data_size). */
typedef struct ndebug_stream_event_header {
    uint64_t data_size;  /* payload bytes */
    uint32_t type;       /* an ndebug_stream_event_type_t */
    char reserved[52];
} ndebug_stream_event_header_t;

/* Payload of NDEBUG_STREAM_EVENT_TYPE_DEBUG_TENSOR_READ: 1024 bytes of
 * description, then tensor_data_size bytes of tensor data. */
typedef struct ndebug_stream_payload_debug_tensor_read {
    char prefix[512];          /* NUL-terminated label */
    uint32_t logical_nc_id;
    uint32_t pipe;
    char tensor_dtype[16];     /* NUL-terminated type name */
    uint64_t tensor_shape[8];
    uint64_t tensor_data_size;
    char reserved0[416];
    char tensor_data[];
} ndebug_stream_payload_debug_tensor_read_t;

/** Connects to the debug stream of logical core logical_nc_idx; *stream_fd is
 * the pollable connection handle. NRT_INVALID when a client is connected. */
NRT_STATUS nrt_debug_client_connect(int logical_nc_idx, int *stream_fd);

/** Ends a connection made by nrt_debug_client_connect() (drops what it held). */
void nrt_debug_client_connect_close(int stream_fd);

/** Takes the oldest waiting event: its header in *header and a malloc'ed
 * copy of its payload in *payload, which the caller frees (NULL when the
 * payload is empty). NRT_QUEUE_EMPTY when no event is waiting. */
NRT_STATUS nrt_debug_client_read_one_event(int stream_fd, ndebug_stream_event_header_t *header,
                                           void **payload);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NDEBUG_STREAM_H_INCLUDED */
