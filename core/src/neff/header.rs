//! The 1024-byte little-endian NEFF header.

use alloc::string::String;

use crate::error::Result;

bitflags::bitflags! {
    /// The header's incompatible-feature bits: compiler features a NEFF relies on. No public
    /// list names them; the bits seen in compiler output this runtime was tested with are
    /// [`NeffFeatures::TESTED`], and every other bit is kept (and reported by the parser as a
    /// warning, never dropped silently).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct NeffFeatures: u64 {
        /// The bits of neuronx-cc 2.23 output (`0x209c00`): accepted silently.
        const TESTED = 0x209c00;
        // Bits no NEFF this runtime was tested with carried.
        const _ = !0;
    }
}

/// Size of the header.
pub const HEADER_SIZE: usize = 1024;

/// Newest NEFF major version this runtime loads.
pub const SUPPORTED_MAJOR: u64 = 2;
/// Minor version reported next to [`SUPPORTED_MAJOR`] in version-mismatch messages.
pub const SUPPORTED_MINOR: u64 = 0;

/// `pkg_version` of a gzip-compressed tar payload (MD5-sized hash).
pub const PKG_GZIP_TAR: u64 = 2;
/// `pkg_version` of a plain tar payload (SHA-256 hash).
pub const PKG_PLAIN_TAR: u64 = 1;

const NAME_LEN: usize = 256;
const BUILD_LEN: usize = 128;

/// The decoded header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Packaging version: 2 = gzip-compressed tar, 1 = plain tar.
    pub pkg_version: u64,
    /// Bytes of payload after the header.
    pub data_size: u64,
    /// NEFF major version.
    pub version_major: u64,
    /// NEFF minor version.
    pub version_minor: u64,
    /// Build version text (up to 127 bytes).
    pub build_version: String,
    /// TPBs required for efficient execution.
    pub num_tpb: u32,
    /// Package hash (MD5 in the first 16 bytes for pkg 2, SHA-256 for pkg 1).
    pub hash: [u8; 32],
    /// Unique identifier.
    pub uuid: [u8; 16],
    /// NEFF name (up to 255 bytes).
    pub name: String,
    /// TPBs requested at compile time.
    pub requested_tpb_count: u32,
    /// TPBs per kelf node.
    pub tpb_per_node: [u8; 64],
    /// Incompatible-feature bits.
    pub feature_bits: NeffFeatures,
    /// Logical core size the NEFF needs.
    pub lnc_size: u32,
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(off..off + 8) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(off..off + 4) {
        a.copy_from_slice(s);
    }
    u32::from_le_bytes(a)
}

fn array_at<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    let mut a = [0u8; N];
    if let Some(s) = b.get(off..off + N) {
        a.copy_from_slice(s);
    }
    a
}

/// A NUL-terminated text field (the whole field if it has no NUL), which must be UTF-8.
fn text_at(b: &[u8], off: usize, len: usize, field: &str) -> Result<String> {
    let raw = b.get(off..off + len).unwrap_or(&[]);
    let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
    let bytes = raw.get(..end).unwrap_or(&[]);
    match core::str::from_utf8(bytes) {
        Ok(s) => Ok(String::from(s)),
        Err(_) => Err(err!(
            Invalid,
            "Invalid NEFF: the header's {field} is not UTF-8"
        )),
    }
}

impl Header {
    /// Decodes and checks the header of a file of `file_len` bytes.
    pub fn parse(file: &[u8]) -> Result<Self> {
        if file.is_empty() {
            return Err(err!(Invalid, "Invalid NEFF: the file is empty"));
        }
        let Some(h) = file.get(..HEADER_SIZE) else {
            return Err(err!(
                Invalid,
                "Invalid NEFF: the file has {} bytes, fewer than the {HEADER_SIZE}-byte header",
                file.len()
            ));
        };
        let header_size = u64_at(h, 8);
        if header_size != HEADER_SIZE as u64 {
            return Err(err!(
                Invalid,
                "Invalid NEFF: header_size is {header_size}, expected {HEADER_SIZE}"
            ));
        }
        let data_size = u64_at(h, 16);
        let available = (file.len() - HEADER_SIZE) as u64;
        if data_size > available {
            return Err(err!(
                Invalid,
                "Invalid NEFF: data_size {data_size} is larger than the {available} bytes after \
                 the header"
            ));
        }
        if data_size < available {
            return Err(err!(
                Invalid,
                "Invalid NEFF: data_size {data_size} is smaller than the {available} bytes after \
                 the header"
            ));
        }
        let header = Header {
            pkg_version: u64_at(h, 0),
            data_size,
            version_major: u64_at(h, 24),
            version_minor: u64_at(h, 32),
            build_version: text_at(h, 40, BUILD_LEN, "build version")?,
            num_tpb: u32_at(h, 168),
            hash: array_at(h, 172),
            uuid: array_at(h, 204),
            name: text_at(h, 220, NAME_LEN, "name")?,
            requested_tpb_count: u32_at(h, 476),
            tpb_per_node: array_at(h, 480),
            feature_bits: NeffFeatures::from_bits_retain(u64_at(h, 544)),
            lnc_size: u32_at(h, 552),
        };
        if header.version_major > SUPPORTED_MAJOR {
            return Err(err!(
                UnsupportedNeffVersion,
                "NEFF version mismatch supported: {SUPPORTED_MAJOR}.{SUPPORTED_MINOR} received: {}.{}",
                header.version_major,
                header.version_minor
            ));
        }
        if header.version_major == 0 {
            return Err(err!(
                UnsupportedNeffVersion,
                "NEFF version mismatch supported: {SUPPORTED_MAJOR}.{SUPPORTED_MINOR} received: 0.{}",
                header.version_minor
            ));
        }
        if header.pkg_version != PKG_GZIP_TAR && header.pkg_version != PKG_PLAIN_TAR {
            return Err(err!(
                Invalid,
                "Invalid NEFF: unknown pkg_version {} (1 = tar, 2 = gzip-compressed tar)",
                header.pkg_version
            ));
        }
        if header.lnc_size > 8 {
            return Err(err!(
                Invalid,
                "Invalid NEFF: lnc_size {} is above 8",
                header.lnc_size
            ));
        }
        Ok(header)
    }

    /// Encodes the header (the inverse of [`Header::parse`]).
    pub fn encode(&self) -> [u8; HEADER_SIZE] {
        let mut h = [0u8; HEADER_SIZE];
        let mut put = |off: usize, bytes: &[u8]| {
            if let Some(d) = h.get_mut(off..off + bytes.len()) {
                d.copy_from_slice(bytes);
            }
        };
        put(0, &self.pkg_version.to_le_bytes());
        put(8, &(HEADER_SIZE as u64).to_le_bytes());
        put(16, &self.data_size.to_le_bytes());
        put(24, &self.version_major.to_le_bytes());
        put(32, &self.version_minor.to_le_bytes());
        let b = self.build_version.as_bytes();
        put(40, b.get(..b.len().min(BUILD_LEN - 1)).unwrap_or(&[]));
        put(168, &self.num_tpb.to_le_bytes());
        put(172, &self.hash);
        put(204, &self.uuid);
        let n = self.name.as_bytes();
        put(220, n.get(..n.len().min(NAME_LEN - 1)).unwrap_or(&[]));
        put(476, &self.requested_tpb_count.to_le_bytes());
        put(480, &self.tpb_per_node);
        put(544, &self.feature_bits.bits().to_le_bytes());
        put(552, &self.lnc_size.to_le_bytes());
        h
    }
}
