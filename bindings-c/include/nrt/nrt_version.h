/*
 * nrt_version.h - Neuron Runtime library version query.
 *
 * Part of the nrt-capi library, a reimplementation of the libnrt 2.31 public
 * C interface.
 *
 * libnrt's copy of this header has no #include lines and relies on an
 * earlier include (usually nrt/nrt.h) for <stdint.h>, <stddef.h> and
 * NRT_STATUS. This copy includes what it uses, so it also works on its own
 * and in any include order; that is a strict superset of the original.
 */

#ifndef NRT_NRT_VERSION_H_INCLUDED
#define NRT_NRT_VERSION_H_INCLUDED

#include <stddef.h>
#include <stdint.h>
#include "nrt/nrt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RT_VERSION_DETAIL_LEN 128
#define GIT_HASH_LEN 64

/* sizeof 224 */
typedef struct nrt_version {
    uint64_t rt_major;
    uint64_t rt_minor;
    uint64_t rt_patch;
    uint64_t rt_maintenance;
    char rt_detail[RT_VERSION_DETAIL_LEN];  /* NUL-terminated */
    char git_hash[GIT_HASH_LEN];            /* NUL-terminated */
} nrt_version_t;

/** Fills *ver with the library version; size must be sizeof(nrt_version_t)
 * (kept for backward compatibility). May be called before nrt_init(). */
NRT_STATUS nrt_get_version(nrt_version_t *ver, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NRT_VERSION_H_INCLUDED */
