//! `handlers/dma.rs` through the real syscall path: the mapped semaphore block
//! (`RESOURCE_MMAP_INFO` + `mmap` of the node) equal to what the semaphore and event requests
//! see, and the DMA queue requests with the driver's argument rules.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::os::fd::{AsRawFd, OwnedFd};

use common::*;
use nrt_emu::InProcessConfig;
use nrt_sim::Instance;

const RESOURCE_MMAP_INFO: u32 = 0xc020_4e70;
const DMA_QUEUE_INIT: u32 = 0x8008_4e21;
const DMA_QUEUE_INIT_BATCH: u32 = 0xb008_4e85;
const DMA_QUEUE_RELEASE: u32 = 0x8008_4e22;
const DMA_COPY_DESCRIPTORS64: u32 = 0x8028_4e26;
const DMA_RINGS_DEVICE: u32 = 18;

/// `RESOURCE_MMAP_INFO`: (result, offset, size).
fn mmap_info(fd: &OwnedFd, block: u32, id: u32, resource: u32) -> (Result<i32, i32>, u64, u64) {
    let mut a = [0u8; 32];
    put32(&mut a, 0, block);
    put32(&mut a, 4, id);
    put32(&mut a, 8, resource);
    let r = ioctl(fd, RESOURCE_MMAP_INFO, &mut a);
    (r, get64(&a, 16), get64(&a, 24))
}

/// A read-only shared mapping of `len` bytes at `offset` of the node.
struct Map(*const u8, usize);

impl Map {
    fn new(fd: &OwnedFd, offset: u64, len: usize) -> Map {
        // SAFETY: a fresh shared read-only mapping of the node's file; checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        assert_ne!(p, libc::MAP_FAILED, "{}", std::io::Error::last_os_error());
        Map(p as *const u8, len)
    }

    fn u32_at(&self, at: usize) -> u32 {
        assert!(at + 4 <= self.1);
        // SAFETY: inside the mapping, 4-byte aligned (offsets are multiples of 4).
        unsafe { std::ptr::read_volatile(self.0.add(at) as *const u32) }
    }

    fn semaphore(&self, i: usize) -> u32 {
        self.u32_at(0x1000 + 4 * i)
    }

    fn event(&self, i: usize) -> u32 {
        self.u32_at(4 * i)
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`.
        unsafe { libc::munmap(self.0 as *mut libc::c_void, self.1) };
    }
}

#[test]
fn the_mapped_semaphore_block_follows_the_requests() {
    let ((), acc) = emulate(InProcessConfig::new(Instance::Trn1, 1), |emu| {
        let fd = open(&emu.device_path(0), libc::O_RDWR).unwrap();
        let (r, off1, size) = mmap_info(&fd, 0, 1, 0);
        assert_eq!(r, Ok(0));
        assert_eq!((off1, size), ((1 << 40) + 0x2000, 0x2000));
        let (r, off0, _) = mmap_info(&fd, 0, 0, 0);
        assert_eq!((r, off0), (Ok(0), 1 << 40));
        // trn1 has 2 cores; other resources of the driver's table are not modelled; unknown
        // blocks and resources are invalid.
        assert_eq!(mmap_info(&fd, 0, 2, 0).0, Err(libc::EINVAL));
        assert_eq!(mmap_info(&fd, 0, 0, 2).0, Err(libc::EOPNOTSUPP));
        assert_eq!(mmap_info(&fd, 1, 0, 1).0, Err(libc::EOPNOTSUPP));
        assert_eq!(mmap_info(&fd, 7, 0, 0).0, Err(libc::EINVAL));
        assert_eq!(mmap_info(&fd, 0, 0, 9).0, Err(libc::EINVAL));

        let core1 = Map::new(&fd, off1, size as usize);
        let core0 = Map::new(&fd, off0, size as usize);
        assert_eq!(core1.semaphore(7), 0);
        assert_eq!(sem(&fd, SEMAPHORE_WRITE, 1, 7, 42), Ok(42));
        assert_eq!(core1.semaphore(7), 42);
        sem(&fd, SEMAPHORE_INCREMENT, 1, 7, 3).unwrap();
        assert_eq!(core1.semaphore(7), 45);
        sem(&fd, SEMAPHORE_DECREMENT, 1, 7, 5).unwrap();
        assert_eq!(core1.semaphore(7), 40);
        assert_eq!(sem(&fd, SEMAPHORE_READ, 1, 7, 0), Ok(40));
        sem(&fd, SEMAPHORE_WRITE, 1, 255, 0xdead_beef).unwrap();
        assert_eq!(core1.semaphore(255), 0xdead_beef);
        sem(&fd, EVENT_SET, 1, 9, 1).unwrap();
        assert_eq!(core1.event(9), 1);
        // Core 0's block is its own.
        assert_eq!((core0.semaphore(7), core0.event(9)), (0, 0));
        sem(&fd, SEMAPHORE_WRITE, 0, 7, 3).unwrap();
        assert_eq!((core0.semaphore(7), core1.semaphore(7)), (3, 40));

        // A reset of core 1 clears its semaphores and events, and the mapping shows it.
        let mut r = [0u8; 8];
        put32(&mut r, 0, 1 << 1);
        assert_eq!(ioctl(&fd, NC_RESET, &mut r), Ok(0));
        let mut ready = [0u8; 8];
        put32(&mut ready, 0, get32(&r, 4));
        assert_eq!(ioctl(&fd, NC_RESET_READY, &mut ready), Ok(0));
        assert_eq!(
            (core1.semaphore(7), core1.semaphore(255), core1.event(9)),
            (0, 0, 0)
        );
        assert_eq!(core0.semaphore(7), 3);
    });
    assert_eq!(acc.allocated_bytes, 0);
    assert_eq!(acc.attached_processes, 0);
}

/// A `struct neuron_ioctl_dma_queue_init` at the start of `b`.
#[allow(clippy::too_many_arguments)]
fn queue(b: &mut [u8], eng: u32, qid: u32, tx_n: u32, rx_n: u32, tx: u64, rx: u64, rxc: u64) {
    put32(b, 0, eng);
    put32(b, 4, qid);
    put32(b, 8, tx_n);
    put32(b, 12, rx_n);
    put64(b, 16, tx);
    put64(b, 24, rx);
    put64(b, 32, rxc);
    put32(b, 40, 0);
}

#[test]
fn dma_queues_follow_the_drivers_rules() {
    let ((), acc) = emulate(InProcessConfig::new(Instance::Trn2, 1), |emu| {
        let fd = open(&emu.device_path(0), libc::O_RDWR).unwrap();
        let tx = alloc(&fd, 4096, 4096, false, 0, DMA_RINGS_DEVICE).unwrap();
        let rx = alloc(&fd, 4096, 4096, false, 0, DMA_RINGS_DEVICE).unwrap();
        let host = alloc(&fd, 4096, 0, true, 0, 17).unwrap();
        let init = |eng, qid, tx_n, rx_n, t, r, c| {
            let mut a = [0u8; 48];
            queue(&mut a, eng, qid, tx_n, rx_n, t, r, c);
            ioctl(&fd, DMA_QUEUE_INIT, &mut a)
        };
        assert_eq!(init(0, 3, 64, 64, tx, rx, 0), Ok(0));
        assert_eq!(init(131, 15, 256, 256, host, host, 0), Ok(0));
        // Engine and queue ranges.
        assert_eq!(init(132, 0, 64, 64, tx, rx, 0), Err(libc::EINVAL));
        assert_eq!(init(0, 16, 64, 64, tx, rx, 0), Err(libc::EINVAL));
        // Ring sizes must be multiples of 16 descriptors (udma_m2m_init_queue: -1).
        assert_eq!(init(0, 3, 8, 64, tx, rx, 0), Err(libc::EPERM));
        assert_eq!(init(0, 3, 64, 24, tx, rx, 0), Err(libc::EPERM));
        // A completion ring: too small is EINVAL, one that fits is not supported (-1).
        assert_eq!(init(0, 3, 64, 512, tx, rx, rx), Err(libc::EINVAL));
        assert_eq!(init(0, 3, 64, 64, tx, rx, rx), Err(libc::EPERM));
        // A handle naming no chunk leaves the ring unset, as the driver's lookup does.
        assert_eq!(init(1, 0, 64, 64, 999, 0, 0), Ok(0));

        let mut batch = vec![0u8; 12296];
        put32(&mut batch, 0, 256);
        assert_eq!(
            ioctl(&fd, DMA_QUEUE_INIT_BATCH, &mut batch),
            Err(libc::E2BIG)
        );
        put32(&mut batch, 0, 3);
        queue(&mut batch[8..], 2, 0, 64, 64, tx, rx, 0);
        queue(&mut batch[56..], 2, 1, 64, 64, tx, rx, 0);
        queue(&mut batch[104..], 2, 16, 64, 64, tx, rx, 0);
        assert_eq!(
            ioctl(&fd, DMA_QUEUE_INIT_BATCH, &mut batch),
            Err(libc::EINVAL)
        );
        put32(&mut batch, 0, 2);
        assert_eq!(ioctl(&fd, DMA_QUEUE_INIT_BATCH, &mut batch), Ok(0));
        put32(&mut batch, 0, 0);
        assert_eq!(ioctl(&fd, DMA_QUEUE_INIT_BATCH, &mut batch), Ok(0));

        let mut rel = [0u8; 8];
        put32(&mut rel, 0, 0);
        put32(&mut rel, 4, 3);
        assert_eq!(ioctl(&fd, DMA_QUEUE_RELEASE, &mut rel), Ok(0));

        // Descriptors: a bounds-checked copy of num_descs × 16 bytes into the chunk.
        let mut descs: Vec<u8> = (0..64u8).collect();
        let copy = |handle: u64, buf: u64, n: u32, offset: u64| {
            let mut a = [0u8; 40];
            put64(&mut a, 0, handle);
            put64(&mut a, 8, buf);
            put32(&mut a, 16, n);
            put64(&mut a, 24, offset);
            put32(&mut a, 32, 0);
            ioctl(&fd, DMA_COPY_DESCRIPTORS64, &mut a)
        };
        let buf = descs.as_mut_ptr() as u64;
        assert_eq!(copy(tx, buf, 4, 4096 - 64), Ok(0));
        let mut back = vec![0u8; 64];
        assert_eq!(buf_copy(&fd, tx, &mut back, 4096 - 64, false), Ok(0));
        assert_eq!(back, descs);
        assert_eq!(copy(tx, buf, 4, 4096 - 48), Err(libc::EINVAL));
        assert_eq!(copy(999, buf, 4, 0), Err(libc::EINVAL));
        assert_eq!(copy(tx, 8, 4, 0), Err(libc::EFAULT));
        assert_eq!(copy(host, buf, 1, 0), Ok(0));

        for h in [tx, rx, host] {
            assert_eq!(free(&fd, h), Ok(0));
        }
        let a = emu.accounting();
        assert_eq!((a.allocations, a.allocated_bytes), (0, 0));
    });
    assert_eq!(acc.attached_processes, 0);
}
