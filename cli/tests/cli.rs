//! The `nrt` command end to end: every subcommand, and every error case as exactly one line
//! on stderr with a non-zero exit status.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;

use common::{compiler_fixture, example, nrt, plumbing_matmul_neff, stdout_of, write_npy};
use predicates::prelude::*;

/// Runs `args`, expecting failure with `code` and exactly one stderr line that starts with
/// "error: " and contains `needle`; no panic, no backtrace, nothing on stdout.
fn fails_one_line(args: &[&str], code: i32, needle: &str) {
    let out = nrt()
        .args(args)
        .assert()
        .failure()
        .code(code)
        .get_output()
        .clone();
    let err = String::from_utf8(out.stderr).unwrap();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "nrt {args:?}: expected one stderr line, got {err:?}"
    );
    let line = lines[0];
    assert!(line.starts_with("error: "), "nrt {args:?}: {line}");
    assert!(
        line.contains(needle),
        "nrt {args:?}: {line:?} lacks {needle:?}"
    );
    for bad in ["panicked", "backtrace", "RUST_BACKTRACE"] {
        assert!(!line.contains(bad), "nrt {args:?}: {line}");
    }
    assert!(out.stdout.is_empty(), "nrt {args:?} printed on stdout");
}

/// A built MLP NEFF and its sample input, in a temporary directory.
fn built_mlp() -> (tempfile::TempDir, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let neff = dir.path().join("mlp.neff").display().to_string();
    let inputs = dir.path().join("in");
    nrt()
        .args(["build", &example("mlp.toml"), "-o", &neff, "--inputs-dir"])
        .arg(&inputs)
        .assert()
        .success();
    let x = inputs.join("x_t.npy").display().to_string();
    (dir, neff, x)
}

// ---- run -------------------------------------------------------------------------------------

#[test]
fn run_spec_prints_outputs_counters_and_times() {
    let s = stdout_of(nrt().args(["run", &example("mlp.toml")]));
    for want in [
        "model      mlp (built in memory from",
        "sim: simulated trn1",
        "x_t   bf16   [96, 32]  sample data from the spec",
        "y_t   bf16   [10, 32]",
        "simulated  ",
        "not validated against hardware",
        "TensorE",
        "ScalarE",
        "DMA (16/16 used, mean)",
        "counters   from the report the simulator kept of the execution above",
        "engine     1 program run in this process (the execution above)",
        "host time  load",
    ] {
        assert!(s.contains(want), "missing {want:?} in\n{s}");
    }
    assert!(!s.contains("PLUMBING"));
}

#[test]
fn run_writes_outputs_and_a_trace_that_renders() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let trace = dir.path().join("t.json");
    let svg = dir.path().join("timeline.svg");
    let s = stdout_of(
        nrt()
            .args(["run", &example("matmul.toml"), "--output-dir"])
            .arg(&out)
            .arg("--trace")
            .arg(&trace),
    );
    assert!(s.contains("saved"), "{s}");
    assert!(s.contains("nrt trace render"), "{s}");
    let npy = std::fs::read(out.join("out.npy")).unwrap();
    assert!(npy.starts_with(b"\x93NUMPY"));
    let header = String::from_utf8_lossy(&npy[..128]).to_string();
    assert!(
        header.contains("'descr': '<f4'") && header.contains("(192, 640"),
        "{header}"
    );
    assert_eq!(npy.len(), 128 + 192 * 640 * 4);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&trace).unwrap()).unwrap();
    assert_eq!(json["otherData"]["validated_against_hw"], false);
    assert!(json["traceEvents"].as_array().unwrap().len() > 100);

    let s = stdout_of(
        nrt()
            .args(["trace", "render"])
            .arg(&trace)
            .arg("-o")
            .arg(&svg),
    );
    assert!(s.contains("lanes"), "{s}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg "));
    for want in [
        ">TensorE</text>",
        ">DMA engine 0</text>",
        ">MultiplyMoving</text>",
        "µs",
    ] {
        assert!(text.contains(want), "svg lacks {want}");
    }
    assert!(!text.contains(">DMA queue 0.0</text>"));
    let queues = dir.path().join("q.svg");
    nrt()
        .args(["trace", "render", "--queues", "--width", "900"])
        .arg(&trace)
        .arg("-o")
        .arg(&queues)
        .assert()
        .success();
    assert!(
        std::fs::read_to_string(&queues)
            .unwrap()
            .contains(">DMA queue 0.0</text>")
    );
}

#[test]
fn run_neff_with_npy_and_raw_inputs_matches_the_spec_run() {
    let (dir, neff, x) = built_mlp();
    let a = dir.path().join("a");
    let b = dir.path().join("b");
    nrt()
        .args(["run", &example("mlp.toml"), "-o"])
        .arg(&a)
        .assert()
        .success();
    let s = stdout_of(
        nrt()
            .args([
                "run",
                &neff,
                "--input",
                &format!("x_t={x}"),
                "--repeat",
                "3",
                "-o",
            ])
            .arg(&b),
    );
    assert!(s.contains(&format!("from {x}")), "{s}");
    assert!(s.contains("(mean of 3)"), "{s}");
    assert_eq!(
        std::fs::read(a.join("y_t.npy")).unwrap(),
        std::fs::read(b.join("y_t.npy")).unwrap()
    );
    // The same input as raw bf16 bytes (.bin): convert the float32 .npy by hand.
    let npy = std::fs::read(&x).unwrap();
    let raw: Vec<u8> = npy[128..]
        .chunks_exact(4)
        .flat_map(|c| [c[2], c[3]]) // the values are bf16-exact: the upper half is the bf16
        .collect();
    let bin = dir.path().join("x.bin");
    std::fs::write(&bin, raw).unwrap();
    let c = dir.path().join("c");
    nrt()
        .args(["run", &neff, "--input"])
        .arg(format!("x_t={}", bin.display()))
        .arg("-o")
        .arg(&c)
        .assert()
        .success();
    assert_eq!(
        std::fs::read(a.join("y_t.npy")).unwrap(),
        std::fs::read(c.join("y_t.npy")).unwrap()
    );
}

#[test]
fn run_zero_fills_missing_inputs_with_a_notice() {
    let (_dir, neff, _) = built_mlp();
    let s = stdout_of(nrt().args(["run", &neff]));
    assert!(
        s.contains("x_t   bf16   [96, 32]  not given: zero-filled"),
        "{s}"
    );
}

#[test]
fn run_neffs_without_a_simulator_program_say_plumbing_mode() {
    // The built NEFF always; the compiler fixture too when `shared/` has it.
    let (_built_dir, built) = plumbing_matmul_neff();
    for neff in std::iter::once(built).chain(compiler_fixture()) {
        let dir = tempfile::tempdir().unwrap();
        let s = stdout_of(
            nrt()
                .args(["run", &neff, "--instance", "trn2", "-o"])
                .arg(dir.path()),
        );
        assert!(s.contains("PLUMBING"), "{neff}: {s}");
        assert!(s.contains("nothing was computed"), "{neff}: {s}");
        assert!(s.contains("zero-filled"), "{neff}: {s}");
        assert!(
            !s.contains("TensorE"),
            "{neff}: no counters in plumbing mode: {s}"
        );
        let npy = std::fs::read(dir.path().join("output0.npy")).unwrap();
        assert!(
            String::from_utf8_lossy(&npy[..128]).contains("'<f2'"),
            "{neff}"
        );
        assert!(npy[128..].iter().all(|&b| b == 0), "{neff}");
        // On trn1 (logical cores of one physical core) a two-subgraph NEFF cannot load.
        fails_one_line(&["run", &neff], 1, "try --instance trn2");
    }
}

// ---- info ------------------------------------------------------------------------------------

#[test]
fn info_shows_a_compiler_neff() {
    let Some(fixture) = compiler_fixture() else {
        return;
    };
    let s = stdout_of(nrt().args(["info", &fixture]));
    for want in [
        "NEFF 2.0",
        "gzip-compressed tar",
        "2.23.6484.0",
        "logical core size 2",
        "plumbing mode",
        "sg00",
        "sg01",
        "x        input      fp16   [128, 256]  65,536",
        "y        input      fp16   [256, 128]  65,536",
        "output0  output     fp16   [128, 128]  32,768",
    ] {
        assert!(s.contains(want), "missing {want:?} in\n{s}");
    }
}

#[test]
fn info_shows_our_neff_and_its_program() {
    let (_dir, neff, _) = built_mlp();
    let s = stdout_of(nrt().args(["info", &neff]));
    for want in [
        "name       mlp",
        "covers the payload",
        "runs on the cycle-level simulator",
        "'mlp': 6 tensors (4 const)",
        "x_t   input      bf16   [96, 32]  6,144",
        "y_t   output     bf16   [10, 32]    640",
    ] {
        assert!(s.contains(want), "missing {want:?} in\n{s}");
    }
}

// ---- ls --------------------------------------------------------------------------------------

#[test]
fn ls_lists_simulated_devices_and_reservable_cores() {
    let s = stdout_of(nrt().arg("ls"));
    assert!(s.contains("simulated trn1 instance"), "{s}");
    assert!(
        s.contains("| NEURON DEVICE | NEURON CORES | CORE IDS | NEURON MEMORY |"),
        "{s}"
    );
    assert!(
        s.contains("| 0             | 2            | 0-1      | 32 GiB"),
        "{s}"
    );
    let s = stdout_of(nrt().args(["ls", "--instance", "trn2", "--devices", "2"]));
    assert!(s.contains("2 × 8 NeuronCore-v3"), "{s}");
    assert!(s.contains("2 physical cores per logical core"), "{s}");
    assert!(
        s.contains("| 1             | 8            | 8-15     | 96 GiB"),
        "{s}"
    );
    let s = stdout_of(nrt().arg("ls").env("NEURON_RT_VISIBLE_CORES", "1"));
    assert!(
        s.contains("could reserve 1 logical core (1), physical cores 1"),
        "{s}"
    );
}

#[test]
fn ls_linux_without_devices_is_one_line() {
    if Path::new("/dev/neuron0").exists() {
        return; // a real Neuron machine: nothing to check here
    }
    fails_one_line(&["ls", "--backend", "linux"], 1, "no usable Neuron device");
}

// ---- build -----------------------------------------------------------------------------------

#[test]
fn build_writes_a_neff_and_sample_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let neff = dir.path().join("mm.neff");
    let s = stdout_of(
        nrt()
            .args(["build", &example("matmul.toml"), "-o"])
            .arg(&neff)
            .arg("--inputs-dir")
            .arg(dir.path().join("in")),
    );
    assert!(s.contains("matmul M=192 K=256 N=640 (bf16 → fp32)"), "{s}");
    assert!(s.contains("--input lhs_t="), "{s}");
    assert!(dir.path().join("in/lhs_t.npy").exists());
    assert!(dir.path().join("in/rhs.npy").exists());
    let s = stdout_of(nrt().arg("info").arg(&neff));
    assert!(s.contains("out    output     fp32   [192, 640]"), "{s}");
}

#[test]
fn build_refuses_bad_specs_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("bad.toml");
    std::fs::write(
        &spec,
        "name = \"x\"\nlayers = [ { op = \"conv\" } ]\n[tensors]\n",
    )
    .unwrap();
    let out = dir.path().join("x.neff").display().to_string();
    let spec = spec.display().to_string();
    fails_one_line(&["build", &spec, "-o", &out], 1, "bad.toml:2:");
    let text = std::fs::read_to_string(example("mlp.toml"))
        .unwrap()
        .replace("shape = [160, 10]", "shape = [150, 10]");
    let spec = dir.path().join("mlp.toml");
    std::fs::write(&spec, text).unwrap();
    let spec = spec.display().to_string();
    fails_one_line(
        &["build", &spec, "-o", &out],
        1,
        "'w2' must be [160, d_out]",
    );
    fails_one_line(&["run", &spec], 1, "'w2' must be [160, d_out]");
    assert!(!Path::new(&out).exists());
}

// ---- bench -----------------------------------------------------------------------------------

#[test]
fn bench_reports_latency_throughput_and_simulated_time() {
    let s = stdout_of(nrt().args([
        "bench",
        &example("mlp.toml"),
        "--iterations",
        "6",
        "--threads",
        "2",
        "--warmup",
        "1",
    ]));
    for want in [
        "6 timed executions on 2 threads (+1 warm-up)",
        "latency    p50 ",
        " p99 ",
        "executions/s on the host",
        "per execution →",
        "not validated against hardware",
    ] {
        assert!(s.contains(want), "missing {want:?} in\n{s}");
    }
    // A NEFF without a simulator program benches in plumbing mode.
    let (_dir, neff) = plumbing_matmul_neff();
    let s = stdout_of(nrt().args(["bench", &neff, "--instance", "trn2", "-n", "2"]));
    assert!(s.contains("PLUMBING MODE"), "{s}");
}

// ---- errors ----------------------------------------------------------------------------------

#[test]
fn missing_files_are_one_line() {
    for args in [
        &["run", "no-such.neff"][..],
        &["info", "no-such.neff"],
        &["bench", "no-such.neff"],
        &["build", "no-such.toml", "-o", "x.neff"],
        &["run", "no-such.toml"],
        &["trace", "render", "no-such.json", "-o", "t.svg"],
    ] {
        fails_one_line(args, 1, "cannot read 'no-such.");
    }
    let (_dir, neff, _) = built_mlp();
    fails_one_line(
        &["run", &neff, "--input", "x_t=no-such.npy"],
        1,
        "cannot read 'no-such.npy'",
    );
}

#[test]
fn malformed_neffs_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, neff, _) = built_mlp();
    let good = std::fs::read(&neff).unwrap();
    let cases: [(&str, Vec<u8>, &str); 4] = [
        ("empty.neff", vec![], "Invalid NEFF: the file is empty"),
        (
            "short.neff",
            vec![7; 100],
            "fewer than the 1024-byte header",
        ),
        ("junk.neff", vec![0xA5; 4096], "Invalid NEFF"),
        ("cut.neff", good[..good.len() / 2].to_vec(), "Invalid NEFF"),
    ];
    for (name, bytes, needle) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let p = p.display().to_string();
        fails_one_line(&["run", &p], 1, needle);
        fails_one_line(&["info", &p], 1, needle);
        fails_one_line(&["bench", &p], 1, needle);
    }
}

#[test]
fn unknown_input_name_is_one_line() {
    let (_dir, neff, x) = built_mlp();
    fails_one_line(
        &["run", &neff, "--input", &format!("nope={x}")],
        1,
        "model 'mlp' has no input named 'nope' (its inputs: x_t)",
    );
    fails_one_line(
        &["bench", &example("mlp.toml"), "--input", &format!("x={x}")],
        1,
        "has no input named 'x'",
    );
    fails_one_line(&["run", &neff, "--input", "x_t"], 2, "expected NAME=FILE");
    fails_one_line(
        &[
            "run",
            &neff,
            "--input",
            &format!("x_t={x}"),
            "--input",
            &format!("x_t={x}"),
        ],
        2,
        "given twice",
    );
}

#[test]
fn wrong_npy_shape_or_dtype_is_one_line() {
    let (dir, neff, _) = built_mlp();
    let shape = dir.path().join("shape.npy");
    write_npy(&shape, "<f4", &[32, 96], &[0; 32 * 96 * 4]);
    fails_one_line(
        &["run", &neff, "--input", &format!("x_t={}", shape.display())],
        1,
        "has shape [32, 96], the model expects [96, 32]",
    );
    let dtype = dir.path().join("dtype.npy");
    write_npy(&dtype, "<f8", &[96, 32], &[0; 96 * 32 * 8]);
    fails_one_line(
        &["run", &neff, "--input", &format!("x_t={}", dtype.display())],
        1,
        "holds float64 (<f8), the model expects float32 (<f4) for a bf16 tensor",
    );
    let ints = dir.path().join("ints.npy");
    write_npy(&ints, "<i4", &[96, 32], &[0; 96 * 32 * 4]);
    fails_one_line(
        &["run", &neff, "--input", &format!("x_t={}", ints.display())],
        1,
        "holds int32 (<i4)",
    );
    let notnpy = dir.path().join("bad.npy");
    std::fs::write(&notnpy, b"not numpy").unwrap();
    fails_one_line(
        &[
            "run",
            &neff,
            "--input",
            &format!("x_t={}", notnpy.display()),
        ],
        1,
        "not a .npy file",
    );
    let raw = dir.path().join("short.bin");
    std::fs::write(&raw, [0u8; 10]).unwrap();
    fails_one_line(
        &["run", &neff, "--input", &format!("x_t={}", raw.display())],
        1,
        "has 10 bytes, the model expects 6144",
    );
}

#[test]
fn unknown_backend_or_instance_is_one_line() {
    for args in [
        &["run", "m.neff", "--backend", "tpu"][..],
        &["bench", "m.neff", "--backend", "tpu"],
        &["ls", "--backend", "tpu"],
    ] {
        fails_one_line(
            args,
            2,
            "invalid value 'tpu' for '--backend <BACKEND>' [possible values: sim, linux]",
        );
    }
    fails_one_line(
        &["ls", "--instance", "trn9"],
        2,
        "[possible values: inf2, trn1, trn2]",
    );
    fails_one_line(
        &["ls", "--backend", "linux", "--instance", "trn1"],
        2,
        "sim backend only",
    );
}

#[test]
fn linux_backend_without_devices_is_one_line() {
    if Path::new("/dev/neuron0").exists() {
        return;
    }
    let (_dir, neff, _) = built_mlp();
    fails_one_line(
        &["run", &neff, "--backend", "linux"],
        1,
        "Cannot find Neuron devices",
    );
    fails_one_line(
        &["bench", &neff, "--backend", "linux"],
        1,
        "Cannot find Neuron devices",
    );
}

#[test]
fn usage_errors_are_one_line() {
    fails_one_line(&["run"], 2, "required arguments were not provided");
    fails_one_line(&["lss"], 2, "unrecognized subcommand 'lss'");
    fails_one_line(&["run", "m.neff", "--repeat", "0"], 2, "--repeat");
    fails_one_line(&["bench", "m.neff", "-n", "0"], 2, "--iterations");
    fails_one_line(&["build", "m.toml"], 2, "--output");
}

#[test]
fn trace_render_errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let t = dir.path().join("t.json");
    std::fs::write(&t, "{\"traceEvents\": []}").unwrap();
    let t = t.display().to_string();
    let svg = dir.path().join("t.svg").display().to_string();
    fails_one_line(&["trace", "render", &t, "-o", &svg], 1, "no slices to draw");
    let j = dir.path().join("j.json");
    std::fs::write(&j, "[1, 2").unwrap();
    fails_one_line(
        &["trace", "render", &j.display().to_string(), "-o", &svg],
        1,
        "not JSON",
    );
    fails_one_line(
        &["trace", "render", &t, "-o", "t.png"],
        2,
        "only SVG output",
    );
}

#[test]
fn help_lists_every_subcommand() {
    let s = stdout_of(nrt().arg("--help"));
    for sub in ["run", "info", "ls", "build", "asm", "bench", "trace"] {
        assert!(s.contains(&format!("  {sub} ")), "{sub} missing from\n{s}");
    }
    for sub in ["run", "info", "ls", "build", "asm", "bench"] {
        nrt()
            .args([sub, "--help"])
            .assert()
            .success()
            .stdout(predicate::str::contains("Usage: nrt ").and(predicate::str::contains(sub)));
    }
    nrt()
        .args(["trace", "render", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Usage: nrt trace render"));
}
