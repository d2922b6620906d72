//! `--fail-ioctl N[:ERRNO]`: which driver ioctl the emulator fails, and how.

/// One `--fail-ioctl`: the `nth` driver ioctl (counted from 1 over every driver ioctl the
/// emulator serves) fails with `errno`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FailIoctl {
    pub(crate) nth: u64,
    pub(crate) errno: i32,
}

/// `--fail-ioctl N[:ERRNO]`: the N-th driver ioctl (from 1) fails with ERRNO (a number or a
/// name such as `EIO`; EIO when not given).
pub(crate) fn parse_fail_ioctl(s: &str) -> Result<FailIoctl, String> {
    let (n, errno) = match s.split_once(':') {
        Some((n, e)) => (n, parse_errno(e)?),
        None => (s, libc::EIO),
    };
    let nth = n
        .parse::<u64>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| format!("{n:?} is not an ioctl ordinal (1, 2, …)"))?;
    Ok(FailIoctl { nth, errno })
}

/// Errno names `--fail-ioctl` accepts, with their numbers.
const ERRNOS: [(&str, i32); 16] = [
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("EINTR", libc::EINTR),
    ("EIO", libc::EIO),
    ("ENXIO", libc::ENXIO),
    ("E2BIG", libc::E2BIG),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EFAULT", libc::EFAULT),
    ("EBUSY", libc::EBUSY),
    ("ENODEV", libc::ENODEV),
    ("EINVAL", libc::EINVAL),
    ("ENOSPC", libc::ENOSPC),
    ("ENOTTY", libc::ENOTTY),
    ("ETIMEDOUT", libc::ETIMEDOUT),
];

fn parse_errno(s: &str) -> Result<i32, String> {
    if let Some(&(_, e)) = ERRNOS.iter().find(|(n, _)| n.eq_ignore_ascii_case(s)) {
        return Ok(e);
    }
    s.parse::<i32>()
        .ok()
        .filter(|&e| (1..4096).contains(&e))
        .ok_or_else(|| {
            let names: Vec<&str> = ERRNOS.iter().map(|(n, _)| *n).collect();
            format!(
                "{s:?} is not an errno (a number in 1..4095, or one of {})",
                names.join(", ")
            )
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn fail_ioctl_values() {
        let f = parse_fail_ioctl("3").unwrap();
        assert_eq!((f.nth, f.errno), (3, libc::EIO));
        let f = parse_fail_ioctl("12:ENOMEM").unwrap();
        assert_eq!((f.nth, f.errno), (12, libc::ENOMEM));
        let f = parse_fail_ioctl("1:einval").unwrap();
        assert_eq!((f.nth, f.errno), (1, libc::EINVAL));
        let f = parse_fail_ioctl("7:16").unwrap();
        assert_eq!((f.nth, f.errno), (7, 16));
        for bad in ["0", "-1", "x", "3:", "3:EWHAT", "3:0", "3:5000", ""] {
            assert!(parse_fail_ioctl(bad).is_err(), "{bad}");
        }
    }
}
