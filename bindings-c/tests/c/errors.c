/* Error paths: NULL arguments, bad sizes, stale handles, calls before init / after close / in
 * a forked child, a truncated NEFF. */
#include <sys/wait.h>
#include <unistd.h>

#include <nrt/nrt_async.h>
#include <nrt/nrt_version.h>

#include "common.h"

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    char path[512];
    size_t neff_size = 0;
    snprintf(path, sizeof path, "%s/mlp.neff", argv[1]);
    void *neff = read_file(path, &neff_size);
    nrt_model_t *model = NULL;
    nrt_tensor_t *t = NULL;
    uint32_t count = 0;

    /* Before nrt_init. */
    EXPECT(nrt_load(neff, neff_size, -1, -1, &model), NRT_UNINITIALIZED);
    EXPECT(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 16, "t", &t), NRT_UNINITIALIZED);
    nrt_version_t ver;
    EXPECT(nrt_get_version(&ver, sizeof ver), NRT_SUCCESS); /* exempt from the guard */
    if (ver.rt_major != 2 || ver.rt_minor != 31) return 1;
    EXPECT(nrt_get_version(&ver, 159), NRT_FAILURE);
    EXPECT(nrt_get_total_nc_count(&count), NRT_SUCCESS); /* callable before nrt_init */
    if (strcmp(nrt_get_status_as_str(NRT_CLOSED), "NRT_CLOSED") != 0) return 1;

    CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
    CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "")); /* idempotent */

    /* NULL arguments. */
    EXPECT(nrt_load(NULL, neff_size, -1, -1, &model), NRT_INVALID);
    EXPECT(nrt_load(neff, neff_size, -1, -1, NULL), NRT_INVALID);
    EXPECT(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 16, "t", NULL), NRT_INVALID);
    EXPECT(nrt_execute(NULL, NULL, NULL), NRT_INVALID);
    EXPECT(nrt_get_model_tensor_info(NULL, NULL), NRT_INVALID);
    EXPECT(nrt_tensor_read(NULL, NULL, 0, 4), NRT_INVALID);
    EXPECT(nrt_allocate_tensor_set(NULL), NRT_INVALID);
    nrt_tensor_free(NULL);
    nrt_destroy_tensor_set(NULL);

    /* A truncated NEFF. */
    EXPECT(nrt_load(neff, neff_size / 2, -1, -1, &model), NRT_INVALID);
    EXPECT(nrt_load(neff, 100, -1, -1, &model), NRT_INVALID);

    /* Bad sizes. */
    CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 16, "t", &t));
    unsigned char buf[64] = {0};
    EXPECT(nrt_tensor_write(t, buf, 8, 16), NRT_INVALID);
    EXPECT(nrt_tensor_read(t, buf, 17, 1), NRT_INVALID);
    EXPECT(nrt_tensor_memset(t, 0, 0, 17), NRT_INVALID);
    EXPECT(nrt_tensor_read(t, NULL, 0, 4), NRT_INVALID);
    if (nrt_tensor_get_size(t) != 16) return 1;
    EXPECT(nrt_tensor_allocate(99, 0, 16, "t", &t), NRT_INVALID);

    /* Stale and forged handles. */
    nrt_tensor_t *stale = t;
    nrt_tensor_free(&t);
    if (t != NULL) return 1;
    EXPECT(nrt_tensor_write(stale, buf, 0, 4), NRT_INVALID_HANDLE);
    if (nrt_tensor_get_size(stale) != 0 || nrt_tensor_get_va(stale) != NULL) return 1;
    EXPECT(nrt_tensor_write((nrt_tensor_t *)(uintptr_t)0x1234560, buf, 0, 4), NRT_INVALID_HANDLE);
    CHECK(nrt_load(neff, neff_size, -1, -1, &model));
    nrt_model_t *stale_model = model;
    CHECK(nrt_unload(model));
    EXPECT(nrt_unload(stale_model), NRT_INVALID_HANDLE);
    EXPECT(nrt_get_model_tensor_info(stale_model, NULL), NRT_INVALID);
    nrt_tensor_info_array_t *info = NULL;
    EXPECT(nrt_get_model_tensor_info(stale_model, &info), NRT_INVALID_HANDLE);
    EXPECT(nrt_unload((nrt_model_t *)(uintptr_t)0xdeadbeef0), NRT_INVALID_HANDLE);
    nrt_tensor_set_t *set = NULL;
    CHECK(nrt_allocate_tensor_set(&set));
    EXPECT(nrt_get_tensor_from_tensor_set(set, "missing", &t), NRT_FAILURE);
    nrt_destroy_tensor_set(&set);
    bool done = false;
    EXPECT(nrta_is_completed(12345, &done), NRT_INVALID);

    /* Not supported: a documented status, never a crash. */
    EXPECT(nrt_build_global_comm(0, 0, 2), NRT_FAILURE);

    /* A forked child is in NRT_STATE_CHILD. It reports through a pipe, not its exit status,
     * which memory checkers may change (the child inherits the parent's allocations). */
    int fds[2];
    if (pipe(fds) != 0) return 1;
    pid_t pid = fork();
    if (pid == 0) {
        NRT_STATUS s1 = nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 16, "c", &t);
        NRT_STATUS s2 = nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", "");
        char ok = (s1 == NRT_FAILURE && s2 == NRT_FAILURE) ? 'y' : 'n';
        if (write(fds[1], &ok, 1) != 1) _exit(2);
        _exit(0);
    }
    close(fds[1]);
    char answer = 0;
    if (read(fds[0], &answer, 1) != 1 || answer != 'y') {
        fprintf(stderr, "the forked child did not see NRT_FAILURE\n");
        return 1;
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);

    /* After nrt_close: uninitialized again. */
    nrt_close();
    EXPECT(nrt_load(neff, neff_size, -1, -1, &model), NRT_UNINITIALIZED);
    nrt_close(); /* harmless */
    free(neff);
    printf("errors: OK\n");
    return 0;
}
