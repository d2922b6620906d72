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
        feature_bits: nrt_core::neff::NeffFeatures::empty(),
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

/// The name [`plumbing_matmul_neff`] writes in its header.
pub const PLUMBING_MATMUL_NAME: &str = "plumbing_matmul";

/// A NEFF built by the project's writer with the shape of the compiler fixture
/// `../shared/fixtures/neff/matmul_small.neff`, for tests that need *a* compiler-like NEFF
/// rather than that file (which a fresh clone does not have):
///
/// * two subgraphs `sg00` and `sg01`, so it loads only on a logical core of two physical cores
///   (trn2) and stages one subgraph per physical core;
/// * no simulator program: it loads in plumbing mode and its executions zero-fill the outputs;
/// * the fixture's header figures: NEFF version 2.0, logical core size 2, one TPB, feature
///   bits `0x209c00`, gzip-compressed payload;
/// * the fixture's I/O (same names, var ids, dtypes, shapes, sizes): inputs `x` fp16
///   [128, 256] and `y` fp16 [256, 128], 65,536 bytes each, output `output0` fp16 [128, 128],
///   32,768 bytes.
///
/// What only the compiler output has is not mirrored: its name (this one is
/// [`PLUMBING_MATMUL_NAME`], not `file.neff`), UUID, tool version, the 32 compiler members
/// per subgraph, and a header hash of undocumented scope (this one's hash validates).
pub fn plumbing_matmul_neff() -> Vec<u8> {
    let tensor = |name: &str, usage, shape: &[u32], var_id| {
        let t = tensor(name, Dtype::Float16, shape);
        NeffTensor {
            name: t.name,
            usage,
            size: t.size,
            dtype: t.dtype,
            shape: t.shape,
            var_id,
        }
    };
    neff::write(&NeffSpec {
        name: PLUMBING_MATMUL_NAME.into(),
        uuid: *b"nrt-rs plumbing!",
        version: (2, 0),
        feature_bits: nrt_core::neff::NeffFeatures::TESTED,
        lnc_size: 2,
        num_tpb: 1,
        gzip: true,
        subgraphs: ["sg00", "sg01"]
            .map(|name| SubgraphSpec {
                name: name.into(),
                members: vec![],
            })
            .into(),
        tensors: vec![
            tensor("x", TensorUsage::Input, &[128, 256], 1),
            tensor("y", TensorUsage::Input, &[256, 128], 2),
            tensor("output0", TensorUsage::Output, &[128, 128], 3),
        ],
    })
    .expect("the writer accepts this spec")
}
