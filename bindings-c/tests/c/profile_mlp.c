/* Device profiles of the simulator MLP: nrt_profile_start / stop around two executions writes the
 * per-engine timeline (rendered with `nrt trace render`, the binary named by $NRT_BIN) and a
 * summary whose figures are checked against what the MLP program does; continuous profiling
 * saves the latest execution of a core; misuse is refused. */
#include <nrt/nrt_profile.h>

#include "prof_common.h"

/* The numbers after every `"key":` in `s`, in order. */
static size_t numbers(const char *s, const char *key, double *out, size_t max) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    size_t n = 0;
    for (const char *p = strstr(s, pat); p && n < max; p = strstr(p + 1, pat))
        out[n++] = strtod(p + strlen(pat), NULL);
    return n;
}

/* Checks a profile summary of `execs` successful MLP executions. */
static void check_summary(const char *path, const mlp_t *m, size_t execs) {
    char *s = read_text(path);
    char want[64];
    snprintf(want, sizeof want, "\"execution_count\":%zu", execs);
    if (!strstr(s, want)) FAIL("%s: no %s: %s", path, want, s);
    if ((size_t)count_of(s, "\"status\":\"NRT_SUCCESS\"") != execs) FAIL("%s: statuses: %s", path, s);
    double dma[8], ticks[8], ns[8], pe[8]; /* pe: TensorE busy % */
    /* The MLP program loads each input once and stores its output once (its DMA descriptors
     * cover each I/O tensor exactly once), so each execution moves exactly their bytes. */
    double io = (double)(mlp_bytes(m, NRT_TENSOR_USAGE_INPUT) + mlp_bytes(m, NRT_TENSOR_USAGE_OUTPUT));
    if (numbers(s, "dma_bytes", dma, 8) != execs) FAIL("%s: dma_bytes count", path);
    if (numbers(s, "simulated_ns", ns, 8) != execs) FAIL("%s: simulated_ns count", path);
    /* "ticks" appears per execution and per core (one core each). */
    if (numbers(s, "ticks", ticks, 8) != 2 * execs) FAIL("%s: ticks count", path);
    if (numbers(s, "TensorE", pe, 8) != execs) FAIL("%s: TensorE busy count", path);
    for (size_t i = 0; i < execs; i++) {
        if (dma[i] != io) FAIL("%s: execution %zu moved %.0f DMA bytes, the I/O is %.0f", path, i + 1, dma[i], io);
        /* 1.4 GHz: ns = ticks / 1.4, written with 3 decimals. */
        double t = ticks[2 * i];
        if (t <= 0 || ticks[2 * i + 1] != t) FAIL("%s: ticks of execution %zu", path, i + 1);
        double expect_ns = t / 1.4;
        if (ns[i] < expect_ns - 0.001 || ns[i] > expect_ns + 0.001) FAIL("%s: simulated_ns %f for %f ticks", path, ns[i], t);
        /* The matmuls run on TensorE: busy for part of the run, never more than all of it. */
        if (!(pe[i] > 0 && pe[i] <= 100)) FAIL("%s: TensorE busy %f%%", path, pe[i]);
        /* The simulator is deterministic: the same program and inputs take the same time. */
        if (i > 0 && (t != ticks[0] || pe[i] != pe[0])) FAIL("%s: executions differ", path);
    }
    free(s);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const char *nrt_bin = getenv("NRT_BIN");
    char dir[256], trace[512], summary[600], svg[512], cmd[2048];
    scratch_dir(dir, sizeof dir, "profile");
    snprintf(trace, sizeof trace, "%s/mlp.json", dir);
    snprintf(summary, sizeof summary, "%s.summary.json", trace);
    snprintf(svg, sizeof svg, "%s/mlp.svg", dir);

    mlp_t m = {0};
    mlp_map(&m, argv[1]);
    EXPECT(nrt_profile_start(NULL, trace), NRT_INVALID);
    CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
    mlp_open(&m, argv[1]);

    /* One model, two executions. */
    EXPECT(nrt_profile_start(m.model, NULL), NRT_INVALID);
    EXPECT(nrt_profile_stop(trace), NRT_INVALID); /* not started */
    CHECK(nrt_profile_start(m.model, trace));
    EXPECT(nrt_profile_start(m.model, trace), NRT_INVALID); /* already started */
    CHECK(nrt_execute(m.model, m.inputs, m.outputs));
    CHECK(nrt_execute(m.model, m.inputs, m.outputs));
    CHECK(nrt_profile_stop(trace));
    mlp_check_output(&m, argv[1]);
    CHECK(nrt_execute(m.model, m.inputs, m.outputs)); /* after stop: not recorded */

    char *t = read_text(trace);
    if (strncmp(t, "{", 1) || !strstr(t, "\"traceEvents\":[")) FAIL("%s is not a trace document", trace);
    if (count_of(t, "\"cat\":\"execution\"") != 2) FAIL("%s: expected 2 execution slices", trace);
    if (!strstr(t, "\"name\":\"executions\"")) FAIL("%s: no executions lane", trace);
    if (count_of(t, "\"cat\":\"instr\"") < 2) FAIL("%s: no instruction slices", trace);
    free(t);
    check_summary(summary, &m, 2);

    if (nrt_bin && *nrt_bin) {
        snprintf(cmd, sizeof cmd, "'%s' trace render '%s' -o '%s' > /dev/null", nrt_bin, trace, svg);
        if (system(cmd) != 0) FAIL("%s failed", cmd);
        char *pic = read_text(svg);
        if (!strstr(pic, "<svg") || !strstr(pic, "executions") || !strstr(pic, "</svg>"))
            FAIL("%s is not the rendered timeline", svg);
        free(pic);
        printf("rendered %s\n", svg);
    } else {
        FAIL("NRT_BIN is not set: the trace cannot be rendered");
    }

    /* Continuous profiling: the latest execution of core 0, saved twice under two names. */
    nrt_profile_continuous_options_t *opts = NULL;
    CHECK(nrt_profile_continuous_options_allocate(&opts));
    char out_dir[512];
    snprintf(out_dir, sizeof out_dir, "%s/continuous", dir);
    CHECK(nrt_profile_continuous_options_set_output_dir(opts, out_dir));
    CHECK(nrt_profile_continuous_start(opts));
    EXPECT(nrt_profile_continuous_start(opts), NRT_INVALID);
    EXPECT(nrt_profile_continuous_save(0, opts), NRT_INVALID); /* nothing executed yet */
    CHECK(nrt_execute(m.model, m.inputs, m.outputs));
    CHECK(nrt_profile_continuous_save(0, opts));
    CHECK(nrt_execute(m.model, m.inputs, m.outputs));
    CHECK(nrt_profile_continuous_save(0, opts));
    EXPECT(nrt_profile_continuous_save(1, opts), NRT_INVALID); /* no such core here */
    CHECK(nrt_profile_continuous_stop());
    EXPECT(nrt_profile_continuous_stop(), NRT_INVALID);
    DIR *d = opendir(out_dir);
    if (!d) FAIL("no %s", out_dir);
    int traces = 0, summaries = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strstr(e->d_name, ".summary.json")) {
            char p[1024];
            snprintf(p, sizeof p, "%s/%s", out_dir, e->d_name);
            check_summary(p, &m, 1);
            summaries++;
        } else if (strstr(e->d_name, ".json")) {
            traces++;
        }
    }
    closedir(d);
    if (traces != 2 || summaries != 2) FAIL("continuous: %d traces, %d summaries", traces, summaries);
    CHECK(nrt_profile_continuous_options_free(opts));
    EXPECT(nrt_profile_continuous_options_free(opts), NRT_INVALID_HANDLE); /* freed: refused */

    mlp_close(&m);
    nrt_close();
    mlp_unmap(&m);
    remove_tree(dir);
    printf("profile_mlp: OK\n");
    return 0;
}
