//! Inspect capture of a failing execution, through the C ABI: a simulator program whose DMA
//! overwrites an SBUF buffer VectorE is reading, with no semaphore edge between them, completes
//! with `NRT_EXEC_COMPLETED_WITH_ERR` (1004); with "inspect on fail" its directory holds the
//! device profile of the failed run, its input bytes and its status, and the system profile
//! records the completion with that status and the runtime's error (the input was written
//! before capture began, so its write is not in it).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::ffi::{CString, c_void};
use std::ptr::null_mut;

use nrt_sim::engine::{
    AccessPattern, DType, DmaDescriptor, DmaEndpoint, EngineId, Instr, ProgramBuilder,
};

/// VectorE copies SBUF bytes 0..2048 of each partition while a DMA started by SyncE writes
/// them: a write-after-read hazard the simulator reports.
fn hazardous_neff() -> Vec<u8> {
    let mut b = ProgramBuilder::new("war");
    let x = b.input("x", DType::F32, &[128, 512]);
    let done = b.sem().unwrap();
    b.push(
        EngineId::Vector,
        Instr::TensorCopy {
            src: AccessPattern::sbuf(DType::F32, 0, 128, 0, 512),
            out: AccessPattern::sbuf(DType::F32, 0, 128, 4096, 512),
        },
    );
    let descs: Vec<DmaDescriptor> = (0..128u8)
        .map(|p| DmaDescriptor {
            src: DmaEndpoint::Hbm {
                tensor: x,
                offset: u64::from(p) * 2048,
            },
            dst: DmaEndpoint::Sbuf {
                partition: p,
                offset: 0,
            },
            len: 2048,
        })
        .collect();
    let n = b.dma_spread(EngineId::Sync, &descs, 0, done, 16);
    b.wait(EngineId::Sync, done, n);
    nrt_sim::neff::neff_from_programs("war", &[b.build().unwrap()]).unwrap()
}

#[test]
fn a_failing_execution_is_captured_with_its_profile_inputs_and_status() {
    let dir = std::env::temp_dir().join(format!("nrt-capi-onfail-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // SAFETY: this test binary runs this single test; nothing else reads the environment
    // concurrently.
    unsafe {
        std::env::set_var("NEURON_RT_BACKEND", "sim");
        std::env::set_var("NEURON_RT_LOG_LEVEL", "QUIET");
    }
    // SAFETY: NULL version strings are allowed.
    let st = unsafe { nrt::nrt_init(1, std::ptr::null(), std::ptr::null()) };
    assert_eq!(st, 0);
    let neff = hazardous_neff();
    let mut model: *mut c_void = null_mut();
    // SAFETY: a valid buffer and out-pointer.
    let st = unsafe { nrt::nrt_load(neff.as_ptr().cast(), neff.len(), 0, -1, &mut model) };
    assert_eq!(st, 0);

    let name = CString::new("x").unwrap();
    let size = 128 * 512 * 4;
    let bytes: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
    let mut x: *mut c_void = null_mut();
    let (mut inputs, mut outputs): (*mut c_void, *mut c_void) = (null_mut(), null_mut());
    // SAFETY: valid strings, buffers and out-pointers throughout.
    unsafe {
        assert_eq!(
            nrt::nrt_tensor_allocate(0, 0, size, name.as_ptr(), &mut x),
            0
        );
        assert_eq!(nrt::nrt_tensor_write(x, bytes.as_ptr().cast(), 0, size), 0);
        assert_eq!(nrt::nrt_allocate_tensor_set(&mut inputs), 0);
        assert_eq!(nrt::nrt_allocate_tensor_set(&mut outputs), 0);
        assert_eq!(
            nrt::nrt_add_tensor_to_tensor_set(inputs, name.as_ptr(), x),
            0
        );
    }

    let mut cfg: *mut c_void = null_mut();
    let out_dir = CString::new(dir.to_str().unwrap()).unwrap();
    // SAFETY: valid out-pointer and string.
    unsafe {
        assert_eq!(nrt::inspect::nrt_inspect_config_allocate(&mut cfg), 0);
        assert_eq!(
            nrt::inspect::nrt_inspect_config_set_output_dir(cfg, out_dir.as_ptr()),
            0
        );
    }
    assert_eq!(
        nrt::inspect::nrt_inspect_config_set_enable_inspect_on_fail(cfg, true),
        0
    );
    assert_eq!(nrt::inspect::nrt_inspect_begin_with_options(cfg), 0);
    assert_eq!(
        nrt::nrt_execute(model, inputs, outputs),
        1004,
        "NRT_EXEC_COMPLETED_WITH_ERR"
    );
    assert_eq!(nrt::inspect::nrt_inspect_stop(), 0);
    assert_eq!(nrt::inspect::nrt_inspect_config_free(cfg), 0);

    let root = dir.join(format!("sim_pid_{}", std::process::id()));
    let exec = root.join("session_1_model1_nc0_seq1");
    assert_eq!(std::fs::read(exec.join("inputs/x.bin")).unwrap(), bytes);
    let info = std::fs::read_to_string(exec.join("execution.json")).unwrap();
    assert_eq!(
        info,
        "{\"model_id\":1,\"nc_idx\":0,\"nrt_sequence_id\":1,\"status\":1004,\
         \"status_name\":\"NRT_EXEC_COMPLETED_WITH_ERR\"}\n"
    );
    let trace: serde_json::Value =
        serde_json::from_slice(&std::fs::read(exec.join("device_profile.json")).unwrap()).unwrap();
    assert_eq!(
        trace["otherData"]["status"],
        serde_json::json!("NRT_EXEC_COMPLETED_WITH_ERR")
    );
    let summary = &trace["otherData"]["summary"]["executions"][0];
    assert_eq!(summary["status"], "NRT_EXEC_COMPLETED_WITH_ERR");
    // The DMA moved the whole input (128 descriptors of 2048 bytes) before the run ended.
    assert_eq!(summary["cores"][0]["dma_bytes"], serde_json::json!(size));
    let sys: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("system_profile.json")).unwrap()).unwrap();
    let names: Vec<&str> = sys["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "nrt_exec_submit",
            "nrt_exec_start",
            "nrt_exec_complete",
            "nrt_error"
        ]
    );
    assert_eq!(sys["events"][2]["status"], serde_json::json!(1004));
    assert_eq!(sys["events"][3]["status"], serde_json::json!(1004));

    // SAFETY: handles from this library.
    unsafe {
        nrt::nrt_tensor_free(&mut x);
        nrt::nrt_destroy_tensor_set(&mut inputs);
        nrt::nrt_destroy_tensor_set(&mut outputs);
    }
    assert_eq!(nrt::nrt_unload(model), 0);
    nrt::nrt_close();
    std::fs::remove_dir_all(&dir).unwrap();
}
