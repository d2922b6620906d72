//! `nrt info --program` and `nrt asm`: a model's program printed as text, edited, assembled
//! into a NEFF and run, with the edit visible in the outputs (checked against a plain f32
//! reference); the unedited text gives a NEFF that runs identically; errors are one line.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;

use common::{nrt, plumbing_matmul_neff, quiet_stdout_of, read_f32_npy, stdout_of};

const SPEC: &str = r#"
name = "biasact"
dtype = "fp32"
[tensors.x]
kind = "input"
shape = [4, 8]
seed = 5
[tensors.bias]
kind = "input"
shape = [4]
seed = 6
[[layers]]
op = "bias_activation"
x = "x"
bias = "bias"
activation = "relu"
"#;

/// Runs `neff` on the sample inputs in `inputs`, returning `out`.
fn run(neff: &Path, inputs: &Path, out_dir: &Path) -> Vec<f32> {
    nrt()
        .arg("run")
        .arg(neff)
        .arg("--input")
        .arg(format!("x={}", inputs.join("x.npy").display()))
        .arg("--input")
        .arg(format!("bias={}", inputs.join("bias.npy").display()))
        .arg("-o")
        .arg(out_dir)
        .assert()
        .success();
    read_f32_npy(&out_dir.join("out.npy")).1
}

/// Rule: disassemble → edit the activation's scale → assemble → run gives
/// `relu(2·x + bias)` exactly (the scale is exact, so one rounding either way); the unedited
/// text runs exactly as the original NEFF.
#[test]
fn edited_program_text_runs_with_the_edit() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("m.toml"), SPEC).unwrap();
    let neff = d.join("m.neff");
    let inputs = d.join("in");
    nrt()
        .arg("build")
        .arg(d.join("m.toml"))
        .arg("-o")
        .arg(&neff)
        .arg("--inputs-dir")
        .arg(&inputs)
        .assert()
        .success();
    let text = quiet_stdout_of(nrt().arg("info").arg("--program").arg(&neff));
    assert!(text.starts_with("# nrt-sim program text"), "{text}");
    assert!(
        text.contains("\n.format 1.0\n.program \"biasact\"\n"),
        "{text}"
    );
    // A spec is accepted too, and gives the same program.
    let from_spec = quiet_stdout_of(nrt().arg("info").arg("--program").arg(d.join("m.toml")));
    assert_eq!(from_spec, text);

    assert_eq!(text.matches("activation func=relu").count(), 1, "{text}");
    assert_eq!(text.matches(" scale=1.0 ").count(), 1, "{text}");
    std::fs::write(d.join("same.s"), &text).unwrap();
    std::fs::write(
        d.join("edited.s"),
        text.replace(" scale=1.0 ", " scale=2.0 "),
    )
    .unwrap();

    let same = d.join("same.neff");
    let s = stdout_of(nrt().arg("asm").arg(d.join("same.s")).arg("-o").arg(&same));
    assert!(s.contains("model 'biasact', 1 subgraph"), "{s}");
    assert!(s.contains("format 1.0"), "{s}");
    let edited = d.join("edited.neff");
    nrt()
        .arg("asm")
        .arg(d.join("edited.s"))
        .arg("-o")
        .arg(&edited)
        .assert()
        .success();
    // The assembled NEFF prints the same text back.
    let again = quiet_stdout_of(nrt().arg("info").arg("--program").arg(&same));
    assert_eq!(again, text);

    let (_, x) = read_f32_npy(&inputs.join("x.npy"));
    let (_, bias) = read_f32_npy(&inputs.join("bias.npy"));
    let reference = |scale: f32| -> Vec<f32> {
        let mut v = Vec::new();
        for (f, b) in bias.iter().enumerate() {
            for n in 0..8 {
                v.push((x[f * 8 + n] * scale + b).max(0.0));
            }
        }
        v
    };
    let original = run(&neff, &inputs, &d.join("o1"));
    assert_eq!(original, reference(1.0));
    assert_eq!(run(&same, &inputs, &d.join("o2")), original);
    let changed = run(&edited, &inputs, &d.join("o3"));
    assert_eq!(changed, reference(2.0));
    assert_ne!(changed, original);
}

/// Runs `nrt args`, expecting failure with exactly one stderr line equal to `want`.
fn fails_with(args: &[&str], want: &str) {
    let out = nrt()
        .args(args)
        .assert()
        .failure()
        .code(1)
        .get_output()
        .clone();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err, format!("{want}\n"), "nrt {args:?}");
    assert!(out.stdout.is_empty());
}

/// Rule: a malformed text, a missing file and a NEFF without a program are one line each.
#[test]
fn asm_and_info_program_errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.s");
    std::fs::write(&bad, ".format 1.0\n.engine SyncE\n    halt now\n").unwrap();
    let bad = bad.display().to_string();
    let out = dir.path().join("x.neff").display().to_string();
    fails_with(
        &["asm", &bad, "-o", &out],
        &format!("error: {bad}: line 3, column 10: expected the end of the line, found `now`"),
    );
    assert!(!Path::new(&out).exists());
    let missing = dir.path().join("missing.s").display().to_string();
    let out2 = nrt()
        .args(["asm", &missing, "-o", &out])
        .assert()
        .failure()
        .code(1)
        .get_output()
        .clone();
    let err = String::from_utf8(out2.stderr).unwrap();
    assert!(
        err.starts_with(&format!("error: cannot read '{missing}': ")) && err.lines().count() == 1,
        "{err}"
    );
    let (_d, plumbing) = plumbing_matmul_neff();
    fails_with(
        &["info", "--program", &plumbing],
        &format!(
            "error: {plumbing}: no simulator program (compiler output: it runs in plumbing mode)"
        ),
    );
}

/// Rule: several texts make one subgraph each; `nrt info --program` then prints each
/// program under a `# subgraph NAME` line; `--name` names the model.
#[test]
fn asm_packs_one_subgraph_per_text() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("m.toml"), SPEC).unwrap();
    let text = quiet_stdout_of(nrt().arg("info").arg("--program").arg(d.join("m.toml")));
    std::fs::write(d.join("p.s"), &text).unwrap();
    let neff = d.join("two.neff");
    let s = stdout_of(
        nrt()
            .arg("asm")
            .arg(d.join("p.s"))
            .arg(d.join("p.s"))
            .args(["--name", "pair", "-o"])
            .arg(&neff),
    );
    assert!(s.contains("model 'pair', 2 subgraphs"), "{s}");
    let both = quiet_stdout_of(nrt().arg("info").arg("--program").arg(&neff));
    let parts: Vec<&str> = both.split("# subgraph ").collect();
    assert_eq!(parts.len(), 3, "{both}");
    assert_eq!(parts[0], "");
    for part in &parts[1..] {
        let (name, body) = part.split_once('\n').unwrap();
        assert!(name.starts_with("sg"), "{name}");
        assert_eq!(body.trim_end(), text.trim_end());
    }
}
