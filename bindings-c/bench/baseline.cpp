// The benchmark's baseline: the design of AWS's libnrt for model lookups, behind the same C
// functions the driver calls — a process-wide pthread rwlock around a std::unordered_map from
// model id to model, an atomic reference count per model taken under the read lock, and a
// lifecycle-state guard on every entry. Only what the hot-path driver needs is implemented:
// nrt_init, nrt_close, nrt_load (registers a model; the NEFF bytes are not parsed), nrt_unload
// and nrt_get_model_nc_count. Built by bindings-c/bench/run.sh as libnrt_baseline.so.
#include <atomic>
#include <cstdint>
#include <pthread.h>
#include <unordered_map>

#include <nrt/nrt.h>

namespace {

enum State { START = 0, INIT = 1, CLOSED = 2 };

struct Model {
    std::atomic<int64_t> ref_count{0};
    uint32_t id;
    uint32_t nc_count;
};

std::atomic<int> g_state{START};
std::atomic<uint32_t> g_next_id{1};
pthread_rwlock_t g_lock = PTHREAD_RWLOCK_INITIALIZER;
std::unordered_map<uint32_t, Model *> *g_models = nullptr;

NRT_STATUS guard() {
    switch (g_state.load(std::memory_order_acquire)) {
    case INIT:
        return NRT_SUCCESS;
    case CLOSED:
        return NRT_CLOSED;
    default:
        return NRT_UNINITIALIZED;
    }
}

uint32_t id_of(const nrt_model_t *model) { return (uint32_t)(uintptr_t)model; }

// Takes a reference under the read lock (libnrt's db_get_nn_ref_count); NULL if unknown.
Model *acquire(uint32_t id) {
    pthread_rwlock_rdlock(&g_lock);
    auto it = g_models->find(id);
    Model *m = nullptr;
    if (it != g_models->end()) {
        m = it->second;
        m->ref_count.fetch_add(1, std::memory_order_acq_rel);
    }
    pthread_rwlock_unlock(&g_lock);
    return m;
}

void release(Model *m) { m->ref_count.fetch_sub(1, std::memory_order_acq_rel); }

} // namespace

extern "C" {

NRT_STATUS nrt_init(nrt_framework_type_t, const char *, const char *) {
    pthread_rwlock_wrlock(&g_lock);
    if (!g_models)
        g_models = new std::unordered_map<uint32_t, Model *>();
    pthread_rwlock_unlock(&g_lock);
    g_state.store(INIT, std::memory_order_release);
    return NRT_SUCCESS;
}

void nrt_close() {
    g_state.store(CLOSED, std::memory_order_release);
    pthread_rwlock_wrlock(&g_lock);
    if (g_models) {
        for (auto &kv : *g_models)
            delete kv.second;
        delete g_models;
        g_models = nullptr;
    }
    pthread_rwlock_unlock(&g_lock);
}

NRT_STATUS nrt_load(const void *neff, size_t size, int32_t, int32_t, nrt_model_t **model) {
    NRT_STATUS s = guard();
    if (s != NRT_SUCCESS)
        return s;
    if (!neff || size == 0 || !model)
        return NRT_INVALID;
    Model *m = new Model();
    m->id = g_next_id.fetch_add(1);
    m->nc_count = 1;
    pthread_rwlock_wrlock(&g_lock);
    (*g_models)[m->id] = m;
    pthread_rwlock_unlock(&g_lock);
    *model = (nrt_model_t *)(uintptr_t)m->id;
    return NRT_SUCCESS;
}

NRT_STATUS nrt_unload(nrt_model_t *model) {
    NRT_STATUS s = guard();
    if (s != NRT_SUCCESS)
        return s;
    pthread_rwlock_wrlock(&g_lock);
    auto it = g_models->find(id_of(model));
    if (it == g_models->end()) {
        pthread_rwlock_unlock(&g_lock);
        return NRT_INVALID_HANDLE;
    }
    Model *m = it->second;
    g_models->erase(it);
    pthread_rwlock_unlock(&g_lock);
    while (m->ref_count.load(std::memory_order_acquire) != 0) {
    }
    delete m;
    return NRT_SUCCESS;
}

NRT_STATUS nrt_get_model_nc_count(const nrt_model_t *model, uint32_t *count) {
    NRT_STATUS s = guard();
    if (s != NRT_SUCCESS)
        return s;
    if (!model || !count)
        return NRT_INVALID;
    Model *m = acquire(id_of(model));
    if (!m)
        return NRT_INVALID_HANDLE;
    *count = m->nc_count;
    release(m);
    return NRT_SUCCESS;
}

} // extern "C"
