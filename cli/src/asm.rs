//! `nrt info --program` and `nrt asm`: a model's simulator programs as text
//! (`nrt_sim::engine::disassemble`), and program texts assembled into a simulator NEFF
//! (`nrt_sim::engine::assemble`). `docs/SIM_ISA.md`, "Program text", is the format.

use std::path::{Path, PathBuf};

use nrt_core::neff::SIM_PROGRAM_MEMBER;
use nrt_sim::engine::{assemble, disassemble};

use crate::backend::{load_model, parse_neff};
use crate::error::{CliError, Context, Result};
use crate::out::{self, Report};

/// Prints the disassembly of every subgraph's program. One program prints exactly what
/// `nrt asm` reads; several are separated by a `# subgraph NAME` comment (assemble each part
/// from its own file).
pub(crate) fn print_programs(path: &Path) -> Result<()> {
    let model = load_model(path)?;
    if model.programs.is_empty() {
        return Err(CliError::new(format!(
            "{}: no simulator program (compiler output: it runs in plumbing mode)",
            path.display()
        )));
    }
    let names: Vec<&str> = model
        .neff
        .subgraphs
        .iter()
        .filter(|sg| sg.member(SIM_PROGRAM_MEMBER).is_some())
        .map(|sg| sg.name.as_str())
        .collect();
    let several = model.programs.len() > 1;
    let mut text = String::new();
    for (i, p) in model.programs.iter().enumerate() {
        if several {
            text.push_str(&format!(
                "{}# subgraph {}\n",
                if i > 0 { "\n" } else { "" },
                names.get(i).copied().unwrap_or("?")
            ));
        }
        text.push_str(&disassemble(p));
    }
    print!("{text}");
    Ok(())
}

/// Assembles each file into a program (one subgraph each, in order) and writes the NEFF.
pub(crate) fn asm(files: &[PathBuf], output: &Path, name: Option<&str>) -> Result<()> {
    let mut programs = Vec::with_capacity(files.len());
    for f in files {
        let text =
            std::fs::read_to_string(f).context(|| format!("cannot read '{}'", f.display()))?;
        let p = assemble(&text)
            .map_err(|e| CliError::new(format!("{}: {}", f.display(), e.message())))?;
        programs.push(p);
    }
    let stem = files
        .first()
        .and_then(|f| f.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "program".to_owned());
    let model_name = match (name, programs.first()) {
        (Some(n), _) => n.to_owned(),
        (None, Some(p)) if !p.name.is_empty() => p.name.clone(),
        _ => stem,
    };
    let neff = nrt_sim::neff::neff_from_programs(&model_name, &programs)
        .map_err(|e| CliError::new(format!("cannot pack the NEFF: {}", e.message())))?;
    std::fs::write(output, &neff).context(|| format!("cannot write '{}'", output.display()))?;
    // Read back as `nrt run` will.
    parse_neff(output, &neff)?;
    let mut r = Report::new();
    r.field(
        "wrote",
        format!(
            "{} ({}): model '{model_name}', {} subgraph{}",
            output.display(),
            out::bytes(neff.len() as u64),
            programs.len(),
            if programs.len() == 1 { "" } else { "s" }
        ),
    );
    for (f, p) in files.iter().zip(&programs) {
        r.field(
            "program",
            format!(
                "{}: '{}', format 1.{}, {} instructions, {} DMA descriptors, {} tensors",
                f.display(),
                p.name,
                p.format_minor(),
                out::int(p.instruction_count() as u64),
                out::int(p.descriptors.len() as u64),
                p.tensors.len()
            ),
        );
    }
    r.print();
    Ok(())
}
