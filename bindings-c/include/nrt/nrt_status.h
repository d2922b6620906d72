/*
 * nrt_status.h - status codes returned by the Neuron Runtime C API.
 *
 * Part of the nrt-capi library, a reimplementation of the libnrt 2.31 public
 * C interface. Numeric values are ABI: they are fixed and new codes are only
 * ever appended. Callers should treat values they do not know as opaque.
 */

#ifndef NRT_NRT_STATUS_H_INCLUDED
#define NRT_NRT_STATUS_H_INCLUDED

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    NRT_SUCCESS = 0,
    NRT_FAILURE = 1,                        /* generic failure */
    NRT_INVALID = 2,                        /* bad argument, invalid NEFF, tensor name/size mismatch, ... */
    NRT_INVALID_HANDLE = 3,                 /* bad model or tensor handle */
    NRT_RESOURCE = 4,                       /* a resource could not be allocated */
    NRT_TIMEOUT = 5,                        /* the operation timed out */
    NRT_HW_ERROR = 6,                       /* hardware failure */
    NRT_QUEUE_FULL = 7,                     /* execution queue cannot take more requests */
    /* 8 is unused */
    NRT_LOAD_NOT_ENOUGH_NC = 9,             /* not enough NeuronCores to load the NEFF */
    NRT_UNSUPPORTED_NEFF_VERSION = 10,      /* NEFF version not supported */
    NRT_FAIL_HOST_MEM_ALLOC = 11,           /* obsolete, kept for backward compatibility */
    /* 12 is unused */
    NRT_UNINITIALIZED = 13,                 /* called before nrt_init() */
    NRT_CLOSED = 14,                        /* called after nrt_close() */
    NRT_QUEUE_EMPTY = 15,                   /* a queue with no data was accessed */

    NRT_EXEC_UNIT_UNRECOVERABLE = 101,      /* execution unit is in a fatal state; reinitialize */

    NRT_EXEC_BAD_INPUT = 1002,              /* invalid input submitted for execution */
    NRT_EXEC_COMPLETED_WITH_NUM_ERR = 1003, /* execution completed with numerical errors (NaN) */
    NRT_EXEC_COMPLETED_WITH_ERR = 1004,     /* execution completed with other errors */
    NRT_EXEC_NC_BUSY = 1005,                /* NeuronCore locked by another model or process */
    NRT_EXEC_OOB = 1006,                    /* indirect copy / embedding update out of bounds */

    NRT_COLL_PENDING = 1100,                /* collective operation still pending */

    NRT_EXEC_HW_ERR_COLLECTIVES = 1200,
    NRT_EXEC_HW_ERR_HBM_UE = 1201,
    NRT_EXEC_HW_ERR_NC_UE = 1202,
    NRT_EXEC_HW_ERR_DMA_ABORT = 1203,
    NRT_EXEC_SW_NQ_OVERFLOW = 1204,
    NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE = 1205,
    NRT_NETWORK_PROXY_FAILURE = 1206
} NRT_STATUS;

/** Returns a static, NUL-terminated name for a status code (never NULL). */
const char *nrt_get_status_as_str(NRT_STATUS status);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_STATUS_H_INCLUDED */
