//! Records the git revision for `nrt_get_version` (`NRT_GIT_HASH`), when built from a checkout.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=NRT_GIT_HASH");
    if std::env::var_os("NRT_GIT_HASH").is_some() {
        return;
    }
    let out = Command::new("git").args(["rev-parse", "HEAD"]).output();
    if let Ok(out) = out {
        if out.status.success() {
            let hash = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if hash.len() == 40 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                println!("cargo:rustc-env=NRT_GIT_HASH={hash}");
            }
        }
    }
    if let Ok(out) = Command::new("git")
        .args(["rev-parse", "--git-dir"])
        .output()
    {
        if out.status.success() {
            let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
            println!("cargo:rerun-if-changed={dir}/HEAD");
            println!("cargo:rerun-if-changed={dir}/refs/heads");
        }
    }
}
