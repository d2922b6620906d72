//! The namespace of `nrt emulate`: a user + mount namespace, entered by the `nrt` process
//! itself (so the program and the emulator that answers it see the same files), in which
//! `/dev` and parts of `/sys` show the emulator's device files and fake sysfs tree.
//!
//! * [`enter`]: `unshare(CLONE_NEWUSER | CLONE_NEWNS)` (the caller must be single-threaded),
//!   uid and gid 0 mapped to the caller's own, `/` made recursively a slave (mounts of the host
//!   still propagate in, ours never out), and a private tmpfs mounted on a fresh directory
//!   under `$TMPDIR` as the staging area (only this namespace sees its contents).
//! * [`Namespace::replace_dev`]: a tmpfs replaces `/dev`, holding a bind mount of every real
//!   entry (device nodes, `pts`, `shm`, …; symlinks such as `fd` copied) except real Neuron
//!   nodes, plus bind mounts of the emulator's device files.
//! * [`Namespace::overlay`]: merges a fake tree (the emulator's sysfs) into a real one
//!   (`/sys`), replacing whole the fake entries named `neuron…` and those the real tree
//!   lacks; directories of both are merged (a tmpfs holding bind mounts of the real entries
//!   and the fake ones) wherever a level needs it, and left as they are otherwise.
//!
//! Every mount lives and dies with the namespace: nothing is left on the host but the empty
//! staging directory, which [`Drop`] removes.

use std::ffi::{CString, OsStr};
use std::fs;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

/// Deepest level of a fake tree that [`Namespace::overlay`] descends to.
const MAX_DEPTH: usize = 16;

/// A namespace entered by [`enter`], with its staging tmpfs.
#[derive(Debug)]
pub(crate) struct Namespace {
    /// The staging directory (on the host: an empty directory; here: a tmpfs).
    staging: PathBuf,
    /// Union directories made so far (names of staging subdirectories).
    unions: usize,
    /// Entries that could not be reproduced, with why (reported, not fatal).
    skipped: Vec<String>,
}

/// Why the namespace could not be set up: the message, and whether the kernel refused it
/// (as opposed to a failure of ours).
#[derive(Debug)]
pub(crate) struct NsError(pub(crate) String);

impl NsError {
    fn at(what: impl std::fmt::Display, e: io::Error) -> Self {
        NsError(format!("{what}: {e}"))
    }
}

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn cvt(ret: libc::c_int) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `mount(2)`.
fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let source = source.map(cstr).transpose()?;
    let target = cstr(target)?;
    let fstype = fstype
        .map(CString::new)
        .transpose()
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let data = data
        .map(CString::new)
        .transpose()
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let ptr = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is null or a NUL-terminated string that outlives the call.
    cvt(unsafe {
        libc::mount(
            ptr(&source),
            target.as_ptr(),
            ptr(&fstype),
            flags,
            ptr(&data).cast(),
        )
    })
}

fn tmpfs(target: &Path, mode: &str) -> io::Result<()> {
    mount(
        Some(Path::new("tmpfs")),
        target,
        Some("tmpfs"),
        libc::MS_NOSUID,
        Some(mode),
    )?;
    mount(None, target, None, libc::MS_PRIVATE, None)
}

/// A recursive bind mount of `source` on `target` (recursive: a plain bind of a directory
/// holding mounts locked by the parent namespace is refused).
fn bind(source: &Path, target: &Path) -> io::Result<()> {
    mount(
        Some(source),
        target,
        None,
        libc::MS_BIND | libc::MS_REC,
        None,
    )
}

fn move_mount(source: &Path, target: &Path) -> io::Result<()> {
    mount(Some(source), target, None, libc::MS_MOVE, None)
}

/// A sysctl's value when the file exists, for messages.
fn sysctl(path: &str) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_owned())
}

/// Why the kernel may have refused a user namespace: the settings known to restrict them,
/// with their values, where they say no.
fn userns_hints() -> String {
    let mut hints = Vec::new();
    if let Some(v) = sysctl("/proc/sys/user/max_user_namespaces") {
        if v == "0" {
            hints.push(format!("/proc/sys/user/max_user_namespaces is {v}"));
        }
    }
    if let Some(v) = sysctl("/proc/sys/kernel/unprivileged_userns_clone") {
        if v == "0" {
            hints.push(format!("/proc/sys/kernel/unprivileged_userns_clone is {v}"));
        }
    }
    if let Some(v) = sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") {
        if v == "1" {
            hints.push(format!(
                "/proc/sys/kernel/apparmor_restrict_unprivileged_userns is {v}"
            ));
        }
    }
    if hints.is_empty() {
        "a container's seccomp profile or a security module may forbid unshare".to_owned()
    } else {
        hints.join(", ")
    }
}

/// Enters a new user + mount namespace (the calling process must be single-threaded), and
/// mounts the staging tmpfs on a new directory under `tmp`.
pub(crate) fn enter(tmp: &Path) -> Result<Namespace, NsError> {
    // SAFETY: getuid/getgid/geteuid cannot fail and touch no memory of ours.
    let (uid, gid, euid) = unsafe { (libc::getuid(), libc::getgid(), libc::geteuid()) };
    // SAFETY: unshare takes flags only.
    let user_ns = match cvt(unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) }) {
        Ok(()) => true,
        Err(e) => {
            let why = format!(
                "the kernel refused a user namespace (unshare(CLONE_NEWUSER|CLONE_NEWNS): {e}; {})",
                userns_hints()
            );
            // As root, a mount namespace alone does the same job.
            // SAFETY: unshare takes flags only.
            if euid != 0 || cvt(unsafe { libc::unshare(libc::CLONE_NEWNS) }).is_err() {
                return Err(NsError(why));
            }
            false
        }
    };
    if user_ns {
        let write = |file: &str, text: String| {
            fs::write(format!("/proc/self/{file}"), text.as_bytes())
                .map_err(|e| NsError::at(format!("writing /proc/self/{file} ({text:?})"), e))
        };
        write("setgroups", "deny".to_owned())?;
        write("uid_map", format!("0 {uid} 1\n"))?;
        write("gid_map", format!("0 {gid} 1\n"))?;
    }
    mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_SLAVE,
        None,
    )
    .map_err(|e| NsError::at("making / a recursive slave mount", e))?;
    let mut template = tmp.join("nrt-emulate.XXXXXX").into_os_string().into_vec();
    template.push(0);
    // SAFETY: `template` is a writable NUL-terminated buffer ending in XXXXXX.
    let made = unsafe { libc::mkdtemp(template.as_mut_ptr().cast()) };
    if made.is_null() {
        return Err(NsError::at(
            format!("creating a staging directory in {}", tmp.display()),
            io::Error::last_os_error(),
        ));
    }
    template.pop();
    let staging = PathBuf::from(std::ffi::OsString::from_vec(template));
    let ns = Namespace {
        staging,
        unions: 0,
        skipped: Vec::new(),
    };
    tmpfs(&ns.staging, "mode=0755")
        .map_err(|e| NsError::at(format!("mounting a tmpfs on {}", ns.staging.display()), e))?;
    Ok(ns)
}

/// Whether `name` is a Neuron device node name (`neuron` and decimal digits).
fn is_neuron_node(name: &OsStr) -> bool {
    name.as_bytes()
        .strip_prefix(b"neuron")
        .is_some_and(|d| !d.is_empty() && d.iter().all(u8::is_ascii_digit))
}

/// Whether a fake tree's entry replaces the real one whole rather than being merged with it.
fn owned(name: &OsStr) -> bool {
    name.as_bytes().starts_with(b"neuron")
}

impl Namespace {
    /// The staging directory (a tmpfs only this namespace sees).
    pub(crate) fn staging(&self) -> &Path {
        &self.staging
    }

    /// Entries that could not be reproduced in a replaced directory, with why.
    pub(crate) fn skipped(&self) -> &[String] {
        &self.skipped
    }

    /// A new tmpfs directory in the staging area.
    fn union_dir(&mut self, what: &str) -> Result<PathBuf, NsError> {
        self.unions += 1;
        let dir = self.staging.join(format!("{what}.{}", self.unions));
        fs::create_dir(&dir).map_err(|e| NsError::at(format!("creating {}", dir.display()), e))?;
        tmpfs(&dir, "mode=0755")
            .map_err(|e| NsError::at(format!("mounting a tmpfs on {}", dir.display()), e))?;
        Ok(dir)
    }

    /// Reproduces `source` (an entry of a directory being replaced) at `target` in a union:
    /// a copy of a symlink, a bind mount of anything else. A failure is recorded in
    /// [`skipped`](Self::skipped) (an odd entry the program most likely does not need) and,
    /// when `required`, returned.
    fn reproduce(&mut self, source: &Path, target: &Path, required: bool) -> Result<(), NsError> {
        let r = (|| -> io::Result<()> {
            let meta = fs::symlink_metadata(source)?;
            if meta.file_type().is_symlink() {
                symlink(fs::read_link(source)?, target)
            } else {
                if meta.is_dir() {
                    fs::create_dir(target)?;
                } else {
                    fs::File::create(target)?;
                }
                fs::set_permissions(target, meta.permissions())?;
                bind(source, target)
            }
        })();
        match r {
            Ok(()) => Ok(()),
            Err(e) if required => Err(NsError::at(
                format!("bind-mounting {} on {}", source.display(), target.display()),
                e,
            )),
            Err(e) => {
                self.skipped.push(format!("{}: {e}", source.display()));
                Ok(())
            }
        }
    }

    /// Replaces `/dev` (`real`) by a tmpfs holding every real entry except real Neuron device
    /// nodes, and the entries of `neuron_dir` (the emulator's device files).
    pub(crate) fn replace_dev(&mut self, real: &Path, neuron_dir: &Path) -> Result<(), NsError> {
        let union = self.union_dir("dev")?;
        let fake = sorted_entries(neuron_dir)?;
        for name in sorted_entries(real)? {
            if is_neuron_node(&name) || fake.contains(&name) {
                continue;
            }
            self.reproduce(&real.join(&name), &union.join(&name), false)?;
        }
        for name in &fake {
            self.reproduce(&neuron_dir.join(name), &union.join(name), true)?;
        }
        move_mount(&union, real)
            .map_err(|e| NsError::at(format!("mounting the new /dev on {}", real.display()), e))
    }

    /// Merges the tree `fake` into the real directory `real` (see the module's description).
    pub(crate) fn overlay(&mut self, fake: &Path, real: &Path) -> Result<(), NsError> {
        self.overlay_at(fake, real, 0)
    }

    fn overlay_at(&mut self, fake: &Path, real: &Path, depth: usize) -> Result<(), NsError> {
        if depth > MAX_DEPTH {
            return Err(NsError(format!(
                "{}: the fake tree is deeper than {MAX_DEPTH} levels",
                fake.display()
            )));
        }
        let names = sorted_entries(fake)?;
        let is_dir = |p: &Path| fs::symlink_metadata(p).is_ok_and(|m| m.is_dir());
        let replaced = |name: &OsStr| owned(name) || fs::symlink_metadata(real.join(name)).is_err();
        // Directories of both trees, merged below this level.
        let mut merge = Vec::new();
        if names.iter().any(|n| replaced(n)) {
            // This level needs new entries: a union of the real entries and the fake ones.
            let union = self.union_dir("sys")?;
            for name in sorted_entries(real)? {
                if !names.contains(&name) {
                    self.reproduce(&real.join(&name), &union.join(&name), false)?;
                }
            }
            for name in &names {
                let (f, r) = (fake.join(name), real.join(name));
                if !replaced(name) && is_dir(&f) && is_dir(&r) {
                    self.reproduce(&r, &union.join(name), true)?;
                    merge.push(name.clone());
                } else {
                    self.reproduce(&f, &union.join(name), true)?;
                }
            }
            move_mount(&union, real).map_err(|e| {
                NsError::at(format!("mounting a merged {} on it", real.display()), e)
            })?;
        } else {
            for name in &names {
                let (f, r) = (fake.join(name), real.join(name));
                if is_dir(&f) && is_dir(&r) {
                    merge.push(name.clone());
                } else if fs::symlink_metadata(&f).is_ok_and(|m| m.file_type().is_symlink()) {
                    return Err(NsError(format!(
                        "{}: a symlink of the fake tree where the real tree has an entry",
                        f.display()
                    )));
                } else {
                    bind(&f, &r).map_err(|e| {
                        NsError::at(
                            format!("bind-mounting {} on {}", f.display(), r.display()),
                            e,
                        )
                    })?;
                }
            }
        }
        for name in merge {
            self.overlay_at(&fake.join(&name), &real.join(&name), depth + 1)?;
        }
        Ok(())
    }
}

/// The names in a directory, sorted.
fn sorted_entries(dir: &Path) -> Result<Vec<std::ffi::OsString>, NsError> {
    let read = || -> io::Result<Vec<std::ffi::OsString>> {
        let mut names = fs::read_dir(dir)?
            .map(|e| e.map(|e| e.file_name()))
            .collect::<io::Result<Vec<_>>>()?;
        names.sort();
        Ok(names)
    };
    read().map_err(|e| NsError::at(format!("reading {}", dir.display()), e))
}

impl Drop for Namespace {
    fn drop(&mut self) {
        // The staging tmpfs goes with the namespace anyway; detaching it here lets the empty
        // directory beneath it be removed from the host's file system.
        if let Ok(c) = cstr(&self.staging) {
            // SAFETY: `c` is a NUL-terminated path that outlives the call.
            let _ = unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
        let _ = fs::remove_dir(&self.staging);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn neuron_node_names() {
        for yes in ["neuron0", "neuron15", "neuron63"] {
            assert!(is_neuron_node(OsStr::new(yes)), "{yes}");
        }
        for no in ["neuron", "neuronx", "neuron0a", "xneuron0", "null"] {
            assert!(!is_neuron_node(OsStr::new(no)), "{no}");
        }
        assert!(owned(OsStr::new("neuron_device")));
        assert!(owned(OsStr::new("neuron")));
        assert!(!owned(OsStr::new("class")));
    }

    /// What the child of [`namespace_shows_the_fake_files`] checks, inside the namespace:
    /// Ok(()) or the first thing that differs.
    fn check_inside(tmp: &Path) -> Result<(), String> {
        let fake = tmp.join("fake");
        let mut ns = enter(tmp).map_err(|e| e.0)?;
        let emu = ns.staging().join("emu");
        let w = |p: &Path, s: &str| {
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, s).unwrap();
        };
        w(&emu.join("dev/neuron0"), "");
        w(&emu.join("dev/neuron1"), "");
        w(&fake.join("class/neuron_device/neuron0/core_count"), "2");
        w(&fake.join("module/neuron/version"), "2.24.7.0\n");
        ns.replace_dev(Path::new("/dev"), &emu.join("dev"))
            .map_err(|e| e.0)?;
        ns.overlay(&fake, Path::new("/sys")).map_err(|e| e.0)?;
        let read = |p: &str| fs::read_to_string(p).map_err(|e| format!("{p}: {e}"));
        if read("/sys/module/neuron/version")? != "2.24.7.0\n" {
            return Err("module version".into());
        }
        if read("/sys/class/neuron_device/neuron0/core_count")? != "2" {
            return Err("core_count".into());
        }
        // The real entries beside them are still there.
        for p in [
            "/sys/class/net/lo",
            "/sys/module/kernel",
            "/dev/pts",
            "/dev/fd",
        ] {
            fs::symlink_metadata(p).map_err(|e| format!("{p}: {e}"))?;
        }
        for p in ["/dev/neuron0", "/dev/neuron1"] {
            if !fs::metadata(p).map_err(|e| format!("{p}: {e}"))?.is_file() {
                return Err(format!("{p} is not the emulator's file"));
            }
        }
        if fs::symlink_metadata("/dev/neuron2").is_ok() {
            return Err("/dev/neuron2 exists".into());
        }
        fs::write("/dev/null", "x").map_err(|e| format!("/dev/null: {e}"))?;
        let mut z = [1u8; 8];
        use std::io::Read;
        fs::File::open("/dev/zero")
            .and_then(|mut f| f.read_exact(&mut z))
            .map_err(|e| format!("/dev/zero: {e}"))?;
        if z != [0; 8] {
            return Err("/dev/zero".into());
        }
        if fs::read_link("/dev/fd").map_err(|e| format!("/dev/fd: {e}"))?
            != Path::new("/proc/self/fd")
        {
            return Err("/dev/fd's target".into());
        }
        if !ns.skipped().is_empty() {
            return Err(format!("skipped: {:?}", ns.skipped()));
        }
        Ok(())
    }

    /// In a forked child (the namespace needs a single-threaded process): the fake device
    /// files and sysfs entries appear at their real places, beside the real entries; outside,
    /// nothing changed and the staging directory is gone.
    #[test]
    fn namespace_shows_the_fake_files() {
        let tmp = tempfile::tempdir().unwrap();
        let (rd, wr) = {
            let mut fds = [0; 2];
            // SAFETY: `fds` has room for two descriptors.
            assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
            (fds[0], fds[1])
        };
        // SAFETY: the child runs the check and leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let msg = match check_inside(tmp.path()) {
                Ok(()) => "ok".to_owned(),
                Err(e) => e,
            };
            // SAFETY: writes from a live buffer, then ends the process.
            unsafe {
                libc::write(wr, msg.as_ptr().cast(), msg.len());
                libc::_exit(0);
            }
        }
        // SAFETY: closes our copy of the write end.
        unsafe { libc::close(wr) };
        let mut out = Vec::new();
        let mut buf = [0u8; 512];
        loop {
            // SAFETY: reads into a live buffer.
            let n = unsafe { libc::read(rd, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            out.extend_from_slice(&buf[..n as usize]);
        }
        let mut status = 0;
        // SAFETY: waits for our child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(String::from_utf8_lossy(&out), "ok");
        assert!(fs::symlink_metadata("/sys/module/neuron").is_err());
        let left: Vec<_> = fs::read_dir(tmp.path()).unwrap().collect();
        // The fake tree stays (it was written outside the staging tmpfs); the staging
        // directory was removed when the namespace was dropped.
        assert_eq!(left.len(), 1, "{left:?}");
    }
}
