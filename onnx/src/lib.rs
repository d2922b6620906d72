//! ONNX import for nrt-rs: parse a model ([`import`]), infer its shapes and fold its
//! constants for given input shapes, and lower every remaining node to `nrt-kernel` library
//! calls in one kernel ([`compile`]), whose program runs on the simulator. See
//! docs/ONNX.md for the supported operators and how the pieces fit.

mod analyze;
mod error;
mod fold;
mod graph;
mod ir;
mod lower;
mod lower_ctx;
mod lower_ops;
mod ops;
mod ops_conv;
mod ops_nn;
mod plan;
pub mod proto;
mod tensor;
mod timing;

use std::collections::HashMap;

pub use error::{Error, Result, SUPPORTED_LIST};
pub use graph::{Attr, Dim, Model, Node, ValueDecl, import};
pub use lower::{Io, Lowered, NodeInfo, Precision};
pub use tensor::{Data, Elem, HostTensor};
pub use timing::{MARKED, NodeTime, attribute};

/// Compiles `model` for the given input shapes (name → shape; inputs not named take their
/// declared, fixed shapes) into one kernel program.
pub fn compile(
    model: &Model,
    shapes: &HashMap<String, Vec<usize>>,
    precision: Precision,
) -> Result<Lowered> {
    compile_bound(model, shapes, &HashMap::new(), precision)
}

/// [`compile`] with some graph inputs bound to values at build time (integer inputs such as
/// shapes, axes and indices: the program is specialised to them and does not take them).
pub fn compile_bound(
    model: &Model,
    shapes: &HashMap<String, Vec<usize>>,
    bound: &HashMap<String, HostTensor>,
    precision: Precision,
) -> Result<Lowered> {
    let an = analyze::analyze(model, shapes, bound)?;
    lower::lower(model, &an, precision)
}

/// Imports and compiles model bytes (what a fuzzer drives): never panics.
pub fn import_and_compile(bytes: &[u8], precision: Precision) -> Result<Lowered> {
    let m = import(bytes)?;
    compile(&m, &HashMap::new(), precision)
}
