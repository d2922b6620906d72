//! A whole model through `nrt_core::Runtime` over `nrt_linux::LinuxDriver` over the emulator:
//! init, load (staging through the launch convention), execute, read the outputs, unload,
//! close — every byte crossing the real driver ABI — and nothing left held afterwards.
//!
//! Ignored until `nrt-linux` stages and submits (branch `linux`); run with `--ignored` after
//! the merge. Checked on a scratch merge of `linux` at 70a5922 with this branch: it passes once
//! the backend allocates the mailbox with `align` = 0 (the driver, and so the emulator,
//! refuses aligned host memory: "MEM_ALLOC (mailbox): Invalid argument").

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_core::{FrameworkType, Runtime};
use nrt_emu::InProcessConfig;
use nrt_linux::LinuxDriver;
use nrt_sim::Instance;
use nrt_sim::engine::{DType, kernels};

#[test]
#[ignore = "needs nrt-linux's staging and submission (branch linux)"]
fn a_model_loads_and_executes_through_the_driver_abi() {
    let (result, acc) = emulate(InProcessConfig::new(Instance::Trn1, 1), |emu| {
        let rt = Runtime::new(LinuxDriver::with_roots(emu.dev_dir(), emu.sysfs_root()));
        rt.init(FrameworkType::NoFw, "", "", &[])
            .map_err(|e| format!("init: {e:?}"))?;
        let add = kernels::elementwise(kernels::Elementwise::Add, 4, 8, DType::F32).unwrap();
        let neff = nrt_sim::neff::neff_from_programs("add", &[add]).unwrap();
        let h = rt.load(&neff, 0, -1).map_err(|e| format!("load: {e:?}"))?;
        let (mut inputs, mut outputs) = (TensorSet::new(), TensorSet::new());
        for (name, v) in [("a", 1.5f32), ("b", 2.25f32)] {
            let t = rt
                .tensor_allocate(TensorPlacement::Device, 0, 128, name)
                .map_err(|e| format!("allocate: {e:?}"))?;
            let bytes: Vec<u8> = (0..32).flat_map(|_| v.to_le_bytes()).collect();
            t.write(0, &bytes).map_err(|e| format!("write: {e:?}"))?;
            inputs.add(name, t);
        }
        let out = rt
            .tensor_allocate(TensorPlacement::Device, 0, 128, "out")
            .map_err(|e| format!("allocate: {e:?}"))?;
        outputs.add("out", out.clone());
        rt.execute(h, &inputs, &outputs)
            .map_err(|e| format!("execute: {e:?}"))?;
        let mut got = vec![0u8; 128];
        out.read(0, &mut got).map_err(|e| format!("read: {e:?}"))?;
        drop((inputs, outputs, out));
        rt.unload(h).map_err(|e| format!("unload: {e:?}"))?;
        rt.close();
        Ok::<Vec<u8>, String>(got)
    });
    let got = result.unwrap_or_else(|e| panic!("{e}\n{acc}"));
    let want: Vec<u8> = (0..32).flat_map(|_| 3.75f32.to_le_bytes()).collect();
    assert_eq!(got, want);
    assert_eq!((acc.launches, acc.launch_failures), (1, 0), "{acc}");
    assert_eq!(
        (acc.allocations, acc.reserved_cores, acc.attached_processes),
        (0, 0, 0),
        "{acc}"
    );
    assert_eq!(acc.per_request.get(&SEMAPHORE_INCREMENT), Some(&1));
}
