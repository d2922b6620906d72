//! Log levels and the one logging shim of the crate.
//!
//! Runtime log records go to the host ([`crate::Host::log`]); the default host implementation
//! forwards them to `log` or `defmt`, whichever feature is enabled (never both).

#[cfg(all(feature = "defmt", feature = "log"))]
compile_error!("features `defmt` and `log` of nrt-core are mutually exclusive: enable one of them");

use core::fmt;

/// Severity of a runtime log record, most severe first (the `NEURON_RT_LOG_LEVEL` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Level {
    /// `ERROR`.
    Error = 1,
    /// `WARNING`.
    Warning = 2,
    /// `INFO`.
    Info = 3,
    /// `DEBUG`.
    Debug = 4,
    /// `TRACE`.
    Trace = 5,
}

impl Level {
    /// The `NEURON_RT_LOG_LEVEL` spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Level::Error => "ERROR",
            Level::Warning => "WARNING",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
            Level::Trace => "TRACE",
        }
    }
}

/// Forwards one record to whichever logging backend the crate was built with. Without `log` or
/// `defmt` the record is dropped.
pub fn forward(level: Level, args: fmt::Arguments<'_>) {
    #[cfg(feature = "log")]
    {
        let l = match level {
            Level::Error => log::Level::Error,
            Level::Warning => log::Level::Warn,
            Level::Info => log::Level::Info,
            Level::Debug => log::Level::Debug,
            Level::Trace => log::Level::Trace,
        };
        log::log!(target: "nrt", l, "{}", args);
    }
    #[cfg(feature = "defmt")]
    {
        let msg = crate::error::Message::from_fmt(args);
        let s = msg.as_str();
        match level {
            Level::Error => defmt::error!("{=str}", s),
            Level::Warning => defmt::warn!("{=str}", s),
            Level::Info => defmt::info!("{=str}", s),
            Level::Debug => defmt::debug!("{=str}", s),
            Level::Trace => defmt::trace!("{=str}", s),
        }
    }
    #[cfg(not(any(feature = "log", feature = "defmt")))]
    {
        let _ = (level, args);
    }
}
