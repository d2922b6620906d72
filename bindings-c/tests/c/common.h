/* Helpers shared by the C test programs. */
#ifndef NRT_TEST_COMMON_H
#define NRT_TEST_COMMON_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nrt/nrt.h>
#include <nrt/nrt_experimental.h>

#define CHECK(call)                                                                        \
    do {                                                                                   \
        NRT_STATUS check_status_ = (call);                                                 \
        if (check_status_ != NRT_SUCCESS) {                                                \
            fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call,     \
                    nrt_get_status_as_str(check_status_), (int)check_status_);             \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

#define EXPECT(call, expected)                                                             \
    do {                                                                                   \
        NRT_STATUS expect_status_ = (call);                                                \
        if (expect_status_ != (expected)) {                                                \
            fprintf(stderr, "%s:%d: %s returned %s (%d), expected %s (%d)\n", __FILE__,     \
                    __LINE__, #call, nrt_get_status_as_str(expect_status_),               \
                    (int)expect_status_, nrt_get_status_as_str(expected), (int)(expected)); \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

/* Reads a whole file; exits on failure. */
static inline void *read_file(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    *size = (size_t)n;
    return buf;
}

#endif
