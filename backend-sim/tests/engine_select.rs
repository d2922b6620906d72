//! Masks, selects and transposes of format 1.1 against plain Rust references: `AffineSelect`
//! (a causal mask, multi-dimensional steps, bit-exact same-type selection), `RangeSelect`
//! (per-partition bounds and the max reduction), `Transpose` on TensorE and VectorE
//! (bit-exact, NaN/∞ included), and block DMA descriptors (transpose, casts, their cost).
//! Each test names the rule it proves.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod ops_common;

use nrt_sim::Instance;
use nrt_sim::engine::{
    AccessPattern, AluOp, DType, Device, DmaBlock, DmaDescriptor, DmaEndpoint, EngineId, EventKind,
    ExecOptions, Instr, MemKind, ProgramBuilder, Space, Track, encode_f32,
};
use ops_common::*;

/// Rule: `AffineSelect` keeps `on_true` where `cmp(offset + p·channel_multiplier + i·step, 0)`
/// holds and writes `on_false` elsewhere — with `p − i ≥ 0` a causal mask.
#[test]
fn affine_select_makes_a_causal_mask() {
    let n = 128usize;
    let x: Vec<f32> = (0..n * n).map(|i| (i % 97) as f32 * 0.5).collect();
    let ix = Buf::sbuf(DType::F32, n as u8, 0, &x);
    let out = AccessPattern::sbuf(DType::F32, 0, n as u8, 4096, n as u16);
    let ins = Instr::AffineSelect {
        on_true: ix.ap,
        out,
        on_false: f32::MIN,
        cmp: AluOp::GreaterEqual,
        offset: 0,
        channel_multiplier: 1,
        steps: [-1, 0, 0, 0],
    };
    let got = bits(
        DType::F32,
        &exec_one(EngineId::GpSimd, ins, &[ix], &[out])[0],
    );
    for p in 0..n {
        for i in 0..n {
            let want = if i <= p { x[p * n + i] } else { f32::MIN };
            assert_eq!(got[p * n + i], want.to_bits(), "p {p} i {i}");
        }
    }
}

/// Rule: `AffineSelect` steps each of the output's free dimensions separately (a mask
/// broadcast over heads), selects same-type values bit for bit (NaN payloads kept, int32
/// exact), and converts `on_false` and other-type values through binary32.
#[test]
fn affine_select_multi_dim_and_types() {
    // [P=16] × [4 heads at stride 16] × [16 positions]: keep where p + 2 − i > 0.
    let (p, heads, f) = (16usize, 4usize, 16usize);
    let vals: Vec<i32> = (0..p * heads * f).map(|i| 0x7FC0_0001 + i as i32).collect();
    let ix = Buf::sbuf_i32(p as u8, 0, &vals);
    let pat = |dt, off| AccessPattern::new(Space::Sbuf, dt, 0, p as u8, off, &[(4, 16), (16, 1)]);
    let keep = |pp: usize, i: usize| pp as i32 + 2 - i as i32 > 0;
    let out = pat(DType::I32, 8192);
    let ins = Instr::AffineSelect {
        on_true: pat(DType::I32, 0),
        out,
        on_false: -7.0,
        cmp: AluOp::Greater,
        offset: 2,
        channel_multiplier: 1,
        steps: [0, -1, 0, 0],
    };
    let got = i32s(&exec_one(EngineId::GpSimd, ins, std::slice::from_ref(&ix), &[out])[0]);
    for pp in 0..p {
        for h in 0..heads {
            for i in 0..f {
                let k = pp * heads * f + h * f + i;
                let want = if keep(pp, i) { vals[k] } else { -7 };
                assert_eq!(got[k], want, "p {pp} h {h} i {i}");
            }
        }
    }
    // The same bits read as fp32 (quiet NaNs with payloads) are kept bit for bit.
    let asf = Buf {
        ap: pat(DType::F32, 0),
        bytes: ix.bytes.clone(),
    };
    let out = pat(DType::F32, 8192);
    let ins = Instr::AffineSelect {
        on_true: asf.ap,
        out,
        on_false: f32::NEG_INFINITY,
        cmp: AluOp::Greater,
        offset: 2,
        channel_multiplier: 1,
        steps: [0, -1, 0, 0],
    };
    let got = bits(
        DType::F32,
        &exec_one(EngineId::GpSimd, ins, &[asf], &[out])[0],
    );
    for k in 0..vals.len() {
        let (pp, i) = (k / (heads * f), k % f);
        let want = if keep(pp, i) {
            vals[k] as u32
        } else {
            f32::NEG_INFINITY.to_bits()
        };
        assert_eq!(got[k], want);
    }
    // fp32 → bf16 converts (RNE), on_false too.
    let xf: Vec<f32> = (0..p * heads * f).map(|i| i as f32 * 1.001).collect();
    let ixf = Buf::sbuf(DType::F32, p as u8, 0, &xf);
    let out = pat(DType::Bf16, 8192);
    let ins = Instr::AffineSelect {
        on_true: pat(DType::F32, 0),
        out,
        on_false: 1.0e-3,
        cmp: AluOp::Greater,
        offset: 2,
        channel_multiplier: 1,
        steps: [0, -1, 0, 0],
    };
    let got = bits(
        DType::Bf16,
        &exec_one(EngineId::GpSimd, ins, &[ixf], &[out])[0],
    );
    for k in 0..xf.len() {
        let (pp, i) = (k / (heads * f), k % f);
        let want = if keep(pp, i) { xf[k] } else { 1.0e-3 };
        assert_eq!(got[k], to_bits(DType::Bf16, want));
    }
}

/// Rule: `RangeSelect` keeps `on_true[p, i]` where `cmp0(i + range_start, bound0[p])` and
/// `cmp1(i + range_start, bound1[p])` hold (binary32 comparisons), writes `on_false`
/// elsewhere, and the optional reduction is each partition's maximum of the binary32 results.
#[test]
fn range_select_keeps_the_window() {
    let (p, f) = (8usize, 64usize);
    let x: Vec<f32> = (0..p * f).map(|i| ((i * 31) % 17) as f32 - 8.0).collect();
    let lo: Vec<f32> = (0..p).map(|k| 10.0 + k as f32 * 5.0).collect();
    let hi: Vec<f32> = (0..p).map(|k| 30.0 + k as f32 * 3.5).collect();
    for dt in [DType::F32, DType::Bf16] {
        let ix = Buf::sbuf(DType::F32, p as u8, 0, &x);
        let il = Buf::sbuf(DType::F32, p as u8, 4096, &lo);
        let ih = Buf::sbuf(DType::F32, p as u8, 4160, &hi);
        let out = AccessPattern::sbuf(dt, 0, p as u8, 8192, f as u16);
        let red = AccessPattern::sbuf(DType::F32, 0, p as u8, 12288, 1);
        let ins = Instr::RangeSelect {
            on_true: ix.ap,
            out,
            cmp0: AluOp::GreaterEqual,
            bound0: il.ap,
            cmp1: AluOp::Less,
            bound1: ih.ap,
            range_start: 10,
            on_false: f32::MIN,
            reduce_max: Some(red),
        };
        let got = exec_one(EngineId::Vector, ins, &[ix, il, ih], &[out, red]);
        let (y, r) = (bits(dt, &got[0]), bits(DType::F32, &got[1]));
        for k in 0..p {
            let mut m = f32::NEG_INFINITY;
            for i in 0..f {
                let idx = (i + 10) as f32;
                let v = if idx >= lo[k] && idx < hi[k] {
                    x[k * f + i]
                } else {
                    f32::MIN
                };
                m = m.max(v);
                assert_eq!(y[k * f + i], to_bits(dt, v), "{dt} p {k} i {i}");
            }
            assert_eq!(r[k], m.to_bits(), "max p {k}");
        }
    }
    // bf16 output of the fill value is −∞ (binary32 MIN rounds up), as NKI notes.
    assert_eq!(to_bits(DType::Bf16, f32::MIN), 0xFF80);
}

/// Values with NaN/∞/−0 and subnormals at a few positions, as raw bits of `dt`.
fn spiky(n: usize, dt: DType) -> Vec<f32> {
    (0..n)
        .map(|i| match i % 53 {
            3 => f32::from_bits(0x7FC1_2000),
            7 => f32::INFINITY,
            11 => -0.0,
            13 => f32::from_bits(0x0000_0123),
            _ => through(dt, i as f32 * 0.37 - 40.0),
        })
        .collect()
}

/// Rule: `Transpose` gives `out[f, p] = src[p, f]` bit for bit — on TensorE from SBUF into a
/// PSUM bank (up to 128×128, here bf16 and fp32), on VectorE within a 32×32 block, NaN, ∞,
/// −0 and subnormals included.
#[test]
fn transpose_is_bit_exact_on_both_engines() {
    for (engine, dt, p, f, src_space) in [
        (
            EngineId::Tensor,
            DType::Bf16,
            128usize,
            128usize,
            Space::Sbuf,
        ),
        (EngineId::Tensor, DType::F32, 64, 96, Space::Sbuf),
        (EngineId::Vector, DType::F32, 32, 32, Space::Psum),
        (EngineId::Vector, DType::I32, 20, 7, Space::Sbuf),
    ] {
        let x = spiky(p * f, dt);
        let mut ix = Buf::sbuf(dt, p as u8, 0, &x);
        if src_space == Space::Psum {
            ix = ix.in_psum(4096);
        }
        let out = AccessPattern::contiguous(
            if engine == EngineId::Tensor {
                Space::Psum
            } else {
                Space::Sbuf
            },
            dt,
            0,
            f as u8,
            if engine == EngineId::Tensor { 0 } else { 8192 },
            p as u16,
        );
        let src = bits(dt, &ix.bytes);
        let got = bits(
            dt,
            &exec_one(engine, Instr::Transpose { src: ix.ap, out }, &[ix], &[out])[0],
        );
        for pp in 0..p {
            for ff in 0..f {
                assert_eq!(
                    got[ff * p + pp],
                    src[pp * f + ff],
                    "{engine} {dt} {pp},{ff}"
                );
            }
        }
    }
}

fn block(
    mem: MemKind,
    index: u32,
    offset: u64,
    dtype: DType,
    (rows, cols): (u32, u32),
    pitch: u32,
    transposed: bool,
) -> DmaEndpoint {
    DmaEndpoint::Block(DmaBlock {
        mem,
        index,
        offset,
        dtype,
        rows,
        cols,
        pitch,
        transposed,
    })
}

/// Runs `descs` as one transfer each, in order, on DMA engine 0; the input tensor `x` holds
/// `xbytes`; returns the output tensor `y` and the descriptor durations.
fn run_dma(
    x: (DType, &[u64], Vec<u8>),
    y: (DType, &[u64]),
    descs: &[DmaDescriptor],
) -> (Vec<u8>, Vec<u64>) {
    let mut b = ProgramBuilder::new("dma");
    b.input("x", x.0, x.1);
    b.output("y", y.0, y.1);
    let s = b.sem().unwrap();
    for (i, d) in descs.iter().enumerate() {
        b.dma_on(EngineId::Sync, 0, 0, std::slice::from_ref(d), s, 1);
        b.wait(EngineId::Sync, s, i as u32 + 1);
    }
    let p = b.build().unwrap();
    assert_eq!(p.format_minor(), 1);
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, p).unwrap();
    let (outs, r) = dev
        .run(&lp, &[("x", &x.2)], &ExecOptions::default())
        .unwrap();
    r.result().unwrap();
    let durs = r
        .events
        .iter()
        .filter(|e| e.track == Track::DmaEngine(0))
        .filter_map(|e| match e.kind {
            EventKind::Descriptor { .. } => Some(e.dur),
            _ => None,
        })
        .collect();
    (outs[0].1.clone(), durs)
}

/// Rule: a transposing block descriptor moves HBM `[R, C]` into SBUF `[C partitions, R]`
/// (NKI `dma_transpose`), bit for bit, and back; SBUF→SBUF transposes too.
#[test]
fn dma_transpose_moves_a_2d_block() {
    let (r, c) = (40u32, 24u32);
    let x = spiky((r * c) as usize, DType::Bf16);
    let xb = encode_f32(DType::Bf16, &x);
    let es = 2u32;
    let descs = [
        // HBM [40, 24] → SBUF [24, 40] (transposed).
        DmaDescriptor {
            src: block(MemKind::Hbm, 0, 0, DType::Bf16, (r, c), c, false),
            dst: block(MemKind::Sbuf, 0, 0, DType::Bf16, (c, r), 0, true),
            len: r * c * es,
        },
        // SBUF [24, 40] → SBUF [40, 24] (transposed back) at another offset.
        DmaDescriptor {
            src: block(MemKind::Sbuf, 0, 0, DType::Bf16, (c, r), 0, false),
            dst: block(MemKind::Sbuf, 0, 4096, DType::Bf16, (r, c), 0, true),
            len: r * c * es,
        },
        // SBUF [24, 40] → HBM y [24, 40], plain (row pitch 40).
        DmaDescriptor {
            src: block(MemKind::Sbuf, 0, 0, DType::Bf16, (c, r), 0, false),
            dst: block(MemKind::Hbm, 1, 0, DType::Bf16, (c, r), r, false),
            len: r * c * es,
        },
    ];
    let (y, _) = run_dma(
        (DType::Bf16, &[u64::from(r), u64::from(c)], xb.clone()),
        (DType::Bf16, &[u64::from(c), u64::from(r)]),
        &descs,
    );
    let xs = bits(DType::Bf16, &xb);
    let ys = bits(DType::Bf16, &y);
    for i in 0..r as usize {
        for j in 0..c as usize {
            assert_eq!(ys[j * r as usize + i], xs[i * c as usize + j], "{i},{j}");
        }
    }
}

/// Rule: a block descriptor between different element types converts each element through
/// binary32 with RNE (to int32: nearest even, saturating, NaN → 0); same types copy bits.
#[test]
fn dma_casts_round_to_nearest_even() {
    let x: Vec<f32> = vec![
        1.0 + 2f32.powi(-8),
        1.0 + 3.0 * 2f32.powi(-8),
        f32::MAX,
        f32::NAN,
        -0.0,
        1e-40,
        2.5,
        -3.5,
        3e9,
        -3e9,
        65519.0,
        65520.0,
        f32::INFINITY,
        0.1,
        -7.7,
        1e-8,
    ];
    let n = x.len() as u32;
    let xb = encode_f32(DType::F32, &x);
    for dt in [DType::Bf16, DType::F16, DType::I32] {
        let descs = [
            DmaDescriptor {
                src: block(MemKind::Hbm, 0, 0, DType::F32, (1, n), n, false),
                dst: block(MemKind::Sbuf, 0, 0, dt, (1, n), 0, false),
                len: n * 4,
            },
            DmaDescriptor {
                src: block(MemKind::Sbuf, 0, 0, dt, (1, n), 0, false),
                dst: block(MemKind::Hbm, 1, 0, dt, (1, n), n, false),
                len: n * dt.size() as u32,
            },
        ];
        let (y, _) = run_dma(
            (DType::F32, &[u64::from(n)], xb.clone()),
            (dt, &[u64::from(n)]),
            &descs,
        );
        let want: Vec<u8> = match dt {
            DType::I32 => x
                .iter()
                .flat_map(|&v| nrt_sim::engine::f32_to_i32(v).to_le_bytes())
                .collect(),
            _ => encode_f32(dt, &x),
        };
        assert_eq!(y, want, "{dt}");
    }
    // int32 → fp32 rounds to nearest even.
    let xi: Vec<i32> = vec![16_777_217, 16_777_219, -2_147_483_648, 2_147_483_647];
    let xb: Vec<u8> = xi.iter().flat_map(|v| v.to_le_bytes()).collect();
    let descs = [
        DmaDescriptor {
            src: block(MemKind::Hbm, 0, 0, DType::I32, (1, 4), 4, false),
            dst: block(MemKind::Sbuf, 0, 0, DType::F32, (1, 4), 0, false),
            len: 16,
        },
        DmaDescriptor {
            src: DmaEndpoint::Sbuf {
                partition: 0,
                offset: 0,
            },
            dst: DmaEndpoint::Hbm {
                tensor: 1,
                offset: 0,
            },
            len: 16,
        },
    ];
    let (y, _) = run_dma((DType::I32, &[4], xb), (DType::F32, &[4]), &descs);
    let got: Vec<f32> = y
        .chunks(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    assert_eq!(
        got,
        vec![
            16_777_216.0,
            16_777_220.0,
            -2_147_483_648.0,
            2_147_483_648.0
        ]
    );
}

/// Rule (cost): a block copy costs what a byte copy of its larger side costs; a transposing
/// one moves its bytes at 90 % of the rate (Trainium2 guide): one 8 KiB descriptor's data
/// phase is ⌈8192·7/136⌉ = 422 ticks copied, ⌈8192·(10/9)·7/136⌉ = 469 transposed.
#[test]
fn dma_block_costs() {
    let xb = vec![0u8; 8192];
    let plain = DmaDescriptor {
        src: DmaEndpoint::Hbm {
            tensor: 0,
            offset: 0,
        },
        dst: DmaEndpoint::Sbuf {
            partition: 0,
            offset: 0,
        },
        len: 8192,
    };
    let cast = DmaDescriptor {
        src: block(MemKind::Hbm, 0, 0, DType::F32, (1, 2048), 2048, false),
        dst: block(MemKind::Sbuf, 0, 0, DType::Bf16, (1, 2048), 0, false),
        len: 8192,
    };
    let transpose = DmaDescriptor {
        src: block(MemKind::Hbm, 0, 0, DType::Bf16, (32, 128), 128, false),
        dst: block(MemKind::Sbuf, 0, 0, DType::Bf16, (128, 32), 0, true),
        len: 8192,
    };
    let (_, d) = run_dma(
        (DType::F32, &[2048], xb),
        (DType::F32, &[1]),
        &[plain, cast, transpose],
    );
    let first = 64 + 232;
    assert_eq!(d, vec![first + 422, first + 422, first + 469]);
}
