//! ONNX import for nrt-rs: parse a model ([`import`]), infer its shapes and fold its
//! constants for given input shapes, and lower every remaining node to `nrt-kernel` library
//! calls in one kernel ([`compile`]), whose program runs on the simulator. See
//! docs/ONNX.md for the supported operators and how the pieces fit.

mod analyze;
mod error;
mod fold;
mod fuse;
mod graph;
mod ir;
mod lower;
mod lower_ctx;
mod lower_ops;
mod ops;
mod ops_binary;
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
pub use lower_ctx::io_dtype;
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
    compile_values(model, shapes, bound, &HashMap::new(), precision)
}

/// [`compile_bound`] with the values of some float graph inputs known at build time
/// (`values`; their shapes count as given): each one an operator needs as a constant (a
/// convolution's weights, a Gemm's C, Clip's bounds, ...) is bound to its value — the program
/// is specialised to it and does not take it ([`Lowered::bound`] lists them) — the others stay
/// run-time inputs. At most one analysis per input bound.
pub fn compile_values(
    model: &Model,
    shapes: &HashMap<String, Vec<usize>>,
    bound: &HashMap<String, HostTensor>,
    values: &HashMap<String, HostTensor>,
    precision: Precision,
) -> Result<Lowered> {
    let mut shapes = shapes.clone();
    for (name, t) in values {
        shapes.insert(name.clone(), t.shape.clone());
    }
    let mut bound = bound.clone();
    let mut late = Vec::new();
    loop {
        let bindable = |n: &str| values.contains_key(n) && !bound.contains_key(n);
        match analyze::analyze(model, &shapes, &bound, &bindable)? {
            analyze::Analyzed::Done(an) => {
                let mut lw = lower::lower(model, &an, precision)?;
                // Inputs with no elements are empty constants: bound too.
                for d in &model.inputs {
                    if !bound.contains_key(&d.name) && !lw.inputs.iter().any(|i| i.name == d.name) {
                        late.push(d.name.clone());
                    }
                }
                lw.bound = late;
                return Ok(lw);
            }
            analyze::Analyzed::Bind(name) => {
                let Some(t) = values.get(&name) else {
                    return Err(Error::Invalid(format!("input '{name}' has no value")));
                };
                shapes.remove(&name);
                bound.insert(name.clone(), t.clone());
                late.push(name);
            }
        }
    }
}

/// Imports and compiles model bytes (what a fuzzer drives): never panics.
pub fn import_and_compile(bytes: &[u8], precision: Precision) -> Result<Lowered> {
    let m = import(bytes)?;
    compile(&m, &HashMap::new(), precision)
}
