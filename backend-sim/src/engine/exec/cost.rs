//! The cost model: the timing model's name and status, the tick, the published NKI timing
//! constants ([`timing`]), the exact-integer DMA rates, each engine's clock ratio to the tick
//! and the cost of a data-path instruction ([`op_cycles`]).

use crate::engine::dtype::DType;
use crate::engine::isa::{AccessPattern, EngineId, Instr};

/// Name of the timing model: every latency comes from the published NKI cost rules.
pub const TIMING_MODEL: &str = "nki-published-cost-rules-v2";
/// The timing model has not been validated against hardware.
pub const VALIDATED_AGAINST_HW: bool = false;
/// Ticks per second: one tick is one cycle of the 1.4 GHz SBUF/PSUM interface clock.
pub const TICKS_PER_SECOND: u64 = 1_400_000_000;

/// Published and derived timing constants.
pub mod timing {
    /// `MM_INIT_LATENCY`: the minimum MultiplyMoving initiation interval, PE cycles.
    pub const MM_INIT_LATENCY: u64 = 64;
    /// fp32 MultiplyMoving / LoadStationary cost multiplier.
    pub const FP32_MATMUL_FACTOR: u64 = 4;
    /// "Fast LoadStationary": up to 4× faster than an MM of the same free size.
    pub const LOAD_STATIONARY_SPEEDUP: u64 = 4;
    /// Static overhead of any tensor access, engine cycles.
    pub const ACCESS_OVERHEAD_CYCLES: u64 = 60;
    /// Extra static overhead of small (free size ≤ 128) or dependent back-to-back
    /// instructions, engine cycles.
    pub const SMALL_OR_DEPENDENT_CYCLES: u64 = 100;
    /// Free sizes up to this count as "small".
    pub const SMALL_FREE_SIZE: u64 = 128;
    /// DMA engine peak, bytes per second (27.2 GB/s).
    pub const DMA_ENGINE_BYTES_PER_SECOND: u64 = 27_200_000_000;
    /// HBM bandwidth available to one core, bytes per second: half of the device's
    /// 820 GB/s (the other core's half is reserved).
    pub const HBM_BYTES_PER_SECOND_PER_CORE: u64 = 410_000_000_000;
    /// Fixed cost of each DMA descriptor, ticks (calibration knob).
    pub const DMA_DESCRIPTOR_OVERHEAD_TICKS: u64 = 64;
    /// Fixed cost of each DMA transfer (one trigger), before its first descriptor, ticks.
    /// With [`DMA_DESCRIPTOR_OVERHEAD_TICKS`] this makes one 32 KiB single-descriptor
    /// transfer take 1,983 ticks = 1,416 ns, the published example.
    pub const DMA_TRANSFER_LATENCY_TICKS: u64 = 232;
    /// Transfers a DMA queue holds before a trigger stalls.
    pub const DMA_QUEUE_DEPTH: usize = 64;
    /// Control instructions take one tick.
    pub const CONTROL_TICKS: u64 = 1;
}

// Fluid DMA arithmetic in exact integers: one byte = BYTE units; rates in units per tick.
// 27.2 GB/s at 1.4 GHz = 136/7 B/tick; 410 GB/s = 2050/7 B/tick; 720720 = lcm(1..=16) makes
// an equal share of the HBM rate among up to 16 engines exact.
const LCM16: u64 = 720_720;
pub(super) const BYTE: u64 = 7 * LCM16;
pub(super) const ENGINE_RATE: u64 = 136 * LCM16;
pub(super) const HBM_RATE: u64 = 2050 * LCM16;

/// Engine cycles per tick as `num / den` ticks... expressed as (cycles-per-tick numerator,
/// tick multiplier): ticks = cycles × den / num.
#[inline]
pub(super) const fn clock_ratio(e: EngineId) -> (u64, u64) {
    match e {
        EngineId::Tensor => (2, 1), // 2.8 GHz: 2 PE cycles per tick
        EngineId::Vector => (4, 5), // 1.12 GHz: 0.8 cycles per tick
        EngineId::Scalar | EngineId::GpSimd | EngineId::Sync => (1, 1),
    }
}

/// The published cost of a data-path instruction, in its engine's cycles.
#[inline]
pub(crate) fn op_cycles(ins: &Instr, dependent: bool) -> u64 {
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
        _ => {
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
            c += ACCESS_OVERHEAD_CYCLES;
            if dependent || free <= SMALL_FREE_SIZE {
                c += SMALL_OR_DEPENDENT_CYCLES;
            }
            c
        }
    }
}
