//! Misuse is an `NRT_INVALID` error with an exact message naming the operation and the
//! tensor or tile — shape mismatches, partition counts, wrong spaces, dtypes, engines, freed
//! tiles, views of another kernel — and a failed operation records nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_core::NrtStatus;
use nrt_kernel::{ActBias, ActFunc, AluOp, DType, DmaCopy, EngineId, Kernel, Memset, TensorTensor};

fn msg(r: Result<(), nrt_core::Error>) -> String {
    let e = r.unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid, "{e}");
    e.message().to_owned()
}

#[test]
fn shape_mismatches() {
    let mut k = Kernel::new("shapes");
    let a = k.sbuf_tile("a", DType::F32, &[128, 512]).unwrap();
    let b = k.sbuf_tile("b", DType::F32, &[128, 512]).unwrap();
    let c = k.sbuf_tile("c", DType::F32, &[128, 256]).unwrap();
    assert_eq!(
        msg(k.tensor_tensor(&c, &a, &b, AluOp::Add)),
        "tensor_tensor: data1 SBUF tile 'a' [128, 512] fp32 does not match dst SBUF tile 'c' \
         [128, 256] fp32 (128 partitions x 512 elements vs 128 x 256)"
    );
    assert_eq!(
        msg(k.tensor_copy(&a.slice(0, 0..64).unwrap(), &b)),
        "tensor_copy: src SBUF tile 'b' [128, 512] fp32 does not match dst SBUF tile 'a' \
         [64, 512] fp32 (128 partitions x 512 elements vs 64 x 512)"
    );
    let x = k.input("x", DType::F32, &[128, 500]).unwrap();
    assert_eq!(
        msg(k.dma_copy(&a, &x)),
        "dma_copy: dst SBUF tile 'a' [128, 512] fp32 and src HBM tensor 'x' [128, 500] fp32 \
         have different shapes ([128, 512] and [128, 500] without size-1 dimensions)"
    );
    let bias = k.sbuf_tile("bias", DType::F32, &[128, 2]).unwrap();
    assert_eq!(
        msg(k.activation(&a, ActFunc::Relu, &b, &bias, 1.0)),
        "activation: bias SBUF tile 'bias' [128, 2] fp32 must be [128, 1] (one value per \
         partition of dst)"
    );
    let w = k.sbuf_tile("w", DType::F32, &[64, 128]).unwrap();
    let ps = k.psum_tile("ps", DType::F32, &[128, 512]).unwrap();
    assert_eq!(
        msg(k.nc_matmul(&ps, &w, &a)),
        "nc_matmul: stationary SBUF tile 'w' [64, 128] fp32 has K = 64 partitions, moving SBUF \
         tile 'a' [128, 512] fp32 has 128; both contract over their partition dimension"
    );
    let w2 = k.sbuf_tile("w2", DType::F32, &[128, 200]).unwrap();
    assert_eq!(
        msg(k.nc_matmul(&ps, &w2, &a)),
        "nc_matmul: stationary SBUF tile 'w2' [128, 200] fp32 has M = 200 columns; at most 128"
    );
    let ps2 = k.psum_tile("ps2", DType::F32, &[64, 512]).unwrap();
    let w3 = k.sbuf_tile("w3", DType::F32, &[128, 128]).unwrap();
    assert_eq!(
        msg(k.nc_matmul(&ps2, &w3, &a)),
        "nc_matmul: dst PSUM tile 'ps2' [64, 512] fp32 must be [M, N] = [128, 512]"
    );
    assert_eq!(
        msg(a.slice(1, 500..600).map(|_| ())),
        "view of SBUF tile 'a': range 500..600 of dimension 1 (size 512) is empty or out of \
         bounds"
    );
    assert_eq!(
        msg(a.reshape(&[128, 500]).map(|_| ())),
        "view of SBUF tile 'a': 65536 elements cannot take shape [128, 500]"
    );
}

#[test]
fn partitions() {
    let mut k = Kernel::new("parts");
    assert_eq!(
        k.psum_tile("p", DType::F32, &[200, 4])
            .unwrap_err()
            .message(),
        "tile 'p': partition dimension 200 is outside 1..=128"
    );
    let a = k.sbuf_tile("a", DType::F32, &[128, 8]).unwrap();
    // 32 partitions from partition 16 break the partition-start rule.
    assert_eq!(
        msg(k.memset(&a.slice(0, 16..48).unwrap(), 0.0)),
        "memset: dst: SBUF tile 'a' [32, 8] fp32: an access of 32 partitions cannot start at \
         partition 16 (65-128 partitions start at 0, 33-64 at 0 or 64, up to 32 at 0/32/64/96)"
    );
    assert_eq!(
        msg(a.slice_step(0, 0..128, 2).map(|_| ())),
        "view of SBUF tile 'a': the partition dimension cannot be stepped (step 2); partitions \
         of an access are contiguous"
    );
    assert_eq!(
        msg(a.permute(&[1, 0]).map(|_| ())),
        "view of SBUF tile 'a': the partition dimension must stay first"
    );
}

#[test]
fn wrong_spaces() {
    let mut k = Kernel::new("spaces");
    let x = k.input("x", DType::F32, &[128, 512]).unwrap();
    let y = k.output("y", DType::F32, &[128, 512]).unwrap();
    let s = k.sbuf_tile("s", DType::F32, &[128, 512]).unwrap();
    let p = k.psum_tile("p", DType::F32, &[128, 512]).unwrap();
    let w = k.sbuf_tile("w", DType::F32, &[128, 128]).unwrap();
    assert_eq!(
        msg(k.tensor_tensor(&s, &x, &s, AluOp::Add)),
        "tensor_tensor: data1 must be an SBUF or PSUM tile, not HBM tensor 'x'"
    );
    assert_eq!(
        msg(k.nc_matmul(&s, &w, &s)),
        "nc_matmul: dst must be in PSUM, not SBUF tile 's'"
    );
    assert_eq!(
        msg(k.nc_matmul(&p, &w, &p)),
        "nc_matmul: moving must be in SBUF, not PSUM tile 'p'"
    );
    assert_eq!(
        msg(k.dma_copy(&y, &x)),
        "dma_copy: HBM -> HBM is not supported (the DMA engines copy HBM -> SBUF, SBUF -> HBM, \
         SBUF -> SBUF and PSUM -> SBUF)"
    );
    assert_eq!(
        msg(k.dma_copy(&p, &x)),
        "dma_copy: HBM -> PSUM is not supported (the DMA engines copy HBM -> SBUF, SBUF -> HBM, \
         SBUF -> SBUF and PSUM -> SBUF)"
    );
    assert_eq!(
        msg(k.memset(&p, 0.0)),
        "memset: GpSimdE cannot access PSUM (dst PSUM tile 'p')"
    );
    assert_eq!(
        msg(k.iota(&p, 0, 1, 1)),
        "iota: GpSimdE cannot access PSUM (dst PSUM tile 'p')"
    );
    assert_eq!(
        msg(k.dma_copy(&x, &s)),
        "dma_copy: dst HBM tensor 'x' is an input tensor; kernels write only output and scratch \
         tensors"
    );
}

#[test]
fn dtypes_and_engines() {
    let mut k = Kernel::new("dtypes");
    let x = k.input("x", DType::F32, &[128, 64]).unwrap();
    let b = k.sbuf_tile("b", DType::Bf16, &[128, 64]).unwrap();
    let i = k.sbuf_tile("i", DType::I32, &[128, 64]).unwrap();
    let f = k.sbuf_tile("f", DType::F32, &[128, 64]).unwrap();
    // The DMA casts (block descriptors, format 1.1), as NKI's dma_copy does.
    k.dma_copy(&b, &x).unwrap();
    assert_eq!(
        msg(k.activation(&f, ActFunc::Exp, &i, ActBias::None, 1.0)),
        "activation: data SBUF tile 'i' [128, 64] int32 is not a float type"
    );
    assert_eq!(
        msg(k.memset(&i, 1.5)),
        "memset: value 1.5 is not an int32 (dst SBUF tile 'i' [128, 64] int32)"
    );
    assert_eq!(
        msg(k.emit(TensorTensor {
            dst: &f,
            data1: &f,
            data2: &f,
            op: AluOp::Max,
            engine: Some(EngineId::Tensor),
        })),
        "tensor_tensor: cannot run on TensorE (this ISA runs it on VectorE, ScalarE or GpSimdE)"
    );
    assert_eq!(
        msg(k.emit(Memset {
            dst: &f,
            value: 0.0,
            engine: Some(EngineId::Scalar),
        })),
        "memset: cannot run on ScalarE (this ISA runs it on GpSimdE or VectorE)"
    );
    let ps = k.psum_tile("ps", DType::F32, &[64, 64]).unwrap();
    let w = k.sbuf_tile("w", DType::Bf16, &[128, 64]).unwrap();
    assert_eq!(
        msg(k.nc_matmul(&ps, &w, &f)),
        "nc_matmul: stationary SBUF tile 'w' [128, 64] bf16 and moving SBUF tile 'f' [128, 64] \
         fp32 must have the same dtype"
    );
}

#[test]
fn freed_tiles_other_kernels_and_atomicity() {
    let build = |fail: bool| {
        let mut k = Kernel::new("atomic");
        let x = k.input("x", DType::F32, &[128, 64]).unwrap();
        let y = k.output("y", DType::F32, &[128, 64]).unwrap();
        let t = k.sbuf_tile("t", DType::F32, &[128, 64]).unwrap();
        let u = k.sbuf_tile("u", DType::F32, &[128, 32]).unwrap();
        k.dma_copy(&t, &x).unwrap();
        if fail {
            // Each fails after some checks passed; none may leave a trace.
            assert!(k.tensor_tensor(&t, &t, &u, AluOp::Add).is_err());
            assert!(k.dma_copy(&y, &u).is_err());
            assert!(k.emit(DmaCopy::new(&u, &t)).is_err());
        }
        k.tensor_scalar(&t, &t, AluOp::Add, 1.0).unwrap();
        k.dma_copy(&y, &t).unwrap();
        k.build().unwrap()
    };
    assert_eq!(build(true), build(false));

    let mut k = Kernel::new("a");
    let mut other = Kernel::new("b");
    let t = k.sbuf_tile("t", DType::F32, &[128, 64]).unwrap();
    let o = other.sbuf_tile("o", DType::F32, &[128, 64]).unwrap();
    assert_eq!(
        msg(k.tensor_copy(&t, &o)),
        "tensor_copy: src SBUF tile 'o' belongs to another kernel"
    );
    assert_eq!(msg(k.free(&o)), "SBUF tile 'o' belongs to another kernel");
    k.free(&t).unwrap();
    assert_eq!(
        msg(k.tensor_scalar(&t, &t, AluOp::Add, 1.0)),
        "tensor_scalar: dst SBUF tile 't' was freed"
    );
}

#[test]
fn random_misuse_never_panics() {
    use nrt_kernel::{Memory, Placement, View};
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let sizes = [
        0usize,
        1,
        2,
        3,
        31,
        32,
        64,
        127,
        128,
        129,
        512,
        513,
        4096,
        1 << 20,
        usize::MAX,
    ];
    let dtypes = [DType::F32, DType::Bf16, DType::F16, DType::I32];
    for _ in 0..300 {
        let mut k = Kernel::new("fuzz");
        let mut views: Vec<View> = Vec::new();
        let mut tiles = Vec::new();
        for i in 0..12 {
            let rank = (next() % 4) as usize;
            let shape: Vec<usize> = (0..rank)
                .map(|_| sizes[(next() % sizes.len() as u64) as usize])
                .collect();
            let dt = dtypes[(next() % 4) as usize];
            let name = format!("v{i}");
            let r = match next() % 6 {
                0 => k.input(&name, dt, &shape).map(|t| t.view().clone()),
                1 => k.output(&name, dt, &shape).map(|t| t.view().clone()),
                2 => k.sbuf_tile(&name, dt, &shape).map(|t| {
                    tiles.push(t.clone());
                    t.view().clone()
                }),
                3 => k.psum_tile(&name, dt, &shape).map(|t| t.view().clone()),
                4 => k
                    .tile_at(
                        &name,
                        if next() % 2 == 0 {
                            Memory::Sbuf
                        } else {
                            Memory::Psum
                        },
                        dt,
                        &shape,
                        Placement {
                            start_partition: sizes[(next() % sizes.len() as u64) as usize],
                            offset: sizes[(next() % sizes.len() as u64) as usize],
                        },
                    )
                    .map(|t| t.view().clone()),
                _ => k
                    .constant(&name, dt, &shape, vec![0; (next() % 64) as usize])
                    .map(|t| t.view().clone()),
            };
            if let Ok(v) = r {
                views.push(v);
            }
        }
        for _ in 0..40 {
            if views.is_empty() {
                break;
            }
            let v = views[(next() % views.len() as u64) as usize].clone();
            let d = (next() % 4) as usize;
            let a = sizes[(next() % sizes.len() as u64) as usize];
            let b = sizes[(next() % sizes.len() as u64) as usize];
            let derived = match next() % 6 {
                0 => v.slice(d, a..b),
                1 => v.slice_step(d, a..b, (next() % 4) as usize),
                2 => v.select(d, a),
                3 => v.reshape(&[a, b]),
                4 => v.permute(&[1, 0]),
                _ => v.broadcast(d, a),
            };
            if let Ok(w) = derived {
                views.push(w);
            }
            let n = views.len() as u64;
            let x = &views[(next() % n) as usize];
            let y = &views[(next() % n) as usize];
            let z = &views[(next() % n) as usize];
            let engine = EngineId::ALL.get((next() % 7) as usize).copied();
            let _ = match next() % 11 {
                0 => k.dma_copy(x, y),
                8 => k.emit(DmaCopy {
                    engine,
                    dma_engines: (next() % 40) as usize,
                    ..DmaCopy::new(x, y)
                }),
                9 => k.emit(TensorTensor {
                    dst: x,
                    data1: y,
                    data2: z,
                    op: AluOp::Max,
                    engine,
                }),
                10 if !tiles.is_empty() => {
                    let t = &tiles[(next() % tiles.len() as u64) as usize];
                    k.free(t)
                }
                1 => k.tensor_tensor(x, y, z, AluOp::Sub),
                2 => k.tensor_scalar(x, y, AluOp::Mul, 2.0),
                3 => k.tensor_copy(x, y),
                4 => k.memset(x, f64::from(next() as u32)),
                5 => k.iota(x, 1, 2, 3),
                6 => k.nc_matmul(x, y, z),
                _ => k.activation(x, ActFunc::Gelu, y, ActBias::Tile(z), 0.5),
            };
        }
        // Whatever succeeded builds into a valid program.
        if let Err(e) = k.build() {
            panic!("build failed after successful operations: {e}");
        }
    }
}
