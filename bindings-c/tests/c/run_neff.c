/*
 * run_neff.c - load a NEFF, run it once on device tensors and print the
 * outputs, following the flow of the Neuron developer guide's first
 * application:
 *
 *   mmap NEFF -> nrt_init -> nrt_load -> nrt_get_model_tensor_info
 *   -> one device tensor per input/output, in an input and an output set
 *   -> write inputs -> nrt_execute -> read outputs
 *   -> nrt_unload -> free tensors -> destroy sets -> free info -> nrt_close
 *
 * Usage: run_neff FILE.neff
 *
 * Every input is filled with a byte pattern: byte j of input k (in model
 * order) is (j * 7 + k) & 0x3f. Bytes below 0x40 keep every float32,
 * float16 and bfloat16 element finite (magnitude < 2), so any model gets
 * well-defined inputs. For each output the program prints its name, size
 * and first bytes in hex. Every call is checked; on failure the program
 * prints the failing call and status, releases what it holds and exits 1.
 *
 * Build: cc -std=c11 -Wall -Wextra -Werror -Ibindings-c/include \
 *            bindings-c/tests/c/run_neff.c -lnrt -pthread
 */

#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <nrt/nrt.h>
#include <nrt/nrt_experimental.h>

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PRINT_BYTES 16

/* Everything the program holds, so that any failure can release it. */
struct app {
    void *neff;
    size_t neff_size;
    bool initialized;
    nrt_model_t *model;
    nrt_tensor_info_array_t *info;
    nrt_tensor_t **tensors;     /* one per info entry, NULL until allocated */
    nrt_tensor_set_t *inputs;
    nrt_tensor_set_t *outputs;
    unsigned char *buf;
};

static void release(struct app *app)
{
    if (app->model != NULL) {
        NRT_STATUS st = nrt_unload(app->model);
        if (st != NRT_SUCCESS) {
            fprintf(stderr, "run_neff: nrt_unload failed: %s (%d)\n", nrt_get_status_as_str(st), (int)st);
        }
        app->model = NULL;
    }
    if (app->tensors != NULL) {
        for (uint64_t i = 0; app->info != NULL && i < app->info->tensor_count; i++) {
            if (app->tensors[i] != NULL) {
                nrt_tensor_free(&app->tensors[i]);
            }
        }
        free(app->tensors);
        app->tensors = NULL;
    }
    if (app->inputs != NULL) {
        nrt_destroy_tensor_set(&app->inputs);
    }
    if (app->outputs != NULL) {
        nrt_destroy_tensor_set(&app->outputs);
    }
    if (app->info != NULL) {
        NRT_STATUS st = nrt_free_model_tensor_info(app->info);
        if (st != NRT_SUCCESS) {
            fprintf(stderr, "run_neff: nrt_free_model_tensor_info failed: %s (%d)\n",
                    nrt_get_status_as_str(st), (int)st);
        }
        app->info = NULL;
    }
    if (app->initialized) {
        nrt_close();
        app->initialized = false;
    }
    free(app->buf);
    app->buf = NULL;
    if (app->neff != NULL) {
        munmap(app->neff, app->neff_size);
        app->neff = NULL;
    }
}

static void die(struct app *app, const char *fmt, ...)
{
    va_list ap;
    fputs("run_neff: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    release(app);
    exit(1);
}

/* Exits through die() unless st is NRT_SUCCESS. */
static void check(struct app *app, NRT_STATUS st, const char *call, const char *what)
{
    if (st != NRT_SUCCESS) {
        die(app, "%s(%s) failed: %s (%d)", call, what, nrt_get_status_as_str(st), (int)st);
    }
}

static void map_neff(struct app *app, const char *path)
{
    struct stat sb;
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        die(app, "cannot open %s: %s", path, strerror(errno));
    }
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        die(app, "cannot stat %s: %s", path, strerror(err));
    }
    if (sb.st_size <= 0) {
        close(fd);
        die(app, "%s is empty", path);
    }
    void *data = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (data == MAP_FAILED) {
        die(app, "cannot mmap %s: %s", path, strerror(err));
    }
    app->neff = data;
    app->neff_size = (size_t)sb.st_size;
}

static const char *usage_name(nrt_tensor_usage_t usage)
{
    return usage == NRT_TENSOR_USAGE_INPUT ? "input" : "output";
}

int main(int argc, char *argv[])
{
    struct app app;
    memset(&app, 0, sizeof app);

    if (argc != 2) {
        fprintf(stderr, "usage: %s FILE.neff\n", argc > 0 ? argv[0] : "run_neff");
        return 2;
    }
    map_neff(&app, argv[1]);

    check(&app, nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""), "nrt_init", "NO_FW");
    app.initialized = true;

    check(&app, nrt_load(app.neff, app.neff_size, -1, -1, &app.model), "nrt_load", argv[1]);
    if (app.model == NULL) {
        die(&app, "nrt_load returned NRT_SUCCESS but no model");
    }

    check(&app, nrt_get_model_tensor_info(app.model, &app.info), "nrt_get_model_tensor_info", argv[1]);
    if (app.info == NULL) {
        die(&app, "nrt_get_model_tensor_info returned NRT_SUCCESS but no info");
    }
    const uint64_t count = app.info->tensor_count;
    printf("model has %llu tensors\n", (unsigned long long)count);

    app.tensors = calloc(count > 0 ? (size_t)count : 1, sizeof *app.tensors);
    if (app.tensors == NULL) {
        die(&app, "out of memory");
    }
    check(&app, nrt_allocate_tensor_set(&app.inputs), "nrt_allocate_tensor_set", "inputs");
    check(&app, nrt_allocate_tensor_set(&app.outputs), "nrt_allocate_tensor_set", "outputs");

    /* One device tensor per model tensor, added under the model's name. */
    size_t max_size = 0;
    for (uint64_t i = 0; i < count; i++) {
        nrt_tensor_info_t *ti = &app.info->tensor_array[i];
        if (ti->usage != NRT_TENSOR_USAGE_INPUT && ti->usage != NRT_TENSOR_USAGE_OUTPUT) {
            die(&app, "tensor %s has unknown usage %d", ti->name, (int)ti->usage);
        }
        check(&app, nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, ti->size, ti->name, &app.tensors[i]),
              "nrt_tensor_allocate", ti->name);
        nrt_tensor_set_t *set = ti->usage == NRT_TENSOR_USAGE_INPUT ? app.inputs : app.outputs;
        check(&app, nrt_add_tensor_to_tensor_set(set, ti->name, app.tensors[i]),
              "nrt_add_tensor_to_tensor_set", ti->name);
        printf("  %-6s %s: %zu bytes, dtype %d, ndim %u\n", usage_name(ti->usage), ti->name, ti->size,
               (int)ti->dtype, (unsigned)ti->ndim);
        if (ti->size > max_size) {
            max_size = ti->size;
        }
    }

    app.buf = malloc(max_size > 0 ? max_size : 1);
    if (app.buf == NULL) {
        die(&app, "out of memory (%zu bytes)", max_size);
    }

    /* Fill every input with the byte pattern, looking it up in the set the
     * way an application would. */
    uint64_t input_no = 0;
    for (uint64_t i = 0; i < count; i++) {
        nrt_tensor_info_t *ti = &app.info->tensor_array[i];
        if (ti->usage != NRT_TENSOR_USAGE_INPUT) {
            continue;
        }
        nrt_tensor_t *t = NULL;
        check(&app, nrt_get_tensor_from_tensor_set(app.inputs, ti->name, &t), "nrt_get_tensor_from_tensor_set",
              ti->name);
        if (t != app.tensors[i]) {
            die(&app, "input set returned another tensor for %s", ti->name);
        }
        for (size_t j = 0; j < ti->size; j++) {
            app.buf[j] = (unsigned char)((j * 7u + (size_t)input_no) & 0x3fu);
        }
        check(&app, nrt_tensor_write(t, app.buf, 0, ti->size), "nrt_tensor_write", ti->name);
        input_no++;
    }

    check(&app, nrt_execute(app.model, app.inputs, app.outputs), "nrt_execute", argv[1]);

    for (uint64_t i = 0; i < count; i++) {
        nrt_tensor_info_t *ti = &app.info->tensor_array[i];
        if (ti->usage != NRT_TENSOR_USAGE_OUTPUT) {
            continue;
        }
        nrt_tensor_t *t = NULL;
        check(&app, nrt_get_tensor_from_tensor_set(app.outputs, ti->name, &t), "nrt_get_tensor_from_tensor_set",
              ti->name);
        check(&app, nrt_tensor_read(t, app.buf, 0, ti->size), "nrt_tensor_read", ti->name);
        printf("output %s (%zu bytes):", ti->name, ti->size);
        for (size_t j = 0; j < ti->size && j < PRINT_BYTES; j++) {
            printf(" %02x", app.buf[j]);
        }
        printf("%s\n", ti->size > PRINT_BYTES ? " ..." : "");
    }

    /* Orderly teardown, checking each step. */
    NRT_STATUS st = nrt_unload(app.model);
    app.model = NULL;
    check(&app, st, "nrt_unload", argv[1]);

    for (uint64_t i = 0; i < count; i++) {
        nrt_tensor_free(&app.tensors[i]);
        if (app.tensors[i] != NULL) {
            app.tensors[i] = NULL; /* never free it twice */
            die(&app, "nrt_tensor_free did not clear the handle of %s", app.info->tensor_array[i].name);
        }
    }
    nrt_destroy_tensor_set(&app.inputs);
    nrt_destroy_tensor_set(&app.outputs);
    if (app.inputs != NULL || app.outputs != NULL) {
        app.inputs = NULL; /* never destroy them twice */
        app.outputs = NULL;
        die(&app, "nrt_destroy_tensor_set did not clear the handle");
    }

    st = nrt_free_model_tensor_info(app.info);
    app.info = NULL;
    check(&app, st, "nrt_free_model_tensor_info", argv[1]);

    nrt_close();
    app.initialized = false;

    release(&app);
    printf("run_neff: OK\n");
    return 0;
}
