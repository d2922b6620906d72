//! Complete kernels built on the operations: tiled matmul, transpose, softmax, layernorm /
//! rmsnorm, element-wise activations and tensor copies, broadcasting element-wise operations,
//! reductions, scaled-dot-product attention, convolutions, pooling, channel normalisations,
//! data movement — every operator the ONNX importer lowers (docs/KERNELS.md).
//!
//! # One shape for every kernel
//!
//! Each module has an *emitter* and a *builder*:
//!
//! * `fn name(k: &mut Kernel, out: &View, inputs: &View…, opts…) -> Result<(), Error>` adds
//!   the kernel's operations to `k`. Every operand is a view of an HBM tensor of `k` (an
//!   input, constant, scratch or output tensor, or a slice of one); `out` must be writable
//!   (output or scratch). The emitter allocates its SBUF/PSUM tiles inside a
//!   [`Kernel::scope`](crate::Kernel::scope), so everything it allocated is freed when it
//!   returns and several emitters can be chained in one kernel (through scratch tensors).
//!   Synchronisation with what the kernel did before and does after is automatic.
//! * `fn build(…) -> Result<Program, Error>` is the convenience form: a fresh kernel with
//!   input tensors and one output tensor named as the builder documents, the emitter, and
//!   [`Kernel::build`](crate::Kernel::build). (`attention`, `conv` and `pool` name theirs
//!   `build_attention`, `build_conv2d`, `build_pool2d`; `activation` has `build` and
//!   `build_copy`.)
//!
//! Misuse (an operand not in HBM, mismatched shapes or dtypes, a size the kernel does not
//! support) is an `NRT_INVALID` error naming the kernel and the operand; running out of
//! on-chip memory is the allocator's `NRT_RESOURCE` error. Nothing is recorded by a call
//! that fails before its first operation; a call that fails later leaves the operations it
//! recorded (as any sequence of operations would).
//!
//! Numerics are those of the instructions (docs/SIM_ISA.md): each module documents its
//! order of operations, which makes the results bit-reproducible; the tests check them bit
//! for bit against plain references of that order where every step is an IEEE operation,
//! and within a stated bound of binary64 references otherwise.
//!
//! # Example
//!
//! `y = softmax(x · w)` in one kernel, the matmul's result in a scratch tensor:
//!
//! ```
//! use nrt_kernel::library::{matmul, softmax};
//! use nrt_kernel::{DType, Kernel};
//! use nrt_sim::Instance;
//! use nrt_sim::engine::{Device, ExecOptions, decode_f32, encode_f32};
//!
//! let mut k = Kernel::new("scores");
//! let x = k.input("x", DType::Bf16, &[3, 40])?;
//! let w = k.input("w", DType::Bf16, &[40, 5])?;
//! let h = k.scratch("h", DType::F32, &[3, 5])?;
//! let y = k.output("y", DType::F32, &[3, 5])?;
//! matmul::matmul(&mut k, &h, &x, &w, &matmul::MatmulOpts::default())?;
//! softmax::softmax(&mut k, &y, &h)?;
//! let program = k.build()?;
//!
//! let dev = Device::new(Instance::Trn1);
//! let lp = dev.load(0, program)?;
//! let xv = encode_f32(DType::Bf16, &[0.25; 3 * 40]);
//! let wv = encode_f32(DType::Bf16, &[0.5; 40 * 5]);
//! let (outs, report) = dev.run(&lp, &[("x", &xv[..]), ("w", &wv[..])], &ExecOptions::default())?;
//! assert!(report.hazards.is_empty());
//! let probs = decode_f32(DType::F32, &outs[0].1);
//! assert!(probs.iter().all(|&p| p == 0.2)); // equal scores: a uniform distribution
//! # Ok::<(), nrt_core::Error>(())
//! ```
//!
//! # Modules
//!
//! Each module is independent; `util` holds the shared checks and tiling helpers, `nary` the
//! any-rank broadcasting tiler of the element-wise kernels. docs/KERNELS.md ("The kernel
//! library and the ONNX operators") maps every ONNX operator the importer supports to its
//! emitter.
//!
//! * [`attention`] — scaled-dot-product attention, one head or several, optionally causal;
//! * [`conv`] — 2-D and 1-D convolution (NCHW, OIHW; stride, padding, dilation, groups,
//!   bias); [`conv_transpose`] — transposed convolution, [`conv_transpose3d`] its 3-D form;
//! * [`pool`] — 2-D and 1-D max and average pooling (dilations, `ceil_mode`), global pools;
//!   [`pool3d`] — 3-D pooling;
//! * [`activation`] — element-wise activation functions (`f(x·scale + bias)`, every
//!   [`ActFn`](crate::ActFn)) and copies (casting when the dtypes differ) of tensors of any
//!   rank;
//! * [`pointwise`] — ONNX's composite element-wise operators (Neg, Sign, LeakyRelu, Elu,
//!   Selu, HardSigmoid, Clip, Shrink, …), PRelu, Where, variadic Sum / Max / Min / Mean,
//!   any-rank binary operations, Cast;
//! * [`matmul`], [`gemm`] (batched NumPy matmul, Gemm), [`transpose`], [`softmax`] (any
//!   axis, log-softmax), [`norm`] (layernorm, rmsnorm), [`chnorm`] (BatchNormalization,
//!   InstanceNormalization, LayerNormalization over any axes), [`lrn`], [`elementwise`]
//!   (broadcasting binary operations), [`reduce`] (axis reductions, several axes at once);
//! * [`data`] — transpose of any rank, concat, split, slice, pad, tile, expand, gather with
//!   constant indices; [`gather`] — gather with run-time indices.

pub mod activation;
pub mod attention;
pub mod chnorm;
pub mod conv;
pub mod conv_transpose;
pub mod conv_transpose3d;
mod conv_weights;
pub mod data;
pub mod elementwise;
pub mod gather;
pub mod gemm;
pub mod lrn;
pub mod matmul;
pub(crate) mod nary;
pub mod norm;
pub mod pointwise;
pub mod pool;
pub mod pool3d;
pub mod reduce;
pub mod softmax;
pub mod transpose;
pub(crate) mod util;
