//! Model records built directly (the NEFF and load capabilities fill them from real files).

use nrt_core::model::{Dtype, IoTable, Model, TensorInfo};

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
