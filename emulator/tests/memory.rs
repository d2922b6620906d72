//! Memory through the real syscall path: allocation with the handle written through the user
//! pointer, copies in both directions, chunk-to-chunk copy, memset, free, the mmap of a host
//! chunk, EFAULT, and the accounting going back to zero.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::*;
use nrt_emu::{FaultPlan, InProcessConfig};
use nrt_sim::Instance;

const CODE_DEVICE: u32 = 8;
const MISC_HOST: u32 = 4;

#[test]
fn device_alloc_copy_memset_free_round_trip() {
    let ((), acc) = emulate(InProcessConfig::new(Instance::Trn1, 1), |emu| {
        let fd = open(&emu.device_path(0), libc::O_RDWR).unwrap();
        let a = alloc(&fd, 10_000, 4096, false, 0, CODE_DEVICE).unwrap();
        let b = alloc(&fd, 8192, 0, false, 1, CODE_DEVICE).unwrap();
        assert_ne!(a, 0);
        assert_ne!(a, b);
        // Sizes are whole pages; device PAs are aligned and above 2^48.
        let (r, pa, _, size, host) = ext_info(&fd, a);
        assert_eq!(r, Ok(0));
        assert_eq!((size, host), (12288, 0));
        assert!(pa >= 1 << 48 && pa % 4096 == 0, "{pa:#x}");
        // The driver writes the chunk's kernel address over `mem_handle`, and the owner's pid.
        let mut e = [0u8; 48];
        put64(&mut e, 0, a);
        assert_eq!(ioctl(&fd, MEM_GET_EXTENDED_INFO, &mut e), Ok(0));
        assert_eq!(get64(&e, 0), 0xffff_8880_0000_0000 | a << 8);
        assert_eq!(get64(&e, 32), u64::from(std::process::id()));
        let acc = emu.accounting();
        assert_eq!((acc.allocations, acc.allocated_bytes), (2, 12288 + 8192));

        let mut data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        assert_eq!(buf_copy(&fd, a, &mut data, 100, true), Ok(0));
        let mut back = vec![0u8; 10_000];
        assert_eq!(buf_copy(&fd, a, &mut back, 100, false), Ok(0));
        assert_eq!(back, data);
        // Out of bounds: offset + size past the (page-rounded) chunk.
        assert_eq!(
            buf_copy(&fd, a, &mut back, 12288 - 9999, true),
            Err(libc::EINVAL)
        );
        assert_eq!(buf_copy(&fd, 999, &mut back, 0, true), Err(libc::EINVAL));

        // MEM_COPY64 a → b, then MEMSET64 part of b.
        let mut c = [0u8; 40];
        put64(&mut c, 0, a);
        put64(&mut c, 8, b);
        put64(&mut c, 16, 4000);
        put64(&mut c, 24, 100);
        put64(&mut c, 32, 10);
        assert_eq!(ioctl(&fd, MEM_COPY64, &mut c), Ok(0));
        let mut m = [0u8; 32];
        put64(&mut m, 0, b);
        put64(&mut m, 8, 10);
        put32(&mut m, 16, 0x1ab);
        put64(&mut m, 24, 5);
        assert_eq!(ioctl(&fd, MEMSET64, &mut m), Ok(0));
        let mut got = vec![0u8; 4010];
        assert_eq!(buf_copy(&fd, b, &mut got, 0, false), Ok(0));
        assert_eq!(&got[..10], &[0; 10]);
        assert_eq!(&got[10..15], &[0xab; 5]);
        assert_eq!(&got[15..], &data[5..4000]);
        put64(&mut c, 16, 8192); // past b's end at dst_offset 10
        assert_eq!(ioctl(&fd, MEM_COPY64, &mut c), Err(libc::EINVAL));

        assert_eq!(free(&fd, a), Ok(0));
        assert_eq!(free(&fd, a), Err(libc::EINVAL));
        // The driver's positive EINVAL for an unknown handle.
        assert_eq!(ext_info(&fd, a).0, Ok(libc::EINVAL));
        assert_eq!(free(&fd, b), Ok(0));
        assert_eq!(emu.accounting().allocations, 0);
    });
    assert_eq!(acc.allocated_bytes, 0);
    assert_eq!(acc.attached_processes, 0);
}

#[test]
fn host_chunk_mmap_sees_the_copies() {
    let ((), acc) = emulate(InProcessConfig::new(Instance::Trn2, 2), |emu| {
        let fd = open(&emu.device_path(1), libc::O_RDWR).unwrap();
        // The driver refuses aligned host memory.
        assert_eq!(
            alloc(&fd, 65536, 4096, true, 0, MISC_HOST),
            Err(libc::EINVAL)
        );
        let h = alloc(&fd, 65536, 0, true, 3, MISC_HOST).unwrap();
        let (r, pa, offset, size, host) = ext_info(&fd, h);
        assert_eq!((r, size, host), (Ok(0), 65536, 1));
        assert_eq!(pa, offset);
        assert_eq!(offset % 4096, 0);
        // SAFETY: maps 64 KiB of the device fd at the chunk's offset.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                65536,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&fd),
                offset as libc::off_t,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        // SAFETY: the mapping is 64 KiB long and lives until the munmap below.
        let view = unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), 65536) };
        assert!(view.iter().all(|&b| b == 0));
        let mut msg = *b"written through MEM_BUF_COPY64";
        assert_eq!(buf_copy(&fd, h, &mut msg, 40000, true), Ok(0));
        assert_eq!(&view[40000..40000 + msg.len()], &msg);
        view[7..12].copy_from_slice(b"hello");
        let mut back = [0u8; 5];
        assert_eq!(buf_copy(&fd, h, &mut back, 7, false), Ok(0));
        assert_eq!(&back, b"hello");
        // SAFETY: unmaps the mapping made above.
        assert_eq!(unsafe { libc::munmap(p, 65536) }, 0);
        assert_eq!(free(&fd, h), Ok(0));
        // A new chunk reads zeros again.
        let h2 = alloc(&fd, 65536, 0, true, 0, MISC_HOST).unwrap();
        let mut z = [1u8; 12];
        assert_eq!(buf_copy(&fd, h2, &mut z, 0, false), Ok(0));
        assert_eq!(z, [0; 12]);
        // Closing the fd frees what the process still holds.
    });
    assert_eq!((acc.allocations, acc.allocated_bytes), (0, 0));
    assert_eq!(acc.attached_processes, 0);
}

#[test]
fn bad_user_pointers_fail_with_efault_and_leave_nothing() {
    let ((), acc) = emulate(InProcessConfig::new(Instance::Trn1, 1), |emu| {
        let misc = open(&emu.device_path(0), libc::O_WRONLY).unwrap();
        assert_eq!(
            ioctl_ptr(&misc, COMPATIBLE_VERSION, 8 as *mut u8),
            Err(libc::EFAULT)
        );
        let fd = open(&emu.device_path(0), libc::O_RDWR).unwrap();
        // A bad handle pointer: the chunk is freed again.
        let mut a = [0u8; 56];
        put64(&mut a, 0, 4096);
        put64(&mut a, 40, 16);
        assert_eq!(ioctl(&fd, MEM_ALLOC_V2MT64, &mut a), Err(libc::EFAULT));
        assert_eq!(emu.accounting().allocations, 0);
        // A bad buffer in a copy.
        let h = alloc(&fd, 4096, 0, false, 0, CODE_DEVICE).unwrap();
        let mut c = [0u8; 40];
        put64(&mut c, 0, h);
        put64(&mut c, 8, 24);
        put64(&mut c, 16, 64);
        put32(&mut c, 32, 1);
        assert_eq!(ioctl(&fd, MEM_BUF_COPY64, &mut c), Err(libc::EFAULT));
        // Memory requests on the O_WRONLY fd are not in the misc set.
        assert_eq!(
            ioctl(&misc, MEM_ALLOC_V2MT64, &mut [0u8; 56]),
            Err(libc::EINVAL)
        );
        assert_eq!(free(&fd, h), Ok(0));
    });
    assert_eq!(acc.ioctls_failed, 4);
    assert_eq!(acc.allocations, 0);
}

#[test]
fn fault_injection_fails_the_nth_ioctl_and_whole_requests_without_effect() {
    let faults = FaultPlan::none()
        .fail_nth(2, libc::EIO)
        .fail_request(MEM_FREE, libc::ENOMEM);
    let ((), acc) = emulate(
        InProcessConfig::new(Instance::Trn1, 1).with_faults(faults),
        |emu| {
            let fd = open(&emu.device_path(0), libc::O_RDWR).unwrap();
            let h = alloc(&fd, 4096, 0, false, 0, CODE_DEVICE).unwrap(); // 1st
            // 2nd: fails and allocates nothing.
            assert_eq!(alloc(&fd, 4096, 0, false, 0, CODE_DEVICE), Err(libc::EIO));
            assert_eq!(emu.accounting().allocations, 1);
            // Every MEM_FREE fails; the chunk stays.
            assert_eq!(free(&fd, h), Err(libc::ENOMEM));
            assert_eq!(free(&fd, h), Err(libc::ENOMEM));
            assert_eq!(emu.accounting().allocations, 1);
            let (r, ..) = ext_info(&fd, h);
            assert_eq!(r, Ok(0));
        },
    );
    assert_eq!(acc.ioctls_served, 5);
    assert_eq!(acc.ioctls_failed, 3);
    assert_eq!(acc.per_request.get(&MEM_FREE), Some(&2));
    assert_eq!(acc.per_request.get(&MEM_ALLOC_V2MT64), Some(&2));
    // The close freed the chunk.
    assert_eq!(acc.allocations, 0);
}

#[test]
fn argument_checks_first_fit_and_the_attach_check() {
    let ((), acc) = emulate(InProcessConfig::new(Instance::Trn1, 1), |emu| {
        let fd = open(&emu.device_path(0), libc::O_RDWR).unwrap();
        // nc_id past MAX_NC_PER_DEVICE, HBM channel past the device's, size past i64.
        assert_eq!(
            alloc(&fd, 4096, 0, false, 8, CODE_DEVICE),
            Err(libc::EINVAL)
        );
        let mut a = [0u8; 56];
        let mut handle = 0u64;
        put64(&mut a, 0, 4096);
        put32(&mut a, 20, 2);
        put64(&mut a, 40, &mut handle as *mut u64 as u64);
        assert_eq!(ioctl(&fd, MEM_ALLOC_V2MT64, &mut a), Err(libc::EINVAL));
        assert_eq!(
            alloc(&fd, 1 << 63, 0, false, 0, CODE_DEVICE),
            Err(libc::EINVAL)
        );
        assert_eq!(alloc(&fd, 0, 0, true, 0, MISC_HOST), Err(libc::ENOMEM));

        // Host chunks: first fit in the node's file, a freed range is reused.
        let h1 = alloc(&fd, 8192, 0, true, 0, MISC_HOST).unwrap();
        let h2 = alloc(&fd, 4096, 0, true, 0, MISC_HOST).unwrap();
        let (pa1, pa2) = (ext_info(&fd, h1).1, ext_info(&fd, h2).1);
        assert_eq!((pa1, pa2), (4096, 4096 + 8192));
        assert_eq!(free(&fd, h1), Ok(0));
        let h3 = alloc(&fd, 4096, 0, true, 0, MISC_HOST).unwrap();
        assert_eq!(ext_info(&fd, h3).1, pa1);

        // MEM_MC_GET_INFO_V2: the chunk holding a PA.
        let mut m = [0u8; 32];
        put64(&mut m, 0, pa2 + 100);
        assert_eq!(ioctl(&fd, 0xc020_4e6f, &mut m), Ok(0));
        assert_eq!(
            (get64(&m, 8), get64(&m, 16), get64(&m, 24)),
            (pa2, 4096, h2)
        );
        put64(&mut m, 0, 1 << 40);
        assert_eq!(ioctl(&fd, 0xc020_4e6f, &mut m), Err(libc::ENOMEM));

        // Notification queues: power-of-two sizes, NeuronCore or TOP_SP types only.
        let mut nq = [0u8; 48];
        put32(&mut nq, 8, 1);
        put32(&mut nq, 16, 3000);
        put32(&mut nq, 20, 1);
        assert_eq!(
            ioctl(&fd, NOTIFICATIONS_INIT_V2, &mut nq),
            Err(libc::EINVAL)
        );
        put32(&mut nq, 16, 4096);
        put32(&mut nq, 4, 2);
        assert_eq!(
            ioctl(&fd, NOTIFICATIONS_INIT_V2, &mut nq),
            Err(libc::ENOSYS)
        );

        // Each close flushes: closing a dup of the only attached fd detaches the process,
        // and the attach-checked MEM_FREE is then refused on the fd still open.
        // SAFETY: dup of an fd we own.
        let dup = unsafe { libc::dup(std::os::fd::AsRawFd::as_raw_fd(&fd)) };
        assert!(dup >= 0);
        // SAFETY: closes the dup made above.
        assert_eq!(unsafe { libc::close(dup) }, 0);
        assert_eq!(emu.accounting().attached_processes, 0);
        assert_eq!(
            emu.accounting().allocations,
            0,
            "the last flush freed the chunks"
        );
        assert_eq!(free(&fd, h2), Err(libc::EACCES));
    });
    assert_eq!((acc.allocations, acc.attached_processes), (0, 0));
}
