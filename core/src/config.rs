//! Configuration: the `NEURON_RT_*` variables this facade uses, parsed from data the host hands
//! in (the core never reads the environment itself).
//!
//! Every malformed value is refused with `NRT_INVALID` and a message naming the variable and the
//! value; parsing never panics and never allocates.

use core::fmt::Write;

use crate::bitmap::{CoreBitmap, MAX_CORES};
use crate::error::{Error, Result};
use crate::fmt::Level;
use crate::status::NrtStatus;

/// Longest accepted path-like value (core-dump directory, S3 prefix), in bytes.
pub const MAX_PATH_VALUE: usize = 1024;

/// Items of `NEURON_RT_DBG_CC_DMA_PACKET_SIZE` kept (4 streams × 4 architectures); the rest are
/// ignored with a warning at init.
pub const MAX_DMA_PACKET_SIZES: usize = 16;

/// Largest `NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS` accepted (the per-core queues are
/// allocated with this bound).
pub const MAX_ASYNC_INFLIGHT: u32 = 65_536;

/// Largest `NEURON_RT_EXEC_TIMEOUT`, in seconds (one day).
pub const MAX_EXEC_TIMEOUT_SECS: u32 = 86_400;

/// Where configuration variables come from: the process environment on a std host, a table on a
/// bare-metal one.
pub trait VarSource {
    /// The value of `name`, or `None` if it is unset.
    fn var(&self, name: &str) -> Option<&str>;
}

impl VarSource for [(&str, &str)] {
    fn var(&self, name: &str) -> Option<&str> {
        // The last assignment wins, as with repeated `export`s.
        self.iter().rev().find(|(k, _)| *k == name).map(|(_, v)| *v)
    }
}

impl<const N: usize> VarSource for [(&str, &str); N] {
    fn var(&self, name: &str) -> Option<&str> {
        self.as_slice().var(name)
    }
}

impl<T: VarSource + ?Sized> VarSource for &T {
    fn var(&self, name: &str) -> Option<&str> {
        T::var(self, name)
    }
}

/// `NEURON_RT_LOG_LEVEL`: a level, or `QUIET` for no output at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LogLevel {
    /// Log records at this level and more severe.
    Level(Level),
    /// Log nothing.
    Quiet,
}

impl LogLevel {
    /// Whether a record at `level` passes this filter.
    pub fn allows(self, level: Level) -> bool {
        match self {
            LogLevel::Quiet => false,
            LogLevel::Level(max) => level <= max,
        }
    }
}

/// The parsed configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// `NEURON_RT_VISIBLE_CORES`: explicit logical cores (sorted, deduplicated); `None` = unset.
    pub visible_cores: Option<CoreBitmap>,
    /// `NEURON_RT_NUM_CORES`: logical cores to reserve; 0 = all.
    pub num_cores: u32,
    /// `NEURON_RT_VIRTUAL_CORE_SIZE`: physical cores per logical core; `None` = the arch default.
    pub virtual_core_size: Option<u32>,
    /// `NEURON_RT_LOG_LEVEL` (default `ERROR`).
    pub log_level: LogLevel,
    /// `NEURON_RT_EXEC_TIMEOUT` in seconds; `None` = the runtime default.
    pub exec_timeout_secs: Option<u32>,
    /// `NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS`: > 0 turns the implicit async mode on.
    pub async_exec_max_inflight: u32,
    /// `NEURON_RT_RESET_CORES` (default on).
    pub reset_cores: bool,
    /// `NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY` (empty = unset).
    pub local_core_dump_directory: heapless::String<MAX_PATH_VALUE>,
    /// `NEURON_RT_S3_CORE_DUMP_PREFIX` (empty = unset).
    pub s3_core_dump_prefix: heapless::String<MAX_PATH_VALUE>,
    /// `NEURON_RT_VALIDATE_HASH` (default off).
    pub validate_hash: bool,
    /// `NEURON_RT_DBG_CC_DMA_PACKET_SIZE`: the first [`MAX_DMA_PACKET_SIZES`] items.
    pub dbg_cc_dma_packet_size: heapless::Vec<u32, MAX_DMA_PACKET_SIZES>,
    /// Items of `NEURON_RT_DBG_CC_DMA_PACKET_SIZE` beyond the first [`MAX_DMA_PACKET_SIZES`]
    /// (validated, then dropped; init warns about them).
    pub dbg_cc_dma_packet_size_ignored: usize,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            visible_cores: None,
            num_cores: 0,
            virtual_core_size: None,
            log_level: LogLevel::Level(Level::Error),
            exec_timeout_secs: None,
            async_exec_max_inflight: 0,
            reset_cores: true,
            local_core_dump_directory: heapless::String::new(),
            s3_core_dump_prefix: heapless::String::new(),
            validate_hash: false,
            dbg_cc_dma_packet_size: heapless::Vec::new(),
            dbg_cc_dma_packet_size_ignored: 0,
        }
    }
}

/// Variable names.
pub mod vars {
    /// Explicit logical cores.
    pub const VISIBLE_CORES: &str = "NEURON_RT_VISIBLE_CORES";
    /// Number of logical cores.
    pub const NUM_CORES: &str = "NEURON_RT_NUM_CORES";
    /// Logical core size.
    pub const VIRTUAL_CORE_SIZE: &str = "NEURON_RT_VIRTUAL_CORE_SIZE";
    /// Log level.
    pub const LOG_LEVEL: &str = "NEURON_RT_LOG_LEVEL";
    /// Execution timeout (seconds).
    pub const EXEC_TIMEOUT: &str = "NEURON_RT_EXEC_TIMEOUT";
    /// Implicit async mode bound.
    pub const ASYNC_EXEC_MAX_INFLIGHT_REQUESTS: &str = "NEURON_RT_ASYNC_EXEC_MAX_INFLIGHT_REQUESTS";
    /// Reset cores at init.
    pub const RESET_CORES: &str = "NEURON_RT_RESET_CORES";
    /// Local core-dump directory template.
    pub const LOCAL_CORE_DUMP_DIRECTORY: &str = "NEURON_RT_LOCAL_CORE_DUMP_DIRECTORY";
    /// S3 core-dump prefix.
    pub const S3_CORE_DUMP_PREFIX: &str = "NEURON_RT_S3_CORE_DUMP_PREFIX";
    /// Validate NEFF hashes at load.
    pub const VALIDATE_HASH: &str = "NEURON_RT_VALIDATE_HASH";
    /// Collective DMA packet sizes.
    pub const DBG_CC_DMA_PACKET_SIZE: &str = "NEURON_RT_DBG_CC_DMA_PACKET_SIZE";

    /// Every variable the parser reads.
    pub const ALL: [&str; 11] = [
        VISIBLE_CORES,
        NUM_CORES,
        VIRTUAL_CORE_SIZE,
        LOG_LEVEL,
        EXEC_TIMEOUT,
        ASYNC_EXEC_MAX_INFLIGHT_REQUESTS,
        RESET_CORES,
        LOCAL_CORE_DUMP_DIRECTORY,
        S3_CORE_DUMP_PREFIX,
        VALIDATE_HASH,
        DBG_CC_DMA_PACKET_SIZE,
    ];
}

/// The `NRT_INVALID` error for a malformed value.
fn invalid(name: &str, value: &str, why: core::fmt::Arguments<'_>) -> Error {
    // Show at most 64 bytes of a hostile value.
    let mut cut = value.len().min(64);
    while !value.is_char_boundary(cut) {
        cut -= 1;
    }
    let shown = value.get(..cut).unwrap_or("");
    let ellipsis = if cut < value.len() { "..." } else { "" };
    Error::new(
        NrtStatus::Invalid,
        format_args!(
            "Invalid value for {name}: \"{}{ellipsis}\": {why}",
            Escaped(shown)
        ),
    )
}

/// Shows control characters of a hostile value escaped (`\0`, `\n`, `\u{1b}`).
struct Escaped<'a>(&'a str);

impl core::fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for c in self.0.chars() {
            if c.is_control() {
                write!(f, "{}", c.escape_debug())?;
            } else {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}

/// Parses an unsigned decimal integer (ASCII digits only, no sign).
fn parse_u32(name: &str, whole: &str, s: &str) -> Result<u32> {
    if s.is_empty() {
        return Err(invalid(name, whole, format_args!("expected a number")));
    }
    let mut v: u32 = 0;
    for b in s.bytes() {
        if !b.is_ascii_digit() {
            return Err(invalid(
                name,
                whole,
                format_args!("\"{s}\" is not a non-negative integer"),
            ));
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u32::from(b - b'0')))
            .ok_or_else(|| invalid(name, whole, format_args!("{s} is out of range")))?;
    }
    Ok(v)
}

fn parse_number(name: &str, value: &str, min: u32, max: u32) -> Result<u32> {
    let v = parse_u32(name, value, value.trim())?;
    if v < min || v > max {
        return Err(invalid(
            name,
            value,
            format_args!("must be between {min} and {max}"),
        ));
    }
    Ok(v)
}

fn parse_bool(name: &str, value: &str) -> Result<bool> {
    let t = value.trim();
    if t == "1" || t.eq_ignore_ascii_case("true") || t.eq_ignore_ascii_case("yes") {
        Ok(true)
    } else if t == "0" || t.eq_ignore_ascii_case("false") || t.eq_ignore_ascii_case("no") {
        Ok(false)
    } else {
        Err(invalid(
            name,
            value,
            format_args!("expected 0, 1, true or false"),
        ))
    }
}

fn parse_log_level(value: &str) -> Result<LogLevel> {
    let t = value.trim();
    let levels = [
        ("ERROR", LogLevel::Level(Level::Error)),
        ("WARNING", LogLevel::Level(Level::Warning)),
        ("WARN", LogLevel::Level(Level::Warning)),
        ("INFO", LogLevel::Level(Level::Info)),
        ("DEBUG", LogLevel::Level(Level::Debug)),
        ("TRACE", LogLevel::Level(Level::Trace)),
        ("QUIET", LogLevel::Quiet),
    ];
    levels
        .iter()
        .find(|(n, _)| t.eq_ignore_ascii_case(n))
        .map(|(_, l)| *l)
        .ok_or_else(|| {
            invalid(
                vars::LOG_LEVEL,
                value,
                format_args!("expected ERROR, WARNING, INFO, DEBUG, TRACE or QUIET"),
            )
        })
}

fn parse_path(name: &str, value: &str) -> Result<heapless::String<MAX_PATH_VALUE>> {
    if value.bytes().any(|b| b == 0) {
        return Err(invalid(name, value, format_args!("contains a NUL byte")));
    }
    let mut s = heapless::String::new();
    s.push_str(value).map_err(|()| {
        invalid(
            name,
            value,
            format_args!("longer than {MAX_PATH_VALUE} bytes"),
        )
    })?;
    Ok(s)
}

/// Parses a core list: items separated by `,`, each `N` or `A-B` (inclusive, `A <= B`),
/// surrounding spaces allowed. The result is sorted and deduplicated.
pub fn parse_core_list(name: &str, value: &str) -> Result<CoreBitmap> {
    if value.trim().is_empty() {
        return Err(invalid(name, value, format_args!("empty core list")));
    }
    let mut set = CoreBitmap::new();
    for item in value.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(invalid(
                name,
                value,
                format_args!("empty item in core list"),
            ));
        }
        let (a, b) = match item.split_once('-') {
            Some((a, b)) => {
                let a = a.trim();
                let b = b.trim();
                if a.is_empty() {
                    return Err(invalid(
                        name,
                        value,
                        format_args!("\"{item}\" is not a core index or range (negative?)"),
                    ));
                }
                (parse_u32(name, value, a)?, parse_u32(name, value, b)?)
            }
            None => {
                let v = parse_u32(name, value, item)?;
                (v, v)
            }
        };
        if a > b {
            return Err(invalid(
                name,
                value,
                format_args!("range start {a} is greater than range end {b}"),
            ));
        }
        if b >= MAX_CORES {
            return Err(invalid(
                name,
                value,
                format_args!(
                    "core {b} is out of range (largest core index is {})",
                    MAX_CORES - 1
                ),
            ));
        }
        for c in a..=b {
            set.insert(c);
        }
    }
    Ok(set)
}

fn parse_packet_sizes(value: &str) -> Result<(heapless::Vec<u32, MAX_DMA_PACKET_SIZES>, usize)> {
    let name = vars::DBG_CC_DMA_PACKET_SIZE;
    if value.trim().is_empty() {
        return Err(invalid(name, value, format_args!("empty list")));
    }
    let mut kept = heapless::Vec::new();
    let mut ignored = 0usize;
    for item in value.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(invalid(name, value, format_args!("empty item in list")));
        }
        let v = parse_u32(name, value, item)?;
        if kept.push(v).is_err() {
            ignored = ignored.saturating_add(1);
        }
    }
    Ok((kept, ignored))
}

impl Config {
    /// Parses every variable this facade uses from `source`. Unset variables take their
    /// defaults; unknown `NEURON_RT_*` variables are ignored.
    pub fn parse(source: &dyn VarSource) -> Result<Config> {
        let mut c = Config::default();
        if let Some(v) = source.var(vars::VISIBLE_CORES) {
            c.visible_cores = Some(parse_core_list(vars::VISIBLE_CORES, v)?);
        }
        if let Some(v) = source.var(vars::NUM_CORES) {
            c.num_cores = parse_number(vars::NUM_CORES, v, 0, MAX_CORES)?;
        }
        if let Some(v) = source.var(vars::VIRTUAL_CORE_SIZE) {
            c.virtual_core_size = Some(parse_number(vars::VIRTUAL_CORE_SIZE, v, 1, 8)?);
        }
        if let Some(v) = source.var(vars::LOG_LEVEL) {
            c.log_level = parse_log_level(v)?;
        }
        if let Some(v) = source.var(vars::EXEC_TIMEOUT) {
            c.exec_timeout_secs = Some(parse_number(
                vars::EXEC_TIMEOUT,
                v,
                1,
                MAX_EXEC_TIMEOUT_SECS,
            )?);
        }
        if let Some(v) = source.var(vars::ASYNC_EXEC_MAX_INFLIGHT_REQUESTS) {
            c.async_exec_max_inflight = parse_number(
                vars::ASYNC_EXEC_MAX_INFLIGHT_REQUESTS,
                v,
                0,
                MAX_ASYNC_INFLIGHT,
            )?;
        }
        if let Some(v) = source.var(vars::RESET_CORES) {
            c.reset_cores = parse_bool(vars::RESET_CORES, v)?;
        }
        if let Some(v) = source.var(vars::LOCAL_CORE_DUMP_DIRECTORY) {
            c.local_core_dump_directory = parse_path(vars::LOCAL_CORE_DUMP_DIRECTORY, v)?;
        }
        if let Some(v) = source.var(vars::S3_CORE_DUMP_PREFIX) {
            c.s3_core_dump_prefix = parse_path(vars::S3_CORE_DUMP_PREFIX, v)?;
        }
        if let Some(v) = source.var(vars::VALIDATE_HASH) {
            c.validate_hash = parse_bool(vars::VALIDATE_HASH, v)?;
        }
        if let Some(v) = source.var(vars::DBG_CC_DMA_PACKET_SIZE) {
            let (kept, ignored) = parse_packet_sizes(v)?;
            c.dbg_cc_dma_packet_size = kept;
            c.dbg_cc_dma_packet_size_ignored = ignored;
        }
        Ok(c)
    }

    /// Whether the implicit async execution mode is on.
    pub fn implicit_async(&self) -> bool {
        self.async_exec_max_inflight > 0
    }

    /// The local core-dump directory, if configured.
    pub fn local_core_dump_directory(&self) -> Option<&str> {
        Some(self.local_core_dump_directory.as_str()).filter(|s| !s.is_empty())
    }

    /// The S3 core-dump prefix, if configured.
    pub fn s3_core_dump_prefix(&self) -> Option<&str> {
        Some(self.s3_core_dump_prefix.as_str()).filter(|s| !s.is_empty())
    }
}
