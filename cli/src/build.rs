//! `nrt build`: compile a spec into a simulator NEFF (and optionally its sample inputs).

use std::path::Path;

use nrt_core::io::TensorUsage;

use crate::backend::parse_neff;
use crate::error::{CliError, Context, Result};
use crate::npy;
use crate::out::{self, Report};
use crate::spec;
use crate::tensors::{self, dtype_name, shape_str};

pub(crate) fn build(spec_path: &Path, output: &Path, inputs_dir: Option<&Path>) -> Result<()> {
    let (spec, built) = spec::build_file(spec_path)?;
    std::fs::write(output, &built.neff)
        .context(|| format!("cannot write '{}'", output.display()))?;
    let (neff, _) = parse_neff(output, &built.neff)?;
    let mut r = Report::new();
    r.field(
        "wrote",
        format!(
            "{} ({}): model '{}', {}",
            output.display(),
            out::bytes(built.neff.len() as u64),
            spec.name,
            built.kernel
        ),
    );
    let p = &built.program;
    let instrs: usize = p.streams.iter().map(Vec::len).sum();
    r.field(
        "program",
        format!(
            "{} instructions over 5 engines, {} DMA descriptors, {} tensors (simulator ISA, \
             docs/SIM_ISA.md)",
            out::int(instrs as u64),
            out::int(p.descriptors.len() as u64),
            p.tensors.len()
        ),
    );
    if let Some(d) = &spec.description {
        r.field("about", d.trim());
    }
    let io: Vec<Vec<String>> = [TensorUsage::Input, TensorUsage::Output]
        .iter()
        .flat_map(|&u| {
            neff.tensors_of(u)
                .map(move |t| {
                    vec![
                        t.name.clone(),
                        u.as_str().to_owned(),
                        dtype_name(t.dtype).to_owned(),
                        shape_str(&t.shape),
                    ]
                })
                .collect::<Vec<_>>()
        })
        .collect();
    r.line("I/O tensors");
    r.table("  ", &["name", "direction", "dtype", "shape"], &io, "llll");
    if !built.weights.is_empty() {
        let w: Vec<String> = built
            .weights
            .iter()
            .map(|(n, d, s)| format!("{n} {d} {}", shape_str(s)))
            .collect();
        r.field("weights", format!("baked in: {}", w.join(", ")));
    }
    if let Some(dir) = inputs_dir {
        std::fs::create_dir_all(dir).context(|| format!("cannot create '{}'", dir.display()))?;
        let mut written = Vec::new();
        for t in neff.tensors_of(TensorUsage::Input) {
            let Some(bytes) = built.sample_inputs.get(&t.name) else {
                continue;
            };
            let info = nrt_core::io::TensorInfo {
                name: t.name.clone(),
                size: t.size,
                dtype: t.dtype,
                shape: t.shape.clone(),
            };
            let path = dir.join(format!("{}.npy", t.name));
            let data = npy::to_bytes(&tensors::to_npy(&info, bytes)).map_err(CliError::new)?;
            std::fs::write(&path, data).context(|| format!("cannot write '{}'", path.display()))?;
            written.push(format!("--input {}={}", t.name, path.display()));
        }
        if written.is_empty() {
            r.field(
                "inputs",
                "the spec gives no sample inputs (no seed or file)",
            );
        } else {
            r.field(
                "inputs",
                format!(
                    "written; run with: nrt run {} {}",
                    output.display(),
                    written.join(" ")
                ),
            );
        }
    }
    r.print();
    Ok(())
}
