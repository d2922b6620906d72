//! The compiler fixture (`matmul_small.neff`: two subgraphs, no simulator program) loaded by
//! `nrt-linux` over the in-process device emulator: every subgraph's instruction streams and
//! constants are staged in device memory of the right types and sizes, execution is refused
//! with the not-public message, and unload frees all of it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use nrt_core::NrtStatus;
use nrt_core::Runtime;
use nrt_core::driver::FaultInjector;
use nrt_core::neff::{self, KeepMembers, ParseOptions};
use nrt_core::tensor::{TensorPlacement, TensorSet};
use nrt_emu::{InProcess, InProcessConfig};
use nrt_host::CapturingHost;
use nrt_linux::{FileKind, LinuxDriver, StagedFile};
use nrt_sim::Instance;
use nrt_tests::{MATMUL_FIXTURE, assert_err, init, shared_path};

/// `NEURON_MEMALLOC_TYPE_CODE_DEVICE`, `_CONSTANTS_DEVICE`.
const CODE_DEVICE: u32 = 8;
const CONSTANTS_DEVICE: u32 = 10;
/// Request numbers.
const RESOURCE_MMAP_INFO: u32 = 0xc020_4e70;
const NOTIFICATIONS_INIT_V2: u32 = 0x8008_4e35;

/// Each subgraph's files as (kind, name, member, bytes): the five engine streams of
/// `def.json` in its key order (pe, act, pool, dve, sp), then the constant `identity_82_sg0000`
/// (`value_sg0000_identity_82_CRSM.npy`: 32,896 bytes, 128 of them the `.npy` header).
fn expected_files() -> Vec<(FileKind, &'static str, &'static str, u64)> {
    vec![
        (FileKind::Stream, "PE", "PE.bin", 768),
        (FileKind::Stream, "Activation", "Activation.bin", 320),
        (FileKind::Stream, "Pool", "Pool.bin", 448),
        (FileKind::Stream, "DVE", "DVE.bin", 128),
        (FileKind::Stream, "SP", "SP.bin", 192),
        (
            FileKind::Constant,
            "identity_82_sg0000",
            "value_sg0000_identity_82_CRSM.npy",
            32768,
        ),
    ]
}

fn summary(files: &[StagedFile]) -> Vec<(FileKind, &str, &str, u64)> {
    files
        .iter()
        .map(|f| (f.kind, f.name.as_str(), f.file.as_str(), f.bytes))
        .collect()
}

#[test]
fn the_compiler_fixture_is_staged_refused_at_execute_and_freed_at_unload() {
    let Some(path) = shared_path(MATMUL_FIXTURE) else {
        return;
    };
    let neff = std::fs::read(path).unwrap();
    let ((), acct) = InProcess::run(InProcessConfig::new(Instance::Trn2, 1), |emu| {
        let host = Arc::new(CapturingHost::new());
        let rt = Runtime::with_host(
            FaultInjector::new(LinuxDriver::with_roots(emu.dev_dir(), emu.sysfs_root())),
            Arc::clone(&host),
        );
        init(&rt, &[]).unwrap_or_else(|e| panic!("{e}"));
        let before = emu.accounting();
        // Bring-up mapped every core's semaphore block: one RESOURCE_MMAP_INFO per
        // notification queue (one each per core).
        let served = |r: u32| before.per_request.get(&r).copied().unwrap_or(0);
        assert_eq!(served(RESOURCE_MMAP_INFO), served(NOTIFICATIONS_INIT_V2));
        assert_eq!(served(RESOURCE_MMAP_INFO), 8);
        let h = rt.load(&neff, 0, -1).unwrap_or_else(|e| panic!("{e}"));

        // Both subgraphs (physical cores 0 and 1 of logical core 0) hold their files.
        let staged = rt.driver().inner().staged_files();
        assert_eq!(
            staged.iter().map(|(pnc, _)| *pnc).collect::<Vec<_>>(),
            [0, 1]
        );
        let parsed = neff::parse(
            &neff,
            &ParseOptions {
                keep: KeepMembers::All,
                ..Default::default()
            },
        )
        .unwrap();
        for ((_, files), sg) in staged.iter().zip(&parsed.subgraphs) {
            assert_eq!(summary(files), expected_files());
            // On the device: each stream byte for byte, each constant without its 128-byte
            // `.npy` header.
            for f in files {
                let member = sg.member(&f.file).unwrap();
                let want = match f.kind {
                    FileKind::Stream => member,
                    FileKind::Constant => &member[128..],
                };
                let got = emu.emulator().read_memory(0, f.pa, f.bytes).unwrap();
                assert!(got == want, "{} of {}", f.file, sg.name);
            }
        }
        // The emulator sees 5 code chunks and 1 constants chunk per subgraph, page-rounded.
        let during = emu.accounting();
        assert_eq!(during.by_mem_type.get(&CODE_DEVICE), Some(&(10, 10 * 4096)));
        assert_eq!(
            during.by_mem_type.get(&CONSTANTS_DEVICE),
            Some(&(2, 2 * 32768))
        );
        assert_eq!(
            during.allocated_bytes - before.allocated_bytes,
            10 * 4096 + 2 * 32768
        );

        let mut inputs = TensorSet::new();
        for (name, size) in [("x", 65536), ("y", 65536)] {
            let t = rt
                .tensor_allocate(TensorPlacement::Device, 0, size, name)
                .unwrap_or_else(|e| panic!("{e}"));
            inputs.add(name, t);
        }
        let mut outputs = TensorSet::new();
        outputs.add(
            "output0",
            rt.tensor_allocate(TensorPlacement::Device, 0, 32768, "output0")
                .unwrap_or_else(|e| panic!("{e}")),
        );
        // The driver error is `Unsupported`, which the runtime reports as NRT_FAILURE.
        assert_err(
            rt.execute(h, &inputs, &outputs),
            NrtStatus::Failure,
            "Execution of model 1 failed: submit: this NEFF carries no simulator program: \
             executing a compiler NEFF needs the start/complete protocol between the runtime and \
             the NeuronCore (which semaphores, events and queues start an execution and signal \
             its end) and the instruction encoding of its engine streams, neither of which is \
             public; only NEFFs with a simulator program run, through the launch convention of \
             docs/LINUX_BACKEND.md",
        );
        drop((inputs, outputs));

        rt.unload(h).unwrap_or_else(|e| panic!("{e}"));
        assert!(rt.driver().inner().staged_files().is_empty());
        let after = emu.accounting();
        assert_eq!(after.by_mem_type.get(&CODE_DEVICE), None);
        assert_eq!(after.by_mem_type.get(&CONSTANTS_DEVICE), None);
        assert_eq!(after.allocated_bytes, before.allocated_bytes);
        rt.close();
    })
    .unwrap_or_else(|e| panic!("nrt-emu cannot run here: {e}"));
    assert_eq!(acct.allocated_bytes, 0, "{acct}");
    assert_eq!(acct.allocations, 0, "{acct}");
    assert_eq!(acct.reserved_cores, 0, "{acct}");
    assert_eq!(acct.attached_processes, 0, "{acct}");
}
