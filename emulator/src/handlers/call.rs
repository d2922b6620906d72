//! One driver ioctl being served ([`Call`]): who made it, on which device and fd mode, and the
//! argument copies between the caller's memory and a [`Rec`].

use crate::abi::{Layout, Rec};
use crate::target::{Fault, Target};

/// How a handler ends when it does not return a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fail {
    /// The ioctl fails with this errno.
    Errno(i32),
    /// The caller is gone: answer nothing.
    Gone,
}

impl From<Fault> for Fail {
    fn from(f: Fault) -> Self {
        match f {
            Fault::Efault => Fail::Errno(libc::EFAULT),
            Fault::Gone => Fail::Gone,
        }
    }
}

/// A handler's result: the ioctl's return value, or how it fails.
pub(crate) type Outcome = Result<i64, Fail>;

/// Shorthand for failing with `errno`.
pub(crate) fn errno<T>(e: i32) -> Result<T, Fail> {
    Err(Fail::Errno(e))
}

/// One driver ioctl.
#[derive(Debug)]
pub(crate) struct Call<'a, 'b> {
    pub(crate) target: &'a Target<'b>,
    /// The device index of the fd's node.
    pub(crate) device: u32,
    /// The fd was opened `O_WRONLY` (free access: misc requests only).
    pub(crate) free_access: bool,
    pub(crate) request: u32,
    /// The third argument: the user pointer.
    pub(crate) arg: u64,
}

impl Call<'_, '_> {
    /// The calling process.
    pub(crate) fn tgid(&self) -> u32 {
        self.target.tgid
    }

    /// Copies the argument struct in (`copy_from_user` of `sizeof`).
    pub(crate) fn read_arg(&self, layout: &'static Layout) -> Result<Rec, Fail> {
        self.read_arg_n(layout, layout.sizeof)
    }

    /// Copies the first `n` bytes of the argument struct in (the rest stays zero).
    pub(crate) fn read_arg_n(&self, layout: &'static Layout, n: usize) -> Result<Rec, Fail> {
        let bytes = self.target.read(self.arg, n.min(layout.sizeof))?;
        Ok(Rec::from_bytes(layout, &bytes))
    }

    /// Copies the argument struct out (`copy_to_user` of `sizeof`).
    pub(crate) fn write_arg(&self, rec: &Rec) -> Result<(), Fail> {
        self.write_arg_n(rec, rec.layout().sizeof)
    }

    /// Copies the first `n` bytes of the argument struct out.
    pub(crate) fn write_arg_n(&self, rec: &Rec, n: usize) -> Result<(), Fail> {
        let bytes = rec.bytes().get(..n).unwrap_or(rec.bytes());
        self.target.write(self.arg, bytes)?;
        Ok(())
    }

    /// Writes raw bytes at the argument pointer (for the requests whose argument is a scalar).
    pub(crate) fn write_raw(&self, data: &[u8]) -> Result<(), Fail> {
        self.target.write(self.arg, data)?;
        Ok(())
    }
}
