//! Helpers shared by the `nrt` command's integration tests: the command with a clean
//! environment, its output, `.npy` files, and the models and fixtures of `nrt-tests`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;

/// Every variable the runtime or the backend selection reads that could change what a test
/// sees: they are removed from the command's environment.
pub(crate) const NRT_VARS: [&str; 7] = [
    "NEURON_RT_LOG_LEVEL",
    "NEURON_RT_VISIBLE_CORES",
    "NEURON_RT_NUM_CORES",
    "NEURON_RT_BACKEND",
    "NEURON_RT_SIM_INSTANCE",
    "NEURON_RT_SIM_DEVICES",
    "NEURON_RT_SIM_PLUMBING",
];

/// The repository root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The example spec `examples/<name>`.
pub(crate) fn example(name: &str) -> String {
    root().join("examples").join(name).display().to_string()
}

/// The `nrt` command without any of [`NRT_VARS`].
pub(crate) fn nrt() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nrt"));
    for v in NRT_VARS {
        c.env_remove(v);
    }
    c
}

/// The stdout of a successful run.
pub(crate) fn stdout_of(c: &mut Command) -> String {
    String::from_utf8(c.assert().success().get_output().stdout.clone()).unwrap()
}

/// The stdout of a successful run that wrote nothing on stderr.
pub(crate) fn quiet_stdout_of(c: &mut Command) -> String {
    let out = c.assert().success().get_output().clone();
    assert!(
        out.stderr.is_empty(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A `.npy` file (version 1.0, C order) with a descr, a shape and raw little-endian data.
pub(crate) fn write_npy(path: &Path, descr: &str, shape: &[u64], data: &[u8]) {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut h = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut v = b"\x93NUMPY\x01\x00".to_vec();
    v.extend_from_slice(&(h.len() as u16).to_le_bytes());
    v.extend_from_slice(h.as_bytes());
    v.extend_from_slice(data);
    std::fs::write(path, v).unwrap();
}

/// The header and data of a float32 `.npy` written by `nrt run --output-dir`.
pub(crate) fn read_f32_npy(path: &Path) -> (String, Vec<f32>) {
    let b = std::fs::read(path).unwrap();
    assert!(b.starts_with(b"\x93NUMPY\x01\x00"));
    let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
    let header = String::from_utf8(b[10..10 + hlen].to_vec()).unwrap();
    assert!(header.contains("'descr': '<f4'"), "{header}");
    let data = b[10 + hlen..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    (header, data)
}

/// The compiler fixture `matmul_small.neff` when the `shared/` folder beside the repository
/// has it; otherwise `None` after a `SKIPPED` line (a failure with `NRT_REQUIRE_SHARED=1`).
#[track_caller]
pub(crate) fn compiler_fixture() -> Option<String> {
    nrt_tests::shared_path(nrt_tests::MATMUL_FIXTURE).map(|p| p.display().to_string())
}

/// [`nrt_tests::models::plumbing_matmul_neff`] (the compiler fixture's shape, no simulator
/// program) written to a temporary directory.
pub(crate) fn plumbing_matmul_neff() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plumbing_matmul.neff");
    std::fs::write(&path, nrt_tests::models::plumbing_matmul_neff()).unwrap();
    (dir, path.display().to_string())
}

/// The seeded-data generator documented at the top of `cli/src/spec.rs`: SplitMix64 from
/// state `seed + (i+1)·γ`, top 24 bits as `u`, value `(2u − 1)·scale` (before rounding to the
/// tensor's type).
pub(crate) fn seeded(seed: u64, n: usize, scale: f64) -> Vec<f32> {
    (0..n as u64)
        .map(|i| {
            let mut z = seed.wrapping_add((i + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            let u = (z >> 40) as f64 / 16_777_216.0;
            ((2.0 * u - 1.0) * scale) as f32
        })
        .collect()
}

/// A seeded fp32 tensor of a spec (a parsed TOML table): its shape and its data as f64.
pub(crate) fn spec_tensor(spec: &toml::Table, name: &str) -> (Vec<usize>, Vec<f64>) {
    let t = spec["tensors"][name].as_table().unwrap();
    let shape: Vec<usize> = t["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_integer().unwrap() as usize)
        .collect();
    let seed = t["seed"].as_integer().unwrap() as u64;
    let scale = t
        .get("scale")
        .and_then(|v| v.as_float().or(v.as_integer().map(|i| i as f64)))
        .unwrap_or(1.0);
    let n = shape.iter().product();
    let v = seeded(seed, n, scale).into_iter().map(f64::from).collect();
    (shape, v)
}
