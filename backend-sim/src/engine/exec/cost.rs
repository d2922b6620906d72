//! The cost model: the timing model's name and status, the tick, the published NKI timing
//! constants ([`timing`]), the exact-integer DMA rates and the data units of a descriptor
//! ([`dma_units`]), each engine's clock ratio to the tick and the cost of a data-path
//! instruction ([`op_cycles`]).
//!
//! Sources: the NKI architecture guide for NeuronCore-v2 (`nki/guides/architecture/
//! trainium_inferentia2_arch.rst`: TensorE `max(N, 64)` and fast LoadStationary, VectorE /
//! ScalarE `N` per input, the 60-cycle access overhead, the 100-cycle small/dependent overhead,
//! the ~64-cycle `ActReadAccumulator`), the NKI engine-selection table
//! (`nki/api/nki.api.shared.rst`: reciprocal on VectorE `max(MIN_II, 8·N)`), and the Trainium2
//! guide (`nki/guides/architecture/trainium2_arch.rst`: DMA transpose at up to 90 % of a copy's
//! throughput). Where NKI publishes nothing, the closest documented analogue is used and named
//! at the instruction.

use crate::engine::dtype::DType;
use crate::engine::isa::{
    AccessPattern, AluOp, DmaDescriptor, DmaEndpoint, EngineId, Instr, Space,
};
use crate::engine::spec::{CoreSpec, TICK_MHZ};

/// Name of the timing model: every latency comes from the published NKI cost rules.
pub const TIMING_MODEL: &str = "nki-published-cost-rules-v2";
/// The timing model has not been validated against hardware.
pub const VALIDATED_AGAINST_HW: bool = false;
/// Ticks per second: one tick is one cycle of the 1.4 GHz SBUF/PSUM interface clock.
pub const TICKS_PER_SECOND: u64 = 1_400_000_000;

/// Published and derived timing constants common to every generation (the figures that
/// differ by generation are in [`CoreSpec`](crate::engine::CoreSpec)).
pub mod timing {
    /// `MM_INIT_LATENCY`: the minimum MultiplyMoving initiation interval, PE cycles.
    pub const MM_INIT_LATENCY: u64 = 64;
    /// fp32 MultiplyMoving / LoadStationary cost multiplier.
    pub const FP32_MATMUL_FACTOR: u64 = 4;
    /// "Fast LoadStationary": up to 4× faster than an MM of the same free size.
    pub const LOAD_STATIONARY_SPEEDUP: u64 = 4;
    /// Static overhead of any tensor access, engine cycles.
    pub const ACCESS_OVERHEAD_CYCLES: u64 = 60;
    /// Extra static overhead of back-to-back instructions that are small (free size ≤ 128)
    /// or depend on the previous instruction's output, engine cycles.
    pub const SMALL_OR_DEPENDENT_CYCLES: u64 = 100;
    /// Free sizes up to this count as "small".
    pub const SMALL_FREE_SIZE: u64 = 128;
    /// Transfers a DMA queue holds before a trigger stalls.
    pub const DMA_QUEUE_DEPTH: usize = 64;
    /// Control instructions take one tick.
    pub const CONTROL_TICKS: u64 = 1;
    /// VectorE reciprocal costs 8 cycles per element (NKI engine-selection table:
    /// `max(MIN_II, 8·N)` on VectorE against `max(MIN_II, N)` on ScalarE).
    pub const RECIPROCAL_VECTOR_FACTOR: u64 = 8;
    /// `ActReadAccumulator`, the instruction that writes ScalarE's reduction registers out
    /// after an `Activate` with a reduction: roughly 64 ScalarE cycles on NeuronCore-v2.
    pub const ACT_READ_ACCUMULATOR_CYCLES: u64 = 64;
    /// A transposing DMA reaches up to 90 % of a copy's throughput (Trainium2 guide): its data
    /// phase moves `bytes · 10 / 9`.
    pub const DMA_TRANSPOSE_SLOWDOWN: (u64, u64) = (10, 9);
}

pub(super) use crate::engine::spec::BYTE;

/// The data-phase units of a descriptor: its bytes × [`BYTE`]. A block descriptor moves the
/// larger of its source and destination blocks (a cast: no published figure; the copy of the
/// larger side is the closest analogue), a transposing one 10/9 of that.
pub(super) fn dma_units(d: &DmaDescriptor) -> u64 {
    match (d.src, d.dst) {
        (DmaEndpoint::Block(s), DmaEndpoint::Block(t)) => {
            let units = s.bytes().max(t.bytes()) * BYTE;
            if s.transposed != t.transposed {
                let (num, den) = timing::DMA_TRANSPOSE_SLOWDOWN;
                units / den * num
            } else {
                units
            }
        }
        _ => u64::from(d.len) * BYTE,
    }
}

/// Engine `e`'s clock on `spec`'s generation as `(engine MHz, tick MHz)`: `cycles × tick /
/// engine` ticks. SyncE runs only control instructions, which take one tick.
#[inline]
pub(super) const fn clock(spec: &CoreSpec, e: EngineId) -> (u64, u64) {
    let mhz = match e {
        EngineId::Tensor => spec.tensor_mhz,
        EngineId::Vector => spec.vector_mhz,
        EngineId::Scalar => spec.scalar_mhz,
        EngineId::GpSimd => spec.gpsimd_mhz,
        EngineId::Sync => TICK_MHZ,
    };
    (mhz, TICK_MHZ)
}

/// How an instruction issues, as the static overheads of VectorE, ScalarE and GpSimdE depend
/// on it (A2, `trainium_inferentia2_arch.rst`: "many back-to-back instructions either with
/// N << 128 or with every instruction depending on the output tile of the previous
/// instruction" add 100 cycles; the 60-cycle tensor access overhead engines "can typically hide
/// some of … through instruction level parallelism").
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IssueCtx {
    /// It reads what the engine's previous instruction wrote.
    pub(crate) dependent: bool,
    /// It issues the tick its engine's previous instruction finishes: the engine never idled
    /// in between (back to back).
    pub(crate) back_to_back: bool,
    /// The engine cycles of the engine's previous data-path instruction (0: none).
    pub(crate) prev_cycles: u64,
}

/// The static overheads on `c` streaming cycles of an instruction of free size `n`:
///
/// * back to back and small or dependent: the 60-cycle access overhead and the 100-cycle
///   instruction overhead (nothing overlaps: the engine waits for the previous result, or
///   the instruction is too short to cover the next one's start);
/// * back to back otherwise: the access overhead overlaps the previous instruction's
///   execution (instruction-level parallelism), up to that instruction's length;
/// * after the engine idled (the first instruction, or one that waited on a semaphore, a
///   port or a queue): the 60-cycle access overhead.
#[inline]
fn overheads(c: u64, n: u64, is: IssueCtx) -> u64 {
    use timing::*;
    if !is.back_to_back {
        c + ACCESS_OVERHEAD_CYCLES
    } else if is.dependent || n <= SMALL_FREE_SIZE {
        c + ACCESS_OVERHEAD_CYCLES + SMALL_OR_DEPENDENT_CYCLES
    } else {
        c + ACCESS_OVERHEAD_CYCLES - ACCESS_OVERHEAD_CYCLES.min(is.prev_cycles)
    }
}

/// The published cost of a data-path instruction on `engine`, in its engine's cycles.
#[inline]
pub(crate) fn op_cycles(ins: &Instr, engine: EngineId, is: IssueCtx, spec: &CoreSpec) -> u64 {
    use timing::*;
    let fp32 = |ap: &AccessPattern| ap.dtype == DType::F32;
    match ins {
        Instr::LoadStationary { src } => {
            let base = src
                .free_elems()
                .max(MM_INIT_LATENCY)
                .div_ceil(LOAD_STATIONARY_SPEEDUP);
            if fp32(src) {
                base * FP32_MATMUL_FACTOR
            } else {
                base
            }
        }
        Instr::MultiplyMoving { moving, .. } => {
            let base = moving.free_elems().max(MM_INIT_LATENCY);
            if fp32(moving) {
                base * FP32_MATMUL_FACTOR
            } else {
                base
            }
        }
        Instr::Transpose { src, .. } if engine == EngineId::Tensor => {
            // No published figure of its own: NKI implements it as a matmul of the input (as
            // the stationary) with an identity (as the moving), so it costs a LoadStationary
            // of the input plus a MultiplyMoving of N = its partitions; 4-byte elements at the
            // fp32 rate.
            let wide = src.dtype.size() == 4;
            let ls = src
                .free_elems()
                .max(MM_INIT_LATENCY)
                .div_ceil(LOAD_STATIONARY_SPEEDUP);
            let mm = u64::from(src.partitions).max(MM_INIT_LATENCY);
            if wide {
                (ls + mm) * FP32_MATMUL_FACTOR
            } else {
                ls + mm
            }
        }
        Instr::TensorTensor { .. }
        | Instr::TensorScalar { .. }
        | Instr::Activation { .. }
        | Instr::TensorCopy { .. }
        | Instr::Memset { .. }
        | Instr::Iota { .. } => {
            let (acc, n) = ins.accesses();
            let mut free = 0u64;
            let mut inputs = 0u64;
            let mut strided = false;
            for (ap, w) in acc.iter().take(n).flatten() {
                strided |= ap.innermost_strided();
                if *w {
                    free = ap.free_elems();
                } else if ap.free_elems() > 1 || !matches!(ins, Instr::Activation { .. }) {
                    inputs += 1;
                }
            }
            let mut c = free * inputs.max(1);
            if strided {
                c *= 2;
            }
            if spec.vector_fast_modes && engine == EngineId::Vector {
                c = vector_fast_mode(ins, c, free);
            }
            overheads(c, free, is)
        }
        _ => cycles_1_1(ins, is),
    }
}

/// NeuronCore-v3's VectorE modes: the streaming cycles `c` (of `free` elements) of a
/// `TensorTensor`, `TensorCopy` or `TensorScalar` where a faster mode applies.
///
/// * `tensor_tensor` costs `N`, not `2N`, with one input in PSUM and the other in SBUF, or with
///   both in SBUF, every operand bf16, add / subtract / multiply and contiguous inputs (the
///   ISA reference's cost table, `general/nki/api/nki/isa/__init__.py` @ 8a38e733; the
///   Trainium2 guide lists the second case among v3's 2x modes).
/// * `tensor_copy` and `tensor_scalar` with bf16 or fp16 input and output run 4x faster SBUF to
///   SBUF with contiguous operands, 2x otherwise (non-contiguous, or one side in PSUM)
///   (Trainium2 guide, "VectorE performance modes").
fn vector_fast_mode(ins: &Instr, c: u64, free: u64) -> u64 {
    let contiguous = |ap: &AccessPattern| {
        ap.used_dims()
            .last()
            .is_none_or(|d| d.size <= 1 || d.stride == 1)
    };
    let half = |ap: &AccessPattern| matches!(ap.dtype, DType::Bf16 | DType::F16);
    match ins {
        Instr::TensorTensor { op, a, b, out } => {
            let mixed = a.space != b.space;
            let bf16_sbuf = a.space == Space::Sbuf
                && b.space == Space::Sbuf
                && [a, b, out].iter().all(|ap| ap.dtype == DType::Bf16)
                && matches!(op, AluOp::Add | AluOp::Sub | AluOp::Mul)
                && contiguous(a)
                && contiguous(b);
            if mixed || bf16_sbuf {
                c.min(free.max(1))
            } else {
                c
            }
        }
        Instr::TensorCopy { src, out } | Instr::TensorScalar { src, out, .. }
            if half(src) && half(out) =>
        {
            let sbuf = src.space == Space::Sbuf && out.space == Space::Sbuf;
            if sbuf && contiguous(src) && contiguous(out) {
                c.div_ceil(4)
            } else {
                c.div_ceil(2)
            }
        }
        _ => c,
    }
}

/// The format-1.1 instructions on VectorE, ScalarE and GpSimdE: the same rule as format 1.0's
/// — `N × inputs` with N the free size of the streamed input and `[P, 1]` operands not counted
/// (one input: "most VectorE instructions execute in roughly N cycles"; two: "2N"), ×2 when an
/// operand's innermost stride exceeds 16 B, and the static overheads ([`overheads`]) — with the
/// published exceptions (reciprocal 8N, the accumulator read-out).
fn cycles_1_1(ins: &Instr, is: IssueCtx) -> u64 {
    use timing::*;
    let free = |ap: &AccessPattern| ap.free_elems();
    // (N, cycles per element of N, extra cycles)
    let (n, inputs, extra) = match ins {
        // NKI: two operations cost the same as one.
        Instr::TensorScalarChain { src, .. } => (free(src), 1, 0),
        // NKI: "approximately the same latency as a regular tensor_tensor".
        Instr::ScalarTensorTensor { data, .. } => (free(data), 2, 0),
        Instr::TensorReduce { src, .. } => (free(src), 1, 0),
        // NKI: scale, bias and the reduction are free; writing the reduction out is one
        // ActReadAccumulator.
        Instr::Activate { src, reduce, .. } => (
            free(src),
            1,
            if reduce.is_some() {
                ACT_READ_ACCUMULATOR_CYCLES
            } else {
                0
            },
        ),
        Instr::Reciprocal { src, .. } => (free(src), RECIPROCAL_VECTOR_FACTOR, 0),
        // VectorE 32x32 transpose: no figure; a one-input VectorE instruction.
        Instr::Transpose { src, .. } => (free(src), 1, 0),
        // GpSimdE: no published costs (as Memset/Iota): N.
        Instr::AffineSelect { out, .. } => (free(out), 1, 0),
        // No figures for these VectorE instructions: one (or, for the scan, two) streamed
        // inputs, the closest documented analogue (tensor_scalar / tensor_tensor).
        Instr::RangeSelect { out, .. } => (free(out), 1, 0),
        Instr::BnStats { src, .. } | Instr::BnAggr { src, .. } | Instr::Max8 { src, .. } => {
            (free(src), 1, 0)
        }
        Instr::TensorTensorScan { out, .. } => (free(out), 2, 0),
        Instr::FindIndex8 { data, .. } => (free(data), 1, 0),
        _ => (0, 1, 0),
    };
    let (acc, na) = ins.accesses();
    let strided = acc
        .iter()
        .take(na)
        .flatten()
        .any(|(ap, _)| ap.innermost_strided());
    let mut c = n * inputs;
    if strided {
        c *= 2;
    }
    overheads(c + extra, n, is)
}
