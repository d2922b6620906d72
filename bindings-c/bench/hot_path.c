/* The C ABI hot-path driver (bindings-c/bench/run.sh builds it twice: against libnrt and
 * against the libnrt-design baseline, libnrt_baseline.so).
 *
 *   hot_path NEFF SCENARIO ITERS
 *
 * Loads MODELS copies of NEFF (so lookups do not run in a trivially small table), then times
 * SCENARIO and prints "SCENARIO <calls per second>":
 *   count1        nrt_get_model_nc_count on one model, one thread
 *   count2        the same on two threads, each on its own model
 *   count2shared  the same on two threads, both on one model
 *   execute       nrt_execute of the NEFF's model (64-byte input "in" and output "out" on
 *                 device), one thread (only when built with -DWITH_EXECUTE) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nrt/nrt.h>

#define MODELS 256

static nrt_model_t *models[MODELS];
static long iters;
static pthread_barrier_t start;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#ifdef WITH_EXECUTE
/* CPU time of the calling thread: the one-thread execute scenario is timed with it, so that the
 * time the thread spends descheduled on a shared machine does not count (the Rust side,
 * hot_path_support, times its loop the same way). */
static double thread_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
#endif

static void die(const char *what, NRT_STATUS s) {
    fprintf(stderr, "hot_path: %s failed with status %d\n", what, (int)s);
    exit(1);
}

static void count_loop(const nrt_model_t *m) {
    uint32_t n = 0;
    for (long i = 0; i < iters; i++) {
        NRT_STATUS s = nrt_get_model_nc_count(m, &n);
        if (s != NRT_SUCCESS)
            die("nrt_get_model_nc_count", s);
    }
    if (n == 0)
        die("nrt_get_model_nc_count (count 0)", NRT_FAILURE);
}

static void *count_thread(void *arg) {
    pthread_barrier_wait(&start);
    count_loop((const nrt_model_t *)arg);
    return NULL;
}

/* Calls per second of `threads` threads running count_loop on their model. */
static double count_rate(int threads, int shared) {
    pthread_t t[2];
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++)
        pthread_create(&t[i], NULL, count_thread, models[shared ? 0 : i]);
    pthread_barrier_wait(&start);
    double t0 = now();
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    double dt = now() - t0;
    pthread_barrier_destroy(&start);
    return (double)iters * threads / dt;
}

#ifdef WITH_EXECUTE
static double execute_rate(void) {
    nrt_tensor_t *in = NULL, *out = NULL;
    nrt_tensor_set_t *ins = NULL, *outs = NULL;
    NRT_STATUS s;
    if ((s = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "in", &in)) ||
        (s = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "out", &out)) ||
        (s = nrt_allocate_tensor_set(&ins)) || (s = nrt_allocate_tensor_set(&outs)) ||
        (s = nrt_add_tensor_to_tensor_set(ins, "in", in)) ||
        (s = nrt_add_tensor_to_tensor_set(outs, "out", out)))
        die("tensor setup", s);
    double t0 = thread_cpu_now();
    for (long i = 0; i < iters; i++) {
        s = nrt_execute(models[0], ins, outs);
        if (s != NRT_SUCCESS)
            die("nrt_execute", s);
    }
    double dt = thread_cpu_now() - t0;
    nrt_destroy_tensor_set(&ins);
    nrt_destroy_tensor_set(&outs);
    nrt_tensor_free(&in);
    nrt_tensor_free(&out);
    return (double)iters / dt;
}
#endif

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: hot_path NEFF count1|count2|count2shared|execute ITERS\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        fprintf(stderr, "hot_path: cannot open %s\n", argv[1]);
        return 1;
    }
    static char neff[1 << 20];
    size_t size = fread(neff, 1, sizeof neff, f);
    fclose(f);
    iters = atol(argv[3]);
    NRT_STATUS s = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
    if (s != NRT_SUCCESS)
        die("nrt_init", s);
    for (int i = 0; i < MODELS; i++)
        if ((s = nrt_load(neff, size, 0, -1, &models[i])) != NRT_SUCCESS)
            die("nrt_load", s);
    double rate = 0;
    if (!strcmp(argv[2], "count1"))
        rate = count_rate(1, 0);
    else if (!strcmp(argv[2], "count2"))
        rate = count_rate(2, 0);
    else if (!strcmp(argv[2], "count2shared"))
        rate = count_rate(2, 1);
#ifdef WITH_EXECUTE
    else if (!strcmp(argv[2], "execute"))
        rate = execute_rate();
#endif
    else {
        fprintf(stderr, "hot_path: unknown scenario %s\n", argv[2]);
        return 2;
    }
    for (int i = 0; i < MODELS; i++)
        if ((s = nrt_unload(models[i])) != NRT_SUCCESS)
            die("nrt_unload", s);
    nrt_close();
    printf("%s %.0f\n", argv[2], rate);
    return 0;
}
