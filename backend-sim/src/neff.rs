//! Simulator programs carried in NEFFs: the program is the member
//! [`SIM_PROGRAM_MEMBER`] of a subgraph directory, and the
//! model's I/O tensors are the program's input and output tensors of the same names (the
//! simulator driver maps each I/O index to its program tensor by that name once, when it stages
//! the subgraph).

use nrt_core::io::{Dtype, TensorUsage};
use nrt_core::neff::{self, NeffSpec, NeffTensor, SIM_PROGRAM_MEMBER, SubgraphSpec};
use nrt_core::{Error, err};

use crate::engine::{DType, Program, TensorKind};

/// The `nrt_dtype_t` of a simulator element type.
pub fn nrt_dtype(d: DType) -> Dtype {
    match d {
        DType::F32 => Dtype::Float32,
        DType::Bf16 => Dtype::Bfloat16,
        DType::F16 => Dtype::Float16,
        DType::I32 => Dtype::Int32,
    }
}

/// A NEFF with one subgraph per program (`programs[i]` runs on physical core `i` of the
/// logical core), whose I/O tensors are the programs' inputs and outputs. Programs of a
/// multi-subgraph NEFF must agree on the I/O tensors they share. The payload is a gzipped tar
/// (package version 2), as the Neuron compiler writes it.
pub fn neff_from_programs(name: &str, programs: &[Program]) -> Result<Vec<u8>, Error> {
    neff_from_programs_packed(name, programs, true)
}

/// [`neff_from_programs`], with the payload gzipped (`gzip`, package version 2) or a plain tar
/// (package version 1, which the NEFF reader takes as well): for a NEFF built in memory only
/// to be loaded at once (`nrt run MODEL.onnx`), where compressing and inflating it again is
/// all cost (ResNet-50's 104 MB program: seconds at deflate level 6).
pub fn neff_from_programs_packed(
    name: &str,
    programs: &[Program],
    gzip: bool,
) -> Result<Vec<u8>, Error> {
    let mut tensors: Vec<NeffTensor> = Vec::new();
    for p in programs {
        for t in &p.tensors {
            let usage = match t.kind {
                TensorKind::Input => TensorUsage::Input,
                TensorKind::Output => TensorUsage::Output,
                _ => continue,
            };
            let shape = t
                .shape
                .iter()
                .map(|&d| {
                    u32::try_from(d).map_err(|_| err!(Invalid, "tensor '{}' is too large", t.name))
                })
                .collect::<Result<Vec<u32>, Error>>()?;
            let nt = NeffTensor {
                name: t.name.clone(),
                usage,
                size: t
                    .size_bytes()
                    .ok_or_else(|| err!(Invalid, "tensor '{}' is too large", t.name))?,
                dtype: nrt_dtype(t.dtype),
                shape,
                var_id: tensors.len() as u64 + 1,
            };
            match tensors.iter().find(|e| e.name == nt.name) {
                Some(e) if e.usage != nt.usage || e.size != nt.size || e.shape != nt.shape => {
                    return Err(err!(Invalid, "programs disagree on tensor '{}'", nt.name));
                }
                Some(_) => {}
                None => tensors.push(nt),
            }
        }
    }
    let lnc_size = u32::try_from(programs.len()).unwrap_or(u32::MAX);
    neff::write(&NeffSpec {
        name: name.into(),
        uuid: [0; 16],
        version: (2, 0),
        feature_bits: nrt_core::neff::NeffFeatures::empty(),
        lnc_size,
        num_tpb: lnc_size,
        gzip,
        subgraphs: programs
            .iter()
            .enumerate()
            .map(|(i, p)| SubgraphSpec {
                name: format!("sg{i:02}"),
                members: vec![(SIM_PROGRAM_MEMBER.into(), p.to_bytes())],
            })
            .collect(),
        tensors,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use crate::engine::kernels;
    use nrt_core::neff::{PKG_GZIP_TAR, PKG_PLAIN_TAR, ParseOptions};

    #[test]
    fn plain_and_gzipped_neffs_carry_the_same_program() {
        let add = kernels::elementwise(kernels::Elementwise::Add, 4, 8, DType::F32).unwrap();
        let progs = [add.clone(), add];
        let gz = neff_from_programs_packed("add", &progs, true).unwrap();
        let plain = neff_from_programs_packed("add", &progs, false).unwrap();
        assert_eq!(gz, neff_from_programs("add", &progs).unwrap());
        let (a, b) = (
            neff::parse(&gz, &ParseOptions::default()).unwrap(),
            neff::parse(&plain, &ParseOptions::default()).unwrap(),
        );
        assert_eq!(a.header.pkg_version, PKG_GZIP_TAR);
        assert_eq!(b.header.pkg_version, PKG_PLAIN_TAR);
        assert_eq!(a.subgraphs, b.subgraphs);
        assert_eq!(a.tensors, b.tensors);
        let prog = progs[0].to_bytes();
        for sg in &b.subgraphs {
            assert_eq!(sg.member(SIM_PROGRAM_MEMBER), Some(prog.as_slice()));
        }
    }
}
