/*
 * nrt_async_sendrecv.h - asynchronous point-to-point tensor transfer between
 * logical NeuronCores of different hosts.
 *
 * Part of the nrt-capi library, a reimplementation of the libnrt 2.31 public
 * C interface. See docs/C_API.md for what each call does on each backend.
 *
 * Lifecycle: nrt_async_sendrecv_init(lnc) after nrt_init(), then
 * communicators (connect on the sending side, accept on the receiving side),
 * polled with nrt_async_sendrecv_test_comm() until connected; transfers are
 * started with send_tensor / recv_tensor and polled with test_request; every
 * init is matched by nrt_async_sendrecv_close(lnc) before nrt_close().
 */

#ifndef NRT_NRT_ASYNC_SENDRECV_H_INCLUDED
#define NRT_NRT_ASYNC_SENDRECV_H_INCLUDED

#include <stdbool.h>
#include <stddef.h>
#include "nrt/nrt.h"
#include "nrt/nrt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A send or receive communicator (opaque). */
typedef struct nrt_async_sendrecv_comm nrt_async_sendrecv_comm_t;
/** An outstanding send or receive (opaque). */
typedef struct nrt_async_sendrecv_request nrt_async_sendrecv_request_t;

/** *num: how many communicators one logical core may hold. */
NRT_STATUS nrt_async_sendrecv_get_max_num_communicators_per_lnc(int *num);

/** *num: how many requests one communicator may have outstanding. */
NRT_STATUS nrt_async_sendrecv_get_max_num_pending_request(int *num);

/** Prepares logical core lnc (host-absolute id) for send/receive. */
NRT_STATUS nrt_async_sendrecv_init(int lnc);

/** Releases what nrt_async_sendrecv_init(lnc) set up, with every communicator
 * and request of that core. */
NRT_STATUS nrt_async_sendrecv_close(int lnc);

/** Creates a send communicator from lnc to peer_lnc on host peer_ip.
 * NRT_RESOURCE when the core has no communicator left. Thread-safe. */
NRT_STATUS nrt_async_sendrecv_connect(const char *peer_ip, int peer_lnc, int lnc,
                                      nrt_async_sendrecv_comm_t **send_comm);

/** Creates a receive communicator on lnc for data from peer_lnc on host
 * peer_ip. NRT_RESOURCE when the core has no communicator left. Thread-safe. */
NRT_STATUS nrt_async_sendrecv_accept(const char *peer_ip, int peer_lnc, int lnc,
                                     nrt_async_sendrecv_comm_t **recv_comm);

/** *done: whether comm is connected to its peer (NRT_TIMEOUT when the
 * connection could not be made in time). */
NRT_STATUS nrt_async_sendrecv_test_comm(nrt_async_sendrecv_comm_t *comm, bool *done);

/** Starts sending length bytes of tensor from offset (non-blocking). */
NRT_STATUS nrt_async_sendrecv_send_tensor(nrt_tensor_t *tensor, size_t offset, size_t length,
                                          nrt_async_sendrecv_comm_t *send_comm,
                                          nrt_async_sendrecv_request_t **request);

/** Starts receiving length bytes into tensor at offset (non-blocking). */
NRT_STATUS nrt_async_sendrecv_recv_tensor(nrt_tensor_t *tensor, size_t offset, size_t length,
                                          nrt_async_sendrecv_comm_t *recv_comm,
                                          nrt_async_sendrecv_request_t **request);

/** *done: whether request finished; *size: bytes it moved. A request that
 * reported done must not be tested again. */
NRT_STATUS nrt_async_sendrecv_test_request(nrt_async_sendrecv_request_t *request, bool *done,
                                           size_t *size);

/** Makes the data of every receive on lnc that tested done visible in memory. */
NRT_STATUS nrt_async_sendrecv_flush(int lnc);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_ASYNC_SENDRECV_H_INCLUDED */
