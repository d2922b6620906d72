//! The kernel guide, `docs/KERNELS.md`, run as written: every ```sh block's commands in order,
//! in one temporary directory, `nrt` being the `nrt` binary built for this test and `cargo`
//! the cargo running it (with `--manifest-path` pointing at this workspace, as the guide's
//! commands run from the repository root, and this test's target directory); each must
//! succeed. A ```text block right after a
//! ```sh block is output the guide quotes: each of its lines (but `...`) must be a line of
//! what the block's last command printed, so the quoted counters and times cannot go stale.
//! A digit-grouped figure in the prose (`53,984`) must be one some command printed, unless
//! it is an estimate introduced by "about". The guide's table of simulated times must give, for each NEFF, exactly the ticks its
//! `nrt run` printed (the simulator is deterministic: equality, no tolerance), and speedups
//! computed from them. The guide's kernel functions must appear verbatim in
//! `kernel/examples/softmax.rs`, the program that builds the NEFFs. The ```rust blocks are
//! doctests of `nrt-kernel` (`kernel/src/guide.rs`); only these three block kinds are allowed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::root;

/// A fenced block: its language and its lines.
struct Block {
    lang: String,
    lines: Vec<String>,
}

fn guide() -> String {
    std::fs::read_to_string(root().join("docs/KERNELS.md")).unwrap()
}

fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut cur: Option<Block> = None;
    for line in text.lines() {
        match (&mut cur, line.strip_prefix("```")) {
            (None, Some(lang)) => {
                cur = Some(Block {
                    lang: lang.trim().to_owned(),
                    lines: Vec::new(),
                });
            }
            (Some(_), Some("")) => out.push(cur.take().unwrap()),
            (Some(b), _) => b.lines.push(line.to_owned()),
            (None, None) => {}
        }
    }
    assert!(cur.is_none(), "an unclosed code block in docs/KERNELS.md");
    out
}

/// The lines outside code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("```") {
            inside = !inside;
        } else if !inside {
            out.push(line);
        }
    }
    out
}

/// The digit-grouped numbers (`53,984`) of a line, each with whether "about " precedes it.
fn grouped_numbers(line: &str) -> Vec<(String, bool)> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !(b[i - 1].is_ascii_digit() || b[i - 1] == b',')) {
            let start = i;
            while i < b.len()
                && (b[i].is_ascii_digit()
                    || (b[i] == b',' && b.get(i + 1).is_some_and(u8::is_ascii_digit)))
            {
                i += 1;
            }
            let n = &line[start..i];
            if n.contains(',') {
                out.push((n.to_owned(), line[..start].ends_with("about ")));
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Runs one guide command in `dir`; returns its stdout.
fn run_line(line: &str, dir: &Path) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut cmd = match words[0] {
        "nrt" => {
            let mut c = Command::new(env!("CARGO_BIN_EXE_nrt"));
            for v in common::NRT_VARS {
                c.env_remove(v);
            }
            c.args(&words[1..]);
            c
        }
        "cargo" => {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut c = Command::new(cargo);
            // The target directory this test was built in (`target/tmp`'s parent), so the
            // example builds next to it, whatever `--target-dir` the test run was given.
            if let Some(target) = Path::new(env!("CARGO_TARGET_TMPDIR")).parent() {
                c.env("CARGO_TARGET_DIR", target);
            }
            c.arg(words[1])
                .arg("--manifest-path")
                .arg(root().join("Cargo.toml"))
                .args(&words[2..]);
            c
        }
        other => panic!("the guide runs '{other}': only nrt and cargo commands are mapped"),
    };
    let out = cmd.current_dir(dir).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "`{line}` failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The ticks of the `simulated  N ticks = …` line of `nrt run`.
fn ticks(stdout: &str) -> u64 {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("simulated "))
        .unwrap_or_else(|| panic!("no simulated time in\n{stdout}"));
    let n = line.split_whitespace().nth(1).unwrap();
    n.replace(',', "").parse().unwrap()
}

/// `12,345` for 12345.
fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn every_block_of_the_guide_runs_and_its_figures_are_current() {
    let text = guide();
    let dir = tempfile::tempdir().unwrap();
    let mut last: Option<(String, String)> = None; // (command, stdout) of the last sh line
    let mut prev_lang = String::new();
    let mut measured: BTreeMap<String, u64> = BTreeMap::new();
    let mut quoted = 0;
    let mut printed = String::new();
    for b in blocks(&text) {
        match b.lang.as_str() {
            "sh" => {
                for line in b.lines.iter().map(|l| l.trim()) {
                    if line.is_empty() || line.starts_with('#') {
                        continue;
                    }
                    let stdout = run_line(line, dir.path());
                    let words: Vec<&str> = line.split_whitespace().collect();
                    if words[..2] == ["nrt", "run"] {
                        let neff = Path::new(words[2]);
                        let name = neff.file_stem().unwrap().to_str().unwrap().to_owned();
                        measured.insert(name, ticks(&stdout));
                    }
                    printed.push_str(&stdout);
                    last = Some((line.to_owned(), stdout));
                }
            }
            "text" => {
                assert_eq!(
                    prev_lang, "sh",
                    "a text block must quote the output of the sh block before it"
                );
                let (cmd, stdout) = last.as_ref().unwrap();
                for want in b.lines.iter().map(|l| l.trim_end()) {
                    if want.trim() == "..." || want.is_empty() {
                        continue;
                    }
                    assert!(
                        stdout.lines().any(|l| l.trim_end() == want),
                        "the guide quotes\n{want}\nbut `{cmd}` printed\n{stdout}"
                    );
                    quoted += 1;
                }
            }
            "rust" | "rust,no_run" => {}
            other => panic!("a ```{other} block: the guide has rust, sh and text blocks only"),
        }
        prev_lang = b.lang;
    }
    assert!(quoted > 10, "the guide quotes only {quoted} output lines");

    // Figures in the prose are figures a command printed, or estimates said to be "about".
    for line in prose(&text) {
        for (n, about) in grouped_numbers(line) {
            assert!(
                about || printed.contains(&n),
                "the guide says {n}, which no command printed:\n{line}"
            );
        }
    }

    // The table: | `name` | ticks | µs | speedup |.
    let mut rows = 0;
    let base = measured["softmax_naive"];
    for line in text.lines().filter(|l| l.starts_with("| `softmax_")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let name = cells[1].trim_matches('`');
        let got = *measured
            .get(name)
            .unwrap_or_else(|| panic!("the table quotes {name}, which the guide never runs"));
        assert_eq!(cells[2], grouped(got), "ticks of {name}");
        let us = format!("{:.1}", got as f64 / 1400.0);
        assert_eq!(cells[3], us, "µs of {name}");
        let speedup = format!("{:.2}×", base as f64 / got as f64);
        assert_eq!(cells[4], speedup, "speedup of {name}");
        rows += 1;
    }
    assert_eq!(rows, measured.len(), "every NEFF run appears in the table");
}

#[test]
fn the_guide_kernels_are_the_example_program() {
    let text = guide();
    let example = std::fs::read_to_string(root().join("kernel/examples/softmax.rs")).unwrap();
    let mut found = 0;
    for b in blocks(&text).iter().filter(|b| b.lang.starts_with("rust")) {
        // Visible lines (rustdoc hides those starting with `# `).
        let visible: Vec<&str> = b
            .lines
            .iter()
            .map(String::as_str)
            .filter(|l| !(l.starts_with("# ") || *l == "#"))
            .collect();
        let mut i = 0;
        while i < visible.len() {
            if visible[i].starts_with("fn softmax_") {
                let end = (i..visible.len()).find(|&j| visible[j] == "}").unwrap();
                let f = visible[i..=end].join("\n");
                assert!(
                    example.contains(&f),
                    "kernel/examples/softmax.rs does not contain the guide's\n{f}"
                );
                found += 1;
                i = end;
            }
            i += 1;
        }
    }
    assert!(found >= 5, "the guide shows {found} kernel functions");
}

/// The example's `softmax_naive_unrolled` (the `reroll` comparison's unrolled build) is
/// `softmax_naive` line for line, comments aside, but for its name and its last call.
#[test]
fn the_unrolled_naive_kernel_is_the_naive_kernel() {
    let example = std::fs::read_to_string(root().join("kernel/examples/softmax.rs")).unwrap();
    let body = |name: &str| -> Vec<String> {
        let start = example
            .find(&format!("fn {name}("))
            .unwrap_or_else(|| panic!("kernel/examples/softmax.rs has no fn {name}"));
        let end = start + example[start..].find("\n}\n").unwrap();
        example[start..end]
            .lines()
            .skip(1)
            .map(|l| l.split(" // ").next().unwrap_or(l).trim_end().to_string())
            .collect()
    };
    let naive = body("softmax_naive");
    let unrolled: Vec<String> = body("softmax_naive_unrolled")
        .into_iter()
        .map(|l| l.replace("k.build_unrolled()", "k.build()"))
        .collect();
    assert_eq!(unrolled, naive);
}
