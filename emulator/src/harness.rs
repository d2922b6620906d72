//! [`InProcess`]: an emulator serving threads of the test process itself, for `cargo test`.
//!
//! The supervisor thread is spawned **before** the filter is installed (a supervisor that
//! inherited the filter would be asked to serve its own `/proc` reads). The filter stays on
//! the thread that installed it and on the threads that thread spawns afterwards, for their
//! whole lives; [`InProcess::run`] therefore runs the body on a fresh thread, so that nothing
//! else of the test process is filtered and the supervisor ends when the body's thread does.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::{self, JoinHandle, ThreadId};

use nrt_sim::Instance;

use crate::config::{Accounting, EmuConfig, FaultPlan};
use crate::emulator::Emulator;
use crate::filter::install_filter;

/// What [`InProcess`] emulates (its root is a fresh temporary directory).
#[derive(Clone, Debug)]
pub struct InProcessConfig {
    /// Instance family.
    pub instance: Instance,
    /// Number of devices.
    pub devices: u32,
    /// Faults to inject.
    pub faults: FaultPlan,
}

impl InProcessConfig {
    /// `devices` devices of `instance`, no faults.
    pub fn new(instance: Instance, devices: u32) -> Self {
        Self {
            instance,
            devices,
            faults: FaultPlan::none(),
        }
    }

    /// With `faults`.
    pub fn with_faults(mut self, faults: FaultPlan) -> Self {
        self.faults = faults;
        self
    }
}

/// A temporary root, removed on drop.
#[derive(Debug)]
struct TempRoot(PathBuf);

impl TempRoot {
    fn new() -> io::Result<Self> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let root = std::env::temp_dir().join(format!(
            "nrt-emu-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root)?;
        Ok(Self(root))
    }
}

impl Drop for TempRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An emulator in a temporary directory, serving the thread that started it.
#[derive(Debug)]
pub struct InProcess {
    emulator: Arc<Emulator>,
    supervisor: Option<JoinHandle<io::Result<()>>>,
    installer: ThreadId,
    // Dropped last: the files go once nothing serves them.
    root: TempRoot,
}

impl InProcess {
    /// Creates the temporary tree and the emulator, spawns the supervisor thread and installs
    /// the filter on the **current thread** (see the module documentation: the filter stays
    /// on this thread for its whole life; prefer [`InProcess::run`]).
    ///
    /// Fails with the kernel's error, and a message saying so, when seccomp user
    /// notification is not available.
    pub fn start(cfg: InProcessConfig) -> io::Result<InProcess> {
        let root = TempRoot::new()?;
        let emulator = Arc::new(Emulator::new(EmuConfig {
            instance: cfg.instance,
            devices: cfg.devices,
            root: root.0.clone(),
            faults: cfg.faults,
        })?);
        let (tx, rx) = mpsc::channel();
        let serving = Arc::clone(&emulator);
        let supervisor = thread::Builder::new()
            .name("nrt-emu-supervisor".into())
            .spawn(move || match rx.recv() {
                Ok(listener) => serving.serve(listener),
                Err(_) => Ok(()),
            })?;
        let listener = match install_filter() {
            Ok(fd) => fd,
            Err(e) => {
                drop(tx);
                let _ = supervisor.join();
                return Err(io::Error::new(
                    e.kind(),
                    format!("the kernel refused a seccomp user-notification filter: {e}"),
                ));
            }
        };
        if tx.send(listener).is_err() {
            return Err(io::Error::other("the supervisor thread ended early"));
        }
        Ok(InProcess {
            emulator,
            supervisor: Some(supervisor),
            installer: thread::current().id(),
            root,
        })
    }

    /// Runs `body` on a fresh thread serving an emulator of `cfg`, then waits for the
    /// supervisor to end (when the body's thread, and any thread it left running, ends) and
    /// returns the body's result with the final accounting. A panic of the body is resumed
    /// here.
    pub fn run<T, F>(cfg: InProcessConfig, body: F) -> io::Result<(T, Accounting)>
    where
        T: Send,
        F: FnOnce(&InProcess) -> T + Send,
    {
        thread::scope(|s| {
            let worker = s.spawn(move || -> io::Result<(T, Parts)> {
                let emu = InProcess::start(cfg)?;
                let out = body(&emu);
                Ok((out, emu.into_parts()))
            });
            let (out, parts) = match worker.join() {
                Ok(result) => result?,
                Err(payload) => std::panic::resume_unwind(payload),
            };
            let Parts {
                emulator,
                supervisor,
                root,
            } = parts;
            if let Some(h) = supervisor {
                match h.join() {
                    Ok(served) => served?,
                    Err(payload) => std::panic::resume_unwind(payload),
                }
            }
            let accounting = emulator.accounting();
            drop(root);
            Ok((out, accounting))
        })
    }

    fn into_parts(mut self) -> Parts {
        Parts {
            emulator: Arc::clone(&self.emulator),
            supervisor: self.supervisor.take(),
            root: TempRoot(std::mem::take(&mut self.root.0)),
        }
    }

    /// The emulator.
    pub fn emulator(&self) -> &Arc<Emulator> {
        &self.emulator
    }

    /// `root/dev`.
    pub fn dev_dir(&self) -> PathBuf {
        self.emulator.dev_dir()
    }

    /// `root/sys`.
    pub fn sysfs_root(&self) -> PathBuf {
        self.emulator.sysfs_root()
    }

    /// `root/dev/neuron{i}`.
    pub fn device_path(&self, i: u32) -> PathBuf {
        self.emulator.device_path(i)
    }

    /// The temporary root.
    pub fn root(&self) -> &Path {
        &self.emulator.config().root
    }

    /// What the emulator holds and has served so far.
    pub fn accounting(&self) -> Accounting {
        self.emulator.accounting()
    }
}

/// What outlives the body's thread in [`InProcess::run`].
struct Parts {
    emulator: Arc<Emulator>,
    supervisor: Option<JoinHandle<io::Result<()>>>,
    root: TempRoot,
}

impl Drop for InProcess {
    fn drop(&mut self) {
        let Some(h) = self.supervisor.take() else {
            return;
        };
        if thread::current().id() == self.installer {
            // This thread keeps the filter: the supervisor must keep serving it (a closed
            // listener would fail its every open and close with ENOSYS). It ends with the
            // thread.
            drop(h);
        } else {
            let _ = h.join();
        }
    }
}
