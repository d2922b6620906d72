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
/// multi-subgraph NEFF must agree on the I/O tensors they share.
pub fn neff_from_programs(name: &str, programs: &[Program]) -> Result<Vec<u8>, Error> {
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
        gzip: true,
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
