//! NEFF (Neuron Executable File Format): a bounded streaming parser and a writer.
//!
//! A NEFF is a 1024-byte little-endian header ([`Header`]) followed by a payload that is a
//! gzip-compressed POSIX tar (`pkg_version` 2, what the compiler writes; zero padding may follow
//! the gzip member) or a plain tar (`pkg_version` 1). The runtime needs a few members:
//! `kelf-*.json` (the subgraph list), each subgraph's `def.json` (its `var` entries of type
//! `input` / `output`: name, byte size, `var_id`) and `tensor_map.json` (dtype and shape),
//! `neff.json` (metadata signatures, cross-checked), `info.json` (the tool version), plus the
//! subgraph members a backend asks for (the simulator's program). Everything else is streamed
//! past and never stored.
//!
//! # Memory
//!
//! The payload is inflated through a fixed 64 KiB window into a streaming tar reader. Only kept
//! members are stored, each bounded by [`ParseOptions::max_member_size`], and their total by
//! [`ParseOptions::max_kept_bytes`]; the names and sizes of every member are indexed (bounded by
//! [`ParseOptions::max_members`]). No allocation is sized by a number read from the file: kept
//! members grow as their bytes arrive. Peak memory is therefore the kept members, the index and a
//! constant (the inflate state and window), whatever the archive's size.
//!
//! # Order of I/O tensors
//!
//! [`Neff::tensors`] lists the inputs ordered by name (byte-wise), then the outputs ordered by
//! name — the order libnrt's `std::map` gives `nrt_get_model_tensor_info`.
//!
//! # Versions and feature bits
//!
//! A NEFF major version above [`SUPPORTED_MAJOR`] (or 0) is refused with
//! `NRT_UNSUPPORTED_NEFF_VERSION`, "NEFF version mismatch supported: 2.0 received: X.Y".
//! Feature bits name compiler features a NEFF relies on; no public list of them exists. Policy:
//! the bits seen in compiler output this project was tested with ([`NeffFeatures::TESTED`]) are
//! accepted silently; any other bit is accepted with a warning in [`Neff::warnings`] (the
//! simulator executes only its own programs, which no feature bit changes), never silently.
//!
//! # Hash
//!
//! NEFFs written by [`write()`] carry the MD5 (`pkg_version` 2) or SHA-256 (`pkg_version` 1) of
//! the payload — the `data_size` bytes after the header — and say so in the header's build
//! version ([`HASH_SCOPE_MARKER`]). With [`ParseOptions::validate_hash`]
//! (`NEURON_RT_VALIDATE_HASH`), such a NEFF whose hash does not match is refused. What the
//! compiler's hash covers is not documented (it is not the MD5 of the payload, of the tar or of
//! header plus payload), so a compiler NEFF is loaded with a warning that its hash was not
//! checked.

mod gzip;
mod header;
mod json;
mod tar;

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use md5::Digest as _;

use crate::error::Result;
use crate::io::{Dtype, IoTable, TensorInfo, TensorUsage};

pub use header::{
    HEADER_SIZE, Header, NeffFeatures, PKG_GZIP_TAR, PKG_PLAIN_TAR, SUPPORTED_MAJOR,
    SUPPORTED_MINOR,
};

/// Most subgraphs a NEFF may have (the header's `tpb_per_node` has 64 entries).
pub const MAX_SUBGRAPHS: usize = 64;
/// Most I/O tensors a NEFF may declare.
pub const MAX_IO_TENSORS: usize = 4096;
/// Most dimensions of a tensor.
pub const MAX_DIMS: usize = 8;
/// Text in the header's build version of NEFFs whose hash covers the payload.
pub const HASH_SCOPE_MARKER: &str = "hash=payload";
/// The member, in each subgraph directory, that holds a simulator program.
pub const SIM_PROGRAM_MEMBER: &str = "nrt-sim.prog";

/// Which subgraph members (besides `def.json` and `tensor_map.json`) the parser keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeepMembers<'a> {
    /// Only the named ones (file names inside a subgraph directory).
    Named(&'a [&'a str]),
    /// Every member of every subgraph directory (bounded by the size limits).
    All,
}

/// Most bytes of subgraph members a model load keeps, one member or all together (a simulator
/// program carries the model's weights as constants: ResNet-50 in fp32 is about 100 MB).
pub const MAX_LOADED_MEMBER_BYTES: usize = 1 << 30;

/// Limits and choices of [`parse`].
#[derive(Clone, Copy, Debug)]
pub struct ParseOptions<'a> {
    /// Subgraph members to keep.
    pub keep: KeepMembers<'a>,
    /// Largest member kept (JSON members included).
    pub max_member_size: usize,
    /// Largest total of kept member bytes.
    pub max_kept_bytes: usize,
    /// Most members in the archive.
    pub max_members: usize,
    /// Check the header hash (`NEURON_RT_VALIDATE_HASH`).
    pub validate_hash: bool,
    /// Bytes of the output window a gzipped payload is inflated through (heap, for the
    /// parse's duration; values below [`MIN_INFLATE_WINDOW`] count as that). The default,
    /// [`DEFAULT_INFLATE_WINDOW`], hands the tar reader large chunks; firmware sets it small.
    /// It bounds only the output buffer: the decoder's own state (its 32 KiB dictionary and
    /// tables) is allocated besides.
    pub inflate_window: usize,
}

/// The default [`ParseOptions::inflate_window`].
pub const DEFAULT_INFLATE_WINDOW: usize = 64 * 1024;
pub use gzip::MIN_INFLATE_WINDOW;

impl Default for ParseOptions<'_> {
    fn default() -> Self {
        Self {
            keep: KeepMembers::Named(&[SIM_PROGRAM_MEMBER]),
            max_member_size: 64 << 20,
            max_kept_bytes: 256 << 20,
            max_members: 100_000,
            validate_hash: false,
            inflate_window: DEFAULT_INFLATE_WINDOW,
        }
    }
}

/// One I/O tensor of a NEFF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeffTensor {
    /// Name (the `def.json` variable name).
    pub name: String,
    /// Input or output.
    pub usage: TensorUsage,
    /// Size in bytes.
    pub size: u64,
    /// Element type (`nrt_dtype_t`).
    pub dtype: Dtype,
    /// Dimensions.
    pub shape: Vec<u32>,
    /// `var_id` in `def.json`.
    pub var_id: u64,
}

/// A member of a subgraph directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubgraphMember {
    /// File name inside the subgraph directory (may contain further `/`).
    pub name: String,
    /// Size in bytes.
    pub size: u64,
    /// The bytes, if kept.
    pub data: Option<Vec<u8>>,
}

/// One subgraph (one physical core of a logical core).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subgraph {
    /// Name (`sg00`, ...).
    pub name: String,
    /// Every member of the subgraph's directory, in archive order (`def.json` and
    /// `tensor_map.json` included, with their data only under [`KeepMembers::All`]).
    pub members: Vec<SubgraphMember>,
}

impl Subgraph {
    /// The kept bytes of member `name` of this subgraph.
    pub fn member(&self, name: &str) -> Option<&[u8]> {
        self.members
            .iter()
            .find(|m| m.name == name)
            .and_then(|m| m.data.as_deref())
    }
}

/// A parsed NEFF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Neff {
    /// The header.
    pub header: Header,
    /// Subgraphs, in the kelf list's order.
    pub subgraphs: Vec<Subgraph>,
    /// I/O tensors: inputs by name, then outputs by name.
    pub tensors: Vec<NeffTensor>,
    /// `info.json`'s `tool_version`, if present.
    pub tool_version: Option<String>,
    /// Things accepted but worth telling (unknown feature bits, an unchecked hash).
    pub warnings: Vec<String>,
}

impl Neff {
    /// The NEFF's name.
    pub fn name(&self) -> &str {
        &self.header.name
    }

    /// The NEFF's UUID.
    pub fn uuid(&self) -> [u8; 16] {
        self.header.uuid
    }

    /// `(major, minor)`.
    pub fn version(&self) -> (u64, u64) {
        (self.header.version_major, self.header.version_minor)
    }

    /// The subgraph called `name`.
    pub fn subgraph(&self, name: &str) -> Option<&Subgraph> {
        self.subgraphs.iter().find(|s| s.name == name)
    }

    /// The tensors of one usage, in name order.
    pub fn tensors_of(&self, usage: TensorUsage) -> impl Iterator<Item = &NeffTensor> {
        self.tensors.iter().filter(move |t| t.usage == usage)
    }

    /// The model's I/O table.
    pub fn io_table(&self) -> Result<IoTable> {
        let info = |t: &NeffTensor| TensorInfo {
            name: t.name.clone(),
            size: t.size,
            dtype: t.dtype,
            shape: t.shape.clone(),
        };
        IoTable::new(
            self.tensors_of(TensorUsage::Input).map(info).collect(),
            self.tensors_of(TensorUsage::Output).map(info).collect(),
        )
    }
}

/// The `nrt_dtype_t` of a NEFF dtype string.
pub fn dtype_from_str(s: &str) -> Option<Dtype> {
    Some(match s {
        "float32" => Dtype::Float32,
        "float32r" => Dtype::Fp32r,
        "float16" => Dtype::Float16,
        "bfloat16" => Dtype::Bfloat16,
        "float8e3" => Dtype::Fp8E3,
        "float8e4" => Dtype::Fp8E4,
        "float8e5" => Dtype::Fp8E5,
        "int8" => Dtype::Int8,
        "uint8" => Dtype::Uint8,
        "int16" => Dtype::Int16,
        "uint16" => Dtype::Uint16,
        "int32" => Dtype::Int32,
        "uint32" => Dtype::Uint32,
        "int64" => Dtype::Int64,
        "uint64" => Dtype::Uint64,
        _ => return None,
    })
}

/// The NEFF dtype string of an `nrt_dtype_t`.
pub fn dtype_str(d: Dtype) -> &'static str {
    match d {
        Dtype::Float32 => "float32",
        Dtype::Fp32r => "float32r",
        Dtype::Float16 => "float16",
        Dtype::Bfloat16 => "bfloat16",
        Dtype::Fp8E3 => "float8e3",
        Dtype::Fp8E4 => "float8e4",
        Dtype::Fp8E5 => "float8e5",
        Dtype::Int8 => "int8",
        Dtype::Uint8 => "uint8",
        Dtype::Int16 => "int16",
        Dtype::Uint16 => "uint16",
        Dtype::Int32 => "int32",
        Dtype::Uint32 => "uint32",
        Dtype::Int64 => "int64",
        Dtype::Uint64 => "uint64",
        Dtype::Unknown => "unknown",
    }
}

/// Kept top-level members and the index of subgraph members, gathered while streaming.
#[derive(Default)]
struct Collected {
    kelf: Option<(String, Vec<u8>)>,
    neff_json: Option<Vec<u8>>,
    info_json: Option<Vec<u8>>,
    /// (directory, member name, size, data)
    dir_members: Vec<(String, String, u64, Option<Vec<u8>>)>,
    kept_bytes: usize,
    /// [`KeepMembers::All`]: `def.json` and `tensor_map.json` keep their data too.
    keep_all: bool,
}

fn is_kelf_list(path: &str) -> bool {
    !path.contains('/') && path.starts_with("kelf-") && path.ends_with(".json")
}

fn split_dir(path: &str) -> Option<(&str, &str)> {
    path.split_once('/')
        .filter(|(d, f)| !d.is_empty() && !f.is_empty())
}

/// Parses a NEFF held in memory (an `nrt_load` buffer). See the module documentation for what
/// is checked; every failure is `NRT_INVALID` (or `NRT_UNSUPPORTED_NEFF_VERSION`) with a
/// message naming what is wrong.
pub fn parse(file: &[u8], options: &ParseOptions<'_>) -> Result<Neff> {
    let header = Header::parse(file)?;
    let payload = file.get(HEADER_SIZE..).unwrap_or(&[]);
    let mut warnings = Vec::new();

    // Hash: check ours, report the compiler's as unchecked.
    if options.validate_hash {
        if header.build_version.contains(HASH_SCOPE_MARKER) {
            if payload_hash(header.pkg_version, payload) != header.hash {
                return Err(err!(
                    Invalid,
                    "Invalid NEFF: the header hash does not match the payload (NEURON_RT_VALIDATE_HASH)"
                ));
            }
        } else {
            warnings.push(String::from(
                "NEFF hash not validated: the scope of this NEFF's header hash is not documented",
            ));
        }
    }
    let unknown = header.feature_bits.difference(NeffFeatures::TESTED);
    if !unknown.is_empty() {
        warnings.push(alloc::format!(
            "NEFF feature bits {:#x} are not known to this runtime; loading anyway",
            unknown.bits()
        ));
    }

    let mut collected = Collected {
        keep_all: options.keep == KeepMembers::All,
        ..Collected::default()
    };
    let mut reader = tar::TarReader::new(options.max_members);
    let max_member = options.max_member_size;
    let keep = options.keep;
    let mut decide = |path: &str, _size: u64| -> Result<tar::Disposition> {
        let wanted = if is_kelf_list(path) || path == "neff.json" || path == "info.json" {
            true
        } else if let Some((_, file)) = split_dir(path) {
            file == "def.json"
                || file == "tensor_map.json"
                || match keep {
                    KeepMembers::All => true,
                    KeepMembers::Named(names) => names.contains(&file),
                }
        } else {
            false
        };
        Ok(if wanted {
            tar::Disposition::Keep(max_member)
        } else {
            tar::Disposition::Skip
        })
    };
    let max_kept = options.max_kept_bytes;
    let mut done = |m: tar::Member| -> Result<()> {
        if let Some(d) = &m.data {
            collected.kept_bytes = collected.kept_bytes.saturating_add(d.len());
            if collected.kept_bytes > max_kept {
                return Err(err!(
                    Invalid,
                    "Invalid NEFF: the members to keep exceed {max_kept} bytes"
                ));
            }
        }
        if is_kelf_list(&m.path) {
            if let Some((first, _)) = &collected.kelf {
                return Err(err!(
                    Invalid,
                    "Invalid NEFF: two subgraph lists, {first} and {}",
                    m.path
                ));
            }
            collected.kelf = Some((m.path, m.data.unwrap_or_default()));
        } else if m.path == "neff.json" {
            collected.neff_json = m.data;
        } else if m.path == "info.json" {
            collected.info_json = m.data;
        } else if let Some((dir, file)) = split_dir(&m.path) {
            collected
                .dir_members
                .push((dir.to_string(), file.to_string(), m.size, m.data));
        }
        Ok(())
    };

    match payload.first() {
        Some(0x1f) => {
            gzip::inflate(payload, options.inflate_window, &mut |chunk| {
                reader.feed(chunk, &mut decide, &mut done)
            })?;
        }
        Some(_) => reader.feed(payload, &mut decide, &mut done)?,
        None => return Err(err!(Invalid, "Invalid NEFF: the payload is empty")),
    }
    reader.finish()?;
    if !reader.finished() {
        return Err(err!(
            Invalid,
            "Invalid NEFF: the tar archive has no end-of-archive marker"
        ));
    }
    build(header, collected, warnings)
}

fn payload_hash(pkg_version: u64, payload: &[u8]) -> [u8; 32] {
    let mut h = [0u8; 32];
    if pkg_version == PKG_PLAIN_TAR {
        h.copy_from_slice(&sha2::Sha256::digest(payload));
    } else if let Some(d) = h.get_mut(..16) {
        d.copy_from_slice(&md5::Md5::digest(payload));
    }
    h
}

fn shape_u32(name: &str, dims: &[u64]) -> Result<Vec<u32>> {
    if dims.len() > MAX_DIMS {
        return Err(err!(
            Invalid,
            "Invalid NEFF: tensor \"{name}\" has {} dimensions (at most {MAX_DIMS})",
            dims.len()
        ));
    }
    dims.iter()
        .map(|&d| {
            u32::try_from(d).ok().filter(|&d| d > 0).ok_or_else(|| {
                err!(
                    Invalid,
                    "Invalid NEFF: tensor \"{name}\" has a dimension of {d}"
                )
            })
        })
        .collect()
}

fn check_size(name: &str, size: u64, dtype: Dtype, shape: &[u32]) -> Result<()> {
    let elems = shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(u64::from(d)));
    let bytes = elems.and_then(|e| e.checked_mul(u64::from(dtype.size())));
    if bytes != Some(size) {
        return Err(err!(
            Invalid,
            "Invalid NEFF: tensor \"{name}\": shape {shape:?} of {} is {} bytes but its size is {size}",
            dtype_str(dtype),
            bytes.map_or_else(|| String::from("too many"), |b| b.to_string())
        ));
    }
    Ok(())
}

fn build(header: Header, mut c: Collected, warnings: Vec<String>) -> Result<Neff> {
    let Some((kelf_name, kelf_bytes)) = c.kelf.take() else {
        return Err(err!(
            Invalid,
            "Invalid NEFF: no subgraph list (kelf-*.json)"
        ));
    };
    let kelf: json::KelfList = json::parse(&kelf_name, &kelf_bytes)?;
    if kelf.graphs.is_empty() || kelf.graphs.len() > MAX_SUBGRAPHS {
        return Err(err!(
            Invalid,
            "Invalid NEFF: {kelf_name} lists {} subgraphs (1 to {MAX_SUBGRAPHS} are supported)",
            kelf.graphs.len()
        ));
    }
    let mut tensors: Vec<NeffTensor> = Vec::new();
    let mut subgraphs = Vec::with_capacity(kelf.graphs.len());
    for g in &kelf.graphs {
        if subgraphs.iter().any(|s: &Subgraph| s.name == g.name) {
            return Err(err!(
                Invalid,
                "Invalid NEFF: subgraph \"{}\" is listed twice",
                g.name
            ));
        }
        let Some((dir, def_file)) = split_dir(&g.definition) else {
            return Err(err!(
                Invalid,
                "Invalid NEFF: subgraph \"{}\" has definition \"{}\" outside a subgraph directory",
                g.name,
                g.definition
            ));
        };
        let find = |file: &str| {
            c.dir_members
                .iter()
                .find(|(d, f, _, data)| d == dir && f == file && data.is_some())
        };
        let Some((_, _, _, Some(def_bytes))) = find(def_file) else {
            return Err(err!(
                Invalid,
                "Invalid NEFF: subgraph \"{}\" has no definition {}",
                g.name,
                g.definition
            ));
        };
        let def: json::Def = json::parse(&g.definition, def_bytes)?;
        let tm_path = alloc::format!("{dir}/tensor_map.json");
        let tensor_map: Option<json::UniqueMap<json::TensorMapEntry>> =
            match find("tensor_map.json") {
                Some((_, _, _, Some(bytes))) => Some(json::parse(&tm_path, bytes)?),
                _ => None,
            };
        for (name, var) in &def.var.0 {
            let usage = match var.kind.as_str() {
                "input" => TensorUsage::Input,
                "output" => TensorUsage::Output,
                _ => continue,
            };
            if name.is_empty() || name.len() > crate::io::MAX_TENSOR_NAME {
                return Err(err!(
                    Invalid,
                    "Invalid NEFF: {}: tensor name of {} bytes (1 to 255 allowed)",
                    g.definition,
                    name.len()
                ));
            }
            let size = var.size.unwrap_or(0);
            if size == 0 {
                return Err(err!(
                    Invalid,
                    "Invalid NEFF: {}: tensor \"{name}\" has size 0",
                    g.definition
                ));
            }
            let entry = tensor_map
                .as_ref()
                .and_then(|m| m.0.iter().find(|(k, _)| k == name))
                .map(|(_, e)| e)
                .ok_or_else(|| {
                    err!(
                        Invalid,
                        "Invalid NEFF: tensor \"{name}\" has no entry in {tm_path}"
                    )
                })?;
            let dtype_name = entry.dtype.as_deref().unwrap_or("");
            let dtype = dtype_from_str(dtype_name).ok_or_else(|| {
                err!(
                    Invalid,
                    "Invalid NEFF: {tm_path}: tensor \"{name}\" has unknown dtype \"{dtype_name}\""
                )
            })?;
            if let Some(kind) = entry.kind.as_deref() {
                if kind != var.kind {
                    return Err(err!(
                        Invalid,
                        "Invalid NEFF: tensor \"{name}\" is an {} in {} but an {kind} in {tm_path}",
                        var.kind,
                        g.definition
                    ));
                }
            }
            let dims = entry
                .tf_shape
                .as_deref()
                .or(entry.sim_shape.as_deref())
                .ok_or_else(|| {
                    err!(
                        Invalid,
                        "Invalid NEFF: {tm_path}: tensor \"{name}\" has no shape"
                    )
                })?;
            let shape = shape_u32(name, dims)?;
            check_size(name, size, dtype, &shape)?;
            let t = NeffTensor {
                name: name.clone(),
                usage,
                size,
                dtype,
                shape,
                var_id: var.var_id.unwrap_or(0),
            };
            match tensors.iter().find(|e| e.name == t.name) {
                Some(e) if e.usage != t.usage => {
                    return Err(err!(
                        Invalid,
                        "Invalid NEFF: duplicate tensor name \"{name}\": both an input and an output"
                    ));
                }
                Some(e) if *e != t => {
                    return Err(err!(
                        Invalid,
                        "Invalid NEFF: tensor \"{name}\" of subgraph \"{}\" differs from an earlier \
                         subgraph's",
                        g.name
                    ));
                }
                Some(_) => {}
                None => {
                    if tensors.len() >= MAX_IO_TENSORS {
                        return Err(err!(
                            Invalid,
                            "Invalid NEFF: more than {MAX_IO_TENSORS} I/O tensors"
                        ));
                    }
                    tensors.push(t);
                }
            }
        }
        let members = c
            .dir_members
            .iter_mut()
            .filter(|(d, ..)| d == dir)
            .map(|(_, f, size, data)| {
                let keep = c.keep_all || (f != "def.json" && f != "tensor_map.json");
                SubgraphMember {
                    name: f.clone(),
                    size: *size,
                    data: if keep { data.take() } else { None },
                }
            })
            .collect();
        subgraphs.push(Subgraph {
            name: g.name.clone(),
            members,
        });
    }
    if tensors.is_empty() {
        return Err(err!(Invalid, "Invalid NEFF: no input or output tensors"));
    }
    // Cross-check the graph signature's inputs.
    if let Some(bytes) = &c.neff_json {
        let nj: json::NeffJson = json::parse("neff.json", bytes)?;
        for (name, sig) in &nj.metadata.signatures.default.inputs.0 {
            let Some(t) = tensors
                .iter()
                .find(|t| &t.name == name && t.usage == TensorUsage::Input)
            else {
                return Err(err!(
                    Invalid,
                    "Invalid NEFF: neff.json signature input \"{name}\" is not an input of any subgraph"
                ));
            };
            let dtype_ok = sig
                .dtype
                .as_deref()
                .is_none_or(|d| dtype_from_str(d) == Some(t.dtype));
            let shape_ok = sig.shape.as_deref().is_none_or(|s| {
                s.len() == t.shape.len() && s.iter().zip(&t.shape).all(|(a, b)| *a == u64::from(*b))
            });
            if !dtype_ok || !shape_ok {
                return Err(err!(
                    Invalid,
                    "Invalid NEFF: neff.json signature of input \"{name}\" disagrees with its subgraphs"
                ));
            }
        }
    }
    let tool_version = match &c.info_json {
        Some(bytes) => json::parse::<json::Info>("info.json", bytes)?.tool_version,
        None => None,
    };
    tensors.sort_by(|a, b| {
        (a.usage as u32, a.name.as_bytes()).cmp(&(b.usage as u32, b.name.as_bytes()))
    });
    Ok(Neff {
        header,
        subgraphs,
        tensors,
        tool_version,
        warnings,
    })
}

mod writer;
pub use writer::{NeffSpec, SubgraphSpec, write};
