//! `nrt info`: a NEFF's header, subgraphs and I/O tensors.

use std::path::Path;

use nrt_core::io::TensorUsage;
use nrt_core::neff::{HASH_SCOPE_MARKER, NeffFeatures, PKG_GZIP_TAR, PKG_PLAIN_TAR};
use nrt_sim::engine::{EngineId, TensorKind};

use crate::backend::{Source, load_model};
use crate::error::Result;
use crate::out::{self, Report};
use crate::tensors::{dtype_name, shape_str};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub(crate) fn info(path: &Path) -> Result<()> {
    let model = load_model(path)?;
    let n = &model.neff;
    let h = &n.header;
    let mut r = Report::new();
    let file = match &model.source {
        Source::Neff => format!(
            "{} ({})",
            path.display(),
            out::bytes(model.bytes.len() as u64)
        ),
        Source::Spec { kernel, .. } => format!(
            "{} (a spec, built in memory: {kernel}; NEFF {})",
            path.display(),
            out::bytes(model.bytes.len() as u64)
        ),
    };
    r.field("file", file);
    r.field("name", n.name());
    let pkg = match h.pkg_version {
        PKG_GZIP_TAR => "gzip-compressed tar",
        PKG_PLAIN_TAR => "plain tar",
        _ => "unknown packaging",
    };
    r.field(
        "version",
        format!(
            "NEFF {}.{}; package version {} ({pkg}), payload {}",
            h.version_major,
            h.version_minor,
            h.pkg_version,
            out::bytes(h.data_size)
        ),
    );
    r.field(
        "build",
        if h.build_version.is_empty() {
            "-".to_owned()
        } else {
            format!("{:?}", h.build_version)
        },
    );
    r.field("tool", n.tool_version.as_deref().unwrap_or("-"));
    r.field("uuid", hex(&h.uuid));
    let hash = if h.pkg_version == PKG_GZIP_TAR {
        format!("md5 {}", hex(h.hash.get(..16).unwrap_or(&[])))
    } else {
        format!("sha256 {}", hex(&h.hash))
    };
    let scope = if h.build_version.contains(HASH_SCOPE_MARKER) {
        "covers the payload"
    } else {
        "scope undocumented (compiler NEFF): not checked"
    };
    r.field("hash", format!("{hash} ({scope})"));
    r.field(
        "cores",
        format!(
            "logical core size {}, TPBs {} (requested {})",
            h.lnc_size, h.num_tpb, h.requested_tpb_count
        ),
    );
    let unknown = h.feature_bits.difference(NeffFeatures::TESTED).bits();
    r.field(
        "features",
        format!(
            "{:#x}{}",
            h.feature_bits.bits(),
            if unknown != 0 {
                format!(" (bits {unknown:#x} not seen in tested compiler output)")
            } else {
                String::new()
            }
        ),
    );
    r.field(
        "simulator",
        if model.is_plumbing() {
            "no program: compiler output. On the simulator it runs in plumbing mode — \
             outputs zero-filled, nothing computed"
                .to_owned()
        } else {
            format!(
                "program in every subgraph ({}): runs on the cycle-level simulator",
                n.subgraphs.len()
            )
        },
    );
    for w in &n.warnings {
        r.field("warning", w);
    }

    r.line("");
    r.line(format!("subgraphs ({})", n.subgraphs.len()));
    let mut programs = model.programs.iter();
    let rows: Vec<Vec<String>> = n
        .subgraphs
        .iter()
        .map(|sg| {
            let bytes: u64 = sg.members.iter().map(|m| m.size).sum();
            let prog = if sg.member(nrt_core::neff::SIM_PROGRAM_MEMBER).is_some() {
                programs.next().map_or("-".to_owned(), |p| {
                    let instrs: Vec<String> = EngineId::ALL
                        .iter()
                        .map(|&e| format!("{} {}", e.name(), p.stream(e).len()))
                        .collect();
                    let consts = p
                        .tensors
                        .iter()
                        .filter(|t| t.kind == TensorKind::Const)
                        .count();
                    format!(
                        "'{}': {} tensors ({consts} const), {} DMA descriptors, instructions: {}",
                        p.name,
                        p.tensors.len(),
                        out::int(p.descriptors.len() as u64),
                        instrs.join(", ")
                    )
                })
            } else {
                "none".to_owned()
            };
            vec![
                sg.name.clone(),
                out::int(sg.members.len() as u64),
                out::bytes(bytes),
                prog,
            ]
        })
        .collect();
    r.table(
        "  ",
        &["name", "members", "size", "simulator program"],
        &rows,
        "lrrl",
    );

    r.line("");
    r.line("I/O tensors");
    let mut rows = Vec::new();
    for usage in [TensorUsage::Input, TensorUsage::Output] {
        for t in model.tensors(usage) {
            rows.push(vec![
                t.name.clone(),
                usage.as_str().to_owned(),
                dtype_name(t.dtype).to_owned(),
                shape_str(&t.shape),
                out::int(t.size),
            ]);
        }
    }
    r.table(
        "  ",
        &["name", "direction", "dtype", "shape", "bytes"],
        &rows,
        "llllr",
    );
    r.print();
    Ok(())
}
