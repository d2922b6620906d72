//! The five engines ([`EngineId`]), the semaphore comparisons ([`SemCmp`]), the instructions
//! ([`Instr`]), which engines may run each, and the memory accesses each makes. The operand
//! rules are in `validate.rs`, the engine rules of each format version in `rules.rs`.

use core::fmt;

use super::actfunc::ActFunc;
use super::alu::AluOp;
use super::ops::{ActFn, ActReduce, Bias, Operand, ScalarStep};
use super::pattern::{AccessPattern, MAX_DIMS};

/// One of the five instruction sequencers of a NeuronCore.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EngineId {
    /// The Sync engine (SP): control instructions only, mostly DMA triggers.
    Sync = 0,
    /// TensorE: the 128×128 systolic array.
    Tensor = 1,
    /// VectorE.
    Vector = 2,
    /// ScalarE.
    Scalar = 3,
    /// GpSimdE.
    GpSimd = 4,
}

impl EngineId {
    /// The five engines in the simulator's fixed evaluation order.
    pub const ALL: [EngineId; 5] = [
        EngineId::Sync,
        EngineId::Tensor,
        EngineId::Vector,
        EngineId::Scalar,
        EngineId::GpSimd,
    ];

    /// Index in [`EngineId::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Display name (`"SyncE"`, `"TensorE"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            EngineId::Sync => "SyncE",
            EngineId::Tensor => "TensorE",
            EngineId::Vector => "VectorE",
            EngineId::Scalar => "ScalarE",
            EngineId::GpSimd => "GpSimdE",
        }
    }
}

impl fmt::Display for EngineId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a `SemWait` compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SemCmp {
    /// Proceed when the semaphore ≥ value.
    Ge,
    /// Proceed when the semaphore == value.
    Eq,
}

/// One instruction of an engine stream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Instr {
    /// Blocks the sequencer until semaphore `sem` compares true against `value`.
    SemWait {
        /// Semaphore index.
        sem: u8,
        /// Comparison.
        cmp: SemCmp,
        /// Operand.
        value: u32,
    },
    /// Adds `value` to semaphore `sem` (wrapping).
    SemInc {
        /// Semaphore index.
        sem: u8,
        /// Increment.
        value: u32,
    },
    /// Sets semaphore `sem` to `value`.
    SemSet {
        /// Semaphore index.
        sem: u8,
        /// New value.
        value: u32,
    },
    /// Enqueues descriptors `[first, first + count)` of the program's descriptor table as one
    /// transfer on queue `queue` of DMA engine `dma`; when its last descriptor completes, the
    /// DMA engine adds `inc` to semaphore `sem`.
    DmaTrigger {
        /// DMA engine (0..16).
        dma: u8,
        /// Queue of that engine (0..16).
        queue: u8,
        /// First descriptor.
        first: u32,
        /// Number of descriptors (≥ 1).
        count: u32,
        /// Semaphore updated on completion.
        sem: u8,
        /// Increment applied on completion (0: none).
        inc: u32,
    },
    /// Appends `payload` to the notification queue.
    Notify {
        /// Payload.
        payload: u32,
    },
    /// Stops the sequencer once its in-flight work is done.
    Halt,
    /// (Format 1.1) Opens a loop of `count` iterations whose iteration index is the
    /// sequencer's iteration register `reg` (0 in the first iteration). `count` is in
    /// `1..=`[`MAX_LOOP_COUNT`](crate::engine::MAX_LOOP_COUNT); loops nest properly, at most
    /// [`LOOP_REGS`](crate::engine::LOOP_REGS) deep, and an enclosing loop's register cannot
    /// be reused (all checked at load).
    LoopBegin {
        /// Iteration register (0..[`LOOP_REGS`](crate::engine::LOOP_REGS)).
        reg: u8,
        /// Iterations.
        count: u32,
    },
    /// (Format 1.1) Closes the innermost loop, whose register is `reg`: increments the
    /// register and, while it is below the loop's count, continues at the first instruction
    /// of the body.
    LoopEnd {
        /// The loop's iteration register.
        reg: u8,
    },
    /// TensorE: loads the stationary operand, `[K partitions, M free]` (M ≤ 128).
    LoadStationary {
        /// SBUF source.
        src: AccessPattern,
    },
    /// TensorE: `dst[m, n] (+)= Σ_k stationary[k, m] · moving[k, n]` in fp32 into one PSUM bank.
    MultiplyMoving {
        /// SBUF `[K partitions, N free]` (N ≤ 512), same K and dtype as the stationary.
        moving: AccessPattern,
        /// PSUM fp32 `[M partitions, N contiguous]` inside one bank.
        dst: AccessPattern,
        /// Accumulate onto the bank (`true`) or overwrite it (`false`).
        accumulate: bool,
    },
    /// VectorE/ScalarE: `out = a op b` elementwise.
    TensorTensor {
        /// Operation.
        op: AluOp,
        /// First input.
        a: AccessPattern,
        /// Second input.
        b: AccessPattern,
        /// Output.
        out: AccessPattern,
    },
    /// VectorE/ScalarE: `out = src op scalar` elementwise.
    TensorScalar {
        /// Operation.
        op: AluOp,
        /// Input.
        src: AccessPattern,
        /// Scalar operand.
        scalar: f32,
        /// Output.
        out: AccessPattern,
    },
    /// VectorE/ScalarE: `out = func(src * scale + bias)`.
    Activation {
        /// Function.
        func: ActFunc,
        /// Input.
        src: AccessPattern,
        /// Output.
        out: AccessPattern,
        /// Scale.
        scale: f32,
        /// Bias.
        bias: Bias,
    },
    /// VectorE/ScalarE: copies with dtype conversion (RNE).
    TensorCopy {
        /// Input.
        src: AccessPattern,
        /// Output.
        out: AccessPattern,
    },
    /// GpSimdE: fills `out` with a value (raw bits: an `int32` for int32 outputs, a binary32
    /// otherwise, converted with RNE).
    Memset {
        /// Output.
        out: AccessPattern,
        /// Value bits.
        bits: u32,
    },
    /// GpSimdE: `out[p, i] = base + p·partition_step + i·free_step` (int32 arithmetic,
    /// wrapping; `p` counts from the access's first partition, `i` over the flattened free
    /// pattern), converted to the output dtype.
    Iota {
        /// Output.
        out: AccessPattern,
        /// Value at the first element.
        base: i32,
        /// Step per partition.
        partition_step: i32,
        /// Step per free element.
        free_step: i32,
    },
    // ---- format 1.1 -----------------------------------------------------------------------
    /// VectorE/ScalarE (1.1): `out = (src op0 operand0) op1 operand1` (NKI `tensor_scalar`),
    /// each step optionally reversed; `second` is optional. `TensorScalar` is the special case
    /// of one unreversed step with an immediate.
    TensorScalarChain {
        /// Input.
        src: AccessPattern,
        /// Output.
        out: AccessPattern,
        /// First step.
        first: ScalarStep,
        /// Optional second step.
        second: Option<ScalarStep>,
    },
    /// VectorE (1.1): `out = (data op0 operand0) op1 data2` (NKI `scalar_tensor_tensor`);
    /// `reverse1` makes `data2` the left operand of `op1`.
    ScalarTensorTensor {
        /// Input.
        data: AccessPattern,
        /// The tensor–scalar step.
        first: ScalarStep,
        /// The tensor–tensor operation.
        op1: AluOp,
        /// Its elementwise operand, shaped like `data`.
        data2: AccessPattern,
        /// `data2 op1 x` instead of `x op1 data2`.
        reverse1: bool,
        /// Output.
        out: AccessPattern,
    },
    /// VectorE (1.1): folds the innermost `axes` free dimensions of `src` with `op`, left to
    /// right from the first element (NKI `tensor_reduce`); `out` is `[partitions, product of
    /// the kept dimensions]`; `negate` multiplies the result by −1.
    TensorReduce {
        /// Reduction operation (a legal NKI reduction operator).
        op: AluOp,
        /// Input.
        src: AccessPattern,
        /// Output.
        out: AccessPattern,
        /// Number of innermost free dimensions of `src` reduced (1..=its dimensions).
        axes: u8,
        /// Negate the result (arithmetic operations only).
        negate: bool,
    },
    /// ScalarE (1.1): `out = func(src * scale + bias)` with an immediate or per-partition
    /// `scale`, and optionally the per-partition fold of the results (NKI `activation`,
    /// `activation_reduce`).
    Activate {
        /// Function.
        func: ActFn,
        /// Input.
        src: AccessPattern,
        /// Output.
        out: AccessPattern,
        /// Scale (an immediate or a `[P, 1]` fp32 operand).
        scale: Operand,
        /// Bias.
        bias: Bias,
        /// Optional free-axis reduction of the activated values.
        reduce: Option<ActReduce>,
    },
    /// VectorE (1.1): `out = 1/src`, correctly rounded binary32 (NKI `reciprocal`).
    Reciprocal {
        /// Input.
        src: AccessPattern,
        /// Output.
        out: AccessPattern,
    },
    /// TensorE or VectorE (1.1): `out[f, p] = src[p, f]`, the free pattern flattened (NKI
    /// `nc_transpose`); bit-exact. TensorE: `src` SBUF up to `[128, 128]`, `out` PSUM in one
    /// bank. VectorE: up to `[32, 32]`.
    Transpose {
        /// Input `[P, F]`.
        src: AccessPattern,
        /// Output `[F, P]`, same dtype.
        out: AccessPattern,
    },
    /// GpSimdE (1.1): `out[p, i] = cmp(v, 0) ? on_true[p, i] : on_false` with the affine
    /// value `v = offset + p·channel_multiplier + Σ_d i_d·steps[d]` over `out`'s free
    /// indices (int32, wrapping) (NKI `affine_select`, e.g. a causal mask).
    AffineSelect {
        /// Values where the predicate holds.
        on_true: AccessPattern,
        /// Output.
        out: AccessPattern,
        /// Value elsewhere (binary32, converted to `out`'s dtype).
        on_false: f32,
        /// Comparison of the affine value against 0.
        cmp: AluOp,
        /// Constant term.
        offset: i32,
        /// Step per partition (counted from `out`'s first partition).
        channel_multiplier: i32,
        /// Step per index of each of `out`'s free dimensions, outermost first.
        steps: [i32; MAX_DIMS],
    },
    /// VectorE (1.1): keeps `on_true[p, i]` where `cmp0(i + range_start, bound0[p])` and
    /// `cmp1(i + range_start, bound1[p])` (binary32 comparisons), `on_false` elsewhere; with
    /// `reduce_max`, also the per-partition maximum of the result (NKI `range_select`).
    RangeSelect {
        /// Values where both comparisons hold.
        on_true: AccessPattern,
        /// Output.
        out: AccessPattern,
        /// First comparison.
        cmp0: AluOp,
        /// Its `[P, 1]` fp32 bound.
        bound0: AccessPattern,
        /// Second comparison.
        cmp1: AluOp,
        /// Its `[P, 1]` fp32 bound.
        bound1: AccessPattern,
        /// Index of the first free element.
        range_start: i32,
        /// Value elsewhere.
        on_false: f32,
        /// Optional `[P, 1]` maximum of each partition's result.
        reduce_max: Option<AccessPattern>,
    },
    /// VectorE (1.1): per-partition statistics of up to 512 elements (NKI `bn_stats`): `out`
    /// `[P, 6]` = count, mean and count·variance of the even-indexed elements, then of the
    /// odd-indexed ones.
    BnStats {
        /// Input (free size ≤ 512).
        src: AccessPattern,
        /// Output `[P, 6]`.
        out: AccessPattern,
    },
    /// VectorE (1.1): aggregates `(count, mean, count·variance)` triples (NKI `bn_aggr`) into
    /// `out` `[P, 2]` = mean, variance.
    BnAggr {
        /// Input: `[P, 3k]`.
        src: AccessPattern,
        /// Output `[P, 2]`.
        out: AccessPattern,
    },
    /// VectorE (1.1): the recurrence `out[i] = op1(op0(data0[i], out[i − 1]), data1[i])`
    /// along the flattened free axis, `out[−1] = initial` (NKI `tensor_tensor_scan`);
    /// `reverse0` / `reverse1` swap the operands of `op0` / `op1`.
    TensorTensorScan {
        /// First input.
        data0: AccessPattern,
        /// Second input.
        data1: AccessPattern,
        /// Output.
        out: AccessPattern,
        /// The state before the first element.
        initial: Operand,
        /// First operation.
        op0: AluOp,
        /// Second operation.
        op1: AluOp,
        /// `op0(out[i − 1], data0[i])`.
        reverse0: bool,
        /// `op1(data1[i], ·)`.
        reverse1: bool,
    },
    /// VectorE (1.1): the 8 largest values of each partition, descending (NKI `max8`).
    Max8 {
        /// Input (8..=16384 elements per partition).
        src: AccessPattern,
        /// Output `[P, 8]`.
        out: AccessPattern,
    },
    /// VectorE (1.1): for each of the 8 values of `vals[p]`, the index of its first
    /// not-yet-claimed occurrence in `data[p]`, or −1 (all ones) when absent (NKI
    /// `nc_find_index8`).
    FindIndex8 {
        /// Data searched (8..=16384 elements per partition).
        data: AccessPattern,
        /// `[P, 8]` values looked for.
        vals: AccessPattern,
        /// `[P, 8]` int32 indices.
        out: AccessPattern,
    },
}

impl Instr {
    /// The mnemonic.
    pub const fn name(&self) -> &'static str {
        match self {
            Instr::SemWait { .. } => "SemWait",
            Instr::SemInc { .. } => "SemInc",
            Instr::SemSet { .. } => "SemSet",
            Instr::DmaTrigger { .. } => "DmaTrigger",
            Instr::Notify { .. } => "Notify",
            Instr::Halt => "Halt",
            Instr::LoopBegin { .. } => "LoopBegin",
            Instr::LoopEnd { .. } => "LoopEnd",
            Instr::LoadStationary { .. } => "LoadStationary",
            Instr::MultiplyMoving { .. } => "MultiplyMoving",
            Instr::TensorTensor { .. } => "TensorTensor",
            Instr::TensorScalar { .. } => "TensorScalar",
            Instr::Activation { .. } => "Activation",
            Instr::TensorCopy { .. } => "TensorCopy",
            Instr::Memset { .. } => "Memset",
            Instr::Iota { .. } => "Iota",
            Instr::TensorScalarChain { .. } => "TensorScalarChain",
            Instr::ScalarTensorTensor { .. } => "ScalarTensorTensor",
            Instr::TensorReduce { .. } => "TensorReduce",
            Instr::Activate { .. } => "Activate",
            Instr::Reciprocal { .. } => "Reciprocal",
            Instr::Transpose { .. } => "Transpose",
            Instr::AffineSelect { .. } => "AffineSelect",
            Instr::RangeSelect { .. } => "RangeSelect",
            Instr::BnStats { .. } => "BnStats",
            Instr::BnAggr { .. } => "BnAggr",
            Instr::TensorTensorScan { .. } => "TensorTensorScan",
            Instr::Max8 { .. } => "Max8",
            Instr::FindIndex8 { .. } => "FindIndex8",
        }
    }

    /// Whether this is a control instruction (runs on any sequencer in one tick).
    pub const fn is_control(&self) -> bool {
        matches!(
            self,
            Instr::SemWait { .. }
                | Instr::SemInc { .. }
                | Instr::SemSet { .. }
                | Instr::DmaTrigger { .. }
                | Instr::Notify { .. }
                | Instr::Halt
                | Instr::LoopBegin { .. }
                | Instr::LoopEnd { .. }
        )
    }

    /// Whether this is a loop instruction (`LoopBegin`, `LoopEnd`).
    pub const fn is_loop(&self) -> bool {
        matches!(self, Instr::LoopBegin { .. } | Instr::LoopEnd { .. })
    }

    /// Whether `engine` can execute this instruction in some program: the union of the
    /// format-1.0 assignments and NKI's. Which one applies to a given program is decided by
    /// its format (`Program::validate`; `docs/SIM_ISA.md`, "Engine assignment").
    pub const fn runs_on(&self, engine: EngineId) -> bool {
        match self {
            Instr::SemWait { .. }
            | Instr::SemInc { .. }
            | Instr::SemSet { .. }
            | Instr::DmaTrigger { .. }
            | Instr::Notify { .. }
            | Instr::Halt
            | Instr::LoopBegin { .. }
            | Instr::LoopEnd { .. } => true,
            Instr::LoadStationary { .. } | Instr::MultiplyMoving { .. } => {
                matches!(engine, EngineId::Tensor)
            }
            Instr::TensorTensor { .. } | Instr::TensorCopy { .. } => matches!(
                engine,
                EngineId::Vector | EngineId::Scalar | EngineId::GpSimd
            ),
            Instr::TensorScalar { .. }
            | Instr::Activation { .. }
            | Instr::TensorScalarChain { .. } => {
                matches!(engine, EngineId::Vector | EngineId::Scalar)
            }
            Instr::Memset { .. } | Instr::Iota { .. } | Instr::AffineSelect { .. } => {
                matches!(engine, EngineId::GpSimd)
            }
            Instr::Activate { .. } => matches!(engine, EngineId::Scalar),
            Instr::Transpose { .. } => matches!(engine, EngineId::Tensor | EngineId::Vector),
            Instr::ScalarTensorTensor { .. }
            | Instr::TensorReduce { .. }
            | Instr::Reciprocal { .. }
            | Instr::RangeSelect { .. }
            | Instr::BnStats { .. }
            | Instr::BnAggr { .. }
            | Instr::TensorTensorScan { .. }
            | Instr::Max8 { .. }
            | Instr::FindIndex8 { .. } => matches!(engine, EngineId::Vector),
        }
    }

    /// The accesses of a data-path instruction: `(pattern, is_write)`, reads first, then the
    /// main output, then any second output.
    pub(crate) fn accesses(&self) -> ([Option<(AccessPattern, bool)>; MAX_ACCESSES], usize) {
        let mut out = [None; MAX_ACCESSES];
        let mut n = 0;
        let mut push = |ap: AccessPattern, w: bool| {
            if let Some(slot) = out.get_mut(n) {
                *slot = Some((ap, w));
                n += 1;
            }
        };
        match *self {
            Instr::LoadStationary { src } => push(src, false),
            Instr::MultiplyMoving { moving, dst, .. } => {
                push(moving, false);
                push(dst, true);
            }
            Instr::TensorTensor { a, b, out, .. } => {
                push(a, false);
                push(b, false);
                push(out, true);
            }
            Instr::TensorScalar { src, out, .. } | Instr::TensorCopy { src, out } => {
                push(src, false);
                push(out, true);
            }
            Instr::Activation { src, out, bias, .. } => {
                push(src, false);
                if let Bias::PerPartition(b) = bias {
                    push(b, false);
                }
                push(out, true);
            }
            Instr::Memset { out, .. } | Instr::Iota { out, .. } => push(out, true),
            Instr::TensorScalarChain {
                src,
                out,
                first,
                second,
            } => {
                push(src, false);
                if let Some(ap) = first.operand.pattern() {
                    push(ap, false);
                }
                if let Some(ap) = second.and_then(|s| s.operand.pattern()) {
                    push(ap, false);
                }
                push(out, true);
            }
            Instr::ScalarTensorTensor {
                data,
                first,
                data2,
                out,
                ..
            } => {
                push(data, false);
                if let Some(ap) = first.operand.pattern() {
                    push(ap, false);
                }
                push(data2, false);
                push(out, true);
            }
            Instr::TensorReduce { src, out, .. }
            | Instr::Reciprocal { src, out }
            | Instr::Transpose { src, out }
            | Instr::BnStats { src, out }
            | Instr::BnAggr { src, out }
            | Instr::Max8 { src, out } => {
                push(src, false);
                push(out, true);
            }
            Instr::Activate {
                src,
                out,
                scale,
                bias,
                reduce,
                ..
            } => {
                push(src, false);
                if let Some(ap) = scale.pattern() {
                    push(ap, false);
                }
                if let Bias::PerPartition(b) = bias {
                    push(b, false);
                }
                push(out, true);
                if let Some(r) = reduce {
                    push(r.out, true);
                }
            }
            Instr::AffineSelect { on_true, out, .. } => {
                push(on_true, false);
                push(out, true);
            }
            Instr::RangeSelect {
                on_true,
                out,
                bound0,
                bound1,
                reduce_max,
                ..
            } => {
                push(on_true, false);
                push(bound0, false);
                push(bound1, false);
                push(out, true);
                if let Some(r) = reduce_max {
                    push(r, true);
                }
            }
            Instr::TensorTensorScan {
                data0,
                data1,
                out,
                initial,
                ..
            } => {
                push(data0, false);
                push(data1, false);
                if let Some(ap) = initial.pattern() {
                    push(ap, false);
                }
                push(out, true);
            }
            Instr::FindIndex8 { data, vals, out } => {
                push(data, false);
                push(vals, false);
                push(out, true);
            }
            Instr::SemWait { .. }
            | Instr::SemInc { .. }
            | Instr::SemSet { .. }
            | Instr::DmaTrigger { .. }
            | Instr::Notify { .. }
            | Instr::Halt
            | Instr::LoopBegin { .. }
            | Instr::LoopEnd { .. } => {}
        }
        (out, n)
    }

    /// Whether this is a format-1.1 instruction (a variant format 1.0 does not have).
    pub const fn is_format_1_1(&self) -> bool {
        matches!(
            self,
            Instr::TensorScalarChain { .. }
                | Instr::ScalarTensorTensor { .. }
                | Instr::TensorReduce { .. }
                | Instr::Activate { .. }
                | Instr::Reciprocal { .. }
                | Instr::Transpose { .. }
                | Instr::AffineSelect { .. }
                | Instr::RangeSelect { .. }
                | Instr::BnStats { .. }
                | Instr::BnAggr { .. }
                | Instr::TensorTensorScan { .. }
                | Instr::Max8 { .. }
                | Instr::FindIndex8 { .. }
                | Instr::LoopBegin { .. }
                | Instr::LoopEnd { .. }
        )
    }
}

/// Most memory accesses of one instruction.
pub(crate) const MAX_ACCESSES: usize = 6;
