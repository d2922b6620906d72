//! The published figures of each NeuronCore generation that the timing model and the core's
//! memories depend on ([`CoreSpec`]): engine clocks, SBUF size, DMA engine and HBM rates, the
//! fixed DMA costs, and the shared-port restrictions. [`Instance::core_spec`](crate::Instance)
//! picks one per instance family: inf2 and trn1 run [`NEURONCORE_V2`], trn2 runs
//! [`NEURONCORE_V3`].
//!
//! Sources (aws-neuron/aws-neuron-sdk, `nki/`; `docs/SIM_ISA.md`, "Generations", cites each
//! figure with its file and commit and says which one was chosen where sources disagree):
//! the architecture guides `guides/architecture/trainium_inferentia2_arch.rst` (v2) and
//! `trainium2_arch.rst` (v3), the DMA overview `get-started/about/nki-dma-overview.rst` and the
//! DMA bandwidth guide `deep-dives/nki-dma-bandwidth-guide.rst`.

/// One tick is one cycle of this clock on every generation (NeuronCore-v2's 1.4 GHz SBUF/PSUM
/// interface clock), so tick counts of different generations compare directly.
pub const TICK_MHZ: u64 = 1400;

/// The figures of one NeuronCore generation. Rates are whole MB/s (multiples of 200, so the
/// DMA arithmetic stays exact integers); clocks whole MHz.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CoreSpec {
    /// `"NeuronCore-v2"`, `"NeuronCore-v3"`.
    pub name: &'static str,
    /// TensorE (PE array) clock, MHz.
    pub tensor_mhz: u64,
    /// VectorE clock, MHz.
    pub vector_mhz: u64,
    /// ScalarE clock, MHz.
    pub scalar_mhz: u64,
    /// GpSimdE clock, MHz.
    pub gpsimd_mhz: u64,
    /// SBUF bytes per partition (128 partitions).
    pub sbuf_partition_bytes: usize,
    /// Peak rate of one DMA engine, MB/s.
    pub dma_engine_mbps: u64,
    /// HBM bandwidth of one device (chip), MB/s: the DMA engines of all its cores that move
    /// HBM data share it equally, each capped by its own peak (`engine::share`). A core alone
    /// is therefore limited by its engines (16 × the engine rate), not by a per-core share.
    pub hbm_mbps_per_device: u64,
    /// Fixed cost of each DMA descriptor on its engine, ticks (at least one is charged).
    pub dma_descriptor_ticks: u64,
    /// Fixed cost of each transfer on its engine, before its first descriptor, ticks.
    pub dma_transfer_ticks: u64,
    /// Latency from a transfer's trigger to the earliest tick its DMA engine may start it,
    /// ticks (the engine serves other queues meanwhile). The DMA bandwidth guide gives
    /// "semaphore-to-start latency (~1300 ns cross-engine)"; taken as this latency it puts
    /// trn2's tiled matmul 69 % above its published time (`docs/FIDELITY.md`,
    /// "Sensitivity"), so it is **not modelled**: 0 on every generation, and
    /// `ExecOptions::dma_trigger_latency_ticks` sets it for a study.
    pub dma_trigger_latency_ticks: u64,
    /// The least time between the starts of two consecutive transfers on one DMA queue, ticks:
    /// a stage that prepares a transfer (descriptors, setup, semaphores) while the engine moves
    /// the one before it, so back-to-back transfers come no faster than one per this interval
    /// and no slower than their own time on the engine. **Not modelled**: 0 on every
    /// generation; a study device sets it (`Device::with_core_spec`; `docs/FIDELITY.md`,
    /// "Problems noticed").
    pub dma_queue_interval_ticks: u64,
    /// Time the hardware descriptor generator (DGE) holds the triggering sequencer per 128
    /// descriptors, ticks (0: descriptors are built ahead of time, as on NeuronCore-v2).
    pub dge_ticks_per_128_descriptors: u64,
    /// VectorE's faster modes of NeuronCore-v3 (the cost module's `vector_fast_mode`).
    pub vector_fast_modes: bool,
    /// VectorE and GpSimdE share one SBUF port, and VectorE and ScalarE one PSUM port
    /// (NeuronCore-v2; lifted on v3).
    pub shared_ports: bool,
}

/// NeuronCore-v2 (inf2, trn1). Clocks, SBUF and HBM: the v2 architecture guide's tables
/// (TensorE 2.8 GHz, VectorE 1.12, ScalarE and GpSimdE 1.4; 24 MiB SBUF in 128 partitions of
/// 192 KiB; 820 GB/s of HBM per two-core device). DMA: 27.2 GB/s per engine (the DMA
/// overview's text; the architecture guide says 27 GiB/s; the DMA guides' table says 17 B/ns,
/// less than the performance guide's v2 profile shows an engine sustaining: see
/// `docs/SIM_ISA.md`), and fixed costs **fitted** to the overview's first measured transfer
/// (32 KiB on one engine in 1,416 ns, measured on trn2), which therefore validates nothing;
/// the performance guide's v2 profile (32 KiB transfers in 1,810 ns) checks them.
pub const NEURONCORE_V2: CoreSpec = CoreSpec {
    name: "NeuronCore-v2",
    tensor_mhz: 2800,
    vector_mhz: 1120,
    scalar_mhz: 1400,
    gpsimd_mhz: 1400,
    sbuf_partition_bytes: 192 * 1024,
    dma_engine_mbps: 27_200,
    hbm_mbps_per_device: 820_000,
    dma_descriptor_ticks: 64,
    dma_transfer_ticks: 232,
    dma_trigger_latency_ticks: 0,
    dma_queue_interval_ticks: 0,
    dge_ticks_per_128_descriptors: 0,
    vector_fast_modes: false,
    shared_ports: true,
};

/// NeuronCore-v3 (trn2). Clocks, SBUF and HBM: the Trainium2 architecture guide's tables
/// (TensorE 2.4 GHz, VectorE 0.96, ScalarE and GpSimdE 1.2; 28 MiB SBUF in 128 partitions of
/// 224 KiB; 3 TB/s of HBM per eight-core device, the NKI guide's figure at the cited commit
/// (2.9 TB/s elsewhere: `docs/SIM_ISA.md`); the engine-access restrictions of v2 lifted).
/// Triggers: "each DGE-based DMA instruction takes about 600 ns to execute" (Trainium2 guide;
/// the DGE deep dive says the same of hardware DGE, which Sync and Scalar sequencers
/// command): charged on the triggering sequencer, per descriptor, as 600 ns for the 128
/// descriptors of a full-partition load (a program here expresses one such load as up to 16
/// triggers, one per DMA engine). DMA: 23 B/ns per engine (the DMA guides' table). The fixed costs on the engine are
/// **fitted** to the DMA overview's second measured transfer (2 KiB as eight 256-byte
/// descriptors on one engine in 97 ns, on trn2: 89 ns of data at 23 B/ns leaves ~8 ns, one
/// tick per descriptor and three per transfer); its first (32 KiB in 1,416 ns) then checks
/// the 23 B/ns figure.
pub const NEURONCORE_V3: CoreSpec = CoreSpec {
    name: "NeuronCore-v3",
    tensor_mhz: 2400,
    vector_mhz: 960,
    scalar_mhz: 1200,
    gpsimd_mhz: 1200,
    sbuf_partition_bytes: 224 * 1024,
    dma_engine_mbps: 23_000,
    hbm_mbps_per_device: 3_000_000,
    dma_descriptor_ticks: 1,
    dma_transfer_ticks: 3,
    dma_trigger_latency_ticks: 0,
    dma_queue_interval_ticks: 0,
    dge_ticks_per_128_descriptors: 840,
    vector_fast_modes: true,
    shared_ports: false,
};

/// The largest SBUF partition of any generation: the bound the program validator checks (a
/// device then checks a program against its own, [`CoreSpec::sbuf_partition_bytes`]).
pub const MAX_SBUF_PARTITION_BYTES: usize = 224 * 1024;

// Exact DMA arithmetic: one byte is `BYTE` units and a rate of `r` MB/s is `r·5·LCM16/1000`
// units per tick (r / 1.4e3 bytes per tick × 7 × LCM16), an integer when `r` is a multiple of
// 200. LCM16 = lcm(1..=16) makes an equal share of a rate among up to 16 engines exact (a
// share of the device's HBM among more engines, of several cores, is rounded down).
const LCM16: u64 = 720_720;
/// Units of one byte in the DMA arithmetic.
pub(crate) const BYTE: u64 = 7 * LCM16;

const fn units_per_tick(mbps: u64) -> u64 {
    mbps / 200 * LCM16
}

const _: () = {
    // Every rate is a whole number of 200 MB/s steps.
    assert!(NEURONCORE_V2.dma_engine_mbps % 200 == 0);
    assert!(NEURONCORE_V2.hbm_mbps_per_device % 200 == 0);
    assert!(NEURONCORE_V3.dma_engine_mbps % 200 == 0);
    assert!(NEURONCORE_V3.hbm_mbps_per_device % 200 == 0);
    assert!(NEURONCORE_V2.sbuf_partition_bytes <= MAX_SBUF_PARTITION_BYTES);
    assert!(NEURONCORE_V3.sbuf_partition_bytes <= MAX_SBUF_PARTITION_BYTES);
};

impl CoreSpec {
    /// One DMA engine's peak in the DMA arithmetic's units per tick.
    #[inline]
    pub(crate) const fn engine_rate(&self) -> u64 {
        units_per_tick(self.dma_engine_mbps)
    }

    /// The device's HBM bandwidth in the DMA arithmetic's units per tick.
    #[inline]
    pub(crate) const fn hbm_rate(&self) -> u64 {
        units_per_tick(self.hbm_mbps_per_device)
    }

    /// Ticks a trigger of `descriptors` descriptors holds its sequencer for descriptor
    /// generation (0 without a DGE), rounded up.
    #[inline]
    pub(crate) const fn dge_ticks(&self, descriptors: u32) -> u64 {
        (descriptors as u64 * self.dge_ticks_per_128_descriptors).div_ceil(128)
    }

    /// Peak TensorE throughput for 2-byte operands, FLOP/s: a 128 × 128 array doing one
    /// multiply-add per cell per cycle.
    pub const fn tensor_peak_flops(&self) -> u64 {
        128 * 128 * 2 * self.tensor_mhz * 1_000_000
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact-integer rates reproduce the figures: 27.2 GB/s is 136/7 bytes per tick.
    #[test]
    fn rates_are_exact() {
        assert_eq!(NEURONCORE_V2.engine_rate(), 136 * LCM16);
        assert_eq!(NEURONCORE_V2.hbm_rate(), 4100 * LCM16);
        // 23 B/ns = 115/7 bytes per tick.
        assert_eq!(NEURONCORE_V3.engine_rate() * 7, 115 * 7 * LCM16);
        // The published peaks follow from the clocks (v2 guide: 92 TFLOPS; v3 guide: 79).
        assert_eq!(NEURONCORE_V2.tensor_peak_flops() / 1_000_000_000_000, 91);
        assert_eq!(NEURONCORE_V3.tensor_peak_flops() / 1_000_000_000_000, 78);
    }
}
