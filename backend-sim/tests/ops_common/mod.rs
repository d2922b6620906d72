//! Shared helpers of the format-1.1 instruction tests: run one data-path instruction on
//! operands given as raw bytes (loaded by DMA, staged through VectorE copies for PSUM
//! operands), read its outputs back as raw bytes; element codecs and special values.
#![allow(
    dead_code,
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use nrt_sim::Instance;
use nrt_sim::engine::{
    AccessPattern, DType, Device, DmaDescriptor, DmaEndpoint, EngineId, EventKind, ExecOptions,
    ExecReport, Instr, Program, ProgramBuilder, Space, Track, encode_f32,
};

/// A contiguous `[partitions, free]` operand and its bytes (row-major, `dtype` elements).
#[derive(Clone, Debug)]
pub struct Buf {
    pub ap: AccessPattern,
    pub bytes: Vec<u8>,
}

impl Buf {
    /// An operand in SBUF at `offset` with float values encoded to `dtype`.
    pub fn sbuf(dtype: DType, parts: u8, offset: u32, vals: &[f32]) -> Buf {
        let free = vals.len() / usize::from(parts);
        Buf {
            ap: AccessPattern::sbuf(dtype, 0, parts, offset, free as u16),
            bytes: encode_f32(dtype, vals),
        }
    }

    /// An int32 operand in SBUF.
    pub fn sbuf_i32(parts: u8, offset: u32, vals: &[i32]) -> Buf {
        let free = vals.len() / usize::from(parts);
        Buf {
            ap: AccessPattern::sbuf(DType::I32, 0, parts, offset, free as u16),
            bytes: vals.iter().flat_map(|v| v.to_le_bytes()).collect(),
        }
    }

    /// The same operand in PSUM at `offset`.
    pub fn in_psum(mut self, offset: u32) -> Buf {
        self.ap.space = Space::Psum;
        self.ap.offset = offset;
        self
    }
}

/// SBUF staging area of PSUM operands (16 KiB slots from 96 KiB).
const STAGE: u32 = 96 * 1024;

fn row_bytes(ap: &AccessPattern) -> usize {
    ap.free_elems() as usize * ap.dtype.size()
}

/// Builds the program that loads `inputs`, runs `ins` on `engine`, and stores `outputs`
/// (contiguous accesses) into output tensors `out0`, `out1`, ...
pub fn program_one(
    engine: EngineId,
    ins: Instr,
    inputs: &[Buf],
    outputs: &[AccessPattern],
) -> Program {
    program_seq(engine, &[ins], inputs, outputs)
}

/// [`program_one`] with several instructions on `engine`.
pub fn program_seq(
    engine: EngineId,
    ins: &[Instr],
    inputs: &[Buf],
    outputs: &[AccessPattern],
) -> Program {
    let mut b = ProgramBuilder::new("one");
    let loaded = b.sem().unwrap();
    let staged = b.sem().unwrap();
    let done = b.sem().unwrap();
    let unstaged = b.sem().unwrap();
    let stored = b.sem().unwrap();
    let mut nload = 0;
    let mut stage_slot = 0u32;
    let mut stage_copies = Vec::new();
    for (i, buf) in inputs.iter().enumerate() {
        let ap = buf.ap;
        let rb = row_bytes(&ap);
        let t = b.input(
            &format!("in{i}"),
            ap.dtype,
            &[u64::from(ap.partitions), ap.free_elems()],
        );
        let sbuf_off = if ap.space == Space::Psum {
            let off = STAGE + stage_slot * 16 * 1024;
            stage_slot += 1;
            let mut from = ap;
            from.space = Space::Sbuf;
            from.offset = off;
            stage_copies.push(Instr::TensorCopy { src: from, out: ap });
            off
        } else {
            ap.offset
        };
        let descs: Vec<DmaDescriptor> = (0..ap.partitions)
            .map(|p| DmaDescriptor {
                src: DmaEndpoint::Hbm {
                    tensor: t,
                    offset: (usize::from(p) * rb) as u64,
                },
                dst: DmaEndpoint::Sbuf {
                    partition: ap.start_partition + p,
                    offset: sbuf_off,
                },
                len: rb as u32,
            })
            .collect();
        b.dma_on(EngineId::Sync, (i % 16) as u8, 0, &descs, loaded, 1);
        nload += 1;
    }
    b.wait(EngineId::Vector, loaded, nload);
    let nstage = stage_copies.len() as u32;
    for c in stage_copies {
        b.push(EngineId::Vector, c);
    }
    b.signal(EngineId::Vector, staged, 1);
    b.wait(engine, staged, 1);
    for i in ins {
        b.push(engine, *i);
    }
    b.signal(engine, done, 1);
    b.wait(EngineId::Vector, done, 1);
    let mut unstage = Vec::new();
    for (j, ap) in outputs.iter().enumerate() {
        let rb = row_bytes(ap);
        let t = b.output(
            &format!("out{j}"),
            ap.dtype,
            &[u64::from(ap.partitions), ap.free_elems()],
        );
        let sbuf_off = if ap.space == Space::Psum {
            let off = STAGE + stage_slot * 16 * 1024;
            stage_slot += 1;
            let mut to = *ap;
            to.space = Space::Sbuf;
            to.offset = off;
            b.push(EngineId::Vector, Instr::TensorCopy { src: *ap, out: to });
            off
        } else {
            ap.offset
        };
        unstage.push((t, *ap, sbuf_off, rb));
    }
    let _ = nstage;
    b.signal(EngineId::Vector, unstaged, 1);
    b.wait(EngineId::Sync, unstaged, 1);
    let mut nstore = 0;
    for (j, (t, ap, off, rb)) in unstage.into_iter().enumerate() {
        let descs: Vec<DmaDescriptor> = (0..ap.partitions)
            .map(|p| DmaDescriptor {
                src: DmaEndpoint::Sbuf {
                    partition: ap.start_partition + p,
                    offset: off,
                },
                dst: DmaEndpoint::Hbm {
                    tensor: t,
                    offset: (usize::from(p) * rb) as u64,
                },
                len: rb as u32,
            })
            .collect();
        b.dma_on(EngineId::Sync, (j % 16) as u8, 1, &descs, stored, 1);
        nstore += 1;
    }
    b.wait(EngineId::Sync, stored, nstore);
    b.build().unwrap()
}

/// Runs a program on a fresh trn1 device with raw input bytes `in0`, `in1`, ...; returns each
/// output's bytes and the report (which must be a success).
pub fn run_raw(p: Program, inputs: &[Buf]) -> (Vec<Vec<u8>>, ExecReport) {
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, p).unwrap();
    for (i, buf) in inputs.iter().enumerate() {
        dev.write_tensor(&lp, &format!("in{i}"), &buf.bytes)
            .unwrap();
    }
    let r = dev.execute(&lp, &ExecOptions::default()).unwrap();
    r.result().unwrap();
    let outs = lp
        .program()
        .tensors
        .iter()
        .filter(|t| t.name.starts_with("out"))
        .map(|t| dev.read_tensor(&lp, &t.name).unwrap())
        .collect();
    (outs, r)
}

/// Runs one instruction on `engine` and returns its outputs' bytes.
pub fn exec_one(
    engine: EngineId,
    ins: Instr,
    inputs: &[Buf],
    outputs: &[AccessPattern],
) -> Vec<Vec<u8>> {
    run_raw(program_one(engine, ins, inputs, outputs), inputs).0
}

/// The duration in ticks of the (first) slice of instruction `op` on `engine`.
pub fn slice_ticks(r: &ExecReport, engine: EngineId, op: &str) -> u64 {
    r.events
        .iter()
        .find_map(|ev| match ev.kind {
            EventKind::Instr { op: o, .. } if ev.track == Track::Engine(engine) && o == op => {
                Some(ev.dur)
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no {op} on {engine}"))
}

/// Decodes little-endian elements of `dtype` as raw bits (2-byte elements zero-extended).
pub fn bits(dtype: DType, bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(dtype.size())
        .map(|c| match *c {
            [a, b] => u32::from(u16::from_le_bytes([a, b])),
            [a, b, c, d] => u32::from_le_bytes([a, b, c, d]),
            _ => unreachable!(),
        })
        .collect()
}

/// int32 elements.
pub fn i32s(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// binary32 special and ordinary values: zeros, ±1, fractions, infinities, NaN, subnormals,
/// extremes.
pub fn specials() -> Vec<f32> {
    vec![
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.5,
        -3.75,
        0.5,
        3.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-40,
        -1e-40,
        f32::MAX,
        f32::MIN_POSITIVE,
        1e30,
    ]
}

/// The bits of `v` stored as `dtype` (RNE), zero-extended.
pub fn to_bits(dtype: DType, v: f32) -> u32 {
    bits(dtype, &encode_f32(dtype, &[v]))[0]
}

/// Value stored as `dtype` and read back as binary32.
pub fn through(dtype: DType, v: f32) -> f32 {
    nrt_sim::engine::round_through(dtype, v)
}

/// The canonical quiet NaN's bits in `dtype`.
pub fn qnan_bits(dtype: DType) -> u32 {
    match dtype {
        DType::F32 => 0x7FC0_0000,
        DType::Bf16 => 0x7FC0,
        DType::F16 => 0x7E00,
        DType::I32 => 0,
    }
}

/// ULP distance between two binary32 values (sign-magnitude ordering; NaNs must be handled
/// by the caller).
pub fn ulps_f32(a: f32, b: f32) -> u64 {
    let key = |v: f32| {
        let b = v.to_bits() as i64;
        if b & 0x8000_0000 != 0 {
            -(b & 0x7FFF_FFFF)
        } else {
            b
        }
    };
    key(a).abs_diff(key(b))
}

/// ULP distance between two values of `dtype` given as bits (sign-magnitude ordering).
pub fn ulps_bits(dtype: DType, a: u32, b: u32) -> u64 {
    let sign = if dtype.size() == 2 {
        0x8000
    } else {
        0x8000_0000
    };
    let key = |v: u32| {
        let v = i64::from(v);
        if v & sign != 0 { -(v & (sign - 1)) } else { v }
    };
    key(a).abs_diff(key(b))
}
