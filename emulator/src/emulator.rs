//! [`Emulator`]: the emulated machine and its supervisor loop.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use nrt_sim::{SimConfig, SimMachine};

use crate::config::{Accounting, EmuConfig};
use crate::crwl::RangeTable;
use crate::filter::{self, Answer, Notif};
use crate::handlers::{self, Call, Fail};
use crate::lifecycle;
use crate::state::{Counters, Device, State};
use crate::target::{self, Target};
use crate::tree;

/// An emulated machine of Neuron devices: the files under its root, the driver state, and
/// the supervisor ([`Emulator::serve`]) that answers the driver's system calls of the
/// threads filtered by [`install_filter`](crate::install_filter).
#[derive(Debug)]
pub struct Emulator {
    config: EmuConfig,
    machine: Arc<SimMachine>,
    state: Mutex<State>,
    /// Thread → thread group, as last read from `/proc` (checked before each use).
    tgids: Mutex<BTreeMap<u32, u32>>,
    /// An eventfd: readable once [`Emulator::stop`] was called.
    stop: OwnedFd,
}

/// Most devices the driver numbers (`MAX_NEURON_DEVICE_COUNT`).
const MAX_DEVICES: u32 = 64;

impl Emulator {
    /// Creates `root/dev/neuron0 …` (empty sparse files; any previous content is dropped) and
    /// the `root/sys` tree, and the simulated machine behind them.
    pub fn new(config: EmuConfig) -> io::Result<Emulator> {
        if config.devices > MAX_DEVICES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("at most {MAX_DEVICES} devices"),
            ));
        }
        tree::create_sysfs(&config.root, config.instance, config.devices)?;
        let machine = SimMachine::new(SimConfig::emulate_driver(config.instance, config.devices));
        let cores = config.instance.cores_per_device();
        let mut devices = Vec::new();
        for i in 0..config.devices {
            let file = tree::create_node(&config.root, i)?;
            let meta = file.metadata()?;
            devices.push(Device::new(i, cores, file, (meta.dev(), meta.ino())));
        }
        // SAFETY: eventfd with integer arguments; the result is checked below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh fd owned by nothing else.
        let stop = unsafe { OwnedFd::from_raw_fd(fd) };
        let state = State {
            instance: config.instance,
            devices,
            ranges: RangeTable::default(),
            faults: config.faults.clone(),
            counters: Counters::default(),
        };
        Ok(Emulator {
            config,
            machine,
            state: Mutex::new(state),
            tgids: Mutex::new(BTreeMap::new()),
            stop,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &EmuConfig {
        &self.config
    }

    /// The simulated machine behind the devices.
    pub fn machine(&self) -> &Arc<SimMachine> {
        &self.machine
    }

    /// `root/dev/neuron{i}`.
    pub fn device_path(&self, i: u32) -> PathBuf {
        self.dev_dir().join(format!("neuron{i}"))
    }

    /// `root/dev`.
    pub fn dev_dir(&self) -> PathBuf {
        self.config.root.join("dev")
    }

    /// `root/sys`.
    pub fn sysfs_root(&self) -> PathBuf {
        self.config.root.join("sys")
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every handler leaves the state consistent between statements.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What the emulator holds and has served so far.
    pub fn accounting(&self) -> Accounting {
        let st = self.state();
        let mut attached: Vec<u32> = st
            .devices
            .iter()
            .flat_map(|d| d.attached.keys().copied())
            .collect();
        attached.sort_unstable();
        attached.dedup();
        Accounting {
            allocated_bytes: st
                .devices
                .iter()
                .flat_map(|d| d.chunks.values())
                .map(|c| c.size)
                .sum(),
            allocations: st.devices.iter().map(|d| d.chunks.len() as u64).sum(),
            reserved_cores: st.ranges.marked(),
            attached_processes: attached.len() as u32,
            ioctls_served: st.counters.served,
            ioctls_failed: st.counters.failed,
            launches: st.counters.launches,
            launch_failures: st.counters.launch_failures,
            per_request: st.counters.per_request.clone(),
            by_mem_type: st
                .devices
                .iter()
                .flat_map(|d| d.chunks.values())
                .filter_map(|c| c.mem_type.map(|t| (t, c.size)))
                .fold(BTreeMap::new(), |mut m, (t, size)| {
                    let e: &mut (u64, u64) = m.entry(t).or_default();
                    e.0 += 1;
                    e.1 += size;
                    m
                }),
        }
    }

    /// `len` bytes at physical address `pa` of device `device` (inside one host or device
    /// chunk), for tests that check what a backend wrote; `None` when no chunk holds them.
    pub fn read_memory(&self, device: u32, pa: u64, len: u64) -> Option<Vec<u8>> {
        let mut st = self.state();
        let dev = st.device(device)?;
        crate::launch::read_pa(dev, pa, len)
            .ok()
            .map(|(_, bytes)| bytes)
    }

    /// Asks [`Emulator::serve`] to return (at once if it is waiting, else after the
    /// notification it is serving).
    pub fn stop(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from `one` to our eventfd.
        let _ = unsafe {
            libc::write(
                self.stop.as_raw_fd(),
                (&one as *const u64).cast(),
                size_of::<u64>(),
            )
        };
    }

    /// Serves the notifications of `listener` (from [`install_filter`](crate::install_filter))
    /// until it hangs up (no filtered thread is left) or [`Emulator::stop`] is called.
    /// Processes other than the supervisor's own are watched through pidfds: when one exits,
    /// its fds are flushed (cores unmarked, memory freed, detached).
    pub fn serve(&self, listener: OwnedFd) -> io::Result<()> {
        let own = std::process::id();
        let mut watched: BTreeMap<u32, OwnedFd> = BTreeMap::new();
        loop {
            let mut fds = vec![
                libc::pollfd {
                    fd: listener.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.stop.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let order: Vec<u32> = watched.keys().copied().collect();
            fds.extend(watched.values().map(|fd| libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }));
            // SAFETY: `fds` is a valid array of `fds.len()` pollfds.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if fds.get(1).is_some_and(|p| p.revents != 0) {
                return Ok(());
            }
            for (tgid, p) in order.iter().zip(fds.iter().skip(2)) {
                if p.revents != 0 {
                    watched.remove(tgid);
                    lifecycle::process_exit(&mut self.state(), *tgid);
                }
            }
            let events = fds.first().map_or(0, |p| p.revents);
            if events & libc::POLLIN != 0 {
                let Some(notif) = filter::recv(&listener)? else {
                    continue;
                };
                let (answer, tgid) = self.handle(&listener, &notif);
                // Watched before the answer: the caller is alive while it waits for it.
                if let Some(tgid) = tgid.filter(|&t| t != own) {
                    if let std::collections::btree_map::Entry::Vacant(e) = watched.entry(tgid) {
                        if let Some(fd) = pidfd(tgid) {
                            e.insert(fd);
                        }
                    }
                }
                if let Some(answer) = answer {
                    filter::send(&listener, notif.id, answer)?;
                }
            } else if events & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
                // No filtered thread is left, so every watched process has exited, even when
                // its pidfd was not yet seen readable in this round: flush them all.
                let mut st = self.state();
                for tgid in std::mem::take(&mut watched).into_keys() {
                    lifecycle::process_exit(&mut st, tgid);
                }
                return Ok(());
            }
        }
    }

    /// The answer to one notification (`None`: the caller is gone), and the calling process
    /// when it touched an emulated device.
    fn handle(&self, listener: &OwnedFd, n: &Notif) -> (Option<Answer>, Option<u32>) {
        let [a0, a1, a2, ..] = n.args;
        if n.nr == libc::SYS_ioctl {
            return self.ioctl(listener, n, a0, a1 as u32, a2);
        }
        if n.nr == libc::SYS_openat {
            return self.open(listener, n, a0 as i32, a1, a2 as i32);
        }
        #[cfg(target_arch = "x86_64")]
        if n.nr == libc::SYS_open {
            return self.open(listener, n, libc::AT_FDCWD, a0, a1 as i32);
        }
        if n.nr == libc::SYS_close {
            return self.close(listener, n, a0);
        }
        (Some(Answer::Continue), None)
    }

    /// The thread group of thread `tid`: a cached answer while `tid` is still a thread of
    /// it (one `stat`), else `/proc/tid/status` (several times the cost).
    fn tgid(&self, tid: u32) -> Option<u32> {
        let mut cache = self.tgids.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(&tgid) = cache.get(&tid) {
            if target::is_thread_of(tid, tgid) {
                return Some(tgid);
            }
        }
        let tgid = target::tgid_of(tid).ok()?;
        if cache.len() >= 4096 {
            cache.clear();
        }
        cache.insert(tid, tgid);
        Some(tgid)
    }

    /// The device of fd `fd` of the caller, its open flags and the caller's thread group.
    fn device_fd(&self, tid: u32, fd: u64) -> Option<(u32, i32, u32)> {
        let file = target::fd_file(tid, fd)?;
        let device = self.state().device_of(file)?;
        let flags = target::fd_flags(tid, fd)?;
        let tgid = self.tgid(tid)?;
        Some((device, flags, tgid))
    }

    fn ioctl(
        &self,
        listener: &OwnedFd,
        n: &Notif,
        fd: u64,
        request: u32,
        arg: u64,
    ) -> (Option<Answer>, Option<u32>) {
        let Some((device, flags, tgid)) = self.device_fd(n.tid, fd) else {
            // Not an emulated device: the kernel serves it (an NVMe 'N' ioctl, a bad fd).
            return (Some(Answer::Continue), None);
        };
        let target = Target::new(listener, n.id, n.tid, tgid);
        if !target.valid() {
            return (None, None);
        }
        let call = Call {
            target: &target,
            device,
            free_access: flags & libc::O_WRONLY != 0,
            request,
            arg,
        };
        let mut st = self.state();
        st.counters.served += 1;
        *st.counters.per_request.entry(request).or_insert(0) += 1;
        let ordinal = st.counters.served;
        let outcome = match st.faults.errno_for(ordinal, request) {
            Some(e) => Err(Fail::Errno(e)),
            None => handlers::dispatch(&mut st, &self.machine, &call),
        };
        let answer = match outcome {
            Ok(v) => Some(Answer::Value(v)),
            Err(Fail::Errno(e)) => {
                st.counters.failed += 1;
                Some(Answer::Errno(e))
            }
            Err(Fail::Gone) => None,
        };
        (answer, Some(tgid))
    }

    fn open(
        &self,
        listener: &OwnedFd,
        n: &Notif,
        dirfd: i32,
        path: u64,
        flags: i32,
    ) -> (Option<Answer>, Option<u32>) {
        let proceed = (Some(Answer::Continue), None);
        if flags & libc::O_PATH != 0 {
            return proceed;
        }
        // The thread group is looked up only for the device nodes (most opens are not).
        let reader = Target::new(listener, n.id, n.tid, 0);
        let Ok(path) = reader.read_cstr(path, libc::PATH_MAX as usize) else {
            return proceed;
        };
        let Some(file) = target::open_target(n.tid, dirfd, &path) else {
            return proceed;
        };
        if self.state().device_of(file).is_none() {
            return proceed;
        }
        let Some(tgid) = self.tgid(n.tid) else {
            return proceed;
        };
        let mut st = self.state();
        let Some(device) = st.device_of(file) else {
            return proceed;
        };
        if !reader.valid() {
            return (None, None);
        }
        // `IS_NEURON_DEVICE_FREE_ACCESS`: the O_WRONLY bit.
        if flags & libc::O_WRONLY == 0 {
            if let Err(e) = lifecycle::attach(&mut st, &self.machine, device, tgid) {
                return (Some(Answer::Errno(e)), Some(tgid));
            }
        }
        (Some(Answer::Continue), Some(tgid))
    }

    fn close(&self, listener: &OwnedFd, n: &Notif, fd: u64) -> (Option<Answer>, Option<u32>) {
        let Some((device, flags, tgid)) = self.device_fd(n.tid, fd) else {
            return (Some(Answer::Continue), None);
        };
        if !filter::id_valid(listener, n.id) {
            return (None, None);
        }
        lifecycle::flush(&mut self.state(), device, tgid, flags & libc::O_WRONLY != 0);
        (Some(Answer::Continue), Some(tgid))
    }
}

/// A pidfd of process `pid`, when the kernel has them.
fn pidfd(pid: u32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open with integer arguments; the result is checked.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: a fresh fd owned by nothing else.
    Some(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
