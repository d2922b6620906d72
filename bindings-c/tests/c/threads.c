/* Four threads execute the same model while another thread unloads a second model and loads a
 * third, repeatedly, and a third kind of thread keeps replacing the tensors of an input set the
 * executors share (with equal copies); every status is checked and every output compared. */
#include <pthread.h>

#include "common.h"

static void *neff_bytes;
static size_t neff_size;
static unsigned char *expected;
static size_t expected_size;
static nrt_model_t *shared_model;
/* Input set shared by every executor (odd iterations) while `updater` rewrites it. */
static nrt_tensor_set_t *shared_in;
/* Two copies of each input, with equal contents, that `updater` swaps into `shared_in`. */
static nrt_tensor_t *copies[2][16];
static size_t input_count;
static const char *input_names[16];

#define ITERS 200

static void *executor(void *arg) {
    (void)arg;
    nrt_tensor_info_array_t *info = NULL;
    CHECK(nrt_get_model_tensor_info(shared_model, &info));
    nrt_tensor_set_t *in = NULL, *out = NULL;
    CHECK(nrt_allocate_tensor_set(&in));
    CHECK(nrt_allocate_tensor_set(&out));
    nrt_tensor_t *tensors[16];
    nrt_tensor_t *y = NULL;
    for (size_t i = 0; i < info->tensor_count; i++) {
        nrt_tensor_info_t *t = &info->tensor_array[i];
        CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, t->size, t->name, &tensors[i]));
        if (t->usage == NRT_TENSOR_USAGE_INPUT) {
            char path[512];
            size_t size = 0;
            snprintf(path, sizeof path, "%s/%s.bin", getenv("MLP_DIR"), t->name);
            void *data = read_file(path, &size);
            CHECK(nrt_tensor_write(tensors[i], data, 0, size));
            free(data);
            CHECK(nrt_add_tensor_to_tensor_set(in, t->name, tensors[i]));
        } else {
            CHECK(nrt_add_tensor_to_tensor_set(out, t->name, tensors[i]));
            y = tensors[i];
        }
    }
    unsigned char *got = malloc(expected_size);
    for (int k = 0; k < ITERS; k++) {
        CHECK(nrt_execute(shared_model, (k & 1) ? shared_in : in, out));
        CHECK(nrt_tensor_read(y, got, 0, expected_size));
        if (memcmp(got, expected, expected_size) != 0) {
            fprintf(stderr, "wrong output in iteration %d\n", k);
            exit(1);
        }
    }
    free(got);
    for (size_t i = 0; i < info->tensor_count; i++) nrt_tensor_free(&tensors[i]);
    nrt_destroy_tensor_set(&in);
    nrt_destroy_tensor_set(&out);
    CHECK(nrt_free_model_tensor_info(info));
    return NULL;
}

static void *updater(void *arg) {
    (void)arg;
    for (int k = 0; k < 300; k++) {
        for (size_t i = 0; i < input_count; i++)
            CHECK(nrt_add_tensor_to_tensor_set(shared_in, input_names[i], copies[k & 1][i]));
        /* Sets come and go meanwhile. */
        nrt_tensor_set_t *scratch = NULL;
        CHECK(nrt_allocate_tensor_set(&scratch));
        CHECK(nrt_add_tensor_to_tensor_set(scratch, "x", copies[0][0]));
        nrt_destroy_tensor_set(&scratch);
    }
    return NULL;
}

static void *reloader(void *arg) {
    nrt_model_t *second = (nrt_model_t *)arg;
    for (int k = 0; k < 50; k++) {
        nrt_model_t *third = NULL;
        CHECK(nrt_unload(second));
        CHECK(nrt_load(neff_bytes, neff_size, -1, -1, &third));
        second = third;
    }
    CHECK(nrt_unload(second));
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    char path[512];
    setenv("MLP_DIR", argv[1], 1);
    snprintf(path, sizeof path, "%s/mlp.neff", argv[1]);
    neff_bytes = read_file(path, &neff_size);
    snprintf(path, sizeof path, "%s/y_t.expected", argv[1]);
    expected = read_file(path, &expected_size);
    CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
    nrt_model_t *second = NULL;
    CHECK(nrt_load(neff_bytes, neff_size, 0, -1, &shared_model));
    CHECK(nrt_load(neff_bytes, neff_size, 1, -1, &second));
    nrt_tensor_info_array_t *info = NULL;
    CHECK(nrt_get_model_tensor_info(shared_model, &info));
    CHECK(nrt_allocate_tensor_set(&shared_in));
    for (size_t i = 0; i < info->tensor_count; i++) {
        nrt_tensor_info_t *ti = &info->tensor_array[i];
        if (ti->usage != NRT_TENSOR_USAGE_INPUT) continue;
        size_t size = 0;
        snprintf(path, sizeof path, "%s/%s.bin", argv[1], ti->name);
        void *data = read_file(path, &size);
        for (int c = 0; c < 2; c++) {
            CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, ti->size, ti->name,
                                      &copies[c][input_count]));
            CHECK(nrt_tensor_write(copies[c][input_count], data, 0, size));
        }
        free(data);
        input_names[input_count] = ti->name;
        CHECK(nrt_add_tensor_to_tensor_set(shared_in, ti->name, copies[0][input_count]));
        input_count++;
    }
    pthread_t t[6];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, executor, NULL);
    pthread_create(&t[4], NULL, reloader, second);
    pthread_create(&t[5], NULL, updater, NULL);
    for (int i = 0; i < 6; i++) pthread_join(t[i], NULL);
    nrt_destroy_tensor_set(&shared_in);
    for (size_t i = 0; i < input_count; i++)
        for (int c = 0; c < 2; c++) nrt_tensor_free(&copies[c][i]);
    CHECK(nrt_free_model_tensor_info(info));
    CHECK(nrt_unload(shared_model));
    nrt_close();
    free(neff_bytes);
    free(expected);
    printf("threads: OK (4 x %d executions while reloading 50 times and rewriting a shared "
           "input set 300 times)\n", ITERS);
    return 0;
}
