/* Helpers of the profiling and tracing programs: the simulator MLP loaded with one device tensor
 * per I/O (inputs written from DIR/<name>.bin), a scratch directory, and a few readers of the
 * JSON the library writes (flat key lookups inside one object; enough for its fixed layout). */
#ifndef NRT_TEST_PROF_COMMON_H
#define NRT_TEST_PROF_COMMON_H

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define MLP_MAX_TENSORS 16

typedef struct {
    void *neff;
    size_t neff_size;
    nrt_model_t *model;
    nrt_tensor_info_array_t *info;
    nrt_tensor_set_t *inputs, *outputs;
    nrt_tensor_t *tensors[MLP_MAX_TENSORS];
    size_t n;
    size_t output; /* index of the output tensor */
} mlp_t;

#define FAIL(...)                                                                          \
    do {                                                                                   \
        fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                    \
        fprintf(stderr, __VA_ARGS__);                                                      \
        fputc('\n', stderr);                                                               \
        exit(1);                                                                           \
    } while (0)

/* Maps DIR/mlp.neff. */
static inline void mlp_map(mlp_t *m, const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/mlp.neff", dir);
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) FAIL("cannot open %s", path);
    m->neff_size = (size_t)st.st_size;
    m->neff = mmap(NULL, m->neff_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m->neff == MAP_FAILED) FAIL("cannot map %s", path);
}

/* Loads the MLP (nrt_init done), allocates its tensors and writes its inputs. */
static inline void mlp_open(mlp_t *m, const char *dir) {
    char path[4096];
    CHECK(nrt_load(m->neff, m->neff_size, 0, -1, &m->model));
    CHECK(nrt_get_model_tensor_info(m->model, &m->info));
    CHECK(nrt_allocate_tensor_set(&m->inputs));
    CHECK(nrt_allocate_tensor_set(&m->outputs));
    m->n = m->info->tensor_count;
    if (m->n > MLP_MAX_TENSORS) FAIL("%zu tensors", m->n);
    for (size_t i = 0; i < m->n; i++) {
        nrt_tensor_info_t *t = &m->info->tensor_array[i];
        CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, t->size, t->name, &m->tensors[i]));
        if (t->usage == NRT_TENSOR_USAGE_INPUT) {
            size_t size = 0;
            snprintf(path, sizeof path, "%s/%s.bin", dir, t->name);
            void *data = read_file(path, &size);
            if (size != t->size) FAIL("%s: %zu bytes, the model wants %zu", path, size, t->size);
            CHECK(nrt_tensor_write(m->tensors[i], data, 0, size));
            free(data);
            CHECK(nrt_add_tensor_to_tensor_set(m->inputs, t->name, m->tensors[i]));
        } else {
            m->output = i;
            CHECK(nrt_add_tensor_to_tensor_set(m->outputs, t->name, m->tensors[i]));
        }
    }
}

/* Checks the output tensor against DIR/<name>.expected. */
static inline void mlp_check_output(mlp_t *m, const char *dir) {
    char path[4096];
    nrt_tensor_info_t *t = &m->info->tensor_array[m->output];
    unsigned char *got = malloc(t->size);
    CHECK(nrt_tensor_read(m->tensors[m->output], got, 0, t->size));
    size_t size = 0;
    snprintf(path, sizeof path, "%s/%s.expected", dir, t->name);
    unsigned char *want = read_file(path, &size);
    if (size != t->size || memcmp(got, want, size) != 0) FAIL("output %s differs from %s", t->name, path);
    free(got);
    free(want);
}

static inline void mlp_close(mlp_t *m) {
    CHECK(nrt_unload(m->model));
    for (size_t i = 0; i < m->n; i++) nrt_tensor_free(&m->tensors[i]);
    nrt_destroy_tensor_set(&m->inputs);
    nrt_destroy_tensor_set(&m->outputs);
    CHECK(nrt_free_model_tensor_info(m->info));
}

static inline void mlp_unmap(mlp_t *m) { munmap(m->neff, m->neff_size); }

/* Total bytes of the MLP's inputs / of its output. */
static inline size_t mlp_bytes(const mlp_t *m, nrt_tensor_usage_t usage) {
    size_t total = 0;
    for (size_t i = 0; i < m->n; i++)
        if (m->info->tensor_array[i].usage == usage) total += m->info->tensor_array[i].size;
    return total;
}

/* A fresh directory under /tmp (its path in `out`). */
static inline void scratch_dir(char *out, size_t size, const char *tag) {
    snprintf(out, size, "/tmp/nrt-%s-XXXXXX", tag);
    if (!mkdtemp(out)) FAIL("mkdtemp failed");
}

/* Removes a directory tree (the scratch directories). */
static inline void remove_tree(const char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) FAIL("cannot remove %s", dir);
}

static inline bool file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Reads a whole file as a NUL-terminated string. */
static inline char *read_text(const char *path) {
    size_t size = 0;
    char *data = read_file(path, &size);
    char *s = realloc(data, size + 1);
    if (!s) FAIL("out of memory");
    s[size] = 0;
    return s;
}

/* Occurrences of `needle` in `s`. */
static inline int count_of(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

/* The unsigned number after `"key":` in [obj, end); returns false when absent. */
static inline bool json_u64(const char *obj, const char *end, const char *key, uint64_t *v) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(obj, pat);
    if (!p || p >= end) return false;
    *v = strtoull(p + strlen(pat), NULL, 10);
    return true;
}

/* The string after `"key":"` in [obj, end), copied into out; returns false when absent. */
static inline bool json_string(const char *obj, const char *end, const char *key, char *out, size_t size) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(obj, pat);
    if (!p || p >= end) return false;
    p += strlen(pat);
    const char *q = strchr(p, '"');
    if (!q || (size_t)(q - p) >= size) return false;
    memcpy(out, p, (size_t)(q - p));
    out[q - p] = 0;
    return true;
}

#endif
