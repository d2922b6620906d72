//! The NEFF writer: the same schema the parser reads (header, gzip tar, JSON members) plus any
//! extra subgraph members (such as a simulator program).

use alloc::collections::BTreeSet;
use alloc::string::String;
use alloc::vec::Vec;

use serde_json::{Map, Value, json};

use super::{
    HASH_SCOPE_MARKER, HEADER_SIZE, Header, MAX_SUBGRAPHS, Neff, NeffFeatures, NeffTensor,
    PKG_GZIP_TAR, PKG_PLAIN_TAR, dtype_str, gzip, payload_hash, tar,
};
use crate::error::Result;
use crate::io::TensorUsage;

/// One subgraph to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubgraphSpec {
    /// Name and directory (`sg00`, ...): non-empty, unique, no `/`, not `.` or `..`.
    pub name: String,
    /// Extra members of the subgraph directory: (path relative to it, bytes); no path
    /// component may be empty, `.` or `..`. `def.json` and `tensor_map.json` are generated.
    pub members: Vec<(String, Vec<u8>)>,
}

/// Everything a NEFF written by [`write()`] describes; [`Neff::to_spec`] gives it back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeffSpec {
    /// NEFF name (at most 255 bytes).
    pub name: String,
    /// UUID.
    pub uuid: [u8; 16],
    /// (major, minor) NEFF version.
    pub version: (u64, u64),
    /// Feature bits.
    pub feature_bits: NeffFeatures,
    /// Logical core size.
    pub lnc_size: u32,
    /// TPBs required.
    pub num_tpb: u32,
    /// Compress the tar (`pkg_version` 2) or not (`pkg_version` 1).
    pub gzip: bool,
    /// Subgraphs; every subgraph declares every I/O tensor.
    pub subgraphs: Vec<SubgraphSpec>,
    /// I/O tensors (written to every subgraph's `def.json` and `tensor_map.json`).
    pub tensors: Vec<NeffTensor>,
}

impl Neff {
    /// The spec that [`write()`] would turn back into this NEFF (kept members only).
    pub fn to_spec(&self) -> NeffSpec {
        NeffSpec {
            name: self.header.name.clone(),
            uuid: self.header.uuid,
            version: (self.header.version_major, self.header.version_minor),
            feature_bits: self.header.feature_bits,
            lnc_size: self.header.lnc_size,
            num_tpb: self.header.num_tpb,
            gzip: self.header.pkg_version == PKG_GZIP_TAR,
            subgraphs: self
                .subgraphs
                .iter()
                .map(|s| SubgraphSpec {
                    name: s.name.clone(),
                    members: s
                        .members
                        .iter()
                        // The writer generates these two from the tensors.
                        .filter(|m| m.name != "def.json" && m.name != "tensor_map.json")
                        .filter_map(|m| m.data.as_ref().map(|d| (m.name.clone(), d.clone())))
                        .collect(),
                })
                .collect(),
            tensors: self.tensors.clone(),
        }
    }
}

fn to_vec(v: &Value) -> Vec<u8> {
    // Serialising a `Value` cannot fail.
    serde_json::to_vec_pretty(v).unwrap_or_default()
}

/// A subgraph or member name becomes one component of a tar path: it must be non-empty, hold
/// no `/`, and not be `.` or `..` (tar readers normalise those away).
fn check_path_component(what: &str, name: &str) -> Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(err!(Invalid, "cannot write a {what} named \"{name}\""));
    }
    Ok(())
}

/// Writes `spec` as a NEFF file.
pub fn write(spec: &NeffSpec) -> Result<Vec<u8>> {
    if spec.subgraphs.is_empty() || spec.subgraphs.len() > MAX_SUBGRAPHS {
        return Err(err!(
            Invalid,
            "cannot write a NEFF with {} subgraphs (1 to {MAX_SUBGRAPHS})",
            spec.subgraphs.len()
        ));
    }
    if spec.name.len() > 255 {
        return Err(err!(
            Invalid,
            "cannot write a NEFF name of {} bytes (at most 255)",
            spec.name.len()
        ));
    }
    let mut seen = BTreeSet::new();
    for s in &spec.subgraphs {
        check_path_component("subgraph", &s.name)?;
        if !seen.insert(s.name.as_str()) {
            return Err(err!(Invalid, "cannot write subgraph \"{}\" twice", s.name));
        }
        for (name, _) in &s.members {
            // A member may sit in a subdirectory of the subgraph's directory.
            for part in name.split('/') {
                check_path_component("member", part).map_err(|_| {
                    err!(
                        Invalid,
                        "cannot write a member named \"{name}\" in subgraph \"{}\"",
                        s.name
                    )
                })?;
            }
        }
    }
    let mut seen = BTreeSet::new();
    for t in &spec.tensors {
        if !seen.insert(t.name.as_str()) {
            return Err(err!(Invalid, "cannot write tensor \"{}\" twice", t.name));
        }
    }
    let mut tar_bytes = Vec::new();
    let graphs: Vec<Value> = spec
        .subgraphs
        .iter()
        .map(|s| json!({"definition": alloc::format!("{}/def.json", s.name), "name": s.name}))
        .collect();
    tar::write_member(
        &mut tar_bytes,
        "kelf-0.json",
        &to_vec(&json!({"graphs": graphs, "version": "0.5", "target": "nrt-sim"})),
    )?;
    let mut var = Map::new();
    let mut tensor_map = Map::new();
    let mut signature_inputs = Map::new();
    for t in &spec.tensors {
        let kind = match t.usage {
            TensorUsage::Input => "input",
            TensorUsage::Output => "output",
        };
        var.insert(
            t.name.clone(),
            json!({"type": kind, "size": t.size, "var_id": t.var_id}),
        );
        tensor_map.insert(
            t.name.clone(),
            json!({
                "kind": kind,
                "dtype": dtype_str(t.dtype),
                "is_const": false,
                "tf_shape": t.shape,
                "sim_shape": t.shape,
                "layer_name": t.name,
            }),
        );
        if t.usage == TensorUsage::Input {
            signature_inputs.insert(
                t.name.clone(),
                json!({"dtype": dtype_str(t.dtype), "shape": t.shape}),
            );
        }
    }
    let def = to_vec(&json!({"var": var}));
    let tm = to_vec(&Value::Object(tensor_map));
    for s in &spec.subgraphs {
        tar::write_member(&mut tar_bytes, &alloc::format!("{}/def.json", s.name), &def)?;
        tar::write_member(
            &mut tar_bytes,
            &alloc::format!("{}/tensor_map.json", s.name),
            &tm,
        )?;
        for (name, data) in &s.members {
            if name == "def.json" || name == "tensor_map.json" {
                continue;
            }
            tar::write_member(&mut tar_bytes, &alloc::format!("{}/{name}", s.name), data)?;
        }
    }
    tar::write_member(
        &mut tar_bytes,
        "neff.json",
        &to_vec(
            &json!({"metadata": {"signatures": {"default": {"inputs": signature_inputs, "outputs": {}}}}}),
        ),
    )?;
    let tool = crate::version::IMPLEMENTATION;
    tar::write_member(
        &mut tar_bytes,
        "info.json",
        &to_vec(&json!({"tool_version": tool, "name": spec.name, "num_tpb": spec.num_tpb})),
    )?;
    tar::write_end(&mut tar_bytes);

    let (pkg_version, payload) = if spec.gzip {
        (PKG_GZIP_TAR, gzip::compress(&tar_bytes))
    } else {
        (PKG_PLAIN_TAR, tar_bytes)
    };
    let mut tpb_per_node = [0u8; 64];
    tpb_per_node[0] = u8::try_from(spec.num_tpb).unwrap_or(u8::MAX);
    let header = Header {
        pkg_version,
        data_size: payload.len() as u64,
        version_major: spec.version.0,
        version_minor: spec.version.1,
        build_version: alloc::format!("{tool};{HASH_SCOPE_MARKER}"),
        num_tpb: spec.num_tpb,
        hash: payload_hash(pkg_version, &payload),
        uuid: spec.uuid,
        name: spec.name.clone(),
        requested_tpb_count: spec.num_tpb,
        tpb_per_node,
        feature_bits: spec.feature_bits,
        lnc_size: spec.lnc_size,
    };
    let mut out = Vec::with_capacity(HEADER_SIZE + payload.len());
    out.extend_from_slice(&header.encode());
    out.extend_from_slice(&payload);
    Ok(out)
}
