//! The `nrt` command chooses its backend as the C library does (`nrt_backend::Selection`): the
//! same `NEURON_RT_*` variables, the same simulated default (trn1 × 1), with the simulator as
//! the command's default backend and its flags overriding the variables.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::Path;

use assert_cmd::Command;
use common::{nrt, plumbing_matmul_neff, stdout_of};

/// Expects failure with `code` and exactly the one stderr line `error: {message}`.
fn fails_with(c: &mut Command, code: i32, message: &str) {
    let out = c.assert().failure().code(code).get_output().clone();
    assert_eq!(
        String::from_utf8(out.stderr).unwrap(),
        format!("error: {message}\n")
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn the_default_is_one_simulated_trn1_device() {
    let s = stdout_of(nrt().arg("ls"));
    assert!(s.contains("sim: simulated trn1 instance"), "{s}");
    assert!(s.contains("1 × 2 NeuronCore-v2 per device"), "{s}");
}

#[test]
fn the_variables_choose_the_simulated_machine() {
    let s = stdout_of(
        nrt()
            .arg("ls")
            .env("NEURON_RT_SIM_INSTANCE", "trn2")
            .env("NEURON_RT_SIM_DEVICES", "2"),
    );
    assert!(s.contains("sim: simulated trn2 instance"), "{s}");
    assert!(s.contains("2 × 8 NeuronCore-v3"), "{s}");
    let s = stdout_of(
        nrt()
            .args([
                "run",
                concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/mlp.toml"),
            ])
            .env("NEURON_RT_SIM_INSTANCE", "inf2")
            .env("NEURON_RT_SIM_DEVICES", "3")
            .env("NEURON_RT_BACKEND", "sim"),
    );
    assert!(
        s.contains("sim: simulated inf2 (3 devices, funtime)"),
        "{s}"
    );
}

#[test]
fn flags_override_the_variables() {
    let s = stdout_of(
        nrt()
            .args([
                "ls",
                "--instance",
                "inf2",
                "--devices",
                "2",
                "--backend",
                "sim",
            ])
            .env("NEURON_RT_SIM_INSTANCE", "trn2")
            .env("NEURON_RT_SIM_DEVICES", "5")
            .env("NEURON_RT_BACKEND", "linux"),
    );
    assert!(s.contains("sim: simulated inf2 instance"), "{s}");
    assert!(s.contains("2 × 2 NeuronCore-v2"), "{s}");
    // A variable a flag overrides is not read.
    let s = stdout_of(
        nrt()
            .args(["ls", "--instance", "trn1"])
            .env("NEURON_RT_SIM_INSTANCE", "trn9"),
    );
    assert!(s.contains("simulated trn1"), "{s}");
}

#[test]
fn invalid_variables_are_one_line_with_the_c_library_messages() {
    for (var, value, message) in [
        (
            "NEURON_RT_BACKEND",
            "tpu",
            "Invalid value for NEURON_RT_BACKEND: \"tpu\": expected auto, sim or linux",
        ),
        (
            "NEURON_RT_SIM_INSTANCE",
            "trn9",
            "Invalid value for NEURON_RT_SIM_INSTANCE: \"trn9\": expected trn1, inf2 or trn2",
        ),
        (
            "NEURON_RT_SIM_DEVICES",
            "65",
            "Invalid value for NEURON_RT_SIM_DEVICES: \"65\": expected 1 to 64",
        ),
        (
            "NEURON_RT_SIM_PLUMBING",
            "yes",
            "Invalid value for NEURON_RT_SIM_PLUMBING: \"yes\": expected 0 or 1",
        ),
    ] {
        fails_with(nrt().arg("ls").env(var, value), 2, message);
    }
}

#[test]
fn plumbing_can_be_refused_by_variable() {
    // A NEFF without a simulator program (the compiler fixture's shape, built here).
    let (_dir, neff) = plumbing_matmul_neff();
    let out = nrt()
        .args(["run", &neff, "--instance", "trn2"])
        .env("NEURON_RT_SIM_PLUMBING", "0")
        .assert()
        .failure()
        .code(1)
        .get_output()
        .clone();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("plumbing mode is disabled (NEURON_RT_SIM_PLUMBING=0)"),
        "{err}"
    );
}

#[test]
fn auto_without_a_device_says_how_to_choose_the_simulator() {
    if Path::new("/dev/neuron0").exists() {
        return; // a real Neuron machine: auto is the Linux driver
    }
    fails_with(
        nrt().arg("ls").env("NEURON_RT_BACKEND", "auto"),
        1,
        "No /dev/neuron0: set NEURON_RT_BACKEND=sim to run on the simulator (or pass --backend sim)",
    );
}

#[test]
fn simulator_flags_are_refused_when_the_variable_selects_linux() {
    fails_with(
        nrt()
            .args(["ls", "--instance", "trn2"])
            .env("NEURON_RT_BACKEND", "linux"),
        2,
        "--instance applies to the sim backend only (the linux backend uses the machine's devices)",
    );
    fails_with(
        nrt().args(["ls", "--devices", "2", "--backend", "linux"]),
        2,
        "--devices applies to the sim backend only",
    );
}
