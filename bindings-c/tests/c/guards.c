/* The lifecycle guard on every tensor and tensor-set entry, stale / forged / wrong-kind
 * handles, and "every failure is logged exactly once": each failing call below is run with
 * the library's log (fd 2) captured in a file, and the lines are counted.
 *
 * Statuses (specification 002, the NRT_INIT_STATE guard): before nrt_init and after nrt_close
 * (which ends in NRT_STATE_START) NRT_UNINITIALIZED (13); in a forked child NRT_FAILURE (1)
 * with "Incompatible runtime state: NRT_STATE_CHILD"; nrt_close in a forked child returns at
 * once and logs nothing. */
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

static char log_text[8192];

/* Runs `body` with fd 2 redirected to a temporary file; leaves the captured text in log_text
 * and returns the number of library log lines (lines containing " NRT:"). */
#define LOGGED(body) logged_lines_(({                                                     \
    int saved_ = begin_capture();                                                          \
    body;                                                                                  \
    saved_;                                                                                \
}))

static FILE *capture_file;

static int begin_capture(void) {
    fflush(stderr);
    capture_file = tmpfile();
    if (!capture_file) exit(3);
    int saved = dup(2);
    if (saved < 0 || dup2(fileno(capture_file), 2) < 0) exit(3);
    return saved;
}

static int logged_lines_(int saved) {
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(capture_file);
    size_t got = fread(log_text, 1, sizeof log_text - 1, capture_file);
    log_text[got] = 0;
    fclose(capture_file);
    int lines = 0;
    for (char *p = log_text; (p = strstr(p, " NRT:")) != NULL; p++) lines++;
    return lines;
}

static int log_has(const char *needle) { return needle == NULL || strstr(log_text, needle); }
static const char *needle_text(const char *needle) { return needle ? needle : ""; }

#define EXPECT_LOGGED(call, expected_status, expected_lines, needle)                          \
    do {                                                                                       \
        NRT_STATUS st_ = NRT_SUCCESS;                                                          \
        int lines_ = LOGGED(st_ = (call));                                                     \
        if (st_ != (expected_status) || lines_ != (expected_lines) || !log_has(needle)) {     \
            fprintf(stderr, "%s:%d: %s returned %d with %d log line(s), expected %d with %d" \
                            " containing \"%s\"; log:\n%s",                                   \
                    __FILE__, __LINE__, #call, (int)st_, lines_, (int)(expected_status),       \
                    (int)(expected_lines), needle_text(needle), log_text);                    \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* Every tensor and tensor-set entry on existing handles returns `want` (and the size / VA
 * getters their failure values). */
static int all_refused(nrt_tensor_t *t, nrt_tensor_set_t *set, NRT_STATUS want) {
    unsigned char buf[16] = {0};
    nrt_tensor_t *got = NULL;
    nrt_tensor_set_t *new_set = NULL;
    nrt_tensor_t *new_tensor = NULL;
    nrt_tensor_device_allocation_info_t ainfo;
    int bad = 0;
    bad |= nrt_tensor_write(t, buf, 0, 4) != want;
    bad |= nrt_tensor_read(t, buf, 0, 4) != want;
    bad |= nrt_tensor_copy(t, 0, t, 8, 4) != want;
    bad |= nrt_tensor_memset(t, 0, 1, 4) != want;
    bad |= nrt_tensor_get_size(t) != 0;
    bad |= nrt_tensor_get_va(t) != NULL;
    bad |= nrt_tensor_get_device_allocation_info(t, &ainfo) != want;
    bad |= nrt_tensor_allocate_slice(t, 0, 4, "s", &new_tensor) != want;
    bad |= nrt_tensor_allocate_empty("e", &new_tensor) != want;
    bad |= nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_HOST, 0, 4, "h", &new_tensor) != want;
    bad |= nrt_allocate_tensor_set(&new_set) != want;
    bad |= nrt_add_tensor_to_tensor_set(set, "x", t) != want;
    bad |= nrt_get_tensor_from_tensor_set(set, "t", &got) != want;
    bad |= new_tensor != NULL || new_set != NULL || got != NULL;
    return bad;
}

int main(void) {
    /* Before the first call: errors and warnings reach the log (the runner sets QUIET). */
    setenv("NEURON_RT_LOG_LEVEL", "WARNING", 1);
    unsigned char buf[16] = {0};
    nrt_tensor_t *forged = (nrt_tensor_t *)(uintptr_t)0x1234560;

    /* Before nrt_init: NRT_UNINITIALIZED, one line "NRT uninitialized". */
    EXPECT_LOGGED(nrt_tensor_write(forged, buf, 0, 4), NRT_UNINITIALIZED, 1, "NRT uninitialized");
    nrt_tensor_set_t *set = NULL;
    EXPECT_LOGGED(nrt_allocate_tensor_set(&set), NRT_UNINITIALIZED, 1, "NRT uninitialized");

    CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));

    /* Machine and memory queries report the simulated trn1.2xlarge (1 device). */
    nrt_instance_info_t ii;
    memset(&ii, 0x7f, sizeof ii);
    CHECK(nrt_get_instance_info(&ii, sizeof ii));
    if (ii.family != NRT_INSTANCE_TRN1 || ii.size != NRT_INSTANCE_SIZE_2XL ||
        strcmp(ii.arch_name, "trn1") != 0 || strcmp(ii.device_revision, "sim") != 0) {
        fprintf(stderr, "instance info: family %u size %u arch %.16s revision %.8s\n", ii.family,
                ii.size, ii.arch_name, ii.device_revision);
        return 1;
    }
    nrt_vnc_memory_stats_t before, after;
    size_t written = 0;
    CHECK(nrt_get_vnc_memory_stats(0, &before, sizeof before, &written));
    if (written != sizeof before || before.bytes_limit != (size_t)32 << 30) return 1;
    nrt_tensor_t *big = NULL, *slice = NULL;
    CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 65536, "big", &big));
    CHECK(nrt_get_vnc_memory_stats(0, &after, sizeof after, &written));
    if (after.bytes_used - before.bytes_used != 65536) {
        fprintf(stderr, "a 65536-byte tensor moved bytes_used by %zu\n",
                after.bytes_used - before.bytes_used);
        return 1;
    }
    nrt_tensor_device_allocation_info_t ai, si;
    CHECK(nrt_tensor_get_device_allocation_info(big, &ai));
    if (ai.physical_address != (uint64_t)(uintptr_t)nrt_tensor_get_va(big) || ai.size != 65536 ||
        ai.hbm_index != 0)
        return 1;
    CHECK(nrt_tensor_allocate_slice(big, 4096, 16, "slice", &slice));
    CHECK(nrt_tensor_get_device_allocation_info(slice, &si));
    if (si.physical_address != ai.physical_address + 4096 || si.size != 65536) return 1;
    nrt_tensor_free(&slice);
    nrt_tensor_free(&big);
    CHECK(nrt_get_vnc_memory_stats(0, &after, sizeof after, &written));
    if (after.bytes_used != before.bytes_used) return 1;

    nrt_tensor_t *t = NULL, *other = NULL;
    CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, 16, "t", &t));
    CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_HOST, 0, 16, "o", &other));
    CHECK(nrt_allocate_tensor_set(&set));
    CHECK(nrt_add_tensor_to_tensor_set(set, "t", t));

    /* NULL, forged, wrong-kind and stale handles: one status, one log line each. */
    EXPECT_LOGGED(nrt_tensor_write(NULL, buf, 0, 4), NRT_INVALID, 1, "tensor is NULL");
    EXPECT_LOGGED(nrt_tensor_write(forged, buf, 0, 4), NRT_INVALID_HANDLE, 1,
                  "Invalid tensor handle");
    unsigned char *heap = malloc(64); /* a real pointer that is no handle */
    EXPECT_LOGGED(nrt_tensor_read((nrt_tensor_t *)heap, buf, 0, 4), NRT_INVALID_HANDLE, 1,
                  "Invalid tensor handle");
    EXPECT_LOGGED(nrt_add_tensor_to_tensor_set((nrt_tensor_set_t *)t, "x", t),
                  NRT_INVALID_HANDLE, 1, "Invalid tensor set handle");
    EXPECT_LOGGED(nrt_tensor_write((nrt_tensor_t *)set, buf, 0, 4), NRT_INVALID_HANDLE, 1,
                  "Invalid tensor handle");
    nrt_tensor_t *stale = other;
    nrt_tensor_free(&other);
    if (other != NULL) return 1;
    EXPECT_LOGGED(nrt_tensor_write(stale, buf, 0, 4), NRT_INVALID_HANDLE, 1,
                  "Invalid tensor handle");
    if (LOGGED((void)0) != 0) return 1;
    int lines = LOGGED(if (nrt_tensor_get_size(stale) != 0) return 1);
    if (lines != 1) {
        fprintf(stderr, "nrt_tensor_get_size of a stale tensor logged %d lines:\n%s", lines,
                log_text);
        return 1;
    }
    lines = LOGGED(nrt_tensor_free(&stale));
    if (lines != 1 || stale != NULL) {
        fprintf(stderr, "freeing a freed tensor: %d lines (want 1), pointer %p\n", lines,
                (void *)stale);
        return 1;
    }
    nrt_tensor_set_t *stale_set = NULL;
    CHECK(nrt_allocate_tensor_set(&stale_set));
    nrt_tensor_set_t *kept = stale_set;
    nrt_destroy_tensor_set(&stale_set);
    EXPECT_LOGGED(nrt_get_tensor_from_tensor_set(kept, "t", &other), NRT_INVALID_HANDLE, 1,
                  "Invalid tensor set handle");
    /* A failure the core reports without logging (a range check) is logged by the boundary. */
    EXPECT_LOGGED(nrt_tensor_read(t, buf, 8, 16), NRT_INVALID, 1, "outside its 16 bytes");
    /* A failure the core logs itself is not logged again. */
    nrt_tensor_t *bad = NULL;
    EXPECT_LOGGED(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 99, 16, "b", &bad),
                  NRT_INVALID, 1, "Logical Neuron Core 99");
    EXPECT_LOGGED(nrt_tensor_write(t, buf, 0, 4), NRT_SUCCESS, 0, NULL);
    free(heap);

    /* A forked child: every entry refuses with NRT_FAILURE; nrt_close is a quiet no-op. */
    int fds[2];
    if (pipe(fds) != 0) return 1;
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20); /* nrt_close must not wait for the parent's threads */
        int refused = all_refused(t, set, NRT_FAILURE);
        int one_line = LOGGED(nrt_tensor_write(t, buf, 0, 4)) == 1 &&
                       strstr(log_text, "Incompatible runtime state: NRT_STATE_CHILD") != NULL;
        int quiet_close = LOGGED(nrt_close()) == 0;
        char ok = (!refused && one_line && quiet_close) ? 'y' : 'n';
        if (write(fds[1], &ok, 1) != 1) _exit(2);
        _exit(0);
    }
    close(fds[1]);
    char answer = 0;
    if (read(fds[0], &answer, 1) != 1 || answer != 'y') {
        fprintf(stderr, "the forked child: guards or quiet nrt_close failed (%c)\n", answer);
        return 1;
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    /* The parent is unaffected by the child's nrt_close. */
    CHECK(nrt_tensor_write(t, buf, 0, 4));

    /* After nrt_close (INIT -> CLOSED -> START): NRT_UNINITIALIZED everywhere. */
    nrt_close();
    if (all_refused(t, set, NRT_UNINITIALIZED)) {
        fprintf(stderr, "a tensor or tensor-set entry worked after nrt_close\n");
        return 1;
    }
    EXPECT_LOGGED(nrt_tensor_read(t, buf, 0, 4), NRT_UNINITIALIZED, 1, "NRT uninitialized");

    /* A new session: the handles of the old one still resolve, and can be freed. */
    CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
    nrt_destroy_tensor_set(&set);
    nrt_tensor_free(&t);
    if (set != NULL || t != NULL) return 1;
    nrt_close();
    printf("guards: OK\n");
    return 0;
}
