/* System trace on the simulator MLP: the event types, capture filters (event type, core),
 * the runtime's events read back with nrt_sys_trace_fetch_events in exactly the order and with
 * exactly the ids, models, sequence ids, cores, byte counts and statuses the calls made imply,
 * per-core fetch limits, the ring's max-events limit (oldest dropped, counted), and misuse. */
#include <nrt/nrt_async.h>
#include <nrt/nrt_sys_trace.h>

#include "prof_common.h"

/* One expected event: its id, type and fields (-1: the field must be absent). */
typedef struct {
    uint64_t id;
    const char *name;
    int64_t nc, model, seq, bytes, status;
} want_t;

#define MAX_EVENTS 64

typedef struct {
    uint64_t id;
    char name[64];
    int64_t nc, model, seq, bytes, status;
} got_t;

static int64_t field(const char *obj, const char *end, const char *key) {
    uint64_t v;
    return json_u64(obj, end, key, &v) ? (int64_t)v : -1;
}

/* Parses the fetch document; returns the event count and the dropped count. */
static size_t parse(const char *json, got_t *got, uint64_t *dropped) {
    if (strncmp(json, "{\"events\":[", 11) != 0) FAIL("unexpected document: %.60s", json);
    size_t n = 0;
    for (const char *p = strstr(json, "{\"id\":"); p; p = strstr(p + 1, "{\"id\":")) {
        const char *end = strchr(p, '}');
        if (!end || n == MAX_EVENTS) FAIL("malformed events");
        got_t *g = &got[n++];
        g->id = (uint64_t)field(p, end, "id");
        if (!json_string(p, end, "name", g->name, sizeof g->name)) FAIL("event without a name");
        g->nc = field(p, end, "nc_idx");
        g->model = field(p, end, "model_id");
        g->seq = field(p, end, "nrt_sequence_id");
        g->bytes = field(p, end, "bytes");
        g->status = field(p, end, "status");
        char src[32];
        if (!json_string(p, end, "trace_event_source", src, sizeof src) || strcmp(src, "neuron_rt"))
            FAIL("event %llu: trace_event_source", (unsigned long long)g->id);
        if (field(p, end, "process_id") != (int64_t)getpid()) FAIL("event %llu: process_id", (unsigned long long)g->id);
    }
    const char *d = strstr(json, "\"dropped_events\":");
    if (!d) FAIL("no dropped_events");
    *dropped = strtoull(d + 17, NULL, 10);
    return n;
}

static void fetch_expect(const nrt_sys_trace_fetch_options_t *opts, const want_t *want, size_t n_want,
                         uint64_t want_dropped, const char *what) {
    char *buf = NULL;
    size_t size = 0;
    CHECK(nrt_sys_trace_fetch_events(&buf, &size, opts));
    if (strlen(buf) != size) FAIL("%s: written_size %zu, text %zu", what, size, strlen(buf));
    got_t got[MAX_EVENTS];
    uint64_t dropped = 0;
    size_t n = parse(buf, got, &dropped);
    if (n != n_want) FAIL("%s: %zu events, expected %zu: %s", what, n, n_want, buf);
    for (size_t i = 0; i < n; i++) {
        const want_t *w = &want[i];
        const got_t *g = &got[i];
        if (g->id != w->id || strcmp(g->name, w->name) || g->nc != w->nc || g->model != w->model ||
            g->seq != w->seq || g->bytes != w->bytes || g->status != w->status)
            FAIL("%s: event %zu is {id %llu %s nc %lld model %lld seq %lld bytes %lld status %lld}, "
                 "expected {id %llu %s nc %lld model %lld seq %lld bytes %lld status %lld}",
                 what, i, (unsigned long long)g->id, g->name, (long long)g->nc, (long long)g->model,
                 (long long)g->seq, (long long)g->bytes, (long long)g->status,
                 (unsigned long long)w->id, w->name, (long long)w->nc, (long long)w->model,
                 (long long)w->seq, (long long)w->bytes, (long long)w->status);
    }
    if (dropped != want_dropped) FAIL("%s: %llu dropped, expected %llu", what, (unsigned long long)dropped,
                                      (unsigned long long)want_dropped);
    nrt_sys_trace_buffer_free(buf);
    printf("%s: %zu events as expected\n", what, n);
}

static const char *const TYPES[] = {"nrt_load",         "nrt_unload",      "nrt_exec_submit",
                                    "nrt_exec_start",   "nrt_exec_complete", "nrt_tensor_read",
                                    "nrt_tensor_write", "nrt_tensor_copy", "nrt_error"};
#define N_TYPES (sizeof TYPES / sizeof TYPES[0])

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    /* The event types, in their documented order. */
    const char **types = NULL;
    size_t n_types = 0;
    CHECK(nrt_sys_trace_get_event_types(&types, &n_types));
    if (n_types != N_TYPES) FAIL("%zu event types", n_types);
    for (size_t i = 0; i < n_types; i++)
        if (strcmp(types[i], TYPES[i])) FAIL("event type %zu is %s, expected %s", i, types[i], TYPES[i]);
    nrt_sys_trace_free_event_types(types, n_types);

    /* Capture everything but tensor reads, on every core but 1 (this process has only core 0). */
    nrt_sys_trace_config_t *config = NULL;
    CHECK(nrt_sys_trace_config_allocate(&config));
    nrt_sys_trace_config_set_capture_enabled_for_nc(config, 1, false);
    CHECK(nrt_sys_trace_config_set_capture_enabled_for_event_type(config, "nrt_tensor_read", false));
    EXPECT(nrt_sys_trace_config_set_capture_enabled_for_event_type(config, "no_such_event", false), NRT_INVALID);
    CHECK(nrt_sys_trace_config_get_enabled_event_types(config, &types, &n_types));
    if (n_types != N_TYPES - 1) FAIL("%zu enabled types", n_types);
    for (size_t i = 0; i < n_types; i++)
        if (!strcmp(types[i], "nrt_tensor_read")) FAIL("nrt_tensor_read is enabled");
    nrt_sys_trace_free_event_types(types, n_types);

    mlp_t m = {0};
    mlp_map(&m, argv[1]);
    CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
    CHECK(nrt_sys_trace_start(config));
    EXPECT(nrt_sys_trace_start(config), NRT_INVALID);

    /* Load (1 event), write each input (one nrt_tensor_write of its size each). */
    mlp_open(&m, argv[1]);
    uint32_t model_id = 0;
    /* Model ids are not exposed by nrt.h: take it from the load event below. */
    CHECK(nrt_execute(m.model, m.inputs, m.outputs)); /* submit, start, complete: sequence 1 */
    mlp_check_output(&m, argv[1]);                     /* a read: filtered out */
    nrt_tensor_t *copy = NULL;
    size_t out_size = m.info->tensor_array[m.output].size;
    CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, out_size, "copy", &copy));
    CHECK(nrt_tensor_copy(m.tensors[m.output], 0, copy, 0, out_size)); /* nrt_tensor_copy */
    CHECK(nrt_execute(m.model, m.inputs, m.outputs)); /* sequence 2 */
    /* An execution with no inputs fails in the runtime: one error event, of no core. */
    nrt_tensor_set_t *empty = NULL;
    CHECK(nrt_allocate_tensor_set(&empty));
    if (nrt_execute(m.model, empty, m.outputs) == NRT_SUCCESS) FAIL("execute without inputs succeeded");
    nrt_destroy_tensor_set(&empty);

    /* Find the model id and the input sizes in tensor-info order (the order written). */
    {
        char *buf = NULL;
        size_t size = 0;
        nrt_sys_trace_fetch_options_t *opts = NULL;
        CHECK(nrt_sys_trace_fetch_options_allocate(&opts));
        nrt_sys_trace_fetch_options_set_nc_idx(opts, 0);
        nrt_sys_trace_fetch_options_set_max_events_per_nc(opts, 1);
        CHECK(nrt_sys_trace_fetch_events(&buf, &size, opts));
        got_t g[MAX_EVENTS];
        uint64_t dropped;
        if (parse(buf, g, &dropped) != 1 || g[0].id != 1 || strcmp(g[0].name, "nrt_load") || g[0].nc != 0 ||
            g[0].model < 1 || g[0].seq != -1 || dropped != 0)
            FAIL("first event: %s", buf);
        model_id = (uint32_t)g[0].model;
        if (!strstr(buf, "\"model_name\":\"mlp\"")) FAIL("load event without the NEFF name: %s", buf);
        nrt_sys_trace_buffer_free(buf);

        /* The rest of core 0, at most 4 at a time: the input writes first. */
        want_t w[MAX_EVENTS];
        size_t k = 0;
        uint64_t id = 2;
        for (size_t i = 0; i < m.n; i++) {
            if (m.info->tensor_array[i].usage != NRT_TENSOR_USAGE_INPUT) continue;
            w[k++] = (want_t){id++, "nrt_tensor_write", 0, -1, -1, (int64_t)m.info->tensor_array[i].size, -1};
        }
        size_t writes = k;
        for (int64_t seq = 1; seq <= 2; seq++) {
            w[k++] = (want_t){id++, "nrt_exec_submit", 0, model_id, seq, -1, -1};
            w[k++] = (want_t){id++, "nrt_exec_start", 0, model_id, seq, -1, -1};
            w[k++] = (want_t){id++, "nrt_exec_complete", 0, model_id, seq, -1, NRT_SUCCESS};
            if (seq == 1) w[k++] = (want_t){id++, "nrt_tensor_copy", 0, -1, -1, (int64_t)out_size, -1};
        }
        uint64_t error_id = id++;
        if (writes != 5) FAIL("%zu inputs, the MLP has 5", writes);
        nrt_sys_trace_fetch_options_set_max_events_per_nc(opts, 4);
        fetch_expect(opts, w, 4, 0, "core 0, first 4");
        fetch_expect(opts, w + 4, 4, 0, "core 0, next 4");
        nrt_sys_trace_fetch_options_set_defaults(opts);
        /* Everything left: core 0's last events, then the error (no core). */
        want_t rest[MAX_EVENTS];
        size_t r = 0;
        for (size_t i = 8; i < k; i++) rest[r++] = w[i];
        rest[r++] = (want_t){error_id, "nrt_error", -1, -1, -1, -1, NRT_INVALID};
        fetch_expect(opts, rest, r, 0, "all remaining");
        fetch_expect(NULL, NULL, 0, 0, "fetched events are gone");

        /* An explicit-async execution: its events carry the sequence id nrta returned (submitted
         * on this thread, started and completed by the library's worker). */
        NRT_STATUS ret = NRT_FAILURE;
        nrta_seq_t seq = 0;
        CHECK(nrta_execute_schedule(m.model, m.inputs, m.outputs, 0, &ret, &seq));
        for (bool done = false; !done;) CHECK(nrta_is_completed(seq, &done));
        CHECK(ret);
        want_t async[3] = {{id, "nrt_exec_submit", 0, model_id, (int64_t)seq, -1, -1},
                           {id + 1, "nrt_exec_start", 0, model_id, (int64_t)seq, -1, -1},
                           {id + 2, "nrt_exec_complete", 0, model_id, (int64_t)seq, -1, NRT_SUCCESS}};
        id += 3;
        fetch_expect(opts, async, 3, 0, "explicit async");

        /* Unload: the last event of this capture. */
        nrt_tensor_free(&copy);
        mlp_close(&m);
        want_t unload = {id, "nrt_unload", 0, model_id, -1, -1, -1};
        fetch_expect(opts, &unload, 1, 0, "unload");
        nrt_sys_trace_fetch_options_free(opts);
    }
    CHECK(nrt_sys_trace_stop());
    EXPECT(nrt_sys_trace_stop(), NRT_INVALID);
    char *none = NULL;
    size_t none_size = 0;
    EXPECT(nrt_sys_trace_fetch_events(&none, &none_size, NULL), NRT_INVALID);

    /* A ring of 2 events: of 3 writes, the oldest is dropped. Only writes are captured. */
    nrt_sys_trace_config_set_defaults(config);
    nrt_sys_trace_config_set_max_events_per_nc(config, 2);
    for (size_t i = 0; i < N_TYPES; i++)
        CHECK(nrt_sys_trace_config_set_capture_enabled_for_event_type(config, TYPES[i], !strcmp(TYPES[i], "nrt_tensor_write")));
    CHECK(nrt_sys_trace_start(config));
    nrt_tensor_t *t = NULL;
    CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "t", &t));
    unsigned char bytes[64] = {0};
    for (size_t i = 1; i <= 3; i++) CHECK(nrt_tensor_write(t, bytes, 0, i * 8));
    CHECK(nrt_tensor_read(t, bytes, 0, 8)); /* not captured */
    want_t last2[2] = {{2, "nrt_tensor_write", 0, -1, -1, 16, -1}, {3, "nrt_tensor_write", 0, -1, -1, 24, -1}};
    fetch_expect(NULL, last2, 2, 1, "ring of 2");
    nrt_tensor_free(&t);
    CHECK(nrt_sys_trace_stop());

    /* Capture switched off for core 0: nothing of core 0 is kept. */
    nrt_sys_trace_config_set_defaults(config);
    nrt_sys_trace_config_set_capture_enabled_for_nc(config, 0, false);
    CHECK(nrt_sys_trace_start(config));
    CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 64, "t", &t));
    CHECK(nrt_tensor_write(t, bytes, 0, 8));
    nrt_tensor_free(&t);
    fetch_expect(NULL, NULL, 0, 0, "core 0 off");
    CHECK(nrt_sys_trace_stop());

    /* Freed options are refused, not dereferenced. */
    nrt_sys_trace_config_free(config);
    EXPECT(nrt_sys_trace_start(config), NRT_INVALID_HANDLE);
    EXPECT(nrt_sys_trace_config_allocate(NULL), NRT_INVALID);
    nrt_close();
    mlp_unmap(&m);
    printf("sys_trace_events: OK\n");
    return 0;
}
