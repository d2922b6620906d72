//! Errors as values: a status code plus the message the runtime logged for it.

use core::fmt::{self, Write};

use crate::status::NrtStatus;

/// Capacity of an error or log message, in bytes. Longer messages are truncated on a character
/// boundary; nothing is allocated. Every [`Error`] (so every failed `Result` the runtime
/// returns) and every log record formatted for `defmt` carries one: 512 bytes by default,
/// 128 with the feature `short-messages` (firmware: less stack, see `docs/FIRMWARE.md`).
#[cfg(not(feature = "short-messages"))]
pub const MESSAGE_CAPACITY: usize = 512;
/// Capacity of an error or log message, in bytes (reduced by the feature `short-messages`).
#[cfg(feature = "short-messages")]
pub const MESSAGE_CAPACITY: usize = 128;

/// A bounded, truncating message buffer.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Message {
    buf: heapless::String<MESSAGE_CAPACITY>,
    truncated: bool,
}

impl Message {
    /// An empty message.
    pub const fn new() -> Self {
        Self {
            buf: heapless::String::new(),
            truncated: false,
        }
    }

    /// Formats `args`, truncating at [`MESSAGE_CAPACITY`] bytes.
    pub fn from_fmt(args: fmt::Arguments<'_>) -> Self {
        let mut m = Self::new();
        // The writer never reports an error: overflow truncates instead.
        let _ = m.write_fmt(args);
        m
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        self.buf.as_str()
    }

    /// Whether the text was cut short.
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }
}

impl Write for Message {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if self.truncated {
            return Ok(());
        }
        let room = MESSAGE_CAPACITY.saturating_sub(self.buf.len());
        if s.len() <= room {
            // Cannot fail: the length was checked above.
            let _ = self.buf.push_str(s);
        } else {
            let mut cut = room;
            while cut > 0 && !s.is_char_boundary(cut) {
                cut -= 1;
            }
            let _ = self.buf.push_str(s.get(..cut).unwrap_or(""));
            self.truncated = true;
        }
        Ok(())
    }
}

impl fmt::Debug for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed runtime operation: the `NRT_STATUS` a C caller sees and the message logged for it.
///
/// An error also records whether it has been logged already: the runtime logs most failures
/// where they happen and marks them ([`Error::mark_logged`]); a front end (the C library) logs
/// the unmarked rest at its boundary, so every failure is logged exactly once. The mark is not
/// part of equality.
#[derive(Clone)]
pub struct Error {
    status: NrtStatus,
    message: Message,
    logged: bool,
}

impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        self.status == other.status && self.message == other.message
    }
}

impl Eq for Error {}

impl Error {
    /// An error with a formatted message.
    pub fn new(status: NrtStatus, args: fmt::Arguments<'_>) -> Self {
        Self {
            status,
            message: Message::from_fmt(args),
            logged: false,
        }
    }

    /// The same error, marked as logged (whoever logged its message calls this).
    #[must_use]
    pub fn mark_logged(mut self) -> Self {
        self.logged = true;
        self
    }

    /// Whether the message has been logged already.
    pub fn is_logged(&self) -> bool {
        self.logged
    }

    /// The status code.
    pub fn status(&self) -> NrtStatus {
        self.status
    }

    /// The message, exactly as logged.
    pub fn message(&self) -> &str {
        self.message.as_str()
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("status", &self.status)
            .field("message", &self.message.as_str())
            .finish()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status.name(), self.message.as_str())
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}

#[cfg(feature = "defmt")]
impl defmt::Format for Error {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(
            f,
            "{=str}: {=str}",
            self.status.name(),
            self.message.as_str()
        )
    }
}

/// Builds an [`Error`] with a formatted message: `err!(Invalid, "bad {}", x)`.
#[macro_export]
macro_rules! err {
    ($status:ident, $($arg:tt)+) => {
        $crate::Error::new($crate::NrtStatus::$status, format_args!($($arg)+))
    };
}

/// Shorthand for results of runtime operations.
pub type Result<T, E = Error> = core::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_truncate_on_a_char_boundary() {
        let long = "é".repeat(MESSAGE_CAPACITY);
        let m = Message::from_fmt(format_args!("{long}"));
        assert!(m.is_truncated());
        assert!(m.as_str().len() <= MESSAGE_CAPACITY);
        assert!(m.as_str().chars().all(|c| c == 'é'));
    }

    #[test]
    fn the_logged_mark_is_kept_and_not_compared() {
        let e = err!(Closed, "NRT already closed");
        assert!(!e.is_logged());
        let logged = e.clone().mark_logged();
        assert!(logged.is_logged());
        assert_eq!(logged, e);
    }

    #[test]
    fn err_macro_keeps_status_and_message() {
        let e = err!(Invalid, "value {} is bad", 3);
        assert_eq!(e.status(), NrtStatus::Invalid);
        assert_eq!(e.message(), "value 3 is bad");
    }
}
