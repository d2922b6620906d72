//! Allocation: first fit, freeing, scopes, explicit placement, pools, and the exact messages
//! of the failures (SBUF full, PSUM full, a matmul output across a PSUM bank, overlapping
//! placements).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use nrt_core::NrtStatus;
use nrt_kernel::{DType, Kernel, Memory, Placement};

#[test]
fn sbuf_full_names_the_tile_and_the_space_left() {
    let mut k = Kernel::new("full");
    let a = k.sbuf_tile("a", DType::F32, &[128, 40000]).unwrap();
    assert_eq!(a.placement(), Placement::default());
    let e = k.sbuf_tile("b", DType::F32, &[128, 10000]).unwrap_err();
    assert_eq!(e.status(), NrtStatus::Resource);
    assert_eq!(
        e.message(),
        "SBUF full: no room for tile 'b' [128, 10000] fp32 (40000 bytes per partition on 128 \
         partitions); the largest free block for 128 partitions is 36608 bytes"
    );
    // Smaller tiles still fit, after the first one (64-byte aligned).
    let c = k.sbuf_tile("c", DType::Bf16, &[32, 3]).unwrap();
    assert_eq!(
        c.placement(),
        Placement {
            start_partition: 0,
            offset: 160_000
        }
    );
    // 32-partition tiles pack into the four quadrants at the same offset.
    let d = k.sbuf_tile("d", DType::Bf16, &[32, 3]).unwrap();
    assert_eq!(d.placement().start_partition, 32);
    // Freed space is reused first fit.
    k.free(&a).unwrap();
    let b = k.sbuf_tile("b", DType::F32, &[128, 10000]).unwrap();
    assert_eq!(b.placement().offset, 0);
    assert_eq!(
        k.free(&a).unwrap_err().message(),
        "SBUF tile 'a' is already freed"
    );
}

#[test]
fn tile_larger_than_a_partition_and_partition_counts() {
    let mut k = Kernel::new("shapes");
    assert_eq!(
        k.sbuf_tile("huge", DType::F32, &[128, 50000])
            .unwrap_err()
            .message(),
        "tile 'huge': [128, 50000] fp32 needs 200000 bytes per partition; SBUF has 196608 per \
         partition"
    );
    assert_eq!(
        k.sbuf_tile("x", DType::F32, &[129, 4])
            .unwrap_err()
            .message(),
        "tile 'x': partition dimension 129 is outside 1..=128"
    );
    assert_eq!(
        k.sbuf_tile("v", DType::F32, &[128]).unwrap_err().message(),
        "tile 'v': shape [128] needs a partition dimension and at least one free dimension"
    );
    assert_eq!(
        k.tile("h", Memory::Hbm, DType::F32, &[1, 1])
            .unwrap_err()
            .message(),
        "tile 'h': tiles live in SBUF or PSUM; declare HBM tensors with input, output, constant \
         or scratch"
    );
}

#[test]
fn psum_full_and_bank_rules() {
    let mut k = Kernel::new("psum");
    let banks: Vec<_> = (0..8)
        .map(|i| {
            k.psum_tile(&format!("acc{i}"), DType::F32, &[128, 512])
                .unwrap()
        })
        .collect();
    for (i, t) in banks.iter().enumerate() {
        assert_eq!(t.placement().offset, i * 2048);
    }
    let e = k.psum_tile("acc8", DType::F32, &[128, 512]).unwrap_err();
    assert_eq!(e.status(), NrtStatus::Resource);
    assert_eq!(
        e.message(),
        "PSUM full: no room for tile 'acc8' [128, 512] fp32 (2048 bytes per partition on 128 \
         partitions, inside one 2 KiB bank); the largest free block for 128 partitions is 0 \
         bytes, 0 of 8 banks empty"
    );
    k.free(&banks[3]).unwrap();
    k.free(&banks[4]).unwrap();
    // A 3-bank tile does not fit in the two free banks.
    assert_eq!(
        k.psum_tile("wide", DType::F32, &[128, 1536])
            .unwrap_err()
            .message(),
        "PSUM full: no room for tile 'wide' [128, 1536] fp32 (6144 bytes per partition on 128 \
         partitions, from a bank boundary); the largest free block for 128 partitions is 4096 \
         bytes, 2 of 8 banks empty"
    );
    // A 2-bank tile does, from bank 3.
    let wide = k.psum_tile("wide", DType::F32, &[128, 1024]).unwrap();
    assert_eq!(wide.placement().offset, 3 * 2048);
    // A tile that is not a whole bank stays inside one.
    k.free(&banks[0]).unwrap();
    let p1 = k.psum_tile("p1", DType::F32, &[64, 300]).unwrap();
    let p2 = k.psum_tile("p2", DType::F32, &[64, 300]).unwrap();
    assert_eq!(
        (p1.placement().offset, p2.placement().start_partition),
        (0, 64)
    );
    let p3 = k.psum_tile("p3", DType::F32, &[128, 300]).unwrap_err();
    assert!(p3.message().starts_with("PSUM full"), "{p3}");
    // Explicit placements are checked.
    assert_eq!(
        k.tile_at(
            "x",
            Memory::Psum,
            DType::F32,
            &[128, 512],
            Placement {
                start_partition: 0,
                offset: 1024
            }
        )
        .unwrap_err()
        .message(),
        "tile 'x': bytes [1024, 3072) break the PSUM bank rule (a tile of up to one 2 KiB bank \
         stays in one bank, a larger one starts at a bank boundary)"
    );
    assert_eq!(
        k.tile_at(
            "y",
            Memory::Psum,
            DType::F32,
            &[64, 128],
            Placement {
                start_partition: 64,
                offset: 1024
            }
        )
        .unwrap_err()
        .message(),
        "tile 'y' at partitions [64, 128) bytes [1024, 1536) overlaps tile 'p2'"
    );
    assert_eq!(
        k.tile_at(
            "z",
            Memory::Sbuf,
            DType::F32,
            &[64, 8],
            Placement {
                start_partition: 32,
                offset: 0
            }
        )
        .unwrap_err()
        .message(),
        "tile 'z': 64 partitions cannot start at partition 32 (65-128 partitions start at 0, \
         33-64 at 0 or 64, up to 32 at 0/32/64/96)"
    );
}

#[test]
fn matmul_output_across_a_bank_is_refused() {
    let mut k = Kernel::new("bank");
    let w = k.sbuf_tile("w", DType::Bf16, &[128, 128]).unwrap();
    let x = k.sbuf_tile("x", DType::Bf16, &[128, 600]).unwrap();
    let ps = k.psum_tile("acc", DType::F32, &[128, 1024]).unwrap();
    let e = k
        .nc_matmul(
            &ps.slice(1, 256..768).unwrap(),
            &w,
            &x.slice(1, 0..512).unwrap(),
        )
        .unwrap_err();
    assert_eq!(
        e.message(),
        "nc_matmul: dst PSUM tile 'acc' [128, 512] fp32 covers bytes [1024, 3072) of each \
         partition, across a 2 KiB PSUM bank boundary (a matmul output must lie in one bank)"
    );
    let e = k
        .nc_matmul(&ps.slice(1, 0..600).unwrap(), &w, &x)
        .unwrap_err();
    assert_eq!(
        e.message(),
        "nc_matmul: moving SBUF tile 'x' [128, 600] bf16 has N = 600 columns; at most 512 (one \
         2 KiB PSUM bank of fp32)"
    );
    k.nc_matmul(
        &ps.slice(1, 512..1024).unwrap(),
        &w,
        &x.slice(1, 0..512).unwrap(),
    )
    .unwrap();
}

#[test]
fn scopes_and_pools_free_their_tiles() {
    let mut k = Kernel::new("scopes");
    let mut placements = Vec::new();
    for _ in 0..3 {
        k.scope(|k| {
            let t = k.sbuf_tile("t", DType::F32, &[128, 40000])?;
            placements.push(t.placement());
            Ok(())
        })
        .unwrap();
    }
    assert!(placements.iter().all(|p| p.offset == 0));
    // A scope frees on error too.
    let r: Result<(), _> = k.scope(|k| {
        k.sbuf_tile("t", DType::F32, &[128, 40000])?;
        k.sbuf_tile("u", DType::F32, &[128, 40000])?;
        Ok(())
    });
    assert!(r.unwrap_err().message().starts_with("SBUF full"));
    k.sbuf_tile("t", DType::F32, &[128, 40000]).unwrap();
    // A pool rotates over its buffers; an old tile of a buffer is freed when it comes round.
    let mut pool = k
        .tile_pool("p", Memory::Sbuf, DType::F32, &[128, 1024], 2)
        .unwrap();
    let t0 = pool.next(&mut k).unwrap();
    let t1 = pool.next(&mut k).unwrap();
    let t2 = pool.next(&mut k).unwrap();
    assert_ne!(t0.placement(), t1.placement());
    assert_eq!(t0.placement(), t2.placement());
    assert!(!k.is_live(&t0) && k.is_live(&t1) && k.is_live(&t2));
    assert_eq!(
        k.memset(&t0, 0.0).unwrap_err().message(),
        "memset: dst SBUF tile 'p#0' was freed"
    );
    pool.free(&mut k).unwrap();
    assert!(!k.is_live(&t2));
}

/// `Kernel::new` plans tiles in NeuronCore-v2's 192 KiB partitions, so its programs load on
/// every generation; `Kernel::for_core` with NeuronCore-v3's spec places tiles in its 224 KiB,
/// and a trn1 device refuses the result at load.
#[test]
fn a_kernel_plans_for_its_generations_sbuf() {
    use nrt_sim::Instance;
    use nrt_sim::engine::Device;
    let build = |mut k: nrt_kernel::Kernel| -> Result<nrt_kernel::Program, nrt_core::Error> {
        let out = k.output("y", DType::F32, &[128, 16])?;
        let big = k.sbuf_tile("big", DType::F32, &[128, 200 * 256])?;
        let t = k.sbuf_tile("t", DType::F32, &[128, 16])?;
        k.memset(&big.slice(1, 0..16)?, 1.0)?;
        k.tensor_copy(&t, &big.slice(1, 0..16)?)?;
        k.dma_copy(&out, &t)?;
        k.build()
    };
    let e = build(nrt_kernel::Kernel::new("v2")).unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid);
    assert!(e.message().contains("has 196608 per partition"), "{e}");
    let p = build(nrt_kernel::Kernel::for_core(
        "v3",
        Instance::Trn2.core_spec(),
    ))
    .unwrap();
    let dev = Device::new(Instance::Trn2);
    let lp = dev.load(0, p.clone()).unwrap();
    let (outs, _) = dev
        .run(&lp, &[], &nrt_sim::engine::ExecOptions::default())
        .unwrap();
    assert_eq!(outs[0].1, [1.0f32.to_le_bytes(); 128 * 16].concat());
    let e = Device::new(Instance::Trn1).load(0, p).unwrap_err();
    assert_eq!(e.status(), NrtStatus::Invalid);
    assert!(
        e.message().contains("NeuronCore-v2 partition has 196608"),
        "{e}"
    );
}
