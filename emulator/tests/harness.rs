//! The supervisor's lifetime: `InProcess::start` on a thread that keeps the filter after the
//! handle is dropped (the supervisor keeps serving it, so its opens and closes still work),
//! and `Emulator::serve` returning on `stop` (after which the filtered thread's notified calls
//! fail with ENOSYS, as the kernel does for a closed listener).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::{Arc, mpsc};

use common::*;
use nrt_emu::{EmuConfig, Emulator, FaultPlan, InProcess, InProcessConfig, install_filter};
use nrt_sim::Instance;

#[test]
fn a_thread_keeps_being_served_after_dropping_its_handle() {
    std::thread::spawn(|| {
        let emu = InProcess::start(InProcessConfig::new(Instance::Inf2, 1))
            .unwrap_or_else(|e| panic!("nrt-emu cannot run here: {e}"));
        let path = emu.device_path(0);
        let fd = open(&path, libc::O_WRONLY).unwrap();
        let mut v = [0u8; 8];
        assert_eq!(ioctl(&fd, COMPATIBLE_VERSION, &mut v), Ok(0));
        assert_eq!((get32(&v, 0), get32(&v, 4)), (7, 5));
        assert!(emu.root().starts_with(std::env::temp_dir()));
        assert!(emu.sysfs_root().join("module/neuron/version").exists());
        drop(emu);
        // Still served: an ordinary file opens and closes, the device fd still answers.
        let text = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        assert!(text.contains("Seccomp:\t2"), "{text}");
        assert_eq!(ioctl(&fd, COMPATIBLE_VERSION, &mut v), Ok(0));
        drop(fd);
    })
    .join()
    .unwrap();
}

#[test]
fn serve_returns_on_stop() {
    let root = std::env::temp_dir().join(format!("nrt-emu-stop-{}", std::process::id()));
    let emulator = Arc::new(
        Emulator::new(EmuConfig {
            instance: Instance::Trn2,
            devices: 2,
            root: root.clone(),
            faults: FaultPlan::none(),
        })
        .unwrap(),
    );
    assert_eq!(emulator.device_path(1), root.join("dev/neuron1"));
    assert_eq!(emulator.dev_dir(), root.join("dev"));
    assert_eq!(
        std::fs::read_to_string(root.join("sys/class/neuron_device/neuron1/core_count")).unwrap(),
        "8"
    );
    assert_eq!(
        std::fs::read_to_string(
            root.join("sys/class/neuron_device/neuron0/info/architecture/device_name")
        )
        .unwrap(),
        "Trainium2\n"
    );
    let (tx, rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel();
    let path = emulator.device_path(0);
    let target = std::thread::spawn(move || {
        let listener = install_filter().unwrap_or_else(|e| panic!("nrt-emu cannot run here: {e}"));
        tx.send(listener).unwrap();
        let fd = open(&path, libc::O_WRONLY).unwrap();
        let mut v = [0u8; 8];
        assert_eq!(ioctl(&fd, COMPATIBLE_VERSION, &mut v), Ok(0));
        done_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        // The listener is gone: the filter fails notified calls with ENOSYS.
        assert_eq!(ioctl(&fd, COMPATIBLE_VERSION, &mut v), Err(libc::ENOSYS));
        std::mem::forget(fd);
    });
    let listener = rx.recv().unwrap();
    let serving = Arc::clone(&emulator);
    let supervisor = std::thread::spawn(move || serving.serve(listener));
    done_rx.recv().unwrap();
    emulator.stop();
    supervisor.join().unwrap().unwrap();
    go_tx.send(()).unwrap();
    target.join().unwrap();
    assert_eq!(emulator.accounting().ioctls_served, 1);
    let _ = std::fs::remove_dir_all(&root);
}
