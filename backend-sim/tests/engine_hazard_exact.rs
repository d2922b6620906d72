//! The hazard detector compares exact footprints: interleaved accesses that share no byte (even
//! and odd columns on two engines, alternate partitions, alternate HBM rows written through
//! strided block descriptors, a transposing block next to a disjoint region) run without a
//! hazard and give the right results; the same programs with one shared element report the
//! hazard between exactly those two accesses; and [`Footprint::overlaps`] agrees with
//! brute-force enumeration of bytes on many random pairs of footprints, access patterns and
//! block endpoints.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;

use nrt_core::NrtStatus;
use nrt_sim::Instance;
use nrt_sim::engine::{
    AccessPattern, ActFunc, Actor, AluOp, Bias, DType, Device, DmaBlock, DmaDescriptor,
    DmaEndpoint, EngineId, ExecOptions, ExecReport, Footprint, Hazard, Instr, MemKind, Program,
    ProgramBuilder, Region, Space, decode_f32, encode_f32,
};

/// Runs `p` with `inputs` (f32 values encoded to each tensor's dtype); returns the report and
/// every tensor's decoded contents afterwards.
fn exec(p: Program, inputs: &[(&str, &[f32])]) -> (ExecReport, Vec<(String, Vec<f32>)>) {
    let tensors: Vec<(String, DType)> = p
        .tensors
        .iter()
        .map(|t| (t.name.clone(), t.dtype))
        .collect();
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, p).unwrap();
    for (name, v) in inputs {
        let dt = tensors.iter().find(|(n, _)| n == name).unwrap().1;
        dev.write_tensor(&lp, name, &encode_f32(dt, v)).unwrap();
    }
    let r = dev.execute(&lp, &ExecOptions::default()).unwrap();
    let outs = tensors
        .iter()
        .map(|(n, dt)| {
            (
                n.clone(),
                decode_f32(*dt, &dev.read_tensor(&lp, n).unwrap()),
            )
        })
        .collect();
    (r, outs)
}

fn output<'a>(outs: &'a [(String, Vec<f32>)], name: &str) -> &'a [f32] {
    &outs.iter().find(|(n, _)| n == name).unwrap().1
}

fn clean(r: &ExecReport) {
    assert_eq!(r.status, NrtStatus::Success, "{:?}", r.hazards.first());
    assert!(r.hazards.is_empty(), "{}", r.hazards[0]);
}

/// The one hazard of `r`.
fn one_hazard(r: &ExecReport) -> Hazard {
    assert_eq!(r.status, NrtStatus::ExecCompletedWithErr);
    assert_eq!(r.hazards.len(), 1, "{:#?}", r.hazards);
    r.hazards[0]
}

fn data(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i as f32) * 0.25 - 3.0).collect()
}

fn sbuf(p0: u32, p1: u32, b0: u64, b1: u64) -> Region {
    Region {
        mem: MemKind::Sbuf,
        p0,
        p1,
        b0,
        b1,
    }
}

fn hbm_block(index: u32, offset: u64, rows: u32, cols: u32, pitch: u32, t: bool) -> DmaEndpoint {
    DmaEndpoint::Block(DmaBlock {
        mem: MemKind::Hbm,
        index,
        offset,
        dtype: DType::F32,
        rows,
        cols,
        pitch,
        transposed: t,
    })
}

fn chip_block(index: u32, offset: u64, rows: u32, cols: u32, dtype: DType, t: bool) -> DmaEndpoint {
    DmaEndpoint::Block(DmaBlock {
        mem: MemKind::Sbuf,
        index,
        offset,
        dtype,
        rows,
        cols,
        pitch: cols,
        transposed: t,
    })
}

/// Byte descriptors loading `[rows, cols]` f32 tensor `t` into SBUF partitions `0..rows`.
fn load_rows(t: u32, rows: u8, cols: u32) -> Vec<DmaDescriptor> {
    (0..rows)
        .map(|p| DmaDescriptor {
            src: DmaEndpoint::Hbm {
                tensor: t,
                offset: u64::from(p) * u64::from(cols) * 4,
            },
            dst: DmaEndpoint::Sbuf {
                partition: p,
                offset: 0,
            },
            len: cols * 4,
        })
        .collect()
}

/// `x [4, 64]` → SBUF; VectorE doubles the even columns, ScalarE triples the odd ones (or, with
/// `share`, columns 1, 3, …, 61 and 62, 64, …, 122: column 62 is VectorE's too), both into one
/// tile, unordered; Sync stores the tile to `y`.
fn columns(share: bool) -> Program {
    let mut b = ProgramBuilder::new("columns");
    let x = b.input("x", DType::F32, &[4, 64]);
    let y = b.output("y", DType::F32, &[4, 64]);
    let (loaded, done) = (b.sem().unwrap(), b.sem().unwrap());
    b.dma_on(EngineId::Sync, 0, 0, &load_rows(x, 4, 64), loaded, 1);
    let ap = |off: u32, dims: &[(u16, i16)]| {
        AccessPattern::new(Space::Sbuf, DType::F32, 0, 4, off, dims)
    };
    let odd: &[(u16, i16)] = if share {
        &[(2, 61), (31, 2)]
    } else {
        &[(32, 2)]
    };
    b.wait(EngineId::Vector, loaded, 1);
    b.push(
        EngineId::Vector,
        Instr::TensorScalar {
            op: AluOp::Mul,
            src: ap(0, &[(32, 2)]),
            scalar: 2.0,
            out: ap(1024, &[(32, 2)]),
        },
    );
    b.signal(EngineId::Vector, done, 1);
    b.wait(EngineId::Scalar, loaded, 1);
    b.push(
        EngineId::Scalar,
        Instr::Activation {
            func: ActFunc::Identity,
            src: ap(4, odd),
            out: ap(1028, odd),
            scale: 3.0,
            bias: Bias::Imm(0.0),
        },
    );
    b.signal(EngineId::Scalar, done, 1);
    b.wait(EngineId::Sync, done, 2);
    let store: Vec<DmaDescriptor> = (0..4u8)
        .map(|p| DmaDescriptor {
            src: DmaEndpoint::Sbuf {
                partition: p,
                offset: 1024,
            },
            dst: DmaEndpoint::Hbm {
                tensor: y,
                offset: u64::from(p) * 256,
            },
            len: 256,
        })
        .collect();
    b.dma_on(EngineId::Sync, 0, 0, &store, loaded, 1);
    b.wait(EngineId::Sync, loaded, 2);
    b.build().unwrap()
}

#[test]
fn even_and_odd_columns_on_vector_and_scalar() {
    let x = data(256);
    let (r, outs) = exec(columns(false), &[("x", &x)]);
    clean(&r);
    let y = output(&outs, "y");
    for (i, (&v, &xi)) in y.iter().zip(&x).enumerate() {
        let want = if i % 2 == 0 { xi * 2.0 } else { xi * 3.0 + 0.0 };
        assert_eq!(v.to_bits(), want.to_bits(), "element {i}");
    }
    // One shared element (column 62): the hazard between those two writes, boxes reported.
    let (r, _) = exec(columns(true), &[("x", &x)]);
    let h = one_hazard(&r);
    assert!(
        matches!(
            h.first.actor,
            Actor::Engine {
                engine: EngineId::Vector,
                op: "TensorScalar",
                ..
            }
        ) && h.first.write
    );
    assert!(
        matches!(
            h.second.actor,
            Actor::Engine {
                engine: EngineId::Scalar,
                op: "Activation",
                ..
            }
        ) && h.second.write
    );
    assert_eq!(h.first.region, sbuf(0, 4, 1024, 1024 + 63 * 4));
    assert_eq!(h.second.region, sbuf(0, 4, 1028, 1028 + 122 * 4));
    let msg = r.result().unwrap_err();
    assert!(
        msg.message().contains("ScalarE") && msg.message().contains("VectorE"),
        "{msg}"
    );
}

/// Two DMA queues fill the even and the odd partitions of one tile (with `share`, the odd
/// queue writes partition 6 too), unordered; VectorE then copies the tile to `y`.
fn alternate_partitions(share: bool) -> Program {
    let mut b = ProgramBuilder::new("partitions");
    let x = b.input("x", DType::F32, &[8, 16]);
    let y = b.output("y", DType::F32, &[8, 16]);
    let s = b.sem().unwrap();
    let all = load_rows(x, 8, 16);
    let even: Vec<DmaDescriptor> = all.iter().step_by(2).copied().collect();
    let mut odd: Vec<DmaDescriptor> = all.iter().skip(1).step_by(2).copied().collect();
    if share {
        odd.push(all[6]);
    }
    b.dma_on(EngineId::Sync, 0, 0, &even, s, 1);
    b.dma_on(EngineId::Sync, 1, 0, &odd, s, 1);
    b.wait(EngineId::Vector, s, 2);
    b.push(
        EngineId::Vector,
        Instr::TensorCopy {
            src: AccessPattern::sbuf(DType::F32, 0, 8, 0, 16),
            out: AccessPattern::sbuf(DType::F32, 0, 8, 512, 16),
        },
    );
    b.signal(EngineId::Vector, s, 1);
    b.wait(EngineId::Sync, s, 3);
    let store: Vec<DmaDescriptor> = (0..8u8)
        .map(|p| DmaDescriptor {
            src: DmaEndpoint::Sbuf {
                partition: p,
                offset: 512,
            },
            dst: DmaEndpoint::Hbm {
                tensor: y,
                offset: u64::from(p) * 64,
            },
            len: 64,
        })
        .collect();
    b.dma_on(EngineId::Sync, 2, 0, &store, s, 1);
    b.wait(EngineId::Sync, s, 4);
    b.build().unwrap()
}

#[test]
fn alternate_partitions_from_two_dma_queues() {
    let x = data(128);
    let (r, outs) = exec(alternate_partitions(false), &[("x", &x)]);
    clean(&r);
    assert_eq!(output(&outs, "y"), &x[..]);
    let (r, _) = exec(alternate_partitions(true), &[("x", &x)]);
    let h = one_hazard(&r);
    // Descriptor 3 is the even queue's partition 6, descriptor 8 the odd queue's extra one.
    let desc = |a: &Actor| match *a {
        Actor::Dma { engine, desc, .. } => (engine, desc),
        Actor::Engine { .. } => panic!("{a}"),
    };
    assert_eq!(
        (desc(&h.first.actor), desc(&h.second.actor)),
        ((0, 3), (1, 8))
    );
    assert_eq!(h.second.region, sbuf(6, 7, 0, 64));
}

/// `x [8, 16]` → SBUF; two DMA queues store partitions 0..4 into the even rows and 4..8 into
/// the odd rows of `y [8, 16]` through block descriptors of pitch 2 rows, unordered. With
/// `share`, the second queue instead stores column 3 of partitions 4..6 into rows 1 and 4
/// (pitch 3 rows): element (4, 3) is the first queue's too.
fn alternate_rows(share: bool) -> Program {
    let mut b = ProgramBuilder::new("rows");
    let x = b.input("x", DType::F32, &[8, 16]);
    let y = b.output("y", DType::F32, &[8, 16]);
    let s = b.sem().unwrap();
    b.dma_on(EngineId::Sync, 0, 0, &load_rows(x, 8, 16), s, 1);
    b.wait(EngineId::Sync, s, 1);
    let even = DmaDescriptor {
        src: chip_block(0, 0, 4, 16, DType::F32, false),
        dst: hbm_block(y, 0, 4, 16, 32, false),
        len: 256,
    };
    let odd = if share {
        DmaDescriptor {
            src: chip_block(4, 12, 2, 1, DType::F32, false),
            dst: hbm_block(y, (16 + 3) * 4, 2, 1, 48, false),
            len: 8,
        }
    } else {
        DmaDescriptor {
            src: chip_block(4, 0, 4, 16, DType::F32, false),
            dst: hbm_block(y, 64, 4, 16, 32, false),
            len: 256,
        }
    };
    b.dma_on(EngineId::Sync, 1, 0, &[even], s, 1);
    b.dma_on(EngineId::Sync, 2, 0, &[odd], s, 1);
    b.wait(EngineId::Sync, s, 3);
    b.build().unwrap()
}

#[test]
fn alternate_hbm_rows_through_strided_block_descriptors() {
    let x = data(128);
    let (r, outs) = exec(alternate_rows(false), &[("x", &x)]);
    clean(&r);
    let y = output(&outs, "y");
    for row in 0..8 {
        let src = if row % 2 == 0 { row / 2 } else { 4 + row / 2 };
        assert_eq!(
            &y[row * 16..row * 16 + 16],
            &x[src * 16..src * 16 + 16],
            "row {row}"
        );
    }
    let (r, _) = exec(alternate_rows(true), &[("x", &x)]);
    let h = one_hazard(&r);
    let desc = |a: &Actor| match *a {
        Actor::Dma { engine, desc, .. } => (engine, desc),
        Actor::Engine { .. } => panic!("{a}"),
    };
    assert_eq!(
        (desc(&h.first.actor), desc(&h.second.actor)),
        ((1, 8), (2, 9))
    );
    assert!(h.first.write && h.second.write);
    assert_eq!(h.first.region.mem, MemKind::Hbm);
    // Bounding boxes: rows 0..7 of the even block, elements (1, 3) and (4, 3) of the other.
    assert_eq!(h.first.region.b1 - h.first.region.b0, (6 * 16 + 16) * 4);
    assert_eq!(h.second.region.b1 - h.second.region.b0, (3 * 16 + 1) * 4);
    assert_eq!(h.second.region.b0 - h.first.region.b0, (16 + 3) * 4);
}

/// A transposing block stores SBUF `[4 partitions, 8]` into columns 0..4 of `y [8, 8]` (bf16)
/// while another queue stores SBUF partitions 4..12 (4 columns each) into columns 4..8 (with
/// `share`: 3..7), unordered.
fn transpose_next_to(first_col: u64) -> Program {
    let mut b = ProgramBuilder::new("transpose");
    let x = b.input("x", DType::Bf16, &[12, 8]);
    let y = b.output("y", DType::Bf16, &[8, 8]);
    let s = b.sem().unwrap();
    let load: Vec<DmaDescriptor> = (0..12u8)
        .map(|p| DmaDescriptor {
            src: DmaEndpoint::Hbm {
                tensor: x,
                offset: u64::from(p) * 16,
            },
            dst: DmaEndpoint::Sbuf {
                partition: p,
                offset: 0,
            },
            len: 16,
        })
        .collect();
    b.dma_on(EngineId::Sync, 0, 0, &load, s, 1);
    b.wait(EngineId::Sync, s, 1);
    let hbm = |offset: u64, rows, cols, t| {
        DmaEndpoint::Block(DmaBlock {
            mem: MemKind::Hbm,
            index: y,
            offset,
            dtype: DType::Bf16,
            rows,
            cols,
            pitch: 8,
            transposed: t,
        })
    };
    let t = DmaDescriptor {
        src: chip_block(0, 0, 4, 8, DType::Bf16, false),
        dst: hbm(0, 8, 4, true),
        len: 64,
    };
    let other = DmaDescriptor {
        src: chip_block(4, 0, 8, 4, DType::Bf16, false),
        dst: hbm(first_col * 2, 8, 4, false),
        len: 64,
    };
    b.dma_on(EngineId::Sync, 1, 0, &[t], s, 1);
    b.dma_on(EngineId::Sync, 2, 0, &[other], s, 1);
    b.wait(EngineId::Sync, s, 3);
    b.build().unwrap()
}

#[test]
fn transposing_block_next_to_a_disjoint_region() {
    let x = data(96);
    let (r, outs) = exec(transpose_next_to(4), &[("x", &x)]);
    clean(&r);
    let y = output(&outs, "y");
    for row in 0..8 {
        for col in 0..8 {
            let want = if col < 4 {
                x[col * 8 + row] // y[:, 0:4] = transpose of x[0:4, :]
            } else {
                x[(4 + row) * 8 + col - 4]
            };
            assert_eq!(y[row * 8 + col], want, "({row}, {col})");
        }
    }
    let (r, _) = exec(transpose_next_to(3), &[("x", &x)]);
    let h = one_hazard(&r);
    assert!(
        matches!(
            h.first.actor,
            Actor::Dma {
                engine: 1,
                desc: 12,
                ..
            }
        ),
        "{h}"
    );
    assert!(
        matches!(
            h.second.actor,
            Actor::Dma {
                engine: 2,
                desc: 13,
                ..
            }
        ),
        "{h}"
    );
}

/// On chip: a transposing block fills bytes 8..16 of partitions 0..8 while VectorE writes
/// columns 0..4 and `gap`..`gap`+4 (bf16) of the same partitions, unordered.
fn transpose_between_halves(gap: i16) -> Program {
    let mut b = ProgramBuilder::new("between");
    let x = b.input("x", DType::Bf16, &[4, 8]);
    let s = b.sem().unwrap();
    b.dma_on(
        EngineId::Sync,
        0,
        0,
        &[DmaDescriptor {
            src: DmaEndpoint::Block(DmaBlock {
                mem: MemKind::Hbm,
                index: x,
                offset: 0,
                dtype: DType::Bf16,
                rows: 4,
                cols: 8,
                pitch: 8,
                transposed: false,
            }),
            dst: chip_block(0, 8, 8, 4, DType::Bf16, true),
            len: 64,
        }],
        s,
        1,
    );
    b.push(
        EngineId::GpSimd,
        Instr::Memset {
            out: AccessPattern::new(Space::Sbuf, DType::Bf16, 0, 8, 0, &[(2, gap), (4, 1)]),
            bits: 0,
        },
    );
    b.wait(EngineId::Sync, s, 1);
    b.build().unwrap()
}

#[test]
fn transposing_block_between_two_halves_of_a_strided_write() {
    let (r, _) = exec(transpose_between_halves(8), &[("x", &data(32))]);
    clean(&r);
    let (r, _) = exec(transpose_between_halves(7), &[("x", &data(32))]);
    let h = one_hazard(&r);
    assert_eq!(h.second.region, sbuf(0, 8, 8, 16));
    assert_eq!(h.first.region, sbuf(0, 8, 0, 22));
    assert!(matches!(
        h.first.actor,
        Actor::Engine {
            engine: EngineId::GpSimd,
            ..
        }
    ));
}

/// A block descriptor writing an HBM tensor races an unordered byte descriptor reading it.
#[test]
fn block_writes_to_hbm_are_checked_against_reads() {
    let mut b = ProgramBuilder::new("block_raw");
    let y = b.output("y", DType::F32, &[4, 16]);
    let s = b.sem().unwrap();
    b.dma_on(
        EngineId::Sync,
        0,
        0,
        &[DmaDescriptor {
            src: chip_block(0, 0, 4, 16, DType::F32, false),
            dst: hbm_block(y, 0, 4, 16, 16, false),
            len: 256,
        }],
        s,
        1,
    );
    b.dma_on(
        EngineId::Sync,
        1,
        0,
        &[DmaDescriptor {
            src: DmaEndpoint::Hbm {
                tensor: y,
                offset: 64,
            },
            dst: DmaEndpoint::Sbuf {
                partition: 8,
                offset: 0,
            },
            len: 64,
        }],
        s,
        1,
    );
    b.wait(EngineId::Sync, s, 2);
    let (r, _) = exec(b.build().unwrap(), &[]);
    let h = one_hazard(&r);
    assert!(h.first.write != h.second.write, "{h}");
}

/// The reported hazard is the reference search's first among the real conflicts: a record
/// whose box overlaps at a lower partition but shares no byte is passed over.
#[test]
fn the_first_real_conflict_is_reported() {
    let mut b = ProgramBuilder::new("order");
    let ap = |p0, n, off, dims: &[(u16, i16)]| {
        AccessPattern::new(Space::Sbuf, DType::F32, p0, n, off, dims)
    };
    // VectorE: even columns of partitions 0..32 (box overlaps ScalarE's, no shared byte).
    b.push(
        EngineId::Vector,
        Instr::TensorCopy {
            src: ap(0, 32, 8192, &[(32, 1)]),
            out: ap(0, 32, 0, &[(32, 2)]),
        },
    );
    // GpSimdE: every column of partitions 32..64.
    b.push(
        EngineId::GpSimd,
        Instr::Memset {
            out: ap(32, 32, 0, &[(64, 1)]),
            bits: 0,
        },
    );
    // ScalarE, after a long unrelated copy: odd columns of partitions 0..64.
    b.push(
        EngineId::Scalar,
        Instr::TensorCopy {
            src: ap(0, 64, 4096, &[(4096, 1)]),
            out: ap(0, 64, 32768, &[(4096, 1)]),
        },
    );
    b.push(
        EngineId::Scalar,
        Instr::TensorCopy {
            src: ap(0, 64, 4096, &[(32, 1)]),
            out: ap(0, 64, 4, &[(32, 2)]),
        },
    );
    let (r, _) = exec(b.build().unwrap(), &[]);
    let h = one_hazard(&r);
    assert!(
        matches!(
            h.first.actor,
            Actor::Engine {
                engine: EngineId::GpSimd,
                ..
            }
        ),
        "{h}"
    );
    assert!(
        matches!(
            h.second.actor,
            Actor::Engine {
                engine: EngineId::Scalar,
                pc: 1,
                ..
            }
        ),
        "{h}"
    );
}

// ---- randomized comparison with brute-force enumeration ------------------------------------

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
}

/// Every `(memory, partition, byte)` of a footprint, enumerated from its definition.
type Bytes = HashSet<(u8, u32, i64)>;

fn mem_code(m: MemKind) -> u8 {
    match m {
        MemKind::Sbuf => 0,
        MemKind::Psum => 1,
        MemKind::Hbm => 2,
    }
}

/// The bytes `base + Σ k_d·stride_d + e` (`e < run`) in each of `partitions`.
fn enumerate(mem: MemKind, partitions: &[u32], base: i64, run: u64, dims: &[(u64, i64)]) -> Bytes {
    let mut offs = vec![base];
    for &(count, stride) in dims {
        offs = offs
            .iter()
            .flat_map(|&o| (0..count as i64).map(move |k| o + k * stride))
            .collect();
    }
    let mut set = Bytes::new();
    for &p in partitions {
        for &o in &offs {
            for e in 0..run as i64 {
                set.insert((mem_code(mem), p, o + e));
            }
        }
    }
    set
}

/// Checks what a footprint claims about itself against its enumeration.
fn check_shape(fp: &Footprint, set: &Bytes, what: &str) {
    assert_eq!(fp.is_empty(), set.is_empty(), "{what}: {fp}");
    if set.is_empty() {
        return;
    }
    let r = fp.region();
    let p0 = set.iter().map(|x| x.1).min().unwrap();
    let p1 = set.iter().map(|x| x.1).max().unwrap() + 1;
    let b0 = set.iter().map(|x| x.2).min().unwrap();
    let b1 = set.iter().map(|x| x.2).max().unwrap() + 1;
    assert_eq!(
        (r.p0, r.p1, r.b0 as i64, r.b1 as i64),
        (p0, p1, b0, b1),
        "{what}: {fp}"
    );
    let volume = u64::from(p1 - p0) * (b1 - b0) as u64;
    // Partitions carry the same bytes, so the box is full iff its volume is the count.
    assert_eq!(fp.is_dense(), volume == set.len() as u64, "{what}: {fp}");
}

fn random_footprint(rng: &mut Rng) -> Option<(Footprint, Bytes, String)> {
    let mem = [MemKind::Sbuf, MemKind::Psum][rng.below(8).min(1) as usize];
    let (start, count, step) = (
        rng.below(4) as u32,
        rng.below(5) as u32,
        rng.below(4) as u32,
    );
    let base = rng.below(40);
    let run = [0, 1, 1, 2, 2, 3, 4, 5][rng.below(8) as usize];
    let nd = rng.below(5) as usize;
    let dims: Vec<(u64, i64)> = (0..nd)
        .map(|_| (rng.below(5), rng.range(-12, 12)))
        .collect();
    let fp = Footprint::new(mem, (start, count, step), base, run, &dims)?;
    let parts: Vec<u32> = if step == 0 {
        (0..count.min(1)).map(|_| start).collect()
    } else {
        (0..count).map(|i| start + i * step).collect()
    };
    let set = enumerate(mem, &parts, base as i64, run, &dims);
    if set.iter().any(|x| x.2 < 0) {
        return None;
    }
    let what = format!("new({mem:?}, ({start}, {count}, {step}), {base}, {run}, {dims:?})");
    check_shape(&fp, &set, &what);
    Some((fp, set, what))
}

fn random_pattern(rng: &mut Rng) -> Option<(Footprint, Bytes, String)> {
    let space = if rng.below(8) == 0 {
        Space::Psum
    } else {
        Space::Sbuf
    };
    let dtype = [DType::F32, DType::Bf16, DType::F16, DType::I32][rng.below(4) as usize];
    let es = dtype.size() as i64;
    let start = [0u8, 0, 0, 32][rng.below(4) as usize];
    let parts = 1 + rng.below(3) as u8;
    let offset = (rng.below(24) as i64 * es) as u32;
    let nd = 1 + rng.below(4) as usize;
    let dims: Vec<(u16, i16)> = (0..nd)
        .map(|_| (1 + rng.below(4) as u16, rng.range(-6, 6) as i16))
        .collect();
    let ap = AccessPattern::new(space, dtype, start, parts, offset, &dims);
    let mem = if space == Space::Sbuf {
        MemKind::Sbuf
    } else {
        MemKind::Psum
    };
    let bdims: Vec<(u64, i64)> = dims
        .iter()
        .map(|&(c, s)| (u64::from(c), i64::from(s) * es))
        .collect();
    let ps: Vec<u32> = (0..u32::from(parts))
        .map(|i| u32::from(start) + i)
        .collect();
    let set = enumerate(mem, &ps, i64::from(offset), es as u64, &bdims);
    if set.iter().any(|x| x.2 < 0) {
        return None; // not a valid pattern
    }
    let fp = ap.footprint();
    check_shape(&fp, &set, &ap.to_string());
    assert_eq!(fp.region(), ap.region(), "{ap}");
    Some((fp, set, ap.to_string()))
}

fn random_block(rng: &mut Rng) -> (Footprint, Bytes, String) {
    let dtype = [DType::F32, DType::Bf16][rng.below(2) as usize];
    let es = dtype.size() as u64;
    let rows = 1 + rng.below(5) as u32;
    let cols = 1 + rng.below(4) as u32;
    let hbm = rng.below(2) == 0;
    let pitch = if rows == 1 {
        rng.below(6) as u32
    } else {
        cols + rng.below(7) as u32
    };
    let b = DmaBlock {
        mem: if hbm { MemKind::Hbm } else { MemKind::Sbuf },
        index: rng.below(4) as u32,
        offset: rng.below(20) * es,
        dtype,
        rows,
        cols,
        pitch,
        transposed: rng.below(2) == 0,
    };
    let tensor_base = 4096;
    let set = if hbm {
        let dims = [(u64::from(rows), i64::from(pitch) * es as i64)];
        enumerate(
            MemKind::Hbm,
            &[0],
            (tensor_base + b.offset) as i64,
            u64::from(cols) * es,
            &dims,
        )
    } else {
        let ps: Vec<u32> = (b.index..b.index + rows).collect();
        enumerate(
            MemKind::Sbuf,
            &ps,
            b.offset as i64,
            u64::from(cols) * es,
            &[],
        )
    };
    let fp = b.footprint(tensor_base);
    let what = format!("{b:?}");
    check_shape(&fp, &set, &what);
    (fp, set, what)
}

fn random_item(rng: &mut Rng) -> (Footprint, Bytes, String) {
    loop {
        let item = match rng.below(4) {
            0 | 1 => random_footprint(rng),
            2 => random_pattern(rng),
            _ => Some(random_block(rng)),
        };
        if let Some(i) = item {
            return i;
        }
    }
}

#[test]
fn exact_overlap_matches_enumeration_on_random_pairs() {
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let items: Vec<(Footprint, Bytes, String)> = (0..800).map(|_| random_item(&mut rng)).collect();
    let (mut met, mut boxes_only) = (0, 0);
    for (i, (fa, sa, wa)) in items.iter().enumerate() {
        for (fb, sb, wb) in &items[i..] {
            let want = sa.iter().any(|x| sb.contains(x));
            assert_eq!(fa.overlaps(fb), want, "{wa} vs {wb}");
            assert_eq!(fb.overlaps(fa), want, "{wb} vs {wa}");
            met += usize::from(want);
            boxes_only += usize::from(!want && fa.region().overlaps(&fb.region()));
        }
    }
    // The sample exercises both answers and the exact test behind overlapping boxes.
    assert!(
        met > 8_000 && boxes_only > 1_500,
        "{met} met, {boxes_only} boxes only"
    );
}

/// Larger patterns: several overlapping dimensions, so the recursion and the sweep run.
#[test]
fn exact_overlap_matches_enumeration_on_large_patterns() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut items = Vec::new();
    while items.len() < 160 {
        let nd = 2 + rng.below(3) as usize;
        let dims: Vec<(u64, i64)> = (0..nd)
            .map(|_| (2 + rng.below(7), rng.range(-90, 90)))
            .collect();
        let base = 600 + rng.below(64);
        let run = 1 + rng.below(3);
        let Some(fp) = Footprint::new(MemKind::Hbm, (0, 1, 1), base, run, &dims) else {
            continue;
        };
        let set = enumerate(MemKind::Hbm, &[0], base as i64, run, &dims);
        let what = format!("{dims:?} from {base} run {run}");
        check_shape(&fp, &set, &what);
        items.push((fp, set, what));
    }
    let mut met = 0;
    for (i, (fa, sa, wa)) in items.iter().enumerate() {
        for (fb, sb, wb) in &items[i + 1..] {
            let want = sa.iter().any(|x| sb.contains(x));
            assert_eq!(fa.overlaps(fb), want, "{wa} vs {wb}");
            met += usize::from(want);
        }
    }
    assert!(met > 100 && met < 12_000, "{met}");
}

/// Footprints with partition steps: alternate partitions never meet, a common one does.
#[test]
fn partition_steps_are_exact() {
    let fp = |start, count, step, base, dims: &[(u64, i64)]| {
        Footprint::new(MemKind::Sbuf, (start, count, step), base, 4, dims).unwrap()
    };
    let even = fp(0, 64, 2, 0, &[(16, 8)]);
    let odd = fp(1, 64, 2, 0, &[(16, 8)]);
    assert!(even.region().overlaps(&odd.region()));
    assert!(!even.overlaps(&odd) && !odd.overlaps(&even));
    assert!(even.overlaps(&fp(64, 1, 1, 120, &[])));
    assert!(!even.overlaps(&fp(64, 1, 1, 124, &[])), "between the runs");
    assert!(!even.overlaps(&fp(65, 1, 1, 120, &[])), "an odd partition");
    // Steps 3 and 5 from 0 and 1 first meet at partition 6.
    let a = fp(0, 3, 3, 0, &[]);
    assert!(!a.overlaps(&fp(1, 1, 5, 0, &[])), "0, 3, 6 and 1");
    assert!(a.overlaps(&fp(1, 2, 5, 0, &[])), "0, 3, 6 and 1, 6");
    assert!(
        !fp(0, 2, 3, 0, &[]).overlaps(&fp(1, 2, 5, 0, &[])),
        "0, 3 and 1, 6"
    );
}

/// Mixed element sizes: GpSimdE sets the bf16 elements at bytes `8k + a .. 8k + a + 2` while
/// VectorE writes the f32 elements at bytes `8k + b .. 8k + b + 4` (k < 16) of partitions 0..4,
/// unordered. The boxes always overlap; the bytes are shared only when a bf16 element is a half
/// of an f32 one.
fn halves(a: u32, b: u32) -> Program {
    let mut pb = ProgramBuilder::new("halves");
    pb.push(
        EngineId::GpSimd,
        Instr::Memset {
            out: AccessPattern::new(Space::Sbuf, DType::Bf16, 0, 4, a, &[(16, 4)]),
            bits: 0x3f80,
        },
    );
    pb.push(
        EngineId::Vector,
        Instr::TensorCopy {
            src: AccessPattern::new(Space::Sbuf, DType::F32, 0, 4, 4096, &[(16, 1)]),
            out: AccessPattern::new(Space::Sbuf, DType::F32, 0, 4, b, &[(16, 2)]),
        },
    );
    pb.build().unwrap()
}

#[test]
fn element_sizes_straddling_each_other() {
    // bf16 at 8k+2 against f32 at 8k+4; bf16 at 8k+6 against f32 at 8k: adjacent, disjoint.
    for (a, b) in [(2, 4), (6, 0)] {
        let (r, _) = exec(halves(a, b), &[]);
        clean(&r);
    }
    // bf16 at 8k+2 is the upper half of the f32 at 8k; bf16 at 8k+6 that of the f32 at 8k+4.
    for (a, b) in [(2, 0), (6, 4)] {
        let (r, _) = exec(halves(a, b), &[]);
        let h = one_hazard(&r);
        let bf16 = sbuf(0, 4, u64::from(a), u64::from(a) + 15 * 8 + 2);
        let f32 = sbuf(0, 4, u64::from(b), u64::from(b) + 15 * 8 + 4);
        // VectorE issues first; GpSimdE finds the conflict when its Memset issues, once the
        // shared SBUF port frees: VectorE's 16-element copy, not back to back with anything,
        // costs 16 + 60 cycles at 1.12 GHz = 95 ticks.
        let engine = |engine, op| Actor::Engine { engine, pc: 0, op };
        let access = |actor, region, tick| nrt_sim::engine::Access {
            actor,
            region,
            write: true,
            tick,
        };
        assert_eq!(
            h,
            Hazard {
                first: access(engine(EngineId::Vector, "TensorCopy"), f32, 0),
                second: access(engine(EngineId::GpSimd, "Memset"), bf16, 95),
            }
        );
        assert_eq!(
            h.to_string(),
            format!(
                "unsynchronised hazard at tick 95: GpSimdE pc 0 (Memset) writes SBUF partitions \
                 [0, 4) bytes [{:#x}, {:#x}) while VectorE pc 0 (TensorCopy) (issued at tick 0) \
                 writes SBUF partitions [0, 4) bytes [{:#x}, {:#x}) with no semaphore edge \
                 between them",
                bf16.b0, bf16.b1, f32.b0, f32.b1
            )
        );
    }
}
