//! gzip (RFC 1952) around miniz_oxide's streaming raw-deflate decoder: a fixed output window,
//! the member's CRC-32 and size checked, the zero padding after it accepted.

use alloc::boxed::Box;
use alloc::vec::Vec;

use miniz_oxide::inflate::stream::InflateState;
use miniz_oxide::{DataFormat, MZFlush, MZStatus};

use crate::error::Result;

/// The smallest [`ParseOptions::inflate_window`](super::ParseOptions::inflate_window): a
/// smaller window counts as this.
pub const MIN_INFLATE_WINDOW: usize = 256;

const FTEXT_MASK: u8 = 0xE0;
const FHCRC: u8 = 0x02;
const FEXTRA: u8 = 0x04;
const FNAME: u8 = 0x08;
const FCOMMENT: u8 = 0x10;

fn corrupt(why: core::fmt::Arguments<'_>) -> crate::Error {
    err!(Invalid, "Invalid NEFF: corrupt gzip stream: {why}")
}

/// Length of the gzip member header at the start of `data`.
fn header_len(data: &[u8]) -> Result<usize> {
    if data.len() < 10 {
        return Err(corrupt(format_args!("truncated header")));
    }
    if data.get(..3) != Some(&[0x1f, 0x8b, 8][..]) {
        return Err(corrupt(format_args!("bad magic or compression method")));
    }
    let flags = data.get(3).copied().unwrap_or(0);
    if flags & FTEXT_MASK != 0 {
        return Err(corrupt(format_args!("reserved header flags set")));
    }
    let mut pos = 10usize;
    if flags & FEXTRA != 0 {
        let xlen = data
            .get(pos..pos + 2)
            .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])));
        let xlen = xlen.ok_or_else(|| corrupt(format_args!("truncated extra field")))?;
        pos += 2 + xlen;
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            let nul = data
                .get(pos..)
                .and_then(|rest| rest.iter().position(|&b| b == 0))
                .ok_or_else(|| corrupt(format_args!("unterminated name or comment")))?;
            pos += nul + 1;
        }
    }
    if flags & FHCRC != 0 {
        pos += 2;
    }
    if pos > data.len() {
        return Err(corrupt(format_args!("truncated header")));
    }
    Ok(pos)
}

/// Inflates the gzip member at the start of `data`, handing the output to `sink` in chunks of
/// at most `window` bytes (at least [`MIN_INFLATE_WINDOW`]). Bytes after the member must be
/// zero (padding). Memory use is the decoder state plus one window, whatever the sizes
/// involved.
///
/// If `sink` fails, inflating continues (without the sink) to the end of the member, so that a
/// corrupt stream is reported as such rather than as whatever its garbage output broke.
pub(crate) fn inflate(
    data: &[u8],
    window: usize,
    sink: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<u64> {
    let mut sink_error: Option<crate::Error> = None;
    let window = window.max(MIN_INFLATE_WINDOW);
    let total = inflate_checked(data, window, &mut |chunk| {
        if sink_error.is_none() {
            if let Err(e) = sink(chunk) {
                sink_error = Some(e);
            }
        }
        Ok(())
    })?;
    match sink_error {
        Some(e) => Err(e),
        None => Ok(total),
    }
}

fn inflate_checked(
    data: &[u8],
    window_len: usize,
    sink: &mut dyn FnMut(&[u8]) -> Result<()>,
) -> Result<u64> {
    let start = header_len(data)?;
    let mut input = data.get(start..).unwrap_or(&[]);
    let mut state: Box<InflateState> = InflateState::new_boxed(DataFormat::Raw);
    let mut window: Vec<u8> = alloc::vec![0u8; window_len];
    let mut crc = crc32fast::Hasher::new();
    let mut total: u64 = 0;
    loop {
        let r =
            miniz_oxide::inflate::stream::inflate(&mut state, input, &mut window, MZFlush::None);
        let out = window.get(..r.bytes_written).unwrap_or(&[]);
        if !out.is_empty() {
            crc.update(out);
            total = total.wrapping_add(out.len() as u64);
            sink(out)?;
        }
        input = input.get(r.bytes_consumed..).unwrap_or(&[]);
        match r.status {
            Ok(MZStatus::StreamEnd) => break,
            Ok(_) => {
                if r.bytes_consumed == 0 && r.bytes_written == 0 {
                    return Err(corrupt(format_args!("the deflate data ends early")));
                }
            }
            Err(e) => return Err(corrupt(format_args!("{e:?}"))),
        }
    }
    let Some(trailer) = input.get(..8) else {
        return Err(corrupt(format_args!("truncated trailer")));
    };
    let stored_crc = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
    let stored_size = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
    let crc = crc.finalize();
    if stored_crc != crc {
        return Err(corrupt(format_args!(
            "CRC-32 {stored_crc:#010x} stored, {crc:#010x} computed"
        )));
    }
    if stored_size != total as u32 {
        return Err(corrupt(format_args!(
            "size {stored_size} stored, {} inflated",
            total as u32
        )));
    }
    let padding = input.get(8..).unwrap_or(&[]);
    if let Some(i) = padding.iter().position(|&b| b != 0) {
        return Err(err!(
            Invalid,
            "Invalid NEFF: non-zero data {i} bytes after the end of the gzip stream"
        ));
    }
    Ok(total)
}

/// Compresses `data` into one gzip member (no name, mtime 0: deterministic).
pub(crate) fn compress(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() / 4 + 64);
    out.extend_from_slice(&[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff]);
    out.extend_from_slice(&miniz_oxide::deflate::compress_to_vec(data, 6));
    out.extend_from_slice(&crc32fast::hash(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}
