/*
 * nrt_async.h - Neuron Runtime explicit asynchronous API (nrta_*), version 3
 * (the form of Runtime Library 2.31: every scheduling call takes an
 * NRT_STATUS pointer instead of an error tracker). Experimental, subject to
 * change.
 *
 * Part of the nrt-capi library, a reimplementation of the libnrt 2.31 public
 * C interface.
 *
 * Requests are scheduled on queues of execution units (XUs) of a logical
 * NeuronCore. A scheduling call returns at once with the request's sequence
 * id in *req_sequence; the request's final status is stored in *ret only
 * when the request completes, so *ret must stay valid until completion has
 * been observed (nrta_is_completed / nrta_get_sequence).
 */

#ifndef NRT_NRT_ASYNC_H_INCLUDED
#define NRT_NRT_ASYNC_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "nrt/nrt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Execution units; new kinds are only appended. */
typedef enum {
    NRTA_XU_TENSOR_OP = 0,      /* tensor reads, writes and copies */
    NRTA_XU_COMPUTE = 1,        /* model execution (one queue: queue 0) */
    NRTA_XU_COLLECTIVES = 2,    /* collective operations */
    NRTA_XU_TYPE_NUM = 3
} nrta_xu_t;

/* Sequence id: bits 63..48 execution-unit id, bits 47..0 sequence number.
 * Sequence numbers are monotone and consecutive per XU queue. */
typedef uint64_t nrta_seq_t;
typedef uint16_t nrta_xu_id_t;

#define NRTA_SEQ_NUM_MAX ((1ull << 48) - 1)
#define NRTA_SEQ_NUM_MASK NRTA_SEQ_NUM_MAX
#define NRTA_SEQ_GET_SEQ_NUM(seq_id) (((uint64_t)(seq_id)) & NRTA_SEQ_NUM_MASK)
#define NRTA_SEQ_GET_XU_ID(seq_id) (((uint64_t)(seq_id)) >> 48)

/** Schedules a copy of size bytes from host buf into tensor at offset. */
NRT_STATUS nrta_tensor_write(nrt_tensor_t *tensor, const void *buf, uint64_t offset,
                             uint64_t size, int queue, NRT_STATUS *ret,
                             nrta_seq_t *req_sequence);

/** Schedules a copy of size bytes from tensor at offset into host buf. */
NRT_STATUS nrta_tensor_read(void *buf, nrt_tensor_t *tensor, uint64_t offset,
                            uint64_t size, int queue, NRT_STATUS *ret,
                            nrta_seq_t *req_sequence);

/** Schedules a copy between two tensors of the same logical NeuronCore; both
 * must stay allocated until the copy completes. */
NRT_STATUS nrta_tensor_copy(nrt_tensor_t *src, uint64_t src_offset, nrt_tensor_t *dst,
                            uint64_t dst_offset, uint64_t size, int queue,
                            NRT_STATUS *ret, nrta_seq_t *req_sequence);

/** Schedules one execution of model. queue must be 0. Returns NRT_QUEUE_FULL
 * when the queue is full (wait for a completion and retry), and
 * NRT_EXEC_UNIT_UNRECOVERABLE when the unit needs a runtime restart. */
NRT_STATUS nrta_execute_schedule(nrt_model_t *model, const nrt_tensor_set_t *input,
                                 nrt_tensor_set_t *output, int queue,
                                 NRT_STATUS *ret, nrta_seq_t *req_sequence);

/** Prepares a collective operation and returns its context in *cc_ctx
 * (work in progress). */
NRT_STATUS nrta_cc_prepare(nrt_cc_comm_t *comm, nrt_tensor_list_t *input,
                           nrt_tensor_list_t *output, nrt_dtype_t dtype,
                           nrt_op_type_t op, nrt_cc_op_type_t cc_op,
                           nrt_cc_context_t **cc_ctx);

/** Schedules a prepared collective operation. queue must be 0 (work in
 * progress). */
NRT_STATUS nrta_cc_schedule(nrt_cc_context_t **cc_ctx, int queue,
                            NRT_STATUS *ret, nrta_seq_t *req_sequence);

/** *is_completed tells whether request seq has completed. Returns
 * NRT_INVALID for a sequence id that is not valid. */
NRT_STATUS nrta_is_completed(nrta_seq_t seq, bool *is_completed);

/** Sequence id of the last completed request of queue `queue` of unit xu on
 * logical NeuronCore lnc. */
NRT_STATUS nrta_get_sequence(uint32_t lnc, nrta_xu_t xu, int queue, nrta_seq_t *seq);

/* ------------------------------------------------------------------------ */
/* Completion handles and error trackers                                    */
/*                                                                          */
/* These four calls come from the 2.x form of this interface (an error      */
/* tracker argument instead of NRT_STATUS *ret). Runtime Library 2.31       */
/* dropped them from the scheduling calls; this library still provides them */
/* as stand-alone calls that work with version 3 sequence ids.              */
/* ------------------------------------------------------------------------ */

/** One recorded failure: the request's sequence id and its NRT_STATUS
 * (stored as 64 bits so that every compiler lays the struct out alike). */
typedef struct nrta_error {
    nrta_seq_t seq_id;
    uint64_t error_code;
} nrta_error_t;

#ifdef __cplusplus
static_assert(sizeof(nrta_error_t) == 16, "nrta_error_t is 16 bytes");
#else
_Static_assert(sizeof(nrta_error_t) == 16, "nrta_error_t is 16 bytes");
#endif

/** An opaque list of failures of one logical NeuronCore. */
typedef struct nrta_error_tracker nrta_error_tracker_t;

/** Returns in *fd a new file descriptor that polls readable once request seq
 * has completed (immediately if it already has). Only poll()/select()/epoll
 * and close() may be used on it; the caller closes it when done. */
NRT_STATUS nrta_get_completion_handle(nrta_seq_t seq, int *fd);

/** Creates an error tracker for logical NeuronCore lnc_idx (process-relative):
 * from now on every failed execution on that core is appended to it. */
NRT_STATUS nrta_error_tracker_create(uint32_t lnc_idx, nrta_error_tracker_t **error_tracker);

/** Frees an error tracker (NULL is ignored). Lists it returned become invalid. */
void nrta_error_tracker_destroy(nrta_error_tracker_t *error_tracker);

/** Returns the failures recorded since the previous call (oldest first) in
 * *list / *error_count and empties the tracker. *list stays valid until the
 * next call on the same tracker or its destruction; it is NULL when
 * *error_count is 0. */
NRT_STATUS nrta_error_tracker_get_list(nrta_error_tracker_t *error_tracker,
                                       const nrta_error_t **list, size_t *error_count);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_ASYNC_H_INCLUDED */
