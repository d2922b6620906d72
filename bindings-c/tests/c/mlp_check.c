/* The developer guide's flow on the simulator MLP (mlp_neff example output directory):
 * mmap the NEFF, init, load, tensor info, one device tensor per I/O, write inputs, execute,
 * read outputs and compare them with the expected bytes, unload, free, destroy, close. */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
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
    if (neff == MAP_FAILED) return 1;

    CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
    nrt_model_t *model = NULL;
    CHECK(nrt_load(neff, (size_t)st.st_size, -1, -1, &model));
    nrt_tensor_info_array_t *info = NULL;
    CHECK(nrt_get_model_tensor_info(model, &info));

    nrt_tensor_set_t *inputs = NULL, *outputs = NULL;
    CHECK(nrt_allocate_tensor_set(&inputs));
    CHECK(nrt_allocate_tensor_set(&outputs));
    nrt_tensor_t *tensors[64];
    size_t n = info->tensor_count;
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
    int mismatches = 0;
    for (size_t i = 0; i < n; i++) {
        nrt_tensor_info_t *t = &info->tensor_array[i];
        if (t->usage != NRT_TENSOR_USAGE_OUTPUT) continue;
        nrt_tensor_t *out = NULL;
        CHECK(nrt_get_tensor_from_tensor_set(outputs, t->name, &out));
        if (out != tensors[i]) {
            fprintf(stderr, "the set returned another tensor for %s\n", t->name);
            return 1;
        }
        unsigned char *got = malloc(t->size);
        CHECK(nrt_tensor_read(out, got, 0, t->size));
        size_t size = 0;
        snprintf(path, sizeof path, "%s/%s.expected", argv[1], t->name);
        unsigned char *want = read_file(path, &size);
        if (size != t->size || memcmp(got, want, size) != 0) {
            fprintf(stderr, "output %s differs from %s\n", t->name, path);
            mismatches++;
        }
        printf("output %s: %zu bytes, matches the expected output: %s\n", t->name, t->size,
               mismatches ? "no" : "yes");
        free(got);
        free(want);
    }
    CHECK(nrt_unload(model));
    for (size_t i = 0; i < n; i++) {
        nrt_tensor_free(&tensors[i]);
        if (tensors[i] != NULL) return 1;
    }
    nrt_destroy_tensor_set(&inputs);
    nrt_destroy_tensor_set(&outputs);
    if (inputs != NULL || outputs != NULL) return 1;
    CHECK(nrt_free_model_tensor_info(info));
    nrt_close();
    munmap(neff, (size_t)st.st_size);
    close(fd);
    if (mismatches) return 1;
    printf("mlp_check: OK\n");
    return 0;
}
