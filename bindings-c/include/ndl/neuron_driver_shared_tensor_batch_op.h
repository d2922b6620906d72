/*
 * neuron_driver_shared_tensor_batch_op.h - one operation of a batched tensor
 * read or write (see nrt_tensor_read_batch / nrt_tensor_write_batch in
 * nrt/nrt.h).
 *
 * Part of the nrt-capi library, a reimplementation of the libnrt 2.31 public
 * C interface.
 */

#ifndef NEURON_DRIVER_SHARED_TENSOR_BATCH_OP_H
#define NEURON_DRIVER_SHARED_TENSOR_BATCH_OP_H

#include <stdint.h>

typedef uint64_t nrt_tensor_batch_offset_t;
typedef uint64_t nrt_tensor_batch_size_t;

/* One contiguous transfer: `size` bytes between `buffer` (host memory) and
 * the tensor at byte `offset`. sizeof == 24 on LP64. */
typedef struct nrt_tensor_batch_op {
    nrt_tensor_batch_offset_t offset;
    nrt_tensor_batch_size_t size;
    void *buffer;
} nrt_tensor_batch_op_t;

#endif /* NEURON_DRIVER_SHARED_TENSOR_BATCH_OP_H */
