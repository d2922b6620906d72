//! `nrt/nds/neuron_ds.h`: the Neuron datastore, kept in this process.
//!
//! libnrt publishes its datastore in memory the Neuron driver shares with monitoring tools;
//! nrt-rs keeps it in the process instead (on both backends), which gives the writer's view
//! and this process's own readers everything the header describes: per-core and per-device
//! counters, and model-node / process records created, filled, committed and deleted as
//! objects. Reading another process's datastore (`nds_open` with a foreign pid) is not
//! provided. One datastore exists per device pointer given to `nds_open` (any value, NULL
//! included: the device is only a key here).
//!
//! Handles (instances and objects) are addresses of allocations this module made and lists;
//! a handle that is not listed is refused (non-zero or NULL, and one log line), never
//! dereferenced. Calls return 0 on success and -1 on failure.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use crate::ffi_util::{boundary, log_msg, unsupported};

/// Per-device counters (`NDS_ND_COUNTER_COUNT`).
pub(crate) const ND_COUNTERS: usize = 31;
/// Per-core counters, original and extended (`NDS_TOTAL_NC_COUNTER_COUNT`).
pub(crate) const NC_COUNTERS: usize = 95;
/// Cores per device the datastore holds counters for (4 + 12 extended).
pub(crate) const MAX_CORES: usize = 16;

const MODEL_NODE: c_int = 0;
const PROCESS_INFO: c_int = 1;
const PROCESS_INFO_EXT: c_int = 2;

/// `nds_model_node_info_t` (284 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
struct ModelNodeInfo {
    model_id: u32,
    model_node_id: u32,
    name: [u8; 256],
    uuid: [u8; 16],
    nc_index: u8,
    sg_index: u8,
}

/// `nds_mem_usage_info_t` (16 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
struct MemUsage {
    total_size: usize,
    chunk_count: u32,
}

/// `nds_model_node_mem_usage_info_t` (384 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
struct ModelNodeMemUsage {
    usage: [[MemUsage; 12]; 2],
}

/// `nds_version_info_t` (8 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
struct VersionInfo {
    major: u8,
    minor: u8,
    build: u32,
}

/// `nds_process_info_t` (60 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
struct ProcessInfo {
    framework_type: i8,
    tag: [u8; 32],
    framework_version: VersionInfo,
    fal_version: VersionInfo,
    runtime_version: VersionInfo,
}

/// `nds_process_info_ext_t` (256 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
struct ProcessInfoExt {
    tag: [u8; 256],
}

const _: () = assert!(size_of::<ModelNodeInfo>() == 284);
const _: () = assert!(size_of::<MemUsage>() == 16);
const _: () = assert!(size_of::<ModelNodeMemUsage>() == 384);
const _: () = assert!(size_of::<VersionInfo>() == 8);
const _: () = assert!(size_of::<ProcessInfo>() == 60);
const _: () = assert!(size_of::<ProcessInfoExt>() == 256);

const ZERO_VERSION: VersionInfo = VersionInfo {
    major: 0,
    minor: 0,
    build: 0,
};
const ZERO_NODE: ModelNodeInfo = ModelNodeInfo {
    model_id: 0,
    model_node_id: 0,
    name: [0; 256],
    uuid: [0; 16],
    nc_index: 0,
    sg_index: 0,
};
const ZERO_USAGE: ModelNodeMemUsage = ModelNodeMemUsage {
    usage: [[MemUsage {
        total_size: 0,
        chunk_count: 0,
    }; 12]; 2],
};

/// An object's contents.
#[derive(Clone, Copy)]
#[allow(
    clippy::large_enum_variant,
    reason = "objects live boxed; the variants are the C layouts the accessors hand out"
)]
enum Data {
    ModelNode(ModelNodeInfo, ModelNodeMemUsage),
    Process(ProcessInfo),
    ProcessExt(ProcessInfoExt),
}

/// An object: its instance, the record it commits to, whether it was created (not read), and
/// its contents (written by the C program through the typed accessors).
struct Obj {
    inst: usize,
    record: u64,
    created: bool,
    data: Data,
}

#[derive(Clone, Copy)]
struct Inst {
    device: usize,
    writable: bool,
}

struct Store {
    nd: [u64; ND_COUNTERS],
    nc: [[u64; NC_COUNTERS]; MAX_CORES],
    models: Vec<(u64, ModelNodeInfo, ModelNodeMemUsage)>,
    process: Option<(u64, ProcessInfo)>,
    process_ext: Option<(u64, ProcessInfoExt)>,
}

impl Store {
    fn new() -> Box<Self> {
        Box::new(Self {
            nd: [0; ND_COUNTERS],
            nc: [[0; NC_COUNTERS]; MAX_CORES],
            models: Vec::new(),
            process: None,
            process_ext: None,
        })
    }
}

#[derive(Default)]
struct Nds {
    stores: HashMap<usize, Box<Store>>,
    /// Instance handle → the `Box<Inst>` behind it (from `Box::into_raw`).
    insts: HashMap<usize, Inst>,
    /// Object handle → listed (the `Box<Obj>` behind it, from `Box::into_raw`).
    objs: HashMap<usize, ()>,
    next_record: u64,
}

fn nds() -> MutexGuard<'static, Nds> {
    static N: OnceLock<Mutex<Nds>> = OnceLock::new();
    N.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// Logs a refusal and returns -1.
fn refuse(args: std::fmt::Arguments<'_>) -> c_int {
    log_msg(args);
    -1
}

impl Nds {
    fn inst(&self, h: *mut c_void) -> Option<Inst> {
        let i = self.insts.get(&(h as usize)).copied();
        if i.is_none() {
            log_msg(format_args!("{h:p} is not an open datastore instance"));
        }
        i
    }

    /// The store of a writable instance (logged refusal otherwise).
    fn writable(&mut self, h: *mut c_void) -> Option<&mut Store> {
        let i = self.inst(h)?;
        if !i.writable {
            log_msg(format_args!(
                "datastore instance {h:p} is read-only (opened for another pid)"
            ));
            return None;
        }
        self.stores.get_mut(&i.device).map(|b| &mut **b)
    }

    fn store(&self, h: *mut c_void) -> Option<&Store> {
        let i = self.inst(h)?;
        self.stores.get(&i.device).map(|b| &**b)
    }

    /// The listed object behind `h`.
    fn obj(&self, h: *mut c_void) -> Option<*mut Obj> {
        if self.objs.contains_key(&(h as usize)) {
            Some(h.cast())
        } else {
            log_msg(format_args!("{h:p} is not a datastore object"));
            None
        }
    }

    fn new_obj(&mut self, inst: usize, record: u64, created: bool, data: Data) -> *mut c_void {
        let p = Box::into_raw(Box::new(Obj {
            inst,
            record,
            created,
            data,
        }));
        self.objs.insert(p as usize, ());
        p.cast()
    }
}

fn nc_slot(store: &mut Store, pnc: c_int, counter: u32) -> Option<&mut u64> {
    let slot = usize::try_from(pnc)
        .ok()
        .and_then(|p| store.nc.get_mut(p))
        .and_then(|row| row.get_mut(counter as usize));
    if slot.is_none() {
        log_msg(format_args!(
            "no datastore counter {counter} of core {pnc} (cores 0..{MAX_CORES}, counters 0..{NC_COUNTERS})"
        ));
    }
    slot
}

fn nd_slot(store: &mut Store, counter: u32) -> Option<&mut u64> {
    let slot = store.nd.get_mut(counter as usize);
    if slot.is_none() {
        log_msg(format_args!(
            "no datastore device counter {counter} (0..{ND_COUNTERS})"
        ));
    }
    slot
}

/// `nds_open`: pid 0 opens this process's datastore of `device` for writing; this process's
/// own pid opens it read-only; another pid is not provided (its datastore is in that process).
///
/// # Safety
///
/// `inst` is NULL or writable.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn nds_open(
    device: *mut c_void,
    pid: libc::pid_t,
    inst: *mut *mut c_void,
) -> c_int {
    boundary("nds_open", -1, || {
        if inst.is_null() {
            return refuse(format_args!("inst is NULL"));
        }
        // SAFETY: plain system call.
        let own = unsafe { libc::getpid() };
        if pid != 0 && pid != own {
            let _ = unsupported(
                "nds_open",
                "the datastore of another process lives in that process (nrt-rs shares none through the driver)",
            );
            return -1;
        }
        let mut n = nds();
        n.stores.entry(device as usize).or_insert_with(Store::new);
        let i = Inst {
            device: device as usize,
            writable: pid == 0,
        };
        let h = Box::into_raw(Box::new(i));
        n.insts.insert(h as usize, i);
        // SAFETY: checked non-NULL; the caller's contract.
        unsafe { inst.write(h.cast()) };
        0
    })
}

/// `nds_close`: frees the instance (its objects stay valid until deleted; committing them then
/// fails).
#[unsafe(no_mangle)]
pub(crate) extern "C" fn nds_close(inst: *mut c_void) -> c_int {
    boundary("nds_close", -1, || {
        if nds().insts.remove(&(inst as usize)).is_none() {
            return refuse(format_args!("{inst:p} is not an open datastore instance"));
        }
        // SAFETY: listed, so it came from `Box::into_raw` in `nds_open` and is freed once.
        drop(unsafe { Box::from_raw(inst.cast::<Inst>()) });
        0
    })
}

fn or_bits(a: u64, b: u64) -> u64 {
    a | b
}

macro_rules! nc_update {
    ($name:ident, $label:literal, $op:expr) => {
        #[doc = concat!("`", $label, "` (wraps around).")]
        #[unsafe(no_mangle)]
        pub(crate) extern "C" fn $name(
            inst: *mut c_void,
            pnc_index: c_int,
            counter_index: u32,
            amount: u64,
        ) -> c_int {
            boundary($label, -1, || {
                let mut n = nds();
                let Some(store) = n.writable(inst) else {
                    return -1;
                };
                let Some(slot) = nc_slot(store, pnc_index, counter_index) else {
                    return -1;
                };
                let op: fn(u64, u64) -> u64 = $op;
                *slot = op(*slot, amount);
                0
            })
        }
    };
}

macro_rules! nd_update {
    ($name:ident, $label:literal, $op:expr) => {
        #[doc = concat!("`", $label, "` (wraps around).")]
        #[unsafe(no_mangle)]
        pub(crate) extern "C" fn $name(
            inst: *mut c_void,
            counter_index: u32,
            amount: u64,
        ) -> c_int {
            boundary($label, -1, || {
                let mut n = nds();
                let Some(store) = n.writable(inst) else {
                    return -1;
                };
                let Some(slot) = nd_slot(store, counter_index) else {
                    return -1;
                };
                let op: fn(u64, u64) -> u64 = $op;
                *slot = op(*slot, amount);
                0
            })
        }
    };
}

nc_update!(
    nds_increment_nc_counter,
    "nds_increment_nc_counter",
    u64::wrapping_add
);
nc_update!(
    nds_decrement_nc_counter,
    "nds_decrement_nc_counter",
    u64::wrapping_sub
);
nd_update!(
    nds_increment_nd_counter,
    "nds_increment_nd_counter",
    u64::wrapping_add
);
nd_update!(
    nds_decrement_nd_counter,
    "nds_decrement_nd_counter",
    u64::wrapping_sub
);
nd_update!(nds_or_nd_counter, "nds_or_nd_counter", or_bits);

/// `nds_get_*_counter`: writes the counter `pick` finds in the instance's store to `*value`
/// (0), or logs why not (-1). Any open instance may read.
fn read_counter(
    inst: *mut c_void,
    value: *mut u64,
    pick: impl FnOnce(&mut Store) -> Option<&mut u64>,
) -> c_int {
    if value.is_null() {
        return refuse(format_args!("value is NULL"));
    }
    let mut n = nds();
    let Some(i) = n.inst(inst) else { return -1 };
    let Some(slot) = n.stores.get_mut(&i.device).and_then(|s| pick(s)) else {
        return -1;
    };
    // SAFETY: checked non-NULL; the caller's contract.
    unsafe { value.write(*slot) };
    0
}

/// `nds_set_*_counter`: sets the counter `pick` finds to `*value` (0), or logs why not (-1).
/// Only a writable instance may.
fn write_counter(
    inst: *mut c_void,
    value: *mut u64,
    pick: impl FnOnce(&mut Store) -> Option<&mut u64>,
) -> c_int {
    if value.is_null() {
        return refuse(format_args!("value is NULL"));
    }
    let mut n = nds();
    let Some(slot) = n.writable(inst).and_then(pick) else {
        return -1;
    };
    // SAFETY: checked non-NULL; the caller's contract.
    *slot = unsafe { value.read() };
    0
}

/// `nds_get_nc_counter`.
///
/// # Safety
///
/// `value` is NULL or writable.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn nds_get_nc_counter(
    inst: *mut c_void,
    pnc_index: c_int,
    counter_index: u32,
    value: *mut u64,
) -> c_int {
    boundary("nds_get_nc_counter", -1, || {
        read_counter(inst, value, |store| {
            nc_slot(store, pnc_index, counter_index)
        })
    })
}

/// `nds_set_nc_counter`: sets the counter to `*value`.
///
/// # Safety
///
/// `value` is NULL or readable.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn nds_set_nc_counter(
    inst: *mut c_void,
    pnc_index: c_int,
    counter_index: u32,
    value: *mut u64,
) -> c_int {
    boundary("nds_set_nc_counter", -1, || {
        write_counter(inst, value, |store| {
            nc_slot(store, pnc_index, counter_index)
        })
    })
}

/// `nds_get_nd_counter`.
///
/// # Safety
///
/// `value` is NULL or writable.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn nds_get_nd_counter(
    inst: *mut c_void,
    counter_index: u32,
    value: *mut u64,
) -> c_int {
    boundary("nds_get_nd_counter", -1, || {
        read_counter(inst, value, |store| nd_slot(store, counter_index))
    })
}

/// `nds_set_nd_counter`: sets the counter to `*value`.
///
/// # Safety
///
/// `value` is NULL or readable.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn nds_set_nd_counter(
    inst: *mut c_void,
    counter_index: u32,
    value: *mut u64,
) -> c_int {
    boundary("nds_set_nd_counter", -1, || {
        write_counter(inst, value, |store| nd_slot(store, counter_index))
    })
}

/// `nds_obj_new`: a zeroed object of `type` (`OBJECT_TYPE_*`); NULL for another type or an
/// unknown instance.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn nds_obj_new(inst: *mut c_void, kind: c_int) -> *mut c_void {
    boundary("nds_obj_new", std::ptr::null_mut(), || {
        let mut n = nds();
        if n.inst(inst).is_none() {
            return std::ptr::null_mut();
        }
        let data = match kind {
            MODEL_NODE => Data::ModelNode(ZERO_NODE, ZERO_USAGE),
            PROCESS_INFO => Data::Process(ProcessInfo {
                framework_type: 0,
                tag: [0; 32],
                framework_version: ZERO_VERSION,
                fal_version: ZERO_VERSION,
                runtime_version: ZERO_VERSION,
            }),
            PROCESS_INFO_EXT => Data::ProcessExt(ProcessInfoExt { tag: [0; 256] }),
            other => {
                log_msg(format_args!(
                    "{other} is not a datastore object type (0, 1 or 2)"
                ));
                return std::ptr::null_mut();
            }
        };
        n.next_record += 1;
        let record = n.next_record;
        n.new_obj(inst as usize, record, true, data)
    })
}

/// `nds_obj_commit`: publishes the object's contents (replacing what it published before; a
/// process record replaces the process record). The instance must be open and writable.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn nds_obj_commit(obj: *mut c_void) -> c_int {
    boundary("nds_obj_commit", -1, || {
        let mut n = nds();
        let Some(o) = n.obj(obj) else { return -1 };
        // SAFETY: listed, so a live `Obj` from `new_obj`; only read here, under the lock.
        let (inst, record, data) = unsafe { ((*o).inst, (*o).record, (*o).data) };
        let Some(store) = n.writable(inst as *mut c_void) else {
            return -1;
        };
        match data {
            Data::ModelNode(info, usage) => {
                match store.models.iter_mut().find(|(r, _, _)| *r == record) {
                    Some(e) => *e = (record, info, usage),
                    None => store.models.push((record, info, usage)),
                }
            }
            Data::Process(p) => store.process = Some((record, p)),
            Data::ProcessExt(p) => store.process_ext = Some((record, p)),
        }
        0
    })
}

/// `nds_obj_delete`: frees the object; an object made by `nds_obj_new` also takes what it
/// committed out of the datastore (when its instance is open and writable). Snapshots from
/// `nds_read_*` are only freed.
#[unsafe(no_mangle)]
pub(crate) extern "C" fn nds_obj_delete(obj: *mut c_void) -> c_int {
    boundary("nds_obj_delete", -1, || {
        let mut n = nds();
        let Some(o) = n.obj(obj) else { return -1 };
        n.objs.remove(&(obj as usize));
        // SAFETY: was listed, so it came from `Box::into_raw` in `new_obj`; unlisted above,
        // so freed once.
        let o = unsafe { Box::from_raw(o) };
        let writable = n.insts.get(&o.inst).is_some_and(|i| i.writable);
        if o.created && writable {
            if let Some(store) = n.writable(o.inst as *mut c_void) {
                let r = o.record;
                match o.data {
                    Data::ModelNode(..) => store.models.retain(|(x, _, _)| *x != r),
                    Data::Process(_) => {
                        if store.process.is_some_and(|(x, _)| x == r) {
                            store.process = None;
                        }
                    }
                    Data::ProcessExt(_) => {
                        if store.process_ext.is_some_and(|(x, _)| x == r) {
                            store.process_ext = None;
                        }
                    }
                }
            }
        }
        0
    })
}

macro_rules! accessor {
    ($name:ident, $label:literal, $ty:ty, $pat:pat => $field:expr) => {
        #[doc = concat!("`", $label, "`: the object's contents for reading and writing; NULL for an object of another type.")]
        #[unsafe(no_mangle)]
        pub(crate) extern "C" fn $name(obj: *mut c_void) -> *mut c_void {
            boundary($label, std::ptr::null_mut(), || {
                let n = nds();
                let Some(o) = n.obj(obj) else { return std::ptr::null_mut() };
                // SAFETY: listed, so a live `Obj`; the pointer stays valid until it is deleted.
                let data = unsafe { &raw mut (*o).data };
                // SAFETY: as above.
                match unsafe { &mut *data } {
                    $pat => {
                        let p: *mut $ty = $field;
                        p.cast()
                    }
                    _ => {
                        log_msg(format_args!("datastore object {obj:p} is of another type"));
                        std::ptr::null_mut()
                    }
                }
            })
        }
    };
}

accessor!(nds_obj_handle_to_model_node_info, "nds_obj_handle_to_model_node_info", ModelNodeInfo, Data::ModelNode(info, _) => info);
accessor!(nds_obj_handle_to_model_node_mem_usage, "nds_obj_handle_to_model_node_mem_usage", ModelNodeMemUsage, Data::ModelNode(_, usage) => usage);
accessor!(nds_obj_handle_to_process_info, "nds_obj_handle_to_process_info", ProcessInfo, Data::Process(p) => p);
accessor!(nds_obj_handle_to_process_info_ext, "nds_obj_handle_to_process_info_ext", ProcessInfoExt, Data::ProcessExt(p) => p);

/// `nds_read_all_model_nodes`: a `malloc`ed array of snapshots of the committed model nodes, in
/// commit order (NULL when there are none); the caller deletes each and frees the array.
///
/// # Safety
///
/// `models` and `count` are NULL or writable.
#[unsafe(no_mangle)]
pub(crate) unsafe extern "C" fn nds_read_all_model_nodes(
    inst: *mut c_void,
    models: *mut *mut *mut c_void,
    count: *mut usize,
) -> c_int {
    boundary("nds_read_all_model_nodes", -1, || {
        if models.is_null() || count.is_null() {
            return refuse(format_args!("models or count is NULL"));
        }
        let mut n = nds();
        let Some(store) = n.store(inst) else {
            return -1;
        };
        let nodes: Vec<(u64, ModelNodeInfo, ModelNodeMemUsage)> = store.models.clone();
        let array = if nodes.is_empty() {
            std::ptr::null_mut()
        } else {
            // SAFETY: plain allocation, checked below.
            let a = unsafe { libc::malloc(nodes.len() * size_of::<*mut c_void>()) }
                .cast::<*mut c_void>();
            if a.is_null() {
                return refuse(format_args!(
                    "failed to allocate {} model node handles",
                    nodes.len()
                ));
            }
            for (k, (record, info, usage)) in nodes.iter().enumerate() {
                let h = n.new_obj(
                    inst as usize,
                    *record,
                    false,
                    Data::ModelNode(*info, *usage),
                );
                // SAFETY: `a` holds `nodes.len()` pointers.
                unsafe { a.add(k).write(h) };
            }
            a
        };
        // SAFETY: checked non-NULL; the caller's contract.
        unsafe {
            models.write(array);
            count.write(nodes.len());
        }
        0
    })
}

macro_rules! read_record {
    ($name:ident, $label:literal, $field:ident, $variant:ident) => {
        #[doc = concat!("`", $label, "`: a snapshot of the committed record; NULL (logged) when none is committed.")]
        #[unsafe(no_mangle)]
        pub(crate) extern "C" fn $name(inst: *mut c_void) -> *mut c_void {
            boundary($label, std::ptr::null_mut(), || {
                let mut n = nds();
                let Some(store) = n.store(inst) else { return std::ptr::null_mut() };
                match store.$field {
                    Some((record, p)) => n.new_obj(inst as usize, record, false, Data::$variant(p)),
                    None => {
                        log_msg(format_args!("no {} is committed to the datastore", stringify!($field)));
                        std::ptr::null_mut()
                    }
                }
            })
        }
    };
}

read_record!(
    nds_read_process_info,
    "nds_read_process_info",
    process,
    Process
);
read_record!(
    nds_read_process_info_ext,
    "nds_read_process_info_ext",
    process_ext,
    ProcessExt
);
