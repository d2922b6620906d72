//! Model records built directly (the NEFF and load capabilities fill them from real files).

use nrt_core::io::{Dtype, IoTable, TensorInfo, TensorUsage};
use nrt_core::model::Model;
use nrt_core::neff::{self, NeffSpec, NeffTensor, SubgraphSpec};

/// A tensor description.
pub fn tensor(name: &str, dtype: Dtype, shape: &[u32]) -> TensorInfo {
    let elems: u64 = shape.iter().map(|&d| u64::from(d)).product();
    TensorInfo {
        name: name.to_string(),
        size: elems * u64::from(dtype.size()),
        dtype,
        shape: shape.to_vec(),
    }
}

/// The I/O of the compiler fixture `matmul_small.neff`: inputs `x` [128,256] and `y` [256,128]
/// float16, output `output0` [128,128] float16.
pub fn matmul_io() -> IoTable {
    IoTable::new(
        vec![
            tensor("y", Dtype::Float16, &[256, 128]),
            tensor("x", Dtype::Float16, &[128, 256]),
        ],
        vec![tensor("output0", Dtype::Float16, &[128, 128])],
    )
    .unwrap()
}

/// A READY model called `name` on logical core `vnc` with the matmul I/O and nothing staged.
pub fn model(name: &str, vnc: u32) -> Model {
    Model::new(name.to_string(), vnc, matmul_io(), Vec::new())
}

/// A one-subgraph NEFF with no program and a 64-byte fp32 input `in` and output `out`: the
/// simulator completes it at once without computing (used by the execute benchmark and the
/// zero-allocation test).
pub fn empty_neff() -> Vec<u8> {
    neff::write(&NeffSpec {
        name: "empty".into(),
        uuid: [0; 16],
        version: (2, 0),
        feature_bits: 0,
        lnc_size: 1,
        num_tpb: 1,
        gzip: true,
        subgraphs: vec![SubgraphSpec {
            name: "sg00".into(),
            members: vec![],
        }],
        tensors: vec![
            NeffTensor {
                name: "in".into(),
                usage: TensorUsage::Input,
                size: 64,
                dtype: Dtype::Float32,
                shape: vec![16],
                var_id: 1,
            },
            NeffTensor {
                name: "out".into(),
                usage: TensorUsage::Output,
                size: 64,
                dtype: Dtype::Float32,
                shape: vec![16],
                var_id: 2,
            },
        ],
    })
    .expect("the writer accepts this spec")
}
