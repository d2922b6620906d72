/* No fixed model limit: loads 10,000 copies of a tiny NEFF (no program; a 64-byte fp32 input
 * "in" and output "out"), queries and executes every one, unloads them all, and checks that
 * every unloaded handle is refused and that the runtime still loads afterwards.
 *
 *   many_models DIR        (DIR/empty.neff, written by run_c_tests.sh)
 *
 * The model count can be lowered with NRT_MANY_MODELS (for slow runs such as valgrind). */
#include "common.h"

#define DEFAULT_MODELS 10000

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: many_models DIR\n");
        return 2;
    }
    long count = DEFAULT_MODELS;
    const char *env = getenv("NRT_MANY_MODELS");
    if (env)
        count = atol(env);
    if (count <= 256) {
        fprintf(stderr, "NRT_MANY_MODELS must exceed the old limit of 256\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/empty.neff", argv[1]);
    size_t size = 0;
    void *neff = read_file(path, &size);

    CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
    nrt_model_t **models = calloc((size_t)count, sizeof *models);
    if (!models)
        return 1;
    for (long i = 0; i < count; i++)
        CHECK(nrt_load(neff, size, 0, -1, &models[i]));
    for (long i = 0; i < count; i++)
        for (long j = i + 1; j < count && j < i + 4; j++)
            if (models[i] == models[j]) {
                fprintf(stderr, "models %ld and %ld share a handle\n", i, j);
                return 1;
            }

    nrt_tensor_t *in = NULL, *out = NULL;
    nrt_tensor_set_t *ins = NULL, *outs = NULL;
    CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "in", &in));
    CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "out", &out));
    CHECK(nrt_allocate_tensor_set(&ins));
    CHECK(nrt_allocate_tensor_set(&outs));
    CHECK(nrt_add_tensor_to_tensor_set(ins, "in", in));
    CHECK(nrt_add_tensor_to_tensor_set(outs, "out", out));
    float ones[16];
    for (int k = 0; k < 16; k++)
        ones[k] = 1.0f;
    for (long i = 0; i < count; i++) {
        uint32_t nc = 0;
        CHECK(nrt_get_model_nc_count(models[i], &nc));
        if (nc != 1) {
            fprintf(stderr, "model %ld: nc count %u, expected 1 (trn1)\n", i, nc);
            return 1;
        }
        /* A model without a program zero-fills its output: poison it first. */
        CHECK(nrt_tensor_write(out, ones, 0, sizeof ones));
        CHECK(nrt_execute(models[i], ins, outs));
        float got[16];
        CHECK(nrt_tensor_read(out, got, 0, sizeof got));
        for (int k = 0; k < 16; k++)
            if (got[k] != 0.0f) {
                fprintf(stderr, "model %ld: out[%d] = %g, expected 0\n", i, k, got[k]);
                return 1;
            }
    }
    for (long i = 0; i < count; i++)
        CHECK(nrt_unload(models[i]));
    for (long i = 0; i < count; i += 997) {
        uint32_t nc = 0;
        EXPECT(nrt_get_model_nc_count(models[i], &nc), NRT_INVALID_HANDLE);
        EXPECT(nrt_execute(models[i], ins, outs), NRT_INVALID_HANDLE);
    }
    /* The freed slots are reused under fresh ids: a new model loads and the old handles stay
     * refused. */
    nrt_model_t *again = NULL;
    CHECK(nrt_load(neff, size, 0, -1, &again));
    EXPECT(nrt_get_model_nc_count(models[0], &(uint32_t){0}), NRT_INVALID_HANDLE);
    CHECK(nrt_execute(again, ins, outs));
    CHECK(nrt_unload(again));

    nrt_destroy_tensor_set(&ins);
    nrt_destroy_tensor_set(&outs);
    nrt_tensor_free(&in);
    nrt_tensor_free(&out);
    free(models);
    free(neff);
    nrt_close();
    printf("many_models: %ld models loaded, executed and unloaded\n", count);
    return 0;
}
