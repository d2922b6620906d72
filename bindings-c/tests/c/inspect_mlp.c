/* Inspect capture of the simulator MLP: with nrt_inspect_begin_with_options (every execution)
 * each execution's directory holds its device profile, its inputs (byte-identical to what was
 * written) and outputs (byte-identical to the expected result), and the system profile lists
 * the runtime's events; "on fail" alone writes nothing for successful executions; and
 * NEURON_RT_INSPECT_ENABLE / NEURON_RT_INSPECT_OUTPUT_DIR / NEURON_RT_INSPECT_EVENT_FILTER_* at
 * load time capture a child process that never calls the inspect API. */
#include <sys/wait.h>

#include <nrt/nrt_profile.h>

#include "prof_common.h"

/* Checks that `path` holds exactly the bytes of `want_path`. */
static void same_file(const char *path, const char *want_path) {
    size_t a = 0, b = 0;
    void *x = read_file(path, &a);
    void *y = read_file(want_path, &b);
    if (a != b || memcmp(x, y, a) != 0) FAIL("%s differs from %s", path, want_path);
    free(x);
    free(y);
}

/* Entries of a directory, "." and ".." aside. */
static int entries(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

/* Checks the capture of execution `seq` of the MLP under `root` (the pid directory). */
static void check_execution(const mlp_t *m, const char *mlp_dir, const char *root, int session, uint64_t seq) {
    char exec_dir[1024], p[1600], want[1600];
    /* The model id: the only model loaded in this process is model 1. */
    snprintf(exec_dir, sizeof exec_dir, "%s/session_%d_model1_nc0_seq%llu", root, session, (unsigned long long)seq);
    for (size_t i = 0; i < m->n; i++) {
        nrt_tensor_info_t *t = &m->info->tensor_array[i];
        bool in = t->usage == NRT_TENSOR_USAGE_INPUT;
        snprintf(p, sizeof p, "%s/%s/%s.bin", exec_dir, in ? "inputs" : "outputs", t->name);
        snprintf(want, sizeof want, "%s/%s.%s", mlp_dir, t->name, in ? "bin" : "expected");
        same_file(p, want);
    }
    snprintf(p, sizeof p, "%s/device_profile.json", exec_dir);
    char *trace = read_text(p);
    if (!strstr(trace, "\"traceEvents\":[") || count_of(trace, "\"cat\":\"execution\"") != 1)
        FAIL("%s is not the execution's timeline", p);
    free(trace);
    snprintf(p, sizeof p, "%s/device_profile.json.summary.json", exec_dir);
    if (!file_exists(p)) FAIL("no %s", p);
    snprintf(p, sizeof p, "%s/execution.json", exec_dir);
    char *info = read_text(p);
    char w[128];
    snprintf(w, sizeof w, "\"model_id\":1,\"nc_idx\":0,\"nrt_sequence_id\":%llu,\"status\":0,", (unsigned long long)seq);
    if (!strstr(info, w)) FAIL("%s: %s", p, info);
    free(info);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    mlp_t m = {0};
    mlp_map(&m, argv[1]);
    if (argc == 3 && !strcmp(argv[2], "--child")) {
        /* Capture comes from the environment alone. */
        CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
        mlp_open(&m, argv[1]);
        CHECK(nrt_execute(m.model, m.inputs, m.outputs));
        mlp_close(&m);
        nrt_close();
        mlp_unmap(&m);
        return 0;
    }
    char dir[256], root[512], p[1024];
    scratch_dir(dir, sizeof dir, "inspect");
    snprintf(root, sizeof root, "%s/sim_pid_%d", dir, (int)getpid());

    /* The configuration API. */
    const char **acts = NULL;
    size_t n_acts = 0;
    CHECK(nrt_inspect_config_get_all_activity_types(&acts, &n_acts));
    if (n_acts != 4 || strcmp(acts[0], "system_profile") || strcmp(acts[1], "device_profile") ||
        strcmp(acts[2], "host_memory") || strcmp(acts[3], "cpu_util"))
        FAIL("activity types");
    nrt_inspect_config_free_activity_types(acts, n_acts);
    nrt_inspect_config_t *cfg = NULL;
    CHECK(nrt_inspect_config_allocate(&cfg));
    CHECK(nrt_inspect_config_set_activity(cfg, "all", false));
    CHECK(nrt_inspect_config_set_activity(cfg, "system_profile", true));
    CHECK(nrt_inspect_config_set_activity(cfg, "device_profile", true));
    EXPECT(nrt_inspect_config_set_activity(cfg, "gpu_util", true), NRT_INVALID);
    CHECK(nrt_inspect_config_get_enabled_activity_types(cfg, &acts, &n_acts));
    if (n_acts != 2 || strcmp(acts[0], "system_profile") || strcmp(acts[1], "device_profile"))
        FAIL("enabled activity types");
    nrt_inspect_config_free_activity_types(acts, n_acts);
    EXPECT(nrt_inspect_config_set_output_dir(cfg, ""), NRT_INVALID);
    CHECK(nrt_inspect_config_set_output_dir(cfg, dir));
    CHECK(nrt_inspect_config_set_session_id(cfg, 7));
    CHECK(nrt_inspect_config_set_sys_trace_max_events_per_nc(cfg, 1000));
    CHECK(nrt_inspect_config_set_capture_enabled_for_nc(cfg, 0, true));
    CHECK(nrt_inspect_config_set_capture_enabled_for_event_type_string(cfg, "nrt_tensor_read", false));
    EXPECT(nrt_inspect_config_set_capture_enabled_for_event_type_string(cfg, "nope", false), NRT_INVALID);
    CHECK(nrt_inspect_config_set_enable_inspect(cfg, true));
    CHECK(nrt_inspect_config_set_enable_inspect_on_fail(cfg, false));

    /* Every execution. */
    CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
    CHECK(nrt_inspect_begin_with_options(cfg));
    EXPECT(nrt_inspect_begin_with_options(cfg), NRT_INVALID);
    mlp_open(&m, argv[1]);
    CHECK(nrt_execute(m.model, m.inputs, m.outputs));
    CHECK(nrt_execute(m.model, m.inputs, m.outputs));
    mlp_check_output(&m, argv[1]);
    CHECK(nrt_inspect_stop());
    EXPECT(nrt_inspect_stop(), NRT_INVALID);
    check_execution(&m, argv[1], root, 7, 1);
    check_execution(&m, argv[1], root, 7, 2);
    snprintf(p, sizeof p, "%s/system_profile.json", root);
    char *sys = read_text(p);
    if (count_of(sys, "\"name\":\"nrt_exec_complete\"") != 2 || count_of(sys, "\"name\":\"nrt_load\"") != 1 ||
        count_of(sys, "\"name\":\"nrt_tensor_write\"") != 5 || count_of(sys, "\"name\":\"nrt_tensor_read\"") != 0)
        FAIL("%s: %s", p, sys);
    free(sys);
    if (entries(root) != 3) FAIL("%s: %d entries, expected 2 executions and the system profile", root, entries(root));

    /* Failing executions only: a successful one writes nothing. */
    CHECK(nrt_inspect_config_set_defaults(cfg));
    CHECK(nrt_inspect_config_set_activity(cfg, "host_memory", false));
    CHECK(nrt_inspect_config_set_activity(cfg, "cpu_util", false));
    CHECK(nrt_inspect_config_set_output_dir(cfg, dir));
    CHECK(nrt_inspect_config_set_enable_inspect_on_fail(cfg, true));
    CHECK(nrt_inspect_begin_with_options(cfg));
    CHECK(nrt_execute(m.model, m.inputs, m.outputs));
    CHECK(nrt_inspect_stop());
    if (entries(root) != 3) FAIL("on-fail capture wrote a successful execution");
    CHECK(nrt_inspect_config_free(cfg));
    EXPECT(nrt_inspect_config_free(cfg), NRT_INVALID_HANDLE);

    /* The environment at load time, in a child (a new process image) that never calls
     * nrt_inspect_*. */
    char env_dir[300];
    snprintf(env_dir, sizeof env_dir, "%s/env", dir);
    pid_t pid = fork();
    if (pid < 0) FAIL("fork");
    if (pid == 0) {
        setenv("NEURON_RT_INSPECT_ENABLE", "1", 1);
        setenv("NEURON_RT_INSPECT_OUTPUT_DIR", env_dir, 1);
        setenv("NEURON_RT_INSPECT_EVENT_FILTER_TYPE", "software,^nrt_tensor_write", 1);
        setenv("NEURON_RT_INSPECT_EVENT_FILTER_NC", "0-3", 1);
        execl(argv[0], argv[0], argv[1], "--child", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        FAIL("the child failed (status %d)", status);
    snprintf(root, sizeof root, "%s/sim_pid_%d", env_dir, (int)pid);
    check_execution(&m, argv[1], root, 1, 1);
    snprintf(p, sizeof p, "%s/system_profile.json", root);
    sys = read_text(p);
    /* The type filter of the environment: every runtime event but the writes. */
    if (count_of(sys, "\"name\":\"nrt_exec_complete\"") != 1 || count_of(sys, "\"name\":\"nrt_load\"") != 1 ||
        count_of(sys, "\"name\":\"nrt_tensor_write\"") != 0 || count_of(sys, "\"name\":\"nrt_tensor_read\"") != 0)
        FAIL("%s: %s", p, sys);
    free(sys);

    mlp_close(&m);
    nrt_close();
    mlp_unmap(&m);
    remove_tree(dir);
    printf("inspect_mlp: OK\n");
    return 0;
}
