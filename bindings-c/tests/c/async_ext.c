/* The calls of the extra headers that do something on the simulator, with exact statuses:
 * output completion counters, async completion handles and error trackers, debug streams, the
 * datastore, the nec queries; and one not-provided call of each of nec.h and
 * nrt_async_sendrecv.h (NRT_FAILURE).
 *
 * The machine has 2 simulated trn1 devices (2 cores each, logical core size 1), so that an
 * execution can be given an output on the other device: the simulator refuses it when the
 * execution runs, which is how a scheduled execution fails here. */
#include <fcntl.h>
#include <poll.h>
#include <sys/types.h>
#include <unistd.h>

#include <nrt/ndebug_stream.h>
#include <nrt/nds/neuron_ds.h>
#include <nrt/nec.h>
#include <nrt/nrt_async.h>
#include <nrt/nrt_async_sendrecv.h>

#include "common.h"

#define REQUIRE(cond)                                                   \
    do {                                                                \
        if (!(cond)) {                                                  \
            fprintf(stderr, "%s:%d: %s is false\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                    \
        }                                                               \
    } while (0)

/* Whether fd polls readable within ms milliseconds. */
static int readable(int fd, int ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN, .revents = 0};
    return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

struct io {
    nrt_tensor_set_t *inputs, *outputs, *bad_outputs;
    nrt_tensor_t *tensors[64], *far[64];
    nrt_tensor_t *out; /* the first output */
    size_t n;
};

/* Device tensors for every I/O on logical core 0 (inputs written with the MLP's inputs), and
 * a second output set whose tensors are on logical core 2 (the other device). */
static void make_io(const char *dir, nrt_tensor_info_array_t *info, struct io *io) {
    char path[4096];
    CHECK(nrt_allocate_tensor_set(&io->inputs));
    CHECK(nrt_allocate_tensor_set(&io->outputs));
    CHECK(nrt_allocate_tensor_set(&io->bad_outputs));
    io->n = info->tensor_count;
    io->out = NULL;
    for (size_t i = 0; i < io->n; i++) {
        nrt_tensor_info_t *t = &info->tensor_array[i];
        io->far[i] = NULL;
        CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 0, t->size, t->name, &io->tensors[i]));
        if (t->usage == NRT_TENSOR_USAGE_INPUT) {
            size_t size = 0;
            snprintf(path, sizeof path, "%s/%s.bin", dir, t->name);
            void *data = read_file(path, &size);
            REQUIRE(size == t->size);
            CHECK(nrt_tensor_write(io->tensors[i], data, 0, size));
            free(data);
            CHECK(nrt_add_tensor_to_tensor_set(io->inputs, t->name, io->tensors[i]));
        } else {
            if (io->out == NULL) io->out = io->tensors[i];
            CHECK(nrt_add_tensor_to_tensor_set(io->outputs, t->name, io->tensors[i]));
            CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_DEVICE, 2, t->size, t->name, &io->far[i]));
            CHECK(nrt_add_tensor_to_tensor_set(io->bad_outputs, t->name, io->far[i]));
        }
    }
    REQUIRE(io->out != NULL);
}

static void free_io(struct io *io) {
    for (size_t i = 0; i < io->n; i++) {
        nrt_tensor_free(&io->tensors[i]);
        if (io->far[i]) nrt_tensor_free(&io->far[i]);
    }
    nrt_destroy_tensor_set(&io->inputs);
    nrt_destroy_tensor_set(&io->outputs);
    nrt_destroy_tensor_set(&io->bad_outputs);
}

/* Schedules one execution and waits for it through a completion handle; returns its status. */
static NRT_STATUS run_scheduled(nrt_model_t *model, struct io *io, nrt_tensor_set_t *outputs,
                                nrta_seq_t *seq) {
    NRT_STATUS ret = (NRT_STATUS)12345;
    CHECK(nrta_execute_schedule(model, io->inputs, outputs, 0, &ret, seq));
    int fd = -1;
    CHECK(nrta_get_completion_handle(*seq, &fd));
    REQUIRE(fd >= 0);
    REQUIRE(readable(fd, 20000));
    close(fd);
    bool done = false;
    CHECK(nrta_is_completed(*seq, &done));
    REQUIRE(done);
    return ret;
}

static void output_completion(nrt_model_t *model, struct io *io) {
    nrt_tensor_t *host = NULL;
    CHECK(nrt_tensor_allocate(NRT_TENSOR_PLACEMENT_HOST, 0, 16, "host", &host));
    EXPECT(nrt_tensor_check_output_completion(NULL, 0, 1), NRT_INVALID);
    EXPECT(nrt_tensor_reset_output_completion(NULL), NRT_INVALID);
    EXPECT(nrt_tensor_check_output_completion(host, 0, 1), NRT_INVALID);
    nrt_tensor_free(&host);

    /* Nothing has written the output yet. */
    EXPECT(nrt_tensor_check_output_completion(io->out, 0, 0), NRT_SUCCESS);
    EXPECT(nrt_tensor_check_output_completion(io->out, 1000, 1), NRT_TIMEOUT);
    CHECK(nrt_execute(model, io->inputs, io->outputs));
    EXPECT(nrt_tensor_check_output_completion(io->out, 0, 1), NRT_SUCCESS);
    EXPECT(nrt_tensor_check_output_completion(io->out, 0, 2), NRT_TIMEOUT);
    CHECK(nrt_execute_repeat(model, io->inputs, io->outputs, 3));
    EXPECT(nrt_tensor_check_output_completion(io->out, 0, 4), NRT_SUCCESS);
    EXPECT(nrt_tensor_check_output_completion(io->out, 0, 5), NRT_TIMEOUT);
    CHECK(nrt_tensor_reset_output_completion(io->out));
    EXPECT(nrt_tensor_check_output_completion(io->out, 0, 1), NRT_TIMEOUT);

    /* A scheduled execution: an unbounded wait returns once it has run. */
    NRT_STATUS ret = (NRT_STATUS)12345;
    nrta_seq_t seq = 0;
    CHECK(nrta_execute_schedule(model, io->inputs, io->outputs, 0, &ret, &seq));
    EXPECT(nrt_tensor_check_output_completion(io->out, -1, 1), NRT_SUCCESS);
    /* The queue marks the request completed just after its outputs are counted. */
    int fd = -1;
    CHECK(nrta_get_completion_handle(seq, &fd));
    REQUIRE(readable(fd, 20000));
    close(fd);
    bool done = false;
    CHECK(nrta_is_completed(seq, &done));
    REQUIRE(done);
    EXPECT(ret, NRT_SUCCESS);
    CHECK(nrt_tensor_reset_output_completion(io->out));
    printf("output completion: ok\n");
}

static void completion_handles(nrt_model_t *model, struct io *io) {
    nrta_seq_t seq = 0;
    EXPECT(run_scheduled(model, io, io->outputs, &seq), NRT_SUCCESS);
    REQUIRE(NRTA_SEQ_GET_XU_ID(seq) == NRTA_XU_COMPUTE);
    /* A completed request: readable at once. */
    int fd = -1;
    CHECK(nrta_get_completion_handle(seq, &fd));
    REQUIRE(readable(fd, 0));
    close(fd);
    /* Ids that were never issued, and NULL. */
    EXPECT(nrta_get_completion_handle(seq + 1000, &fd), NRT_INVALID);
    EXPECT(nrta_get_completion_handle(0, &fd), NRT_INVALID);
    EXPECT(nrta_get_completion_handle(seq, NULL), NRT_INVALID);
    printf("completion handles: ok\n");
}

static void error_trackers(nrt_model_t *model, struct io *io) {
    nrta_error_tracker_t *tracker = NULL, *other = NULL;
    EXPECT(nrta_error_tracker_create(0, NULL), NRT_INVALID);
    EXPECT(nrta_error_tracker_create(99, &other), NRT_INVALID);
    CHECK(nrta_error_tracker_create(0, &tracker));
    CHECK(nrta_error_tracker_create(1, &other)); /* another core: sees nothing of core 0 */
    const nrta_error_t *list = (const nrta_error_t *)1;
    size_t count = 99;
    CHECK(nrta_error_tracker_get_list(tracker, &list, &count));
    REQUIRE(count == 0 && list == NULL);
    EXPECT(nrta_error_tracker_get_list(NULL, &list, &count), NRT_INVALID);
    EXPECT(nrta_error_tracker_get_list((nrta_error_tracker_t *)&count, &list, &count),
           NRT_INVALID_HANDLE);
    EXPECT(nrta_error_tracker_get_list(tracker, NULL, &count), NRT_INVALID);

    /* Outputs on the other device: the simulator refuses the execution when it runs. */
    nrta_seq_t bad = 0, good = 0;
    NRT_STATUS status = run_scheduled(model, io, io->bad_outputs, &bad);
    EXPECT(status, NRT_INVALID);
    EXPECT(run_scheduled(model, io, io->outputs, &good), NRT_SUCCESS);
    REQUIRE(NRTA_SEQ_GET_SEQ_NUM(good) == NRTA_SEQ_GET_SEQ_NUM(bad) + 1);
    CHECK(nrta_error_tracker_get_list(tracker, &list, &count));
    REQUIRE(count == 1 && list != NULL);
    REQUIRE(list[0].seq_id == bad);
    REQUIRE(list[0].error_code == (uint64_t)NRT_INVALID);
    /* Taken: the next call has nothing new. */
    CHECK(nrta_error_tracker_get_list(tracker, &list, &count));
    REQUIRE(count == 0 && list == NULL);
    CHECK(nrta_error_tracker_get_list(other, &list, &count));
    REQUIRE(count == 0 && list == NULL);

    /* A failing synchronous execution is recorded without a sequence id. */
    EXPECT(nrt_execute(model, io->inputs, io->bad_outputs), NRT_INVALID);
    CHECK(nrta_error_tracker_get_list(tracker, &list, &count));
    REQUIRE(count == 1 && list != NULL);
    REQUIRE(list[0].seq_id == 0 && list[0].error_code == (uint64_t)NRT_INVALID);
    nrta_error_tracker_destroy(tracker);
    nrta_error_tracker_destroy(other);
    nrta_error_tracker_destroy(NULL);
    printf("error trackers: ok\n");
}

static void debug_streams(void) {
    int fd = -1, fd2 = -1;
    EXPECT(nrt_debug_client_connect(0, NULL), NRT_INVALID);
    EXPECT(nrt_debug_client_connect(99, &fd), NRT_INVALID);
    EXPECT(nrt_debug_client_connect(-1, &fd), NRT_INVALID);
    CHECK(nrt_debug_client_connect(0, &fd));
    EXPECT(nrt_debug_client_connect(0, &fd2), NRT_INVALID); /* one client per core */
    CHECK(nrt_debug_client_connect(1, &fd2));
    REQUIRE(fd >= 0 && fd2 >= 0 && fd != fd2);
    REQUIRE(!readable(fd, 0));
    ndebug_stream_event_header_t header;
    void *payload = NULL;
    EXPECT(nrt_debug_client_read_one_event(fd, &header, &payload), NRT_QUEUE_EMPTY);
    EXPECT(nrt_debug_client_read_one_event(fd, NULL, &payload), NRT_INVALID);
    EXPECT(nrt_debug_client_read_one_event(-5, &header, &payload), NRT_INVALID);
    nrt_debug_client_connect_close(fd);
    nrt_debug_client_connect_close(fd2);
    CHECK(nrt_debug_client_connect(0, &fd)); /* free again after close */
    nrt_debug_client_connect_close(fd);
    printf("debug streams: ok\n");
}

static void datastore(void) {
    nds_instance_t *rw = NULL, *ro = NULL, *other = NULL;
    REQUIRE(nds_open(NULL, 0, NULL) != 0);
    REQUIRE(nds_open(NULL, 0, &rw) == 0 && rw != NULL);
    REQUIRE(nds_open(NULL, getpid(), &ro) == 0 && ro != NULL);
    REQUIRE(nds_open(NULL, 1, &other) != 0); /* another process's datastore */

    uint64_t v = 0;
    REQUIRE(nds_increment_nc_counter(rw, 1, 3, 5) == 0);
    REQUIRE(nds_decrement_nc_counter(rw, 1, 3, 2) == 0);
    REQUIRE(nds_get_nc_counter(ro, 1, 3, &v) == 0 && v == 3);
    REQUIRE(nds_get_nc_counter(rw, 0, 3, &v) == 0 && v == 0);
    v = 40;
    REQUIRE(nds_set_nc_counter(rw, 15, 94, &v) == 0);
    REQUIRE(nds_get_nc_counter(rw, 15, 94, &v) == 0 && v == 40);
    REQUIRE(nds_get_nc_counter(rw, 16, 0, &v) != 0);  /* no such core */
    REQUIRE(nds_get_nc_counter(rw, 0, 95, &v) != 0);  /* no such counter */
    REQUIRE(nds_get_nc_counter(rw, -1, 0, &v) != 0);
    REQUIRE(nds_increment_nc_counter(ro, 1, 3, 1) != 0); /* read-only */

    REQUIRE(nds_decrement_nd_counter(rw, 2, 1) == 0); /* wraps */
    REQUIRE(nds_get_nd_counter(rw, 2, &v) == 0 && v == UINT64_MAX);
    REQUIRE(nds_increment_nd_counter(rw, 2, 2) == 0);
    REQUIRE(nds_get_nd_counter(rw, 2, &v) == 0 && v == 1);
    REQUIRE(nds_or_nd_counter(rw, 3, 1ull << BIT_INDEX_MULTICORE_FEATURE) == 0);
    REQUIRE(nds_or_nd_counter(rw, 3, 1ull << BIT_INDEX_TEST_FEATURE) == 0);
    REQUIRE(nds_get_nd_counter(ro, 3, &v) == 0 && v == 3);
    v = 7;
    REQUIRE(nds_set_nd_counter(rw, 30, &v) == 0);
    REQUIRE(nds_set_nd_counter(rw, 31, &v) != 0);
    REQUIRE(nds_set_nd_counter(ro, 30, &v) != 0);
    REQUIRE(nds_get_nd_counter(rw, 30, NULL) != 0);
    REQUIRE(nds_get_nd_counter((nds_instance_t *)&v, 30, &v) != 0); /* not an instance */

    /* A model node: create, fill, commit, read back, delete. */
    REQUIRE(nds_obj_new(rw, 7) == NULL);
    nds_obj_handle_t node = nds_obj_new(rw, OBJECT_TYPE_MODEL_NODE_INFO);
    REQUIRE(node != NULL);
    REQUIRE(nds_obj_handle_to_process_info(node) == NULL); /* another type */
    nds_model_node_info_t *info = nds_obj_handle_to_model_node_info(node);
    REQUIRE(info != NULL && info->model_id == 0 && info->name[0] == 0);
    info->model_id = 11;
    info->model_node_id = 2;
    snprintf(info->name, sizeof info->name, "mlp");
    info->nc_index = 1;
    nds_model_node_mem_usage_info_t *mem = nds_obj_handle_to_model_node_mem_usage(node);
    REQUIRE(mem != NULL);
    mem->model_mem_usage[1][NDS_DMA_MEM_USAGE_SLOT_TENSORS].total_size = 4096;
    mem->model_mem_usage[1][NDS_DMA_MEM_USAGE_SLOT_TENSORS].chunk_count = 2;
    nds_obj_handle_t *nodes = NULL;
    size_t count = 9;
    REQUIRE(nds_read_all_model_nodes(ro, &nodes, &count) == 0 && count == 0 && nodes == NULL);
    REQUIRE(nds_obj_commit(node) == 0);
    REQUIRE(nds_read_all_model_nodes(ro, &nodes, &count) == 0 && count == 1 && nodes != NULL);
    nds_model_node_info_t *read = nds_obj_handle_to_model_node_info(nodes[0]);
    REQUIRE(read != NULL && read != info);
    REQUIRE(read->model_id == 11 && read->model_node_id == 2 && read->nc_index == 1);
    REQUIRE(strcmp(read->name, "mlp") == 0);
    nds_model_node_mem_usage_info_t *read_mem = nds_obj_handle_to_model_node_mem_usage(nodes[0]);
    REQUIRE(read_mem->model_mem_usage[1][NDS_DMA_MEM_USAGE_SLOT_TENSORS].total_size == 4096);
    REQUIRE(read_mem->model_mem_usage[1][NDS_DMA_MEM_USAGE_SLOT_TENSORS].chunk_count == 2);
    REQUIRE(nds_obj_delete(nodes[0]) == 0); /* a snapshot: only freed */
    free(nodes);
    REQUIRE(nds_read_all_model_nodes(ro, &nodes, &count) == 0 && count == 1);
    REQUIRE(nds_obj_delete(nodes[0]) == 0);
    free(nodes);
    REQUIRE(nds_obj_delete(node) == 0); /* the created object: taken out of the datastore */
    REQUIRE(nds_read_all_model_nodes(ro, &nodes, &count) == 0 && count == 0 && nodes == NULL);
    REQUIRE(nds_obj_delete(node) != 0); /* already deleted */

    /* Process information. */
    REQUIRE(nds_read_process_info(ro) == NULL); /* none committed */
    nds_obj_handle_t proc = nds_obj_new(rw, OBJECT_TYPE_PROCESS_INFO);
    nds_process_info_t *p = nds_obj_handle_to_process_info(proc);
    REQUIRE(p != NULL);
    p->framework_type = 2;
    snprintf(p->tag, sizeof p->tag, "c-test");
    p->runtime_version.major = 2;
    p->runtime_version.minor = 31;
    p->runtime_version.build = 24;
    REQUIRE(nds_obj_commit(proc) == 0);
    nds_obj_handle_t snap = nds_read_process_info(ro);
    nds_process_info_t *q = nds_obj_handle_to_process_info(snap);
    REQUIRE(q != NULL && q->framework_type == 2 && strcmp(q->tag, "c-test") == 0);
    REQUIRE(q->runtime_version.major == 2 && q->runtime_version.minor == 31 && q->runtime_version.build == 24);
    REQUIRE(nds_obj_delete(snap) == 0);
    nds_obj_handle_t ext = nds_obj_new(rw, OBJECT_TYPE_PROCESS_INFO_EXT);
    nds_process_info_ext_t *e = nds_obj_handle_to_process_info_ext(ext);
    REQUIRE(e != NULL);
    snprintf(e->tag, sizeof e->tag, "extended");
    REQUIRE(nds_obj_commit(ext) == 0);
    snap = nds_read_process_info_ext(ro);
    REQUIRE(snap != NULL && strcmp(nds_obj_handle_to_process_info_ext(snap)->tag, "extended") == 0);
    REQUIRE(nds_obj_delete(snap) == 0);
    REQUIRE(nds_obj_delete(ext) == 0);
    REQUIRE(nds_read_process_info_ext(ro) == NULL);
    REQUIRE(nds_obj_delete(proc) == 0);
    REQUIRE(nds_read_process_info(ro) == NULL);

    REQUIRE(nds_close(ro) == 0);
    REQUIRE(nds_close(ro) != 0);
    /* A fresh instance of the same device sees the same counters. */
    REQUIRE(nds_open(NULL, getpid(), &ro) == 0);
    REQUIRE(nds_get_nd_counter(ro, 30, &v) == 0 && v == 7);
    REQUIRE(nds_close(ro) == 0);
    REQUIRE(nds_close(rw) == 0);
    printf("datastore: ok\n");
}

static void nec_queries(void) {
    int ids[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
    REQUIRE(nec_get_device_count(ids, 8) == 2);
    REQUIRE(ids[0] == 0 && ids[1] == 1 && ids[2] == -1);
    REQUIRE(nec_get_device_count(ids, 1) == 2);
    REQUIRE(nec_get_device_count(NULL, 0) == 2);
    uint32_t lnc_size = 0;
    CHECK(nec_get_virtual_core_size(&lnc_size));
    REQUIRE(lnc_size == 1);
    EXPECT(nec_get_virtual_core_size(NULL), NRT_INVALID);
    nec_version_info_t version;
    memset(&version, 0xff, sizeof version);
    CHECK(nec_get_version_info(&version));
    REQUIRE(version.major == 2 && version.minor == 31 && version.patch == 24 && version.maintenance == 0);
    REQUIRE(memchr(version.git_hash, 0, sizeof version.git_hash) != NULL);
    REQUIRE(version.compatibility_version == 0);
    /* Not provided: a failure value (and one log line each). */
    uint32_t domain = 0, bus = 0;
    uint8_t slot = 0, func = 0;
    REQUIRE(nec_get_device_pci_bdf(0, &domain, &bus, &slot, &func) == -1);
    int mla[1] = {0}, host[1] = {0};
    EXPECT(nec_build_port_and_rid_map(0, mla, host, 1), NRT_FAILURE);
    REQUIRE(!nec_is_mla_available(0, 0));
    REQUIRE(nec_get_dynamic_send_size_bytes(NULL, 4, 0, 2) == 0);
    REQUIRE(nec_get_dynamic_send_offset_bytes(NULL, 4, 0, 2) == 0);
    REQUIRE(nec_get_dynamic_recv_offset_bytes(NULL, 4, 0, 2) == 0);
    nec_set_recv_size_bytes(NULL, 64, 4, 0, 2);
    volatile uint32_t sem = 7;
    nec_inc_semaphore(&sem, 1);
    REQUIRE(sem == 7); /* nothing written */
    REQUIRE(nec_mla_idx_to_rid(0, 0) == -1);
    REQUIRE(nec_rid_to_mla_idx(0, 0) == -1);
    REQUIRE(nec_get_peer_mla_idx(0, 0, 1) == -1);
    int peer = 42, access = 42;
    REQUIRE(nec_get_p2p_pod_peer_node(0, 0, 1, &peer) == -1 && peer == 42);
    EXPECT(nec_pod_node_can_access_peer_node(NEC_POD_TYPE_P2P, 0, 0, 1, 1, &access), NRT_FAILURE);
    REQUIRE(access == 42);
    char msg[] = "hello";
    nec_ndl_printk(msg, sizeof msg, 0);

    /* nrt_async_sendrecv.h: nothing is provided; outputs stay untouched. */
    int num = 5;
    bool flag = false;
    size_t size = 3;
    nrt_async_sendrecv_comm_t *comm = NULL;
    nrt_async_sendrecv_request_t *req = NULL;
    EXPECT(nrt_async_sendrecv_get_max_num_communicators_per_lnc(&num), NRT_FAILURE);
    EXPECT(nrt_async_sendrecv_get_max_num_pending_request(&num), NRT_FAILURE);
    REQUIRE(num == 5);
    EXPECT(nrt_async_sendrecv_init(0), NRT_FAILURE);
    EXPECT(nrt_async_sendrecv_connect("127.0.0.1", 1, 0, &comm), NRT_FAILURE);
    EXPECT(nrt_async_sendrecv_accept("127.0.0.1", 0, 1, &comm), NRT_FAILURE);
    REQUIRE(comm == NULL);
    EXPECT(nrt_async_sendrecv_test_comm(comm, &flag), NRT_FAILURE);
    EXPECT(nrt_async_sendrecv_send_tensor(NULL, 0, 4, comm, &req), NRT_FAILURE);
    EXPECT(nrt_async_sendrecv_recv_tensor(NULL, 0, 4, comm, &req), NRT_FAILURE);
    REQUIRE(req == NULL);
    EXPECT(nrt_async_sendrecv_test_request(req, &flag, &size), NRT_FAILURE);
    REQUIRE(!flag && size == 3);
    EXPECT(nrt_async_sendrecv_flush(0), NRT_FAILURE);
    EXPECT(nrt_async_sendrecv_close(0), NRT_FAILURE);

    /* nrt_get_visible_vnc_count agrees with its deprecated twin. */
    uint32_t vnc = 0, nc = 0;
    CHECK(nrt_get_visible_vnc_count(&vnc));
    CHECK(nrt_get_visible_nc_count(&nc));
    REQUIRE(vnc == 4 && nc == 4);
    EXPECT(nrt_get_visible_vnc_count(NULL), NRT_INVALID);
    printf("nec and sendrecv: ok\n");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    setenv("NEURON_RT_SIM_DEVICES", "2", 1);
    setenv("NEURON_RT_SIM_INSTANCE", "trn1", 1);
    char path[4096];
    size_t neff_size = 0;
    snprintf(path, sizeof path, "%s/mlp.neff", argv[1]);
    void *neff = read_file(path, &neff_size);

    /* Before nrt_init. */
    EXPECT(nrta_error_tracker_create(0, &(nrta_error_tracker_t *){NULL}), NRT_UNINITIALIZED);
    int fd = -1;
    EXPECT(nrt_debug_client_connect(0, &fd), NRT_UNINITIALIZED);

    CHECK(nrt_init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""));
    nrt_model_t *model = NULL;
    CHECK(nrt_load(neff, neff_size, 0, 1, &model));
    nrt_tensor_info_array_t *info = NULL;
    CHECK(nrt_get_model_tensor_info(model, &info));
    struct io io;
    make_io(argv[1], info, &io);

    output_completion(model, &io);
    completion_handles(model, &io);
    error_trackers(model, &io);
    debug_streams();
    datastore();
    nec_queries();

    CHECK(nrt_unload(model));
    free_io(&io);
    CHECK(nrt_free_model_tensor_info(info));
    nrt_close();
    /* After nrt_close: uninitialized again. */
    EXPECT(nrta_error_tracker_create(0, &(nrta_error_tracker_t *){NULL}), NRT_UNINITIALIZED);
    EXPECT(nrt_debug_client_connect(0, &fd), NRT_UNINITIALIZED);
    free(neff);
    printf("async_ext: OK\n");
    return 0;
}
