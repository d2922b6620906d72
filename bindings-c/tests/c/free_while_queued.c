/* Freeing tensors and tensor sets while executions that use them are queued: the queued
 * executions keep the storage alive until they complete, so nothing is corrupted and the
 * memory is not handed out again early.
 *
 * Each round schedules QUEUED explicit-async executions of the simulator MLP on one pair of
 * sets, then at once frees every tensor and destroys both sets, and allocates "canary" device
 * tensors of the same sizes filled with a pattern. If freed storage were reused while the
 * executions still ran, a canary would share memory with an output and be overwritten. After
 * every execution has completed: each status is NRT_SUCCESS and every canary still holds its
 * pattern. Run natively, under valgrind and with ASan by run_c_tests.sh. */
#include <stdint.h>
#include <unistd.h>

#include <nrt/nrt_async.h>

#include "common.h"

#define QUEUED 16
#define ROUNDS 4
#define MAX_IO 64

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    char path[4096];
    size_t neff_size = 0;
    snprintf(path, sizeof path, "%s/mlp.neff", argv[1]);
    void *neff = read_file(path, &neff_size);

    CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
    nrt_model_t *model = NULL;
    CHECK(nrt_load(neff, neff_size, -1, -1, &model));
    nrt_tensor_info_array_t *info = NULL;
    CHECK(nrt_get_model_tensor_info(model, &info));
    /* On trn1 a logical core is one physical core; a model is loaded once, on one core. */
    uint32_t nc = 0, vnc = 0, instances = 0;
    CHECK(nrt_get_model_nc_count(model, &nc));
    CHECK(nrt_get_model_vnc_count(model, &vnc));
    CHECK(nrt_get_model_instance_count(model, &instances));
    if (nc != 1 || vnc != 1 || instances != 1) {
        fprintf(stderr, "model counts %u %u %u, want 1 1 1\n", nc, vnc, instances);
        return 1;
    }
    size_t n = info->tensor_count;
    if (n > MAX_IO) return 1;

    /* The inputs, read once. */
    void *input_data[MAX_IO] = {0};
    for (size_t i = 0; i < n; i++) {
        nrt_tensor_info_t *t = &info->tensor_array[i];
        if (t->usage != NRT_TENSOR_USAGE_INPUT) continue;
        size_t size = 0;
        snprintf(path, sizeof path, "%s/%s.bin", argv[1], t->name);
        input_data[i] = read_file(path, &size);
        if (size != t->size) return 1;
    }

    int still_queued_rounds = 0;
    for (int round = 0; round < ROUNDS; round++) {
        nrt_tensor_set_t *inputs = NULL, *outputs = NULL;
        CHECK(nrt_allocate_tensor_set(&inputs));
        CHECK(nrt_allocate_tensor_set(&outputs));
        nrt_tensor_t *tensors[MAX_IO] = {0};
        for (size_t i = 0; i < n; i++) {
            nrt_tensor_info_t *t = &info->tensor_array[i];
            CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, t->size, t->name,
                                      &tensors[i]));
            if (t->usage == NRT_TENSOR_USAGE_INPUT) {
                CHECK(nrt_tensor_write(tensors[i], input_data[i], 0, t->size));
                CHECK(nrt_add_tensor_to_tensor_set(inputs, t->name, tensors[i]));
            } else {
                CHECK(nrt_add_tensor_to_tensor_set(outputs, t->name, tensors[i]));
            }
        }
        NRT_STATUS ret[QUEUED];
        nrta_seq_t seq[QUEUED];
        for (int k = 0; k < QUEUED; k++) {
            __atomic_store_n(&ret[k], (NRT_STATUS)0x7fff, __ATOMIC_RELAXED);
            CHECK(nrta_execute_schedule(model, inputs, outputs, 0, &ret[k], &seq[k]));
        }
        /* Free everything at once. */
        for (size_t i = 0; i < n; i++) {
            nrt_tensor_free(&tensors[i]);
            if (tensors[i] != NULL) return 1;
        }
        nrt_destroy_tensor_set(&inputs);
        nrt_destroy_tensor_set(&outputs);
        if (inputs != NULL || outputs != NULL) return 1;

        bool done = false;
        CHECK(nrta_is_completed(seq[QUEUED - 1], &done));
        if (!done) still_queued_rounds++;

        /* Canaries of the same sizes, with a pattern. */
        nrt_tensor_t *canary[MAX_IO] = {0};
        for (size_t i = 0; i < n; i++) {
            size_t size = info->tensor_array[i].size;
            unsigned char *pattern = malloc(size);
            if (!pattern) return 1;
            memset(pattern, 0xa5 ^ (int)i, size);
            CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, size, "canary",
                                      &canary[i]));
            CHECK(nrt_tensor_write(canary[i], pattern, 0, size));
            free(pattern);
        }

        /* Wait for every execution; each status is written before it reads as completed. */
        for (int k = 0; k < QUEUED; k++) {
            for (int tries = 0;; tries++) {
                CHECK(nrta_is_completed(seq[k], &done));
                if (done) break;
                if (tries > 60000) {
                    fprintf(stderr, "round %d: execution %d did not complete\n", round, k);
                    return 1;
                }
                usleep(1000);
            }
            NRT_STATUS s = __atomic_load_n(&ret[k], __ATOMIC_ACQUIRE);
            if (s != NRT_SUCCESS) {
                fprintf(stderr, "round %d: execution %d: status %d\n", round, k, (int)s);
                return 1;
            }
        }

        for (size_t i = 0; i < n; i++) {
            size_t size = info->tensor_array[i].size;
            unsigned char *got = malloc(size);
            if (!got) return 1;
            CHECK(nrt_tensor_read(canary[i], got, 0, size));
            for (size_t b = 0; b < size; b++) {
                if (got[b] != (unsigned char)(0xa5 ^ (int)i)) {
                    fprintf(stderr, "round %d: canary %zu byte %zu was overwritten (%#x)\n",
                            round, i, b, got[b]);
                    return 1;
                }
            }
            free(got);
            nrt_tensor_free(&canary[i]);
        }
    }

    CHECK(nrt_unload(model));
    CHECK(nrt_free_model_tensor_info(info));
    nrt_close();
    for (size_t i = 0; i < n; i++) free(input_data[i]);
    free(neff);
    printf("free_while_queued: OK (%d of %d rounds freed while executions were still queued)\n",
           still_queued_rounds, ROUNDS);
    return 0;
}
