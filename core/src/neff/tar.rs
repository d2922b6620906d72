//! A streaming POSIX tar reader (ustar, GNU long names, PAX path records) that keeps only the
//! members it is asked to keep, and a ustar writer.

use alloc::string::String;
use alloc::vec::Vec;

use crate::error::Result;

const BLOCK: usize = 512;

/// Longest path accepted from a GNU long-name or PAX record.
const MAX_PATH: usize = 4096;
/// Largest PAX extended header read.
const MAX_PAX: u64 = 64 * 1024;

/// What the reader does with a member's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Disposition {
    /// Read past it without storing anything.
    Skip,
    /// Store it (it must not exceed the given size).
    Keep(usize),
}

/// A complete member.
#[derive(Debug)]
pub(crate) struct Member {
    pub(crate) path: String,
    pub(crate) size: u64,
    /// The data, for kept members.
    pub(crate) data: Option<Vec<u8>>,
}

enum Sink {
    Skip,
    Keep(Vec<u8>),
    LongName(Vec<u8>),
    Pax(Vec<u8>),
}

enum State {
    /// Reading a header block into `TarReader::block`.
    Header {
        filled: usize,
    },
    Data {
        path: String,
        size: u64,
        remaining: u64,
        padding: u64,
        sink: Sink,
    },
    End,
}

/// The streaming reader: feed it the tar bytes in any chunks.
pub(crate) struct TarReader {
    state: State,
    block: [u8; BLOCK],
    offset: u64,
    zero_blocks: u8,
    next_path: Option<String>,
    members: usize,
    max_members: usize,
}

fn octal(field: &[u8]) -> Option<u64> {
    // GNU base-256 for large values: high bit of the first byte set.
    if let Some(&first) = field.first() {
        if first & 0x80 != 0 {
            let mut v: u64 = u64::from(first & 0x7f);
            for &b in field.get(1..).unwrap_or(&[]) {
                v = v.checked_mul(256)?.checked_add(u64::from(b))?;
            }
            return Some(v);
        }
    }
    let mut v: u64 = 0;
    let mut seen = false;
    for &b in field {
        match b {
            b'0'..=b'7' => {
                v = v.checked_mul(8)?.checked_add(u64::from(b - b'0'))?;
                seen = true;
            }
            b' ' | 0 if !seen => {}
            b' ' | 0 => break,
            _ => return None,
        }
    }
    Some(v)
}

fn cstr(field: &[u8]) -> &[u8] {
    let end = field.iter().position(|&b| b == 0).unwrap_or(field.len());
    field.get(..end).unwrap_or(&[])
}

fn normalize(path: &str) -> String {
    let mut p = path;
    while let Some(rest) = p.strip_prefix("./") {
        p = rest;
    }
    String::from(p)
}

fn path_text(bytes: &[u8], offset: u64) -> Result<String> {
    match core::str::from_utf8(bytes) {
        Ok(s) => Ok(normalize(s)),
        Err(_) => Err(err!(
            Invalid,
            "Invalid NEFF: tar member name at offset {offset} is not UTF-8"
        )),
    }
}

/// The `path=` record of a PAX extended header, if any.
fn pax_path(data: &[u8], offset: u64) -> Result<Option<String>> {
    let mut rest = data;
    let mut path = None;
    while !rest.is_empty() {
        // "<len> <key>=<value>\n"
        let Some(space) = rest.iter().position(|&b| b == b' ') else {
            break;
        };
        let len = core::str::from_utf8(rest.get(..space).unwrap_or(&[]))
            .ok()
            .and_then(|s| s.parse::<usize>().ok())
            .filter(|&l| l > space + 1 && l <= rest.len())
            .ok_or_else(|| {
                err!(
                    Invalid,
                    "Invalid NEFF: malformed PAX record at offset {offset}"
                )
            })?;
        let record = rest.get(space + 1..len - 1).unwrap_or(&[]);
        if let Some(value) = record.strip_prefix(b"path=") {
            if value.len() > MAX_PATH {
                return Err(err!(
                    Invalid,
                    "Invalid NEFF: PAX path at offset {offset} is too long"
                ));
            }
            path = Some(path_text(value, offset)?);
        }
        rest = rest.get(len..).unwrap_or(&[]);
    }
    Ok(path)
}

impl TarReader {
    pub(crate) fn new(max_members: usize) -> Self {
        Self {
            state: State::Header { filled: 0 },
            block: [0; BLOCK],
            offset: 0,
            zero_blocks: 0,
            next_path: None,
            members: 0,
            max_members,
        }
    }

    /// Whether the end-of-archive marker was seen.
    pub(crate) fn finished(&self) -> bool {
        matches!(self.state, State::End)
    }

    /// Checks the reader is between members when the input ends.
    pub(crate) fn finish(&self) -> Result<()> {
        match &self.state {
            State::End => Ok(()),
            State::Header { filled: 0, .. } => Ok(()),
            State::Header { .. } => Err(err!(
                Invalid,
                "Invalid NEFF: the tar archive ends inside a header at offset {}",
                self.offset
            )),
            State::Data { path, size, .. } => Err(err!(
                Invalid,
                "Invalid NEFF: tar member \"{path}\" of {size} bytes overruns the archive"
            )),
        }
    }

    /// Consumes `data`, calling `decide(path, size)` for each member header and `done(member)`
    /// for each complete member.
    pub(crate) fn feed(
        &mut self,
        mut data: &[u8],
        decide: &mut dyn FnMut(&str, u64) -> Result<Disposition>,
        done: &mut dyn FnMut(Member) -> Result<()>,
    ) -> Result<()> {
        while !data.is_empty() {
            match &mut self.state {
                State::End => {
                    // Trailing blocks after the end marker must be zero.
                    if data.iter().any(|&b| b != 0) {
                        return Err(err!(
                            Invalid,
                            "Invalid NEFF: data after the tar end-of-archive marker"
                        ));
                    }
                    return Ok(());
                }
                State::Header { filled } => {
                    let take = (BLOCK - *filled).min(data.len());
                    if let (Some(d), Some(s)) = (
                        self.block.get_mut(*filled..*filled + take),
                        data.get(..take),
                    ) {
                        d.copy_from_slice(s);
                    }
                    *filled += take;
                    data = data.get(take..).unwrap_or(&[]);
                    if *filled == BLOCK {
                        let block = self.block;
                        self.on_header(&block, decide)?;
                    }
                }
                State::Data {
                    remaining,
                    padding,
                    sink,
                    ..
                } => {
                    if *remaining > 0 {
                        let take = (*remaining).min(data.len() as u64) as usize;
                        let chunk = data.get(..take).unwrap_or(&[]);
                        match sink {
                            Sink::Skip => {}
                            Sink::Keep(v) | Sink::LongName(v) | Sink::Pax(v) => {
                                v.extend_from_slice(chunk)
                            }
                        }
                        *remaining -= take as u64;
                        self.offset += take as u64;
                        data = data.get(take..).unwrap_or(&[]);
                    } else {
                        let take = (*padding).min(data.len() as u64) as usize;
                        *padding -= take as u64;
                        self.offset += take as u64;
                        data = data.get(take..).unwrap_or(&[]);
                    }
                    if *remaining == 0 && *padding == 0 {
                        self.complete(done)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn on_header(
        &mut self,
        block: &[u8; BLOCK],
        decide: &mut dyn FnMut(&str, u64) -> Result<Disposition>,
    ) -> Result<()> {
        let at = self.offset;
        self.offset += BLOCK as u64;
        if block.iter().all(|&b| b == 0) {
            self.zero_blocks += 1;
            self.state = if self.zero_blocks >= 2 {
                State::End
            } else {
                State::Header { filled: 0 }
            };
            return Ok(());
        }
        if self.zero_blocks > 0 {
            return Err(err!(
                Invalid,
                "Invalid NEFF: a lone zero block in the tar archive at offset {}",
                at - BLOCK as u64
            ));
        }
        // Checksum: the header's bytes with the checksum field read as spaces.
        let stored = octal(block.get(148..156).unwrap_or(&[]));
        let mut unsigned: u64 = 0;
        let mut signed: i64 = 0;
        for (i, &b) in block.iter().enumerate() {
            let b = if (148..156).contains(&i) { b' ' } else { b };
            unsigned += u64::from(b);
            signed += i64::from(b as i8);
        }
        let ok =
            stored.is_some_and(|s| s == unsigned || i64::try_from(s).is_ok_and(|s| s == signed));
        if !ok {
            return Err(err!(
                Invalid,
                "Invalid NEFF: the tar header at offset {at} has a bad checksum"
            ));
        }
        let size = octal(block.get(124..136).unwrap_or(&[])).ok_or_else(|| {
            err!(
                Invalid,
                "Invalid NEFF: the tar header at offset {at} has a malformed size"
            )
        })?;
        let typeflag = block.get(156).copied().unwrap_or(0);
        let magic = block.get(257..262).unwrap_or(&[]);
        let name = cstr(block.get(0..100).unwrap_or(&[]));
        let prefix = if magic == b"ustar" {
            cstr(block.get(345..500).unwrap_or(&[]))
        } else {
            &[]
        };
        let header_path = if prefix.is_empty() {
            path_text(name, at)?
        } else {
            let mut p = path_text(prefix, at)?;
            p.push('/');
            p.push_str(&path_text(name, at)?);
            p
        };
        let padding = (BLOCK as u64 - size % BLOCK as u64) % BLOCK as u64;
        let (path, sink) = match typeflag {
            b'L' => {
                if size > MAX_PATH as u64 {
                    return Err(err!(
                        Invalid,
                        "Invalid NEFF: GNU long name at offset {at} is too long"
                    ));
                }
                (header_path, Sink::LongName(Vec::new()))
            }
            b'x' => {
                if size > MAX_PAX {
                    return Err(err!(
                        Invalid,
                        "Invalid NEFF: PAX header at offset {at} is too large"
                    ));
                }
                (header_path, Sink::Pax(Vec::new()))
            }
            b'0' | 0 | b'7' => {
                let path = self.next_path.take().unwrap_or(header_path);
                self.members += 1;
                if self.members > self.max_members {
                    return Err(err!(
                        Invalid,
                        "Invalid NEFF: more than {} tar members",
                        self.max_members
                    ));
                }
                let sink = match decide(&path, size)? {
                    Disposition::Skip => Sink::Skip,
                    Disposition::Keep(max) => {
                        if size > max as u64 {
                            return Err(err!(
                                Invalid,
                                "Invalid NEFF: member \"{path}\" of {size} bytes is larger than the \
                                 {max} bytes allowed"
                            ));
                        }
                        Sink::Keep(Vec::new())
                    }
                };
                (path, sink)
            }
            // Directories, links, global PAX headers, devices: nothing to keep.
            _ => {
                self.next_path = None;
                (header_path, Sink::Skip)
            }
        };
        self.state = State::Data {
            path,
            size,
            remaining: size,
            padding,
            sink,
        };
        Ok(())
    }

    fn complete(&mut self, done: &mut dyn FnMut(Member) -> Result<()>) -> Result<()> {
        let state = core::mem::replace(&mut self.state, State::Header { filled: 0 });
        let State::Data {
            path, size, sink, ..
        } = state
        else {
            return Ok(());
        };
        let at = self.offset;
        match sink {
            Sink::Skip => {
                if !path.is_empty() && !path.ends_with('/') {
                    done(Member {
                        path,
                        size,
                        data: None,
                    })?;
                }
            }
            Sink::Keep(v) => done(Member {
                path,
                size,
                data: Some(v),
            })?,
            Sink::LongName(v) => self.next_path = Some(path_text(cstr(&v), at)?),
            Sink::Pax(v) => {
                if let Some(p) = pax_path(&v, at)? {
                    self.next_path = Some(p);
                }
            }
        }
        Ok(())
    }
}

/// Appends one ustar member to `out`. Paths longer than 100 bytes use the prefix field.
pub(crate) fn write_member(out: &mut Vec<u8>, path: &str, data: &[u8]) -> Result<()> {
    let mut h = [0u8; BLOCK];
    let bytes = path.as_bytes();
    let (prefix, name) = if bytes.len() <= 100 {
        (&[][..], bytes)
    } else {
        // Split at a '/' so that the name part fits in 100 bytes and the prefix in 155.
        let split = bytes
            .iter()
            .enumerate()
            .rev()
            .find(|&(i, &b)| b == b'/' && i <= 155 && bytes.len() - i - 1 <= 100)
            .map(|(i, _)| i)
            .ok_or_else(|| {
                err!(
                    Invalid,
                    "NEFF member path \"{path}\" is too long for a tar header"
                )
            })?;
        (
            bytes.get(..split).unwrap_or(&[]),
            bytes.get(split + 1..).unwrap_or(&[]),
        )
    };
    let mut put = |off: usize, v: &[u8]| {
        if let Some(d) = h.get_mut(off..off + v.len()) {
            d.copy_from_slice(v);
        }
    };
    put(0, name);
    put(100, b"0000644\0");
    put(108, b"0000000\0");
    put(116, b"0000000\0");
    let size = alloc::format!("{:011o}\0", data.len());
    put(124, size.as_bytes());
    put(136, b"00000000000\0");
    put(156, b"0");
    put(257, b"ustar\0");
    put(263, b"00");
    put(265, b"nrt");
    put(297, b"nrt");
    put(345, prefix);
    put(148, b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    let chk = alloc::format!("{sum:06o}\0 ");
    if let Some(d) = h.get_mut(148..156) {
        d.copy_from_slice(chk.as_bytes());
    }
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    let pad = (BLOCK - data.len() % BLOCK) % BLOCK;
    out.resize(out.len() + pad, 0);
    Ok(())
}

/// Appends the end-of-archive marker.
pub(crate) fn write_end(out: &mut Vec<u8>) {
    out.resize(out.len() + 2 * BLOCK, 0);
}
