//! The firmware's `Driver`: one device with one core, device memory in a static arena, and
//! executions that interpret the NEFF's simulator program ([`crate::interp`]) on the target.

use alloc::vec::Vec;
use core::fmt;

use nrt_core::driver::{
    Arch, DeviceBuffer, DeviceInfo, Driver, DriverError, ErrorKind, ExecRequest, Platform,
    StagedModel, SubgraphImage,
};
use nrt_core::io::TensorUsage;

use crate::interp::{self, OnChip, Placement, Program, Refusal};

/// Bytes of device memory (the arena).
pub const ARENA_BYTES: usize = 16 * 1024;
/// Device allocations live at once.
pub const MAX_BLOCKS: usize = 32;
/// Models staged at once.
pub const MAX_STAGED: usize = 4;
/// Device address of the arena's first byte (never 0).
const BASE: u64 = 0x1000_0000;
/// Alignment of device allocations.
const ALIGN: usize = 16;

/// A driver error: its portable kind and what failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FwError {
    kind: ErrorKind,
    what: &'static str,
}

impl fmt::Display for FwError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.what)
    }
}

impl DriverError for FwError {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
    fn unsupported(operation: &'static str) -> Self {
        Self {
            kind: ErrorKind::Unsupported,
            what: operation,
        }
    }
}

fn fail(kind: ErrorKind, what: &'static str) -> FwError {
    FwError { kind, what }
}

/// Where a program tensor lives.
#[derive(Clone, Copy, Debug)]
enum Slot {
    /// Model I/O tensor `index`, bound per execution.
    Io { output: bool, index: u32 },
    /// A block of the arena the stage allocated (constants, scratch).
    Own {
        at: usize,
        size: usize,
        scratch: bool,
    },
}

#[derive(Debug)]
struct Staged {
    handle: u64,
    program: Program,
    slots: Vec<Slot>,
    /// Per-execution placement of each program tensor (filled by `submit`; allocated once).
    places: Vec<Placement>,
}

#[derive(Debug)]
struct State {
    arena: [u8; ARENA_BYTES],
    chip: OnChip,
    /// Allocated `(offset, size)` blocks, sorted by offset.
    blocks: heapless::Vec<(usize, usize), MAX_BLOCKS>,
    staged: heapless::Vec<Staged, MAX_STAGED>,
    next_handle: u64,
}

impl State {
    fn alloc(&mut self, size: usize) -> Result<usize, FwError> {
        let oom = fail(ErrorKind::OutOfMemory, "device arena exhausted");
        if size == 0 || self.blocks.is_full() {
            return Err(oom);
        }
        let mut at = 0usize;
        let mut index = self.blocks.len();
        for (i, &(o, s)) in self.blocks.iter().enumerate() {
            if o >= at + size {
                index = i;
                break;
            }
            at = (o + s).next_multiple_of(ALIGN);
        }
        if at + size > ARENA_BYTES {
            return Err(oom);
        }
        self.blocks.insert(index, (at, size)).map_err(|_| oom)?;
        Ok(at)
    }

    fn free(&mut self, at: usize) -> Result<(), FwError> {
        let i = self.blocks.iter().position(|&(o, _)| o == at);
        let i = i.ok_or(fail(
            ErrorKind::InvalidArgument,
            "no such device allocation",
        ))?;
        self.blocks.remove(i);
        Ok(())
    }

    /// Arena range of `len` bytes at `offset` inside the allocation `b`.
    fn range(
        &self,
        b: DeviceBuffer,
        offset: u64,
        len: u64,
    ) -> Result<core::ops::Range<usize>, FwError> {
        let bad = fail(ErrorKind::InvalidArgument, "device access out of bounds");
        let at = b
            .addr
            .checked_sub(BASE)
            .and_then(|a| usize::try_from(a).ok());
        let at = at.ok_or(bad)?;
        let &(_, size) = self.blocks.iter().find(|&&(o, _)| o == at).ok_or(bad)?;
        let end = offset.checked_add(len).ok_or(bad)?;
        if b.device != 0 || end > size as u64 || end > b.size {
            return Err(bad);
        }
        Ok(at + offset as usize..at + end as usize)
    }

    fn unstage(&mut self, handle: u64) -> Result<(), FwError> {
        let i = self.staged.iter().position(|s| s.handle == handle);
        let i = i.ok_or(fail(ErrorKind::InvalidArgument, "no such staged model"))?;
        let s = self.staged.swap_remove(i);
        for slot in &s.slots {
            if let Slot::Own { at, .. } = *slot {
                let _ = self.free(at);
            }
        }
        Ok(())
    }
}

/// The firmware driver. Use it through a `static` (its state holds the arena and the on-chip
/// memories: tens of KiB that belong in `.bss`, not on the stack).
#[derive(Debug)]
pub struct FwDriver {
    state: spin::Mutex<State>,
}

impl FwDriver {
    /// An empty device.
    pub const fn new() -> Self {
        Self {
            state: spin::Mutex::new(State {
                arena: [0; ARENA_BYTES],
                chip: OnChip::new(),
                blocks: heapless::Vec::new(),
                staged: heapless::Vec::new(),
                next_handle: 0,
            }),
        }
    }

    /// Device allocations and staged models live now (both 0 when everything was given back).
    pub fn in_use(&self) -> (usize, usize) {
        let s = self.state.lock();
        (s.blocks.len(), s.staged.len())
    }
}

impl Default for FwDriver {
    fn default() -> Self {
        Self::new()
    }
}

fn refusal(r: Refusal) -> FwError {
    match r {
        Refusal::Invalid => fail(ErrorKind::InvalidArgument, "malformed simulator program"),
        Refusal::Unsupported => fail(
            ErrorKind::Unsupported,
            "program outside the firmware interpreter's subset",
        ),
        Refusal::TooLarge => fail(
            ErrorKind::OutOfMemory,
            "program does not fit the firmware's memories",
        ),
    }
}

impl Driver for FwDriver {
    type Error = FwError;

    fn is_funtime(&self) -> bool {
        true
    }

    fn discover(&self) -> Result<DeviceInfo, FwError> {
        Ok(DeviceInfo {
            device_count: 1,
            cores_per_device: 1,
            arch: Arch::V2,
            platform: Platform::Simulator,
        })
    }

    fn stage_subgraph(&self, image: &SubgraphImage<'_>) -> Result<StagedModel, FwError> {
        let bytes = image.program.ok_or(fail(
            ErrorKind::Unsupported,
            "the NEFF carries no simulator program",
        ))?;
        let program = interp::decode(bytes).map_err(refusal)?;
        let oom = fail(ErrorKind::OutOfMemory, "host heap exhausted");
        let mut slots = Vec::new();
        slots
            .try_reserve_exact(program.tensors.len())
            .map_err(|_| oom)?;
        let mut places = Vec::new();
        places
            .try_reserve_exact(program.tensors.len())
            .map_err(|_| oom)?;
        let mut s = self.state.lock();
        if s.staged.is_full() {
            return Err(oom);
        }
        let mut result = Ok(());
        for t in &program.tensors {
            let name = bytes
                .get(t.name.0 as usize..t.name.0 as usize + usize::from(t.name.1))
                .and_then(|b| core::str::from_utf8(b).ok())
                .unwrap_or("");
            let slot = match t.kind {
                0 | 1 => {
                    let usage = if t.kind == 0 {
                        TensorUsage::Input
                    } else {
                        TensorUsage::Output
                    };
                    match image.io.index_of(usage, name) {
                        Some(index) => Slot::Io {
                            output: t.kind == 1,
                            index,
                        },
                        None => {
                            result = Err(fail(
                                ErrorKind::InvalidArgument,
                                "a program I/O tensor is not in the NEFF",
                            ));
                            break;
                        }
                    }
                }
                kind => match s.alloc(t.size as usize) {
                    Ok(at) => {
                        if kind == 2 {
                            let src = bytes
                                .get(t.data.0 as usize..(t.data.0 + t.data.1) as usize)
                                .unwrap_or(&[]);
                            if let Some(dst) = s.arena.get_mut(at..at + src.len()) {
                                dst.copy_from_slice(src);
                            }
                        }
                        Slot::Own {
                            at,
                            size: t.size as usize,
                            scratch: kind == 3,
                        }
                    }
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                },
            };
            slots.push(slot);
            places.push((0, 0));
        }
        if let Err(e) = result {
            for slot in &slots {
                if let Slot::Own { at, .. } = *slot {
                    let _ = s.free(at);
                }
            }
            return Err(e);
        }
        // Handles start at 1; the counter starts at 0 so that the driver's static is all
        // zero (in `.bss`, not copied from flash into `.data`).
        s.next_handle += 1;
        let handle = s.next_handle;
        if s.staged
            .push(Staged {
                handle,
                program,
                slots,
                places,
            })
            .is_err()
        {
            return Err(oom);
        }
        Ok(StagedModel {
            lnc: image.lnc,
            handle,
            plumbing: false,
        })
    }

    fn stop_model(&self, _model: StagedModel) -> Result<(), FwError> {
        Ok(())
    }

    fn unstage_model(&self, model: StagedModel) -> Result<(), FwError> {
        self.state.lock().unstage(model.handle)
    }

    fn alloc_device(&self, device: u32, size: u64) -> Result<DeviceBuffer, FwError> {
        if device != 0 {
            return Err(fail(ErrorKind::InvalidArgument, "no such device"));
        }
        let len = usize::try_from(size)
            .map_err(|_| fail(ErrorKind::OutOfMemory, "device arena exhausted"))?;
        let at = self.state.lock().alloc(len)?;
        Ok(DeviceBuffer {
            device,
            addr: BASE + at as u64,
            size,
        })
    }

    fn free_device(&self, buffer: DeviceBuffer) -> Result<(), FwError> {
        let mut s = self.state.lock();
        let at = buffer
            .addr
            .checked_sub(BASE)
            .and_then(|a| usize::try_from(a).ok());
        s.free(at.ok_or(fail(
            ErrorKind::InvalidArgument,
            "no such device allocation",
        ))?)
    }

    fn write_device(&self, buffer: DeviceBuffer, offset: u64, data: &[u8]) -> Result<(), FwError> {
        let mut s = self.state.lock();
        let r = s.range(buffer, offset, data.len() as u64)?;
        s.arena
            .get_mut(r)
            .map(|d| d.copy_from_slice(data))
            .ok_or(fail(
                ErrorKind::InvalidArgument,
                "device access out of bounds",
            ))
    }

    fn read_device(
        &self,
        buffer: DeviceBuffer,
        offset: u64,
        out: &mut [u8],
    ) -> Result<(), FwError> {
        let s = self.state.lock();
        let r = s.range(buffer, offset, out.len() as u64)?;
        s.arena.get(r).map(|d| out.copy_from_slice(d)).ok_or(fail(
            ErrorKind::InvalidArgument,
            "device access out of bounds",
        ))
    }

    fn memset_device(
        &self,
        buffer: DeviceBuffer,
        offset: u64,
        value: u8,
        len: u64,
    ) -> Result<(), FwError> {
        let mut s = self.state.lock();
        let r = s.range(buffer, offset, len)?;
        s.arena.get_mut(r).map(|d| d.fill(value)).ok_or(fail(
            ErrorKind::InvalidArgument,
            "device access out of bounds",
        ))
    }

    fn copy_device(
        &self,
        src: DeviceBuffer,
        so: u64,
        dst: DeviceBuffer,
        d: u64,
        len: u64,
    ) -> Result<(), FwError> {
        let mut s = self.state.lock();
        let from = s.range(src, so, len)?;
        let to = s.range(dst, d, len)?;
        s.arena.copy_within(from, to.start);
        Ok(())
    }

    fn submit(&self, request: &ExecRequest<'_>) -> Result<(), FwError> {
        let mut guard = self.state.lock();
        let s = &mut *guard;
        let bad = fail(
            ErrorKind::InvalidArgument,
            "an I/O tensor of the program is not bound",
        );
        for sub in request.subgraphs {
            let staged = s.staged.iter_mut().find(|x| x.handle == sub.handle);
            let staged = staged.ok_or(fail(ErrorKind::InvalidArgument, "no such staged model"))?;
            for (slot, place) in staged.slots.iter().zip(staged.places.iter_mut()) {
                *place = match *slot {
                    Slot::Io { output, index } => {
                        let list = if output {
                            request.outputs
                        } else {
                            request.inputs
                        };
                        let b = list.iter().find(|b| b.index == index).ok_or(bad)?;
                        let end = b
                            .buffer
                            .addr
                            .checked_sub(BASE)
                            .and_then(|a| a.checked_add(b.offset));
                        let end = end.and_then(|a| a.checked_add(b.size)).ok_or(bad)?;
                        if end > ARENA_BYTES as u64 {
                            return Err(bad);
                        }
                        // Both fit the arena (checked above), so in usize.
                        let (start, len) = ((end - b.size) as usize, b.size as usize);
                        if output {
                            s.arena.get_mut(start..start + len).ok_or(bad)?.fill(0);
                        }
                        (start, len)
                    }
                    Slot::Own { at, size, scratch } => {
                        if scratch {
                            s.arena.get_mut(at..at + size).ok_or(bad)?.fill(0);
                        }
                        (at, size)
                    }
                };
            }
            interp::run(&staged.program, &mut s.chip, &mut s.arena, &staged.places)
                .map_err(|_| fail(ErrorKind::Execution, "the program faulted on the target"))?;
        }
        Ok(())
    }
}
