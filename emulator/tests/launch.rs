//! The launch convention (docs/LINUX_BACKEND.md, version 1) driven with raw requests, as the
//! backend drives it: a notification queue and a mailbox per core, a stage image in device
//! memory, an execution descriptor, the doorbell, then the queue entry, `SEM_COMPLETED`, the
//! outputs and, for failures, the message.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::os::fd::{AsRawFd, OwnedFd};

use common::*;
use nrt_emu::InProcessConfig;
use nrt_sim::Instance;
use nrt_sim::engine::{DType, kernels};

const CODE_DEVICE: u32 = 8;
const TENSORS_DEVICE: u32 = 9;
const MISC_HOST: u32 = 4;

/// A shared mapping of the device fd.
struct Map {
    ptr: *mut u8,
    len: usize,
}

impl Map {
    fn new(fd: &OwnedFd, offset: u64, len: usize, prot: i32) -> Map {
        // SAFETY: maps `len` bytes of the device fd at a chunk's offset.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        Map { ptr: p.cast(), len }
    }

    fn read_u64(&self, at: usize) -> u64 {
        assert!(at + 8 <= self.len);
        // SAFETY: in bounds of the mapping; volatile as the backend reads the queue.
        unsafe { std::ptr::read_volatile(self.ptr.add(at).cast::<u64>()) }
    }

    fn read_u32(&self, at: usize) -> u32 {
        assert!(at + 4 <= self.len);
        // SAFETY: in bounds of the mapping.
        unsafe { std::ptr::read_volatile(self.ptr.add(at).cast::<u32>()) }
    }

    fn write(&self, at: usize, data: &[u8]) {
        assert!(at + data.len() <= self.len);
        // SAFETY: in bounds of a writable mapping.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(at), data.len()) }
    }

    fn c_string(&self, at: usize) -> String {
        let mut out = Vec::new();
        let mut i = at;
        while i < self.len {
            // SAFETY: in bounds of the mapping.
            let b = unsafe { *self.ptr.add(i) };
            if b == 0 {
                break;
            }
            out.push(b);
            i += 1;
        }
        String::from_utf8(out).unwrap()
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: unmaps what `new` mapped.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// The stage image of the convention.
fn image(inputs: &[&str], outputs: &[&str], program: &[u8]) -> Vec<u8> {
    let mut names = Vec::new();
    for n in inputs.iter().chain(outputs) {
        names.extend_from_slice(&(n.len() as u32).to_le_bytes());
        names.extend_from_slice(n.as_bytes());
        while names.len() % 4 != 0 {
            names.push(0);
        }
    }
    let header_len = (32 + names.len()).next_multiple_of(8);
    let mut img = Vec::new();
    img.extend_from_slice(b"NRTSIMG1");
    img.extend_from_slice(&1u32.to_le_bytes());
    img.extend_from_slice(&(header_len as u32).to_le_bytes());
    img.extend_from_slice(&(program.len() as u64).to_le_bytes());
    img.extend_from_slice(&(inputs.len() as u32).to_le_bytes());
    img.extend_from_slice(&(outputs.len() as u32).to_le_bytes());
    img.extend_from_slice(&names);
    img.resize(header_len, 0);
    img.extend_from_slice(program);
    img
}

/// An execution descriptor: (side, io_index, pa, size) per binding.
fn descriptor(seq: u64, image_pa: u64, bindings: &[(u32, u32, u64, u64)]) -> Vec<u8> {
    let mut d = Vec::new();
    d.extend_from_slice(b"NRTEXEC1");
    d.extend_from_slice(&seq.to_le_bytes());
    d.extend_from_slice(&image_pa.to_le_bytes());
    d.extend_from_slice(&0u32.to_le_bytes());
    d.extend_from_slice(&(bindings.len() as u32).to_le_bytes());
    for &(side, index, pa, size) in bindings {
        d.extend_from_slice(&side.to_le_bytes());
        d.extend_from_slice(&index.to_le_bytes());
        d.extend_from_slice(&pa.to_le_bytes());
        d.extend_from_slice(&size.to_le_bytes());
        d.extend_from_slice(&0u64.to_le_bytes());
    }
    d
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn a_program_runs_through_the_doorbell() {
    doorbell(Instance::Trn1, 1, 0, 1);
}

#[test]
fn a_program_runs_on_the_second_device_of_a_trn2() {
    doorbell(Instance::Trn2, 2, 1, 5);
}

fn doorbell(instance: Instance, devices: u32, device: u32, core: u32) {
    let ((), acc) = emulate(InProcessConfig::new(instance, devices), |emu| {
        let fd = open(&emu.device_path(device), libc::O_RDWR).unwrap();

        // Notification queue.
        let mut nq = [0u8; 48];
        put32(&mut nq, 0, core);
        put32(&mut nq, 8, 1);
        put32(&mut nq, 16, 4096);
        put32(&mut nq, 20, 1);
        assert_eq!(ioctl(&fd, NOTIFICATIONS_INIT_V2, &mut nq), Ok(0));
        let (nq_offset, nq_handle) = (get64(&nq, 32), get64(&nq, 40));
        assert_ne!(nq_handle, 0);
        let queue = Map::new(&fd, nq_offset, 4096, libc::PROT_READ);
        // A second init returns the same queue.
        assert_eq!(ioctl(&fd, NOTIFICATIONS_INIT_V2, &mut nq), Ok(0));
        assert_eq!((get64(&nq, 32), get64(&nq, 40)), (nq_offset, nq_handle));

        // Mailbox.
        let mb = alloc(&fd, 65536, 0, true, core, MISC_HOST).unwrap();
        let (_, mb_pa, mb_offset, ..) = ext_info(&fd, mb);
        let mailbox = Map::new(&fd, mb_offset, 65536, libc::PROT_READ | libc::PROT_WRITE);
        sem(&fd, SEMAPHORE_WRITE, core, 250, mb_pa as u32).unwrap();
        sem(&fd, SEMAPHORE_WRITE, core, 251, (mb_pa >> 32) as u32).unwrap();

        // Stage image of a 4×8 fp32 add.
        let program = kernels::elementwise(kernels::Elementwise::Add, 4, 8, DType::F32)
            .unwrap()
            .to_bytes();
        let mut img = image(&["a", "b"], &["out"], &program);
        let img_h = alloc(&fd, img.len() as u64, 4096, false, core, CODE_DEVICE).unwrap();
        assert_eq!(buf_copy(&fd, img_h, &mut img, 0, true), Ok(0));
        let (_, img_pa, ..) = ext_info(&fd, img_h);

        // One tensor chunk: a at 0, b at 128, out at 256.
        let t = alloc(&fd, 384, 0, false, core, TENSORS_DEVICE).unwrap();
        let (_, t_pa, ..) = ext_info(&fd, t);
        let a: Vec<f32> = (0..32).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..32).map(|i| 1.25 - i as f32).collect();
        let mut ab = f32_bytes(&a);
        ab.extend(f32_bytes(&b));
        assert_eq!(buf_copy(&fd, t, &mut ab, 0, true), Ok(0));
        let bindings = [
            (0, 0, t_pa, 128),
            (0, 1, t_pa + 128, 128),
            (1, 0, t_pa + 256, 128),
        ];

        for seq in 1..=2u64 {
            mailbox.write(0, &descriptor(seq, img_pa, &bindings));
            assert_eq!(sem(&fd, SEMAPHORE_INCREMENT, core, 252, 1), Ok(1));
            let slot = (seq as usize - 1) * 16;
            assert_eq!(queue.read_u64(slot), seq);
            assert_eq!(queue.read_u32(slot + 8), 0, "{}", mailbox.c_string(32768));
            assert_eq!(queue.read_u32(slot + 12), 0);
            assert_eq!(sem(&fd, SEMAPHORE_READ, core, 253, 0), Ok(seq as u32));
            let mut out = vec![0u8; 128];
            assert_eq!(buf_copy(&fd, t, &mut out, 256, false), Ok(0));
            let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
            assert_eq!(out, f32_bytes(&want));
        }
        // The image was staged once.
        assert_eq!(emu.emulator().machine().staged_models().len(), 1);

        // A malformed descriptor: status 3 and a message.
        let mut bad = descriptor(3, img_pa, &bindings);
        bad[0] = b'X';
        mailbox.write(0, &bad);
        sem(&fd, SEMAPHORE_INCREMENT, core, 252, 1).unwrap();
        assert_eq!(queue.read_u64(32), 3);
        assert_eq!(queue.read_u32(40), 3);
        assert_eq!(mailbox.c_string(32768), "bad execution descriptor magic");
        // A binding whose size differs from the program's tensor.
        mailbox.write(
            0,
            &descriptor(
                4,
                img_pa,
                &[
                    (0, 0, t_pa, 128),
                    (0, 1, t_pa + 128, 64),
                    (1, 0, t_pa + 256, 128),
                ],
            ),
        );
        sem(&fd, SEMAPHORE_INCREMENT, core, 252, 1).unwrap();
        assert_eq!(queue.read_u64(48), 4);
        assert_eq!(queue.read_u32(56), 3);
        assert!(
            mailbox.c_string(32768).contains("size"),
            "{}",
            mailbox.c_string(32768)
        );
        assert_eq!(sem(&fd, SEMAPHORE_READ, core, 253, 0), Ok(4));

        // Freeing the image unstages it.
        assert_eq!(free(&fd, img_h), Ok(0));
        assert!(emu.emulator().machine().staged_models().is_empty());
        let acc = emu.accounting();
        assert_eq!((acc.launches, acc.launch_failures), (4, 2));
        drop(queue);
        drop(mailbox);
    });
    assert_eq!((acc.allocations, acc.allocated_bytes), (0, 0), "{acc}");
}

#[test]
fn semaphores_events_reset_and_core_init() {
    let ((), _) = emulate(InProcessConfig::new(Instance::Trn2, 1), |emu| {
        let fd = open(&emu.device_path(0), libc::O_RDWR).unwrap();
        assert_eq!(sem(&fd, SEMAPHORE_WRITE, 7, 255, 40), Ok(40));
        assert_eq!(sem(&fd, SEMAPHORE_INCREMENT, 7, 255, 3), Ok(3));
        assert_eq!(sem(&fd, SEMAPHORE_DECREMENT, 7, 255, 1), Ok(1));
        assert_eq!(sem(&fd, SEMAPHORE_READ, 7, 255, 0), Ok(42));
        // The index is the driver's u16: 65536 + 255 is 255.
        assert_eq!(sem(&fd, SEMAPHORE_READ, 7, 65536 + 255, 0), Ok(42));
        assert_eq!(sem(&fd, SEMAPHORE_READ, 7, 256, 0), Err(libc::EINVAL));
        assert_eq!(sem(&fd, SEMAPHORE_READ, 8, 0, 0), Err(libc::E2BIG));
        assert_eq!(sem(&fd, EVENT_SET, 3, 9, 5), Ok(5));
        assert_eq!(sem(&fd, EVENT_GET, 3, 9, 0), Ok(5));
        assert_eq!(sem(&fd, EVENT_GET, 3, 256, 0), Err(libc::EINVAL));

        let cinit = |nc: u32, state: u32| -> Result<u32, i32> {
            let mut a = [0u8; 12];
            put32(&mut a, 0, nc);
            put32(&mut a, 4, state);
            ioctl(&fd, CINIT_SET_STATE, &mut a)?;
            Ok(get32(&a, 8))
        };
        // INVALID → COMPLETED is refused; STARTED then COMPLETED.
        assert_eq!(cinit(7, 2), Ok(3));
        assert_eq!(cinit(7, 1), Ok(1));
        assert_eq!(cinit(7, 1), Ok(1));
        assert_eq!(cinit(7, 2), Ok(2));
        assert_eq!(cinit(8, 1), Err(libc::E2BIG));

        // NC_RESET of core 7: request id = our tgid; a second one is pending (returns 1);
        // READY consumes it; the core's state is INVALID again and its semaphores cleared.
        let mut r = [0u8; 8];
        put32(&mut r, 0, 1 << 7);
        assert_eq!(ioctl(&fd, NC_RESET, &mut r), Ok(0));
        assert_eq!(get32(&r, 4), std::process::id());
        assert_eq!(ioctl(&fd, NC_RESET, &mut r), Ok(1));
        let mut ready = [0u8; 8];
        put32(&mut ready, 0, std::process::id());
        put32(&mut ready, 4, 77);
        assert_eq!(ioctl(&fd, NC_RESET_READY, &mut ready), Ok(0));
        assert_eq!(get32(&ready, 4), 0);
        assert_eq!(ioctl(&fd, NC_RESET_READY, &mut ready), Ok(0));
        assert_eq!(get32(&ready, 4), 1);
        assert_eq!(cinit(7, 2), Ok(3));
        assert_eq!(sem(&fd, SEMAPHORE_READ, 7, 255, 0), Ok(0));
        assert_eq!(sem(&fd, EVENT_GET, 3, 9, 0), Ok(5));
    });
}

#[test]
fn malformed_stage_images_complete_with_status_3() {
    let ((), acc) = emulate(InProcessConfig::new(Instance::Trn1, 1), |emu| {
        let fd = open(&emu.device_path(0), libc::O_RDWR).unwrap();
        let core = 0u32;
        let mut nq = [0u8; 48];
        put32(&mut nq, 0, core);
        put32(&mut nq, 8, 1);
        put32(&mut nq, 16, 4096);
        put32(&mut nq, 20, 1);
        assert_eq!(ioctl(&fd, NOTIFICATIONS_INIT_V2, &mut nq), Ok(0));
        let queue = Map::new(&fd, get64(&nq, 32), 4096, libc::PROT_READ);
        let mb = alloc(&fd, 65536, 0, true, core, MISC_HOST).unwrap();
        let (_, mb_pa, mb_offset, ..) = ext_info(&fd, mb);
        let mailbox = Map::new(&fd, mb_offset, 65536, libc::PROT_READ | libc::PROT_WRITE);
        sem(&fd, SEMAPHORE_WRITE, core, 250, mb_pa as u32).unwrap();
        sem(&fd, SEMAPHORE_WRITE, core, 251, (mb_pa >> 32) as u32).unwrap();
        let program = kernels::elementwise(kernels::Elementwise::Add, 4, 8, DType::F32)
            .unwrap()
            .to_bytes();
        let good = image(&["a", "b"], &["out"], &program);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                {
                    let mut i = good.clone();
                    i[0] = b'x';
                    i
                },
                "bad stage image magic",
            ),
            (
                {
                    let mut i = good.clone();
                    i[8] = 2;
                    i
                },
                "stage image version 2",
            ),
            (
                {
                    let mut i = good.clone();
                    i[12] = 30;
                    i
                },
                "stage image header_len 30",
            ),
            (
                {
                    let mut i = good.clone();
                    i[24] = 200; // 200 inputs: the names run past the header
                    i
                },
                "stage image names run past the header",
            ),
            (
                image(&["b", "a"], &["out"], &program),
                "stage image names are not in I/O-index (sorted, unique) order",
            ),
            (
                image(&["a", "b"], &["out"], &[]),
                "the stage image carries no program",
            ),
            (
                {
                    let mut i = good.clone();
                    i[16..24].copy_from_slice(&(1u64 << 40).to_le_bytes());
                    i
                },
                "run past their chunk",
            ),
            (
                image(&["a", "b"], &["out"], &[1, 2, 3, 4, 5, 6, 7, 8]),
                "invalid simulator program",
            ),
        ];
        for (seq, (mut img, want)) in (1u64..).zip(cases) {
            let h = alloc(&fd, img.len() as u64, 0, false, core, CODE_DEVICE).unwrap();
            assert_eq!(buf_copy(&fd, h, &mut img, 0, true), Ok(0));
            let (_, pa, ..) = ext_info(&fd, h);
            mailbox.write(0, &descriptor(seq, pa, &[]));
            assert_eq!(sem(&fd, SEMAPHORE_INCREMENT, core, 252, 1), Ok(1));
            let slot = (seq as usize - 1) * 16;
            assert_eq!(queue.read_u64(slot), seq);
            assert_eq!(queue.read_u32(slot + 8), 3, "{want}");
            let msg = mailbox.c_string(32768);
            assert!(msg.contains(want), "{msg:?} lacks {want:?}");
            assert_eq!(free(&fd, h), Ok(0));
        }
        // No mailbox published: nothing to post, nothing completes.
        sem(&fd, SEMAPHORE_WRITE, core, 250, 0).unwrap();
        sem(&fd, SEMAPHORE_WRITE, core, 251, 0).unwrap();
        assert_eq!(sem(&fd, SEMAPHORE_INCREMENT, core, 252, 1), Ok(1));
        assert_eq!(sem(&fd, SEMAPHORE_READ, core, 253, 0), Ok(8));
        drop((queue, mailbox));
    });
    assert_eq!((acc.launches, acc.launch_failures), (9, 9));
}
