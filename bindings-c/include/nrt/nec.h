/*
 * nec.h - Neuron Elastic Collectives (NEC): the runtime side of collective
 * operations, used by the collectives library (NCCL plug-in) and its network
 * proxy threads.
 *
 * Part of the nrt-capi library, a reimplementation of the libnrt 2.31 public
 * C interface. Most of this header describes libnrt's internal collectives
 * state; it is reproduced so that code built against libnrt's copy builds
 * unchanged (libnrt's copy defines nec_pod_type_t and two macros three
 * times, which no C compiler accepts; this copy defines each once). This
 * library runs single-device programs only: see docs/C_API.md for what each
 * nec_* function does.
 */

#ifndef NRT_NEC_H_INCLUDED
#define NRT_NEC_H_INCLUDED

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include "nrt/nrt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Limits of the collectives engine. */
#define NEC_MAX_CHANNELS 32
#define NEC_MAX_NR_CHANNEL_CHUNKS 32
#define NEC_MAX_FOLD_N 16

#define NEC_MAX_COMM_N 12

#define NEC_MAX_NET_BUFFERS (2 * NEC_MAX_COMM_N)

#define NEC_CACHE_LINE_SIZE 128

/* Special rank / device ids of connectors that are not local devices. */
#define NEC_NET_CONNECTOR_RANK -1

#define NEC_NET_MLA_DEV -1

#define NEC_POD_MLA_DEV -2

#define NEC_UNKNOWN_RANK -3

#define NEC_UNKNOWN_MLA_DEV -3

#define NEC_HIER_CC_PIPELINE_STAGE_N    (3)

#define NCCL_NET_NEURON_MAX_REQUESTS 128

#define NEC_MAX_STREAM_N       4

/* Kinds of network communicator a proxy thread drives. */
typedef enum ofi_comm_type {
    NET_SEND_COMM,
    NET_RECV_COMM,
    NET_RECV_LISTEN_COMM,
    LOCAL_RECV_COMM,
    LOCAL_SEND_COMM
} ofi_comm_type_t;

enum enc_comm_type {
    H_COMM_INTRA_ID = 0,
    H_COMM_INTER_ID = 1,
    H_COMM_MAX_ID
};

/* How the devices of a pod (UltraServer) are connected. */
typedef enum nec_pod_type {
    NEC_POD_TYPE_NONE,
    NEC_POD_TYPE_P2P,
    NEC_POD_TYPE_SWITCH,
    NEC_POD_TYPE_INVALID
} nec_pod_type_t;

/* Handles and addresses. */
typedef struct enc_comm* nec_comm_t;
typedef struct enc_channel* nec_channel_t;
typedef uint64_t dma_addr_t;

/* A host index shared by a proxy thread and the device, alone in its cache
 * line. */
struct enc_net_host_memory_index {
    union {
        volatile uint32_t index;
        char pad[NEC_CACHE_LINE_SIZE];
    };
};

struct enc_net_host_memory {
    union {
        struct {
            struct enc_net_host_memory_index post_recv[NEC_MAX_FOLD_N];
        } recv;
        struct {
            struct enc_net_host_memory_index post_send[NEC_MAX_FOLD_N];
        } send;
    };
};

/* DMA-mapped host memory. */
typedef struct enc_host_mem {
    void *mem_handle;
    void *va;
    dma_addr_t pa;
    size_t size;
} enc_host_mem_t;

typedef struct enc_host_mem_shared {
    enc_host_mem_t mem;
    int refcnt;
} enc_host_mem_shared_t;

/* Resources of one network connection of a channel. */
struct enc_net_connector {
    int fold_n;

    enc_host_mem_t net_host_mem;
    enc_host_mem_shared_t *dynamic_input_host_mem;

    void *devmem_res;
    void *nccl_mhandle;

    void *inc_recv_sem_nccl_mhandle;
    uint32_t *inc_recv_sem_values_buffer;
    void *inc_recv_sem_values_buffer_mhandle;

    void *nccl_connector;
};

typedef enum enc_pattern {
    ENC_PATTERN_RING,
    ENC_PATTERN_MESH,
    ENC_PATTERN_INVALID,
} enc_pattern_t;

typedef enum enc_net_connectivity {
    ENC_CONNECTIVITY_MESH,
    ENC_CONNECTIVITY_RDH,
    ENC_CONNECTIVITY_DEFAULT
} enc_net_connectivity_t;

/* One channel (data path) of a collective algorithm. */
struct enc_channel {

    int id;
    enc_pattern_t pattern;

    struct enc_net_connector *net_recv;
    struct enc_net_connector *net_send;

    void *devmem_res;
    void *two_step_pod_mesh_devmem_res;

    void *devmem_gw_buf_res;
    void *nccl_mhandle;

    dma_addr_t gw_recv_buffer;
    dma_addr_t gw_send_buffer;

    struct enc_channel_context *ch_ctx;
    struct encd_dma_channel *drv_channel;
};

struct enc_peer_info {
    int neuron_dev;
    int rid;
    int tpb_index;
    int pod_node_id;
};

typedef enum enc_topology_mode {
    ENC_TOPO_NULL = 0,
    ENC_TOPO_4_DEVS_IN_ROW,
    ENC_TOPO_4_DEVS_IN_COLUMN,
} enc_topology_mode_t;

/* Where this rank sits in the cluster. */
struct enc_comm_info {
    int neuron_dev;
    int rank;
    int rank_n;
    int local_rank_n;
    int local_rack_rank_n;

    int node;
    int node_n;

    enc_topology_mode_t enc_topo_mode;

    bool enable_pod;
    bool use_net;
    int pod;
    int pod_n;
    int pod_node;
    int pod_node_n;

    struct enc_peer_info *peers;
};

struct enc_ring {
    int prev;
    int next;
    int *user_ranks;

    bool duplicate;
};

/* Kangaring: a ring that alternates primary and secondary ranks. */
#define NEC_KANGARING_MAX_NUM_RANKS (256)
#define KANGARING_NUM_SENG_PER_DEV  (4)
#define KANGARING_NUM_TPB_PER_DEV   (8)
#define KANGARING_MAX_SECONDARIES   (3)

enum SEngine {
    S0 = 0,
    S1 = 1,
    S2 = 2,
    S3 = 3,
    SENGS_PER_DIE = 2,
    SENGS_PER_MLA = 4
};

struct enc_kangaring {
    int vnc;
    int logical_path[NEC_KANGARING_MAX_NUM_RANKS];
    int prev;
    int next;
    int port;

    int peer_rmtv;

    int peer_rmtv2;
    int peer_local;

    int next_peer_rmtv;

    bool is_primary;
    bool is_next_pcie;
    bool duplicate;
    bool pattern2;
};

typedef enum metaring_type {
    RING,
    KANGARING,
    SINGLE_CYCLE_RING,
    RDH,
    INVALID_METARING
} metaring_type_t;

struct enc_alg_metaring {
    int channel_n;
    struct enc_channel channels[NEC_MAX_CHANNELS];

    struct enc_ring ring_ranks[NEC_MAX_CHANNELS];
    struct enc_kangaring kangaring_ranks[NEC_MAX_CHANNELS];
    metaring_type_t type;

    bool one_rank_per_device;

    bool is_hybrid_ring;
    bool tokens_exchanged;
    bool deadlock_free_rank_list;

    struct enc_comm *comm;
    struct encd_alg_metaring *drv_alg;

    bool skip_send;
    bool skip_recv;
};

/* Events of the mesh algorithms. Order matters: common events, then mesh,
 * all-to-all and recursive-doubling/halving ones, each range marked by its
 * *_NUM_EVENT_* values. */
typedef enum enc_mesh_event_type {
    EVT_SYNC,
    EVT_GLOBAL_HNDSHK,
    EVT_LOCAL_HNDSHK,
    EVT_INTER_GRP_BRDCST,
    EVT_FUNCTION_BARRIER_FIRST_COLL,
    EVT_FUNCTION_BARRIER_LAST_COLL,
    EVT_REDUCE_LOCAL_HNDSHK,
    EVT_INTRA_GRP_BRDCST,
    ENC_COMMON_NUM_EVENT_TYPE,

    ENC_MESH_NUM_EVENT_START = ENC_COMMON_NUM_EVENT_TYPE,
    EVT_REDUCE_COPY = ENC_COMMON_NUM_EVENT_TYPE,
    EVT_REDUCE_COPY_2,
    EVT_REDUCE_WRITE,
    EVT_INTER_GRP_BRDCST_2,
    EVT_LOCAL_AND_POD_GRP_BRDCST,
    EVT_LOCAL_AND_POD_GRP_BRDCST_2,
    ENC_MESH_NUM_EVENT_TYPE,

    ENC_A2A_NUM_EVENT_START = ENC_MESH_NUM_EVENT_TYPE,
    EVT_LOCAL_HNDSHK_1 = ENC_MESH_NUM_EVENT_TYPE,
    EVT_LOCAL_HNDSHK_2,
    EVT_GLOBAL_HNDSHK_1,
    EVT_INTER_GRP_BRDCST_1,
    EVT_INTRA_GRP_BRDCST_1,
    EVT_2DEV_BRDCST,
    EVT_2DEV_HNDSHK,
    EVT_COPY_FROM_HOST,
    ENC_A2A_NUM_EVENT_TYPE,

    ENC_RDH_NUM_EVENT_START = ENC_A2A_NUM_EVENT_TYPE,
    EVT_RH_STEP_0 = ENC_A2A_NUM_EVENT_TYPE,
    EVT_RH_STEP_1,
    EVT_RH_STEP_2,
    EVT_RH_STEP_3,
    EVT_RH_STEP_4,
    EVT_RH_STEP_5,
    EVT_RH_STEP_6,
    EVT_RH_STEP_7,
    EVT_RH_STEP_8,
    EVT_RH_STEP_9,
    EVT_RDH_LOCAL_HANDSHAKE = EVT_RH_STEP_9,
    EVT_RDH_AXES_HANDSHAKE,
    EVT_RD_STEP_0,
    EVT_RD_STEP_1,
    EVT_RD_STEP_2,
    EVT_RD_STEP_3,
    EVT_RD_STEP_4,
    EVT_RD_STEP_5,
    EVT_RD_STEP_6,
    EVT_RDH_AXES_HANDSHAKE_2,
    EVT_1DEV_RDH_STEP_1,
    EVT_1DEV_RDH_STEP_2,
    EVT_1DEV_RD_STEP_1,
    EVT_1DEV_RD_STEP_2,
    EVT_1DEV_RH_STEP_1,
    EVT_2DEV_RD_STEP_0,
    EVT_2DEV_RD_STEP_1,
    EVT_2DEV_RD_STEP_2,
    EVT_2DEV_RD_STEP_3,
    EVT_2DEV_RD_STEP_4,
    EVT_RDH_LOCAL_PEER_HANDSHAKE,
    ENC_RDH_NUM_EVENT_TYPE

} enc_mesh_event_type_t;

#define ENC_MESH_MAX_NUM_EVENTS 64

#define KiB     (1024)
#define MiB     (1024 * KiB)
#define GiB     (1024 * MiB)

struct enc_mesh_nbr_grp {
    int *ranks;
    int ranks_n;
};

struct enc_mesh_event {
    struct enc_mesh_nbr_grp src_neighbor_grp;
    struct enc_mesh_nbr_grp dst_neighbor_grp;
    bool valid;
    enc_mesh_event_type_t evt_type;
};

typedef enum enc_alg_mesh_type {
    ENC_ALG_FULL_MESH,
    ENC_ALG_GROUPED_MESH,
    ENC_ALG_MESH_TRN2,
    ENC_ALG_MESH_SWITCH,
    ENC_ALG_MESH_INVALID
} enc_alg_mesh_type_t;

#define ENC_MAX_OP_TYPES     (13)
struct enc_alg_mesh_subtype {
    struct enc_mesh_event events[ENC_MESH_MAX_NUM_EVENTS];
    int num_events;
    struct encd_alg_mesh_subtype *drv_mesh;
    struct enc_alg_mesh *mesh;
    size_t op_max_limit[ENC_MAX_OP_TYPES];
    size_t op_min_limit[ENC_MAX_OP_TYPES];
    size_t op_max_limit_sbuf[ENC_MAX_OP_TYPES];
    size_t op_min_limit_sbuf[ENC_MAX_OP_TYPES];
    bool no_inplace_support;
    bool is_use_chnl_buffer;
    bool is_rdh;
    bool is_single_step_mesh;
    bool is_two_step_pod_mesh;
    bool is_latency_opt;
    bool is_bw_opt;
    bool is_rmv_dst_routing;
    uint32_t alltoall_iteration;
};

#define ENC_MAX_MESH_SUBTYPES         (20)
#define ENC_MESH_MAX_NUM_DEVICES      (128)

/* The mesh algorithm of a communicator (one channel). */
struct enc_alg_mesh {
    enc_alg_mesh_type_t mesh_type;

    union {
        struct {
            uint32_t devid_to_rankid[ENC_MESH_MAX_NUM_DEVICES];

            bool is_multi_chip;
        } trn2;
        struct {
            int num_non_net_node_local_groups;
        } trn1;
        struct {
            bool root_rank;
            int num_intra_group_roots;
            int local_root_ids[ENC_MESH_MAX_NUM_DEVICES];
            int global_root_ids[ENC_MESH_MAX_NUM_DEVICES];
        } inf2;
    };
    int group_id;
    int num_groups;

    struct enc_channel channel;
    struct enc_alg_mesh_subtype mesh_subtype[ENC_MAX_MESH_SUBTYPES];

    size_t max_chbuf_space_per_group;

    size_t max_chbuf_space_per_seng;

    size_t max_chbuf_space_per_rank;

    bool double_buffer;

    bool build_rdh;
    bool rdh_double_buffer;
    void *rdh_devmem_res;
    bool use_2dev_proxy;

    bool tokens_exchanged;

    bool use_net;

    struct enc_nccl_comm_node *nccl_comm_node;
    struct enc_comm_info *ci;

    struct enc_comm *comm;
    struct encd_alg_mesh *drv_alg;

    enc_host_mem_t alltoallv_host_input;
};

/* Hierarchical algorithm: intra-node, inter-node and pipelined stages. */
struct enc_alg_hier {
    struct {
        struct enc_nccl_comm_node *nccl_comm_node;
        struct enc_comm_info ci;

        struct enc_alg_metaring ring;
        struct enc_alg_metaring kangaring;
        struct enc_alg_mesh mesh;
    } intra;

    struct {
        struct enc_nccl_comm_node *nccl_comm_node;
        struct enc_comm_info ci;

        struct enc_alg_metaring ring;
        struct enc_alg_metaring rdh;
        struct enc_alg_mesh mesh;
    } inter;

    struct {
        struct {
            struct enc_nccl_comm_node *nccl_comm_node;
            struct enc_comm_info ci;

            struct enc_alg_metaring ring;
        } stage[NEC_HIER_CC_PIPELINE_STAGE_N];
    } pipeline;

    void* devmem_res;

    struct enc_comm *comm;
    struct encd_alg_hier *drv_alg;
};

/* What the collectives library reports about a communicator. */
typedef struct nccl_comm_info {

    uint64_t cluster_id;
    time_t epoch;

    int neuron_dev;
    int rank;
    int rank_n;
    int local_rank_n;
    int local_rack_rank_n;

    int node;
    int node_n;

    bool enable_pod;
    bool use_net;
    int pod;
    int pod_n;
    int pod_node;
    int pod_node_n;

    struct enc_peer_info *peers;

    int channel_n;
    struct enc_ring rings[NEC_MAX_CHANNELS];

    int kangaring_channel_n;
    int* kangaring_paths[NEC_MAX_CHANNELS];

    int mla_cycle_n;
    int* mla_cycles[NEC_MAX_CHANNELS];
} nccl_comm_info_t;

typedef struct enc_nccl_comm_node {
    void *nccl_comm;
    char *key;
    size_t key_sz;

    bool disable_graph;
    bool global_nccl_comm_node;
    int refcnt;
    uint32_t stream_id;
    uint32_t context_id;

    uint32_t num_local_participants;
    uint32_t num_local_leaders;
    uint32_t my_local_leader;
    uint32_t *local_participants;
    uint32_t *local_leaders;
    struct bp_barrier *local_barrier;
    bool intra_pod_interface;
} enc_nccl_comm_node_t;

#define ENC_PROXY_HISTOGRAM_OUTPUT_PATH_LENGTH_MAX (128)
/* Device information passed to the collectives library when it builds a
 * communicator. */
typedef struct enc_proxy_histogram_config {
    bool enable;
    size_t bucket_usecs;
    size_t num_buckets;
    size_t per_neff_warmup;
    size_t warmup;
    char output_path[ENC_PROXY_HISTOGRAM_OUTPUT_PATH_LENGTH_MAX];
} enc_proxy_histogram_config_t;

typedef struct enc_neuron_device_info {
    int nec_dev_id;
    int mla_idx;
    int tpb_idx;
    int host_device_id;
    int routing_id;
    uint64_t pod_id;
    nec_pod_type_t pod_type;
    uint32_t pod_node_id;
    uint32_t virtual_server_id;
    enc_proxy_histogram_config_t histogram_config;
} enc_neuron_device_info_t;

/* A collective communicator: cluster information and the prebuilt
 * algorithms (channels) used to run its operations. */
struct enc_comm {
    struct enc_nccl_comm_node *nccl_comm_node;
    struct enc_comm_info ci;
    int id;
    int stream_id;

    struct enc_alg_metaring ring;
    struct enc_alg_metaring kangaring;
    struct enc_alg_metaring rdh;
    struct enc_alg_hier hier;
    struct enc_alg_mesh mesh;

    int net_conn_count;
    void* net_connector_devmem_res[NEC_MAX_NET_BUFFERS];

    int nr_channel_chunks;
    size_t chunk_size;

    struct encd_comm *drv_comm;

    char topology[1024];
};

/* The process-wide communicator and the resources its streams share. */
struct enc_glb_comm {
    uint32_t g_device_id;
    uint32_t g_device_cnt;
    uint32_t vtpb_idx;
    int nec_dev_id;
    int mla_idx;

    int host_device_id;
    int routing_id;
    uint32_t virtual_server_id;
    nec_pod_type_t pod_type;
    uint32_t pod_node_id;
    uint32_t pod_sz;
    uint64_t pod_id;
    const char *root_comm_id;
    bool check_sigs;

    uint32_t *rank_nodes;
    uint32_t *local_ranks;

    enc_nccl_comm_node_t nccl_comm_node;

    struct bananaphone *local_rings;
    struct bp_handle *local_peer_handles;

    uint32_t *inc_recv_sem_values_buffer;
    size_t inc_recv_sem_values_buffer_size;

    struct enc_comm comm;

    void* inter_rdh_devmem_res[NEC_MAX_STREAM_N];

    void* intra_rdh_devmem_res[NEC_MAX_STREAM_N];

    void* mesh_devmem_res_per_rg[NEC_MAX_STREAM_N * NEC_MAX_COMM_N * H_COMM_MAX_ID];

    void* rdh_devmem_res_per_rg[NEC_MAX_STREAM_N * NEC_MAX_COMM_N];

    void *gateway_devmem_res[NEC_MAX_STREAM_N][NEC_MAX_CHANNELS];

    pthread_mutex_t gcomm_setup_mtx;

    void *proxy_queue;

    void *device_barrier_table;
};

/* Network transfer FIFOs, recorded at load and read by the proxy threads
 * at execution: each operation (net_ops_info_t) is a run of source and
 * destination entries marked with their purpose. */
typedef enum net_addr_mark {
    NET_TRANSFER,
    NET_OP_COMPLETE,
    EXEC_COMPLETE
} net_addr_mark_t;

typedef struct net_src_addr {
    uint32_t net_op_idx;
    int complete;
    dma_addr_t dev_addr;
    void *host_addr;
    void *nccl_mhandle;
    uint32_t size;
    net_addr_mark_t mark;
    void* proxy_histogram_tag;

    int dst_rank;

    void *dst_addr;
    void *dst_mhandle;
} net_src_addr_t;

typedef struct net_dest_addr {
    uint32_t net_op_idx;
    int complete;
    dma_addr_t dev_addr;
    void *host_addr;
    void *nccl_mhandle;
    uint32_t size;
    net_addr_mark_t mark;

    int src_rank;
} net_dest_addr_t;

typedef struct net_ops_info {
    uint16_t sema_shift_offset;
    bool early_send_completion;
    bool early_recv_posting;
    volatile uint32_t *inc_send_handshake;
    volatile uint32_t *inc_send_complete;
    volatile uint32_t *inc_recv_handshake;
    volatile uint32_t *inc_recv_complete;
    uint32_t tx_entry_cnt;
    uint32_t rx_entry_cnt;
    uint32_t net_idx_loop_size;
    uint32_t initial_send_credits;
    uint32_t ending_recv_credits;
    size_t data_type_sz;
    bool is_dynamic_send_recv_sz;
    bool variable_peer;
    bool add_to_histogram;

    void *enc_channel;
} net_ops_info_t;

/** Adds val to a device semaphore through its memory-mapped increment
 * register at sem_inc_addr. */
void nec_inc_semaphore(volatile uint32_t *sem_inc_addr, uint32_t val);

/* Sizes and offsets of a rank's data in dynamic (execution-time) send/recv
 * metadata. */
size_t nec_get_dynamic_send_size_bytes(enc_host_mem_t *dyn_input, size_t data_type_sz, int dst_rank, int rank_n);
size_t nec_get_dynamic_send_offset_bytes(enc_host_mem_t *dyn_input, size_t data_type_sz, int dst_rank, int rank_n);
size_t nec_get_dynamic_recv_offset_bytes(enc_host_mem_t *dyn_input, size_t data_type_sz, int src_rank, int rank_n);
void nec_set_recv_size_bytes(enc_host_mem_t *dyn_input, size_t recv_size_bytes, size_t data_type_sz, int src_rank, int rank_n);

/** Fills available_devices_array with up to array_size device ids; returns
 * the device count, or a negative value on error. */
int nec_get_device_count(int *available_devices_array, uint32_t array_size);
/** PCI domain, bus, slot and function of device neuron_dev; 0 on success. */
int nec_get_device_pci_bdf(int neuron_dev, uint32_t *domain, uint32_t *bus_num, uint8_t *pci_slot, uint8_t *dev_func);

/** Physical cores per logical core in this process. */
NRT_STATUS nec_get_virtual_core_size(uint32_t *virtual_core_size);

/* Version of the collectives engine; fields are only appended (after
 * compatibility_version). */
typedef struct nec_version_info {
    uint64_t major;
    uint64_t minor;
    uint64_t patch;
    uint64_t maintenance;
    char git_hash[16];
    uint64_t compatibility_version;

    uint8_t future_fields[];
} nec_version_info_t;

NRT_STATUS nec_get_version_info(nec_version_info_t *version_info);

/* Device-link topology: routing ids (rid), MLA (device) indexes and ports. */
NRT_STATUS nec_build_port_and_rid_map(int local_nec_dev_id, int *mla_indexes, int *host_device_ids, int count);

bool nec_is_mla_available(int local_nec_dev_id, int mla_idx);

int nec_mla_idx_to_rid(int local_nec_dev_id, int mla_idx);

int nec_rid_to_mla_idx(int local_nec_dev_id, int rid);

int nec_get_peer_mla_idx(int local_nec_dev_id, int mla_idx, int port);

/** The pod node port_distance hops from node on a point-to-point pod. */
int nec_get_p2p_pod_peer_node(uint32_t nec_dev_id, int node, uint32_t port_distance,
                              int *peer_node);

/** *can_access_peer: whether a node of a pod reaches a remote node directly. */
NRT_STATUS nec_pod_node_can_access_peer_node(nec_pod_type_t pod_type,
                                             uint32_t local_rid, uint32_t local_node_id,
                                             uint32_t remote_rid, uint32_t remote_node_id,
                                             int *can_access_peer);

/** Writes size bytes of str to the kernel log through the driver. */
void nec_ndl_printk(char *str, uint32_t size, uint32_t action);

#ifdef __cplusplus
}
#endif

#endif /* NRT_NEC_H_INCLUDED */
