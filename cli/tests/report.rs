//! `nrt run` and `nrt bench` read the report the simulator kept of the executions they made
//! through the runtime: the engine is entered once per subgraph program per execution, never
//! again to recover counters, and the printed outputs and counters are those of the execution
//! with the inputs given.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};

use common::{nrt, quiet_stdout_of as stdout_of};
use nrt_sim::engine::{DType, kernels};

/// The value of the summary line `label` (the text after the padded label).
fn field<'a>(stdout: &'a str, label: &str) -> &'a str {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{label:<11}")))
        .unwrap_or_else(|| panic!("no {label:?} line in\n{stdout}"))
}

/// A float32 `.npy` (version 1.0, C order).
fn write_f32_npy(path: &Path, shape: &[usize], data: &[f32]) {
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let bytes: Vec<u8> = data.iter().flat_map(|x| x.to_le_bytes()).collect();
    common::write_npy(path, "<f4", &shape, &bytes);
}

const K: usize = 4;
const M: usize = 3;
const N: usize = 5;

/// A small fp32 matmul spec, `out[M, N] = lhs_t[K, M]ᵀ · rhs[K, N]`, whose inputs have no
/// sample data: its outputs depend only on the inputs given.
fn matmul_spec(dir: &Path) -> PathBuf {
    let spec = dir.join("mm.toml");
    std::fs::write(
        &spec,
        format!(
            "name = \"small_matmul\"\ndtype = \"fp32\"\noutput = \"out\"\n\n\
             [tensors.lhs_t]\nkind = \"input\"\nshape = [{K}, {M}]\n\n\
             [tensors.rhs]\nkind = \"input\"\nshape = [{K}, {N}]\n\n\
             [[layers]]\nop = \"matmul\"\na = \"lhs_t\"\nb = \"rhs\"\n"
        ),
    )
    .unwrap();
    spec
}

/// The product in plain loops; small integers, so every order of summation is exact.
fn reference(lhs_t: &[f32], rhs: &[f32]) -> Vec<f32> {
    let mut out = vec![0f32; M * N];
    for i in 0..M {
        for j in 0..N {
            out[i * N + j] = (0..K).map(|k| lhs_t[k * M + i] * rhs[k * N + j]).sum();
        }
    }
    out
}

/// Runs the matmul spec with the given inputs (`extra` arguments appended); returns the
/// summary and the output.
fn run_matmul(
    dir: &Path,
    tag: &str,
    lhs_t: &[f32],
    rhs: &[f32],
    extra: &[&str],
) -> (String, Vec<f32>) {
    let spec = matmul_spec(dir);
    let l = dir.join(format!("lhs_t_{tag}.npy"));
    let r = dir.join(format!("rhs_{tag}.npy"));
    write_f32_npy(&l, &[K, M], lhs_t);
    write_f32_npy(&r, &[K, N], rhs);
    let out = dir.join(format!("out_{tag}"));
    let s = stdout_of(
        nrt()
            .arg("run")
            .arg(&spec)
            .arg("--input")
            .arg(format!("lhs_t={}", l.display()))
            .arg("--input")
            .arg(format!("rhs={}", r.display()))
            .arg("-o")
            .arg(&out)
            .args(extra),
    );
    (s, common::read_f32_npy(&out.join("out.npy")).1)
}

fn assert_counters(s: &str) {
    for want in [
        "engines (ticks; active + idle + waits = ",
        "TensorE",
        "VectorE",
        "DMA (",
    ] {
        assert!(s.contains(want), "missing {want:?} in\n{s}");
    }
    let simulated = field(s, "simulated");
    assert!(simulated.contains(" ticks = "), "{simulated}");
    assert!(!s.contains("re-run") && !s.contains("bit-identical"), "{s}");
}

#[test]
fn run_reads_the_report_of_the_execution_it_made() {
    let dir = tempfile::tempdir().unwrap();
    let lhs_a: Vec<f32> = (0..K * M).map(|i| (i % 5) as f32 - 2.0).collect();
    let rhs_a: Vec<f32> = (0..K * N).map(|i| (i % 3) as f32).collect();
    let lhs_b: Vec<f32> = (0..K * M).map(|i| (i % 7) as f32).collect();
    let rhs_b: Vec<f32> = (0..K * N).map(|i| 3.0 - (i % 4) as f32).collect();

    let (sa, out_a) = run_matmul(dir.path(), "a", &lhs_a, &rhs_a, &[]);
    let (sb, out_b) = run_matmul(dir.path(), "b", &lhs_b, &rhs_b, &[]);
    assert_eq!(out_a, reference(&lhs_a, &rhs_a));
    assert_eq!(out_b, reference(&lhs_b, &rhs_b));
    assert_ne!(out_a, out_b);
    // The printed outputs are those of the execution with these inputs.
    let values = |s: &str| {
        s.lines()
            .find(|l| l.trim_start().starts_with("out ") && l.contains('['))
            .unwrap()
            .to_owned()
    };
    assert_ne!(values(&sa), values(&sb));
    assert!(
        values(&sa).contains(&format!("[{}, ", out_a[0])),
        "{}",
        values(&sa)
    );

    for s in [&sa, &sb] {
        assert_counters(s);
        assert_eq!(
            field(s, "counters"),
            "from the report the simulator kept of the execution above, made through the \
             runtime (physical core 0)"
        );
        // The engine ran exactly once: the execution itself.
        assert_eq!(
            field(s, "engine"),
            "1 program run in this process (the execution above)"
        );
    }
}

#[test]
fn with_repeat_the_counters_are_the_last_executions_and_the_engine_ran_once_each() {
    let dir = tempfile::tempdir().unwrap();
    let lhs: Vec<f32> = (0..K * M).map(|i| i as f32).collect();
    let rhs: Vec<f32> = (0..K * N).map(|i| (i % 2) as f32).collect();
    let (s, out) = run_matmul(dir.path(), "r", &lhs, &rhs, &["--repeat", "4"]);
    assert_eq!(out, reference(&lhs, &rhs));
    assert_counters(&s);
    assert!(
        field(&s, "counters").starts_with(
            "from the report the simulator kept of the last of the 4 executions above"
        ),
        "{s}"
    );
    assert_eq!(
        field(&s, "engine"),
        "4 program runs in this process (the 4 executions above)"
    );
    assert!(field(&s, "host time").contains("(mean of 4)"), "{s}");
}

#[test]
fn the_trace_is_the_recorded_event_log_of_the_execution() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.json");
    let lhs = vec![1.0; K * M];
    let rhs = vec![2.0; K * N];
    let (s, out) = run_matmul(
        dir.path(),
        "t",
        &lhs,
        &rhs,
        &["--trace", trace.to_str().unwrap()],
    );
    assert_eq!(out, vec![8.0; M * N]);
    assert_eq!(
        field(&s, "engine"),
        "1 program run in this process (the execution above)"
    );
    assert!(field(&s, "trace").contains(" events"), "{s}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert!(!json["traceEvents"].as_array().unwrap().is_empty());
}

#[test]
fn every_subgraph_of_a_logical_core_reports() {
    // Two subgraphs (one per physical core of a trn2 logical core), each an add program.
    let add = kernels::elementwise(kernels::Elementwise::Add, 4, 8, DType::F32).unwrap();
    let neff = nrt_sim::neff::neff_from_programs("add2", &[add.clone(), add]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("add2.neff");
    std::fs::write(&path, neff).unwrap();
    let a: Vec<f32> = (0..32).map(|i| i as f32).collect();
    let b = vec![0.5f32; 32];
    write_f32_npy(&dir.path().join("a.npy"), &[4, 8], &a);
    write_f32_npy(&dir.path().join("b.npy"), &[4, 8], &b);
    let out = dir.path().join("out");
    let s = stdout_of(
        nrt()
            .arg("run")
            .arg(&path)
            .args(["--instance", "trn2", "--repeat", "2", "--input"])
            .arg(format!("a={}", dir.path().join("a.npy").display()))
            .arg("--input")
            .arg(format!("b={}", dir.path().join("b.npy").display()))
            .arg("-o")
            .arg(&out),
    );
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(common::read_f32_npy(&out.join("out.npy")).1, want);
    assert!(
        s.contains("engines of subgraph 0 (physical core 0), in ticks"),
        "{s}"
    );
    assert!(
        s.contains("engines of subgraph 1 (physical core 1), in ticks"),
        "{s}"
    );
    assert!(
        field(&s, "simulated").contains("(the slowest of 2 subgraphs)"),
        "{s}"
    );
    assert!(
        field(&s, "counters").ends_with("(physical cores 0, 1)"),
        "{s}"
    );
    assert_eq!(
        field(&s, "engine"),
        "4 program runs in this process (2 subgraph programs × the 2 executions above)"
    );
}

#[test]
fn bench_reads_the_report_of_its_last_execution() {
    let s = stdout_of(nrt().args([
        "bench",
        concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/mlp.toml"),
        "-n",
        "5",
        "--threads",
        "2",
        "--warmup",
        "2",
    ]));
    assert!(field(&s, "simulated").contains("per execution → "), "{s}");
    assert!(field(&s, "simulated").contains("the simulator's report of the last execution"));
    // Warm-up and timed executions, nothing else.
    assert_eq!(
        field(&s, "engine"),
        "7 program runs in this process (the 7 executions above)"
    );
}
