//! `nrt-kernel`: write NeuronCore simulator kernels at the tile level, the way NKI does, and
//! build them into an engine [`Program`] (which `nrt_sim::neff::neff_from_programs` packs
//! into a NEFF the runtime loads and executes).
//!
//! * **Tensors and tiles.** A [`Kernel`] declares HBM tensors ([`Kernel::input`],
//!   [`Kernel::output`], [`Kernel::constant`], [`Kernel::scratch`]) and allocates SBUF and
//!   PSUM tiles ([`Kernel::sbuf_tile`], [`Kernel::psum_tile`], [`Kernel::tile_at`] for an
//!   explicit [`Placement`]). A tile's first dimension is its partition dimension (≤ 128),
//!   the rest are free dimensions in each partition. Both dereference to a [`View`]; views
//!   are narrowed with `slice`, `slice_step`, `select`, `reshape`, `permute`, `broadcast`.
//! * **Operations** named and behaving like `nki.isa` — [`Kernel::dma_copy`],
//!   [`Kernel::tensor_copy`], [`Kernel::memset`], [`Kernel::iota`], [`Kernel::nc_matmul`],
//!   [`Kernel::tensor_tensor`], [`Kernel::tensor_scalar`], [`Kernel::activation`] — run on
//!   the engine NKI assigns them (VectorE, ScalarE for `activation`, GpSimdE for the fills,
//!   TensorE for matmuls, DMA queues for copies). [`Kernel::emit`] takes the operation
//!   structs ([`TensorTensor`], [`DmaCopy`], ...), whose `engine` field overrides the engine
//!   where NKI has an `engine=` argument. Operations are recorded in program order.
//! * **Synchronisation is automatic.** The kernel tracks what every operation reads and
//!   writes (by the engine hazard detector's footprints) and emits the semaphore waits, the
//!   signals and the DMA triggers that order every read-after-write, write-after-read and
//!   write-after-write between engines and DMA queues, and nothing an engine's or a queue's
//!   own order already guarantees. Each agent (engine or DMA queue) that others wait for
//!   counts its completed operations on its own semaphore; a wait is "counter ≥ n". Programs
//!   built this way run with an empty [`ExecReport::hazards`](nrt_sim::engine::ExecReport).
//! * **Allocation is automatic.** Tiles are placed first fit (quadrant-aware in partitions,
//!   64-byte aligned; PSUM tiles never cross a 2 KiB bank unless they span whole banks),
//!   freed with [`Kernel::free`] or at the end of a [`Kernel::scope`]; running out is an
//!   `NRT_RESOURCE` error naming the tile and the space left. Semaphores are assigned at
//!   [`Kernel::build`].
//! * **Loops are automatic.** Kernels are written with Rust loops and recorded unrolled;
//!   [`Kernel::build`] then *rerolls* the program ([`nrt_sim::engine::reroll`]): a block of
//!   instructions repeated with access-pattern offsets and partitions, semaphore values and
//!   DMA offsets that change by a constant step per repetition becomes one loop body with
//!   dynamic terms (nested when the loops themselves repeat, up to 4 deep), and the DMA
//!   descriptors of repeated transfers are shared. The instruction and descriptor counts
//!   become those of the loop bodies (`library::softmax` over 4096 rows: 2,337 → 209
//!   instructions, 8,192 → 640 descriptors, the same 209 from 1,024 rows up); the program
//!   executes exactly the same instructions (bit-identical outputs, the same hazards — none),
//!   plus the loop instructions' sequencer ticks (`kernel/tests/reroll.rs` measures −13 to
//!   +59 ticks on the library kernels; docs/SIM_ISA.md, "Rerolling").
//!   [`Kernel::build_unrolled`] builds without rerolling.
//! * **Explicit loops scale.** Rerolling needs the whole recording, so build time grows with
//!   the iteration space. [`Kernel::for_range`] (NKI's `affine_range`) records a loop body
//!   once for all its iterations and emits it as a program loop (nested up to 4 deep): the
//!   body's addresses may be affine in the index, nothing else may depend on it, and its
//!   synchronisation is planned once for every iteration (zero hazards, the same outputs bit
//!   for bit as the Rust-loop kernel). `library::matmul` uses it: 8192³ bf16 builds in
//!   20–45 ms.
//!
//! * **A kernel library**: [`library`] builds complete kernels on these operations — tiled
//!   matmul, transpose, row softmax, layernorm and rmsnorm, broadcasting element-wise binary
//!   operations, axis reductions — each an emitter into a [`Kernel`] given HBM tensor views,
//!   with a convenience builder.
//!
//! Every misuse — a shape, dtype, space or bounds error, a freed tile, a view of another
//! kernel — is an `nrt_core::Error` (`NRT_INVALID`) whose message names the operation and
//! the tensor or tile; nothing panics on API input, and a failed operation records nothing.
//!
//! # Example
//!
//! `out = relu(a + b) · 0.5` over a `[256, 64]` tensor, 128 rows per tile:
//!
//! ```
//! use nrt_kernel::{ActBias, ActFunc, AluOp, DType, Kernel};
//! use nrt_sim::Instance;
//! use nrt_sim::engine::{Device, ExecOptions, decode_f32, encode_f32};
//!
//! let mut k = Kernel::new("add_relu_scale");
//! let a = k.input("a", DType::F32, &[256, 64])?;
//! let b = k.input("b", DType::F32, &[256, 64])?;
//! let out = k.output("out", DType::F32, &[256, 64])?;
//! for t in 0..2 {
//!     let rows = t * 128..(t + 1) * 128;
//!     k.scope(|k| {
//!         let ta = k.sbuf_tile("ta", DType::F32, &[128, 64])?;
//!         let tb = k.sbuf_tile("tb", DType::F32, &[128, 64])?;
//!         k.dma_copy(&ta, &a.slice(0, rows.clone())?)?;
//!         k.dma_copy(&tb, &b.slice(0, rows.clone())?)?;
//!         k.tensor_tensor(&ta, &ta, &tb, AluOp::Add)?; // VectorE
//!         k.activation(&tb, ActFunc::Relu, &ta, ActBias::None, 1.0)?; // ScalarE
//!         k.tensor_scalar(&ta, &tb, AluOp::Mul, 0.5)?; // VectorE
//!         k.dma_copy(&out.slice(0, rows.clone())?, &ta) // triggered by VectorE
//!     })?;
//! }
//! let program = k.build()?;
//!
//! let dev = Device::new(Instance::Trn1);
//! let lp = dev.load(0, program)?;
//! let av: Vec<f32> = (0..256 * 64).map(|i| (i % 7) as f32 - 3.0).collect();
//! let bv: Vec<f32> = (0..256 * 64).map(|i| (i % 5) as f32).collect();
//! let inputs = [
//!     ("a", encode_f32(DType::F32, &av)),
//!     ("b", encode_f32(DType::F32, &bv)),
//! ];
//! let inputs: Vec<(&str, &[u8])> = inputs.iter().map(|(n, d)| (*n, d.as_slice())).collect();
//! let (outs, report) = dev.run(&lp, &inputs, &ExecOptions::default())?;
//! assert!(report.hazards.is_empty());
//! let got = decode_f32(DType::F32, &outs[0].1);
//! for i in 0..av.len() {
//!     assert_eq!(got[i], (av[i] + bv[i]).max(0.0) * 0.5);
//! }
//! # Ok::<(), nrt_core::Error>(())
//! ```
//!
//! # Modules
//!
//! `handle.rs` (memories, placements, view bases) → `view.rs` (views) → `layout.rs` (views to
//! access patterns and DMA descriptors); `alloc.rs` (the tile allocator); `sync/` (agents and
//! clocks, the access log, the wait planner, loops); `stream.rs` (engine streams and their
//! assembly into a program) → `kernel.rs` ([`Kernel`]) → `loops/` ([`Kernel::for_range`]:
//! probing a body, comparing the probes, emitting the loop) → `tensors.rs` ([`Tensor`]), `tiles.rs`
//! ([`Tile`], allocation) → `pool.rs` ([`TilePool`]), `ops/` (the operations) → `library/`
//! (complete kernels: [`library::matmul`], [`library::softmax`], [`library::attention`],
//! [`library::conv`], ...).

#![forbid(unsafe_code)]

mod alloc;
mod blocks;
mod format;
pub mod guide;
mod handle;
mod kernel;
mod layout;
pub mod library;
mod loops;
mod ops;
mod pool;
mod stream;
mod sync;
mod tensors;
mod tiles;
mod view;

pub use handle::{Memory, Placement};
pub use kernel::Kernel;
pub use ops::{
    ActBias, Activation, AffineSelect, BnAggr, BnStats, DmaCopy, DmaTranspose, FindIndex8, Iota,
    Max8, Memset, NcMatmul, NcTranspose, Op, RangeSelect, Reciprocal, Scalar, ScalarTensorTensor,
    TensorCopy, TensorReduce, TensorScalar, TensorScalarChain, TensorTensor, TensorTensorScan,
};
pub use pool::TilePool;
pub use tensors::Tensor;
pub use tiles::Tile;
pub use view::View;

pub use nrt_sim::engine::{ActFn, ActFunc, AluOp, DType, EngineId, Program, TensorKind};
