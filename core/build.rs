//! Records the git revision for `nrt_get_version` (`NRT_GIT_HASH`), when built from a checkout.
//!
//! The script reruns when the revision can have changed: `HEAD` moved, or the branch it names
//! (a loose ref, or `packed-refs`) did. Only paths that exist are watched: cargo reruns a
//! build script on every build while a watched path is missing, and then rebuilds this crate
//! and everything above it (a worktree has no `refs/heads` of its own; a checkout of a
//! detached commit may have no loose branch refs at all).
use std::path::Path;
use std::process::Command;

/// `git ARGS` run in the package folder: its trimmed stdout when it succeeded.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn watch(path: &str) {
    if Path::new(path).exists() {
        println!("cargo:rerun-if-changed={path}");
    }
}

fn main() {
    println!("cargo:rerun-if-env-changed=NRT_GIT_HASH");
    if std::env::var_os("NRT_GIT_HASH").is_some() {
        return;
    }
    if let Some(hash) = git(&["rev-parse", "HEAD"]) {
        if hash.len() == 40 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            println!("cargo:rustc-env=NRT_GIT_HASH={hash}");
        }
    }
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        watch(&format!("{dir}/HEAD"));
        if let Some(common) = git(&["rev-parse", "--git-common-dir"]) {
            if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
                watch(&format!("{common}/{branch}"));
            }
            watch(&format!("{common}/packed-refs"));
        }
    }
}
