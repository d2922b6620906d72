//! Synchronisation: exactly the waits and signals the dependencies need (none inside one
//! engine or one DMA queue, one signal per cross-engine edge, implied waits dropped, stores
//! triggered by their producer), the hazard detector catching a program with a wait removed,
//! and random operation sequences over overlapping regions on every engine and DMA trigger
//! that run hazard-free with the results of a sequential reference.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Rng, incs, output, triggers, waits};
use nrt_kernel::{
    ActBias, ActFunc, AluOp, DType, DmaCopy, EngineId, Kernel, TensorCopy, TensorScalar,
    TensorTensor, View,
};
use nrt_sim::Instance;
use nrt_sim::engine::{Device, ExecOptions, Instr, decode_f32, encode_f32};

use EngineId::{GpSimd, Scalar, Sync, Tensor, Vector};

#[test]
fn one_engine_needs_no_synchronisation() {
    let mut k = Kernel::new("chain");
    let t = k.sbuf_tile("t", DType::F32, &[128, 64]).unwrap();
    let u = k.sbuf_tile("u", DType::F32, &[128, 64]).unwrap();
    k.memset(&t, 1.0).unwrap();
    k.iota(&u, 0, 1, 1).unwrap();
    k.memset(&t, 2.0).unwrap();
    let p = k.build().unwrap();
    for e in EngineId::ALL {
        assert_eq!((waits(&p, e), incs(&p, e)), (0, 0), "{e}");
    }
}

#[test]
fn one_signal_per_cross_engine_edge_and_implied_waits_dropped() {
    let mut k = Kernel::new("edges");
    let t = k.sbuf_tile("t", DType::F32, &[128, 64]).unwrap();
    let u = k.sbuf_tile("u", DType::F32, &[128, 64]).unwrap();
    let v = k.sbuf_tile("v", DType::F32, &[128, 64]).unwrap();
    k.memset(&t, 1.0).unwrap(); // GpSimdE 1
    k.tensor_scalar(&u, &t, AluOp::Add, 1.0).unwrap(); // VectorE 1: RAW on GpSimdE 1
    // ScalarE reads t (GpSimdE 1) and u (VectorE 1): VectorE 1 implies GpSimdE 1.
    k.tensor_tensor_on(Scalar, &v, &t, &u).unwrap();
    // VectorE overwrites t: WAR on ScalarE 1 (which implies its own reads' producers).
    k.tensor_scalar(&t, &v, AluOp::Mul, 3.0).unwrap();
    let p = k.build().unwrap();
    assert_eq!((waits(&p, GpSimd), incs(&p, GpSimd)), (0, 1));
    assert_eq!((waits(&p, Vector), incs(&p, Vector)), (2, 1));
    assert_eq!((waits(&p, Scalar), incs(&p, Scalar)), (1, 1));
}

trait OnEngine {
    fn tensor_tensor_on(
        &mut self,
        e: EngineId,
        d: &View,
        a: &View,
        b: &View,
    ) -> Result<(), nrt_core::Error>;
}

impl OnEngine for Kernel {
    fn tensor_tensor_on(
        &mut self,
        e: EngineId,
        d: &View,
        a: &View,
        b: &View,
    ) -> Result<(), nrt_core::Error> {
        self.emit(TensorTensor {
            dst: d,
            data1: a,
            data2: b,
            op: AluOp::Add,
            engine: Some(e),
        })
    }
}

#[test]
fn producers_trigger_stores_and_queues_order_themselves() {
    let mut k = Kernel::new("io");
    let x = k.input("x", DType::F32, &[16, 64]).unwrap();
    let y = k.output("y", DType::F32, &[16, 64]).unwrap();
    let t = k.sbuf_tile("t", DType::F32, &[16, 64]).unwrap();
    // Two loads into the same tile on the same 16 queues: WAW ordered by the queues.
    k.dma_copy(&t, &x).unwrap();
    k.dma_copy(&t, &x).unwrap();
    k.tensor_scalar(&t, &t, AluOp::Add, 1.0).unwrap();
    k.dma_copy(&y, &t).unwrap();
    // The recorded streams, as they are before rerolling folds the 16-queue spread.
    let p = k.build_unrolled().unwrap();
    assert_eq!((waits(&p, Sync), triggers(&p, Sync)), (0, 32));
    // VectorE waits once per queue (the second load implies the first), then triggers the
    // store itself: no signal anywhere.
    assert_eq!((waits(&p, Vector), triggers(&p, Vector)), (16, 16));
    for e in EngineId::ALL {
        assert_eq!(incs(&p, e), 0, "{e}");
    }
}

#[test]
fn the_detector_sees_a_missing_wait() {
    let mut k = Kernel::new("drop");
    let x = k.input("x", DType::F32, &[128, 64]).unwrap();
    let y = k.output("y", DType::F32, &[128, 64]).unwrap();
    let t = k.sbuf_tile("t", DType::F32, &[128, 64]).unwrap();
    k.emit(DmaCopy {
        dma_engines: 1,
        ..DmaCopy::new(&t, &x)
    })
    .unwrap();
    k.activation(&t, ActFunc::Relu, &t, ActBias::None, 1.0)
        .unwrap();
    k.dma_copy(&y, &t).unwrap();
    let mut p = k.build().unwrap();
    let run = |p: &nrt_kernel::Program| {
        let dev = Device::new(Instance::Trn1);
        let lp = dev.load(0, p.clone()).unwrap();
        dev.execute(&lp, &ExecOptions::default()).unwrap()
    };
    assert!(run(&p).hazards.is_empty());
    let s = &mut p.streams[Scalar.index()];
    let i = s
        .iter()
        .position(|i| matches!(i, Instr::SemWait { .. }))
        .unwrap();
    s.remove(i);
    assert!(!run(&p).hazards.is_empty());
}

/// A sequential reference of the random kernels: two SBUF tiles and a PSUM tile of
/// `[64, 64]` fp32, an input and an output.
struct Model {
    t: Vec<Vec<f32>>,
    x: Vec<f32>,
    y: Vec<f32>,
}

const P: usize = 64;
const F: usize = 64;

/// Region: partitions `[p0, p0 + np)`, columns `[c0, c0 + w)`.
#[derive(Clone, Copy, Debug)]
struct Reg {
    p0: usize,
    np: usize,
    c0: usize,
    w: usize,
}

impl Reg {
    fn random(rng: &mut Rng, np: usize, w: usize) -> Reg {
        let p0 = if np == 64 { 0 } else { 32 * rng.below(2) };
        Reg {
            p0,
            np,
            c0: 8 * rng.below((F - w) / 8 + 1),
            w,
        }
    }
    fn view(&self, v: &View) -> View {
        v.slice(0, self.p0..self.p0 + self.np)
            .unwrap()
            .slice(1, self.c0..self.c0 + self.w)
            .unwrap()
    }
    fn read(&self, a: &[f32]) -> Vec<f32> {
        let mut out = Vec::new();
        for p in self.p0..self.p0 + self.np {
            out.extend_from_slice(&a[p * F + self.c0..p * F + self.c0 + self.w]);
        }
        out
    }
    fn write(&self, a: &mut [f32], v: &[f32]) {
        for (i, p) in (self.p0..self.p0 + self.np).enumerate() {
            a[p * F + self.c0..p * F + self.c0 + self.w]
                .copy_from_slice(&v[i * self.w..(i + 1) * self.w]);
        }
    }
    fn disjoint(&self, o: &Reg) -> bool {
        self.p0 + self.np <= o.p0
            || o.p0 + o.np <= self.p0
            || self.c0 + self.w <= o.c0
            || o.c0 + o.w <= self.c0
    }
}

fn random_kernel(seed: u64, ops: usize) -> (nrt_kernel::Program, Model) {
    let mut rng = Rng(seed);
    let mut k = Kernel::new("random");
    let x = k.input("x", DType::F32, &[P, F]).unwrap();
    let y = k.output("y", DType::F32, &[P, F]).unwrap();
    let tiles = [
        k.sbuf_tile("s0", DType::F32, &[P, F]).unwrap(),
        k.sbuf_tile("s1", DType::F32, &[P, F]).unwrap(),
        k.psum_tile("p", DType::F32, &[P, F]).unwrap(),
    ];
    let xv: Vec<f32> = (0..P * F).map(|_| rng.small(10)).collect();
    let mut m = Model {
        t: vec![vec![0.0; P * F]; 3],
        x: xv,
        y: vec![0.0; P * F],
    };
    let engines = [Sync, Tensor, Vector, Scalar, GpSimd];
    let vs = [Vector, Scalar];
    for _ in 0..ops {
        let np = [32, 64][rng.below(2)];
        let w = [8, 16, 32, 64][rng.below(4)];
        let (a, b, d) = (
            Reg::random(&mut rng, np, w),
            Reg::random(&mut rng, np, w),
            Reg::random(&mut rng, np, w),
        );
        let (ta, tb, td) = (rng.below(3), rng.below(3), rng.below(3));
        let trig = (rng.below(3) == 0).then(|| engines[rng.below(5)]);
        let spread = 1 + rng.below(16);
        match rng.below(8) {
            0 => {
                // Load X -> SBUF.
                let td = rng.below(2);
                k.emit(DmaCopy {
                    engine: trig,
                    dma_engines: spread,
                    ..DmaCopy::new(&d.view(&tiles[td]), &a.view(&x))
                })
                .unwrap();
                let v = a.read(&m.x);
                d.write(&mut m.t[td], &v);
            }
            1 => {
                let c = rng.small(2);
                k.emit(TensorScalar {
                    dst: &d.view(&tiles[td]),
                    data: &a.view(&tiles[ta]),
                    op: AluOp::Add,
                    operand: c,
                    engine: Some(vs[rng.below(2)]),
                })
                .unwrap();
                let v: Vec<f32> = a.read(&m.t[ta]).iter().map(|v| v + c).collect();
                d.write(&mut m.t[td], &v);
            }
            2 => {
                k.emit(TensorTensor {
                    dst: &d.view(&tiles[td]),
                    data1: &a.view(&tiles[ta]),
                    data2: &b.view(&tiles[tb]),
                    op: AluOp::Max,
                    engine: Some(vs[rng.below(2)]),
                })
                .unwrap();
                let (va, vb) = (a.read(&m.t[ta]), b.read(&m.t[tb]));
                let v: Vec<f32> = va.iter().zip(&vb).map(|(p, q)| p.max(*q)).collect();
                d.write(&mut m.t[td], &v);
            }
            3 => {
                let td = rng.below(2);
                let c = rng.small(5);
                k.memset(&d.view(&tiles[td]), f64::from(c)).unwrap();
                d.write(&mut m.t[td], &vec![c; d.np * d.w]);
            }
            4 => {
                // SBUF/PSUM -> SBUF by DMA (source and destination disjoint).
                let td = rng.below(2);
                if ta == td && !a.disjoint(&d) {
                    continue;
                }
                k.emit(DmaCopy {
                    engine: trig,
                    dma_engines: spread,
                    ..DmaCopy::new(&d.view(&tiles[td]), &a.view(&tiles[ta]))
                })
                .unwrap();
                let v = a.read(&m.t[ta]);
                d.write(&mut m.t[td], &v);
            }
            5 => {
                // Store SBUF -> Y.
                let ts = rng.below(2);
                k.emit(DmaCopy {
                    engine: trig,
                    dma_engines: spread,
                    ..DmaCopy::new(&d.view(&y), &a.view(&tiles[ts]))
                })
                .unwrap();
                let v = a.read(&m.t[ts]);
                d.write(&mut m.y, &v);
            }
            6 => {
                k.activation(
                    &d.view(&tiles[td]),
                    ActFunc::Identity,
                    &a.view(&tiles[ta]),
                    ActBias::Scalar(1.0),
                    2.0,
                )
                .unwrap();
                let v: Vec<f32> = a.read(&m.t[ta]).iter().map(|v| v * 2.0 + 1.0).collect();
                d.write(&mut m.t[td], &v);
            }
            _ => {
                k.emit(TensorCopy {
                    dst: &d.view(&tiles[td]),
                    src: &a.view(&tiles[ta]),
                    engine: Some(vs[rng.below(2)]),
                })
                .unwrap();
                let v = a.read(&m.t[ta]);
                d.write(&mut m.t[td], &v);
            }
        }
    }
    // Keep values small: the activation doubles; the model is exact while |v| < 2^24.
    (k.build().unwrap(), m)
}

#[test]
fn random_programs_are_hazard_free_and_sequentially_consistent() {
    for seed in 1..=40u64 {
        let (p, m) = random_kernel(seed * 7919, 60);
        let (outs, report) = common::run(&p, &[("x", encode_f32(DType::F32, &m.x))]);
        assert!(report.hazards.is_empty(), "seed {seed}");
        let got = decode_f32(DType::F32, output(&outs, "y"));
        assert!(
            m.y.iter().all(|v| v.abs() < 16_777_216.0),
            "seed {seed}: model inexact"
        );
        assert_eq!(got, m.y, "seed {seed}");
    }
}
