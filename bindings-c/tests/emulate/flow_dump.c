/* flow_dump.c - the developer guide's flow (as mlp_check.c) on a NEFF whose inputs are files,
 * saving every output whole so that two backends can be compared byte for byte:
 *
 *   mmap DIR/mlp.neff -> nrt_init -> nrt_load -> nrt_get_model_tensor_info
 *   -> one device tensor per input/output -> write DIR/<input>.bin -> nrt_execute
 *   -> read each output into OUT/<output>.out -> unload, free, destroy, close
 *
 * Usage: flow_dump DIR OUT   (DIR: the output directory of the mlp_neff example)
 * Every call is checked; a failure prints the call and its status and exits 1. */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s DIR OUT\n", argv[0]);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/mlp.neff", argv[1]);
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    void *neff = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (neff == MAP_FAILED) {
        fprintf(stderr, "cannot mmap %s\n", path);
        return 1;
    }

    CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
    nrt_model_t *model = NULL;
    CHECK(nrt_load(neff, (size_t)st.st_size, -1, -1, &model));
    nrt_tensor_info_array_t *info = NULL;
    CHECK(nrt_get_model_tensor_info(model, &info));
    size_t n = info->tensor_count;
    if (n > 64) {
        fprintf(stderr, "%zu tensors: at most 64 supported\n", n);
        return 1;
    }
    nrt_tensor_set_t *inputs = NULL, *outputs = NULL;
    CHECK(nrt_allocate_tensor_set(&inputs));
    CHECK(nrt_allocate_tensor_set(&outputs));
    nrt_tensor_t *tensors[64];
    for (size_t i = 0; i < n; i++) {
        nrt_tensor_info_t *t = &info->tensor_array[i];
        CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, t->size, t->name, &tensors[i]));
        if (t->usage == NRT_TENSOR_USAGE_INPUT) {
            size_t size = 0;
            snprintf(path, sizeof path, "%s/%s.bin", argv[1], t->name);
            void *data = read_file(path, &size);
            if (size != t->size) {
                fprintf(stderr, "%s: %zu bytes, the model wants %zu\n", path, size, t->size);
                return 1;
            }
            CHECK(nrt_tensor_write(tensors[i], data, 0, size));
            free(data);
            CHECK(nrt_add_tensor_to_tensor_set(inputs, t->name, tensors[i]));
        } else {
            CHECK(nrt_add_tensor_to_tensor_set(outputs, t->name, tensors[i]));
        }
    }
    CHECK(nrt_execute(model, inputs, outputs));
    for (size_t i = 0; i < n; i++) {
        nrt_tensor_info_t *t = &info->tensor_array[i];
        if (t->usage != NRT_TENSOR_USAGE_OUTPUT) continue;
        unsigned char *got = malloc(t->size > 0 ? t->size : 1);
        if (got == NULL) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        CHECK(nrt_tensor_read(tensors[i], got, 0, t->size));
        snprintf(path, sizeof path, "%s/%s.out", argv[2], t->name);
        FILE *f = fopen(path, "wb");
        if (f == NULL || fwrite(got, 1, t->size, f) != t->size || fclose(f) != 0) {
            fprintf(stderr, "cannot write %s\n", path);
            return 1;
        }
        printf("output %s: %zu bytes -> %s\n", t->name, t->size, path);
        free(got);
    }
    CHECK(nrt_unload(model));
    for (size_t i = 0; i < n; i++) nrt_tensor_free(&tensors[i]);
    nrt_destroy_tensor_set(&inputs);
    nrt_destroy_tensor_set(&outputs);
    CHECK(nrt_free_model_tensor_info(info));
    nrt_close();
    munmap(neff, (size_t)st.st_size);
    close(fd);
    printf("flow_dump: OK\n");
    return 0;
}
