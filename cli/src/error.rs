//! The CLI's error: one line of text and an exit code.

use std::fmt;

/// A failure the CLI reports as exactly one line on stderr (`error: <message>`).
#[derive(Debug)]
pub(crate) struct CliError {
    message: String,
    code: u8,
}

impl CliError {
    /// A failure with exit code 1.
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 1,
        }
    }

    /// A usage error (exit code 2).
    pub(crate) fn usage(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: 2,
        }
    }

    /// The exit code.
    pub(crate) fn code(&self) -> u8 {
        self.code
    }

    /// The message on one line: line breaks become "; ", surrounding space is trimmed.
    pub(crate) fn one_line(&self) -> String {
        let parts: Vec<&str> = self
            .message
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        parts.join("; ")
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.one_line())
    }
}

/// `Result` with [`CliError`].
pub(crate) type Result<T> = std::result::Result<T, CliError>;

/// Adds what was being done to an error: `what: cause`.
pub(crate) trait Context<T> {
    /// Wraps the error as `what: cause`.
    fn context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: fmt::Display> Context<T> for std::result::Result<T, E> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| CliError::new(format!("{}: {e}", what())))
    }
}

/// Returns early with a [`CliError`] built from a format string.
macro_rules! bail {
    ($($arg:tt)*) => {
        return Err($crate::error::CliError::new(format!($($arg)*)))
    };
}
pub(crate) use bail;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_one_line() {
        let e = CliError::new("first\n  second\n\nthird  ");
        assert_eq!(e.one_line(), "first; second; third");
        assert_eq!(e.code(), 1);
        assert_eq!(CliError::usage("x").code(), 2);
    }

    #[test]
    fn context_prefixes_the_cause() {
        let r: std::result::Result<(), &str> = Err("boom");
        let e = r
            .context(|| "reading x".into())
            .err()
            .map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some("reading x: boom"));
    }
}
