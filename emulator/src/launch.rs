//! The device side of the simulator-program launch convention, version 1
//! (`docs/LINUX_BACKEND.md`): on a doorbell ring, read the execution descriptor from the
//! core's mailbox, stage the image it names on the simulated core (cached by the image's PA
//! until that chunk is freed or rewritten), run it with the bindings, and post the result —
//! failure message, notification-queue entry, `SEM_COMPLETED` — before the ring's ioctl
//! returns.

use std::sync::Arc;

use nrt_core::driver::{Binding, Driver, DriverError, ErrorKind, ExecRequest, SubgraphImage};
use nrt_core::io::{Dtype, IoTable, TensorInfo};
use nrt_sim::SimMachine;

use crate::memory;
use crate::state::{Backing, Chunk, Device, Staged, State};

/// Semaphore holding bits 0–31 of the mailbox PA.
pub const SEM_MAILBOX_LO: usize = 250;
/// Semaphore holding bits 32–63 of the mailbox PA.
pub const SEM_MAILBOX_HI: usize = 251;
/// Incrementing it starts an execution.
pub const SEM_DOORBELL: usize = 252;
/// Incremented once per completed execution.
pub const SEM_COMPLETED: usize = 253;

const EXEC_MAGIC: &[u8; 8] = b"NRTEXEC1";
const IMAGE_MAGIC: &[u8; 8] = b"NRTSIMG1";
/// Descriptor header bytes before the bindings.
const DESC_HEADER: u64 = 32;
const BINDING_BYTES: u64 = 32;
/// Where a failure message goes in the mailbox, and its room (NUL included).
const MESSAGE_OFFSET: u64 = 32768;
const MESSAGE_ROOM: usize = 4096;
/// The notification queue of the convention: 4096 bytes of 16-byte entries.
const NQ_BYTES: u64 = 4096;
const NQ_ENTRY: u64 = 16;
/// (engine, type) of the convention's queue: engine 0, `NQ_TYPE_NOTIFY`.
const NQ_ENGINE: u32 = 0;
const NQ_TYPE_NOTIFY: u32 = 1;

/// Completion status of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
enum Status {
    Completed = 0,
    Failed = 1,
    TimedOut = 2,
    Malformed = 3,
}

type Failure = (Status, String);

fn malformed(msg: impl Into<String>) -> Failure {
    (Status::Malformed, msg.into())
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        w.copy_from_slice(s);
    }
    u32::from_le_bytes(w)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        w.copy_from_slice(s);
    }
    u64::from_le_bytes(w)
}

/// Reads `len` bytes at `pa`, which must lie in one chunk.
fn read_pa(dev: &Device, pa: u64, len: u64) -> Result<(Chunk, Vec<u8>), String> {
    let (_, chunk) = dev
        .chunk_at(pa)
        .ok_or_else(|| format!("no memory chunk at PA {pa:#x}"))?;
    let off = pa - chunk.pa;
    if !chunk.within(off, len) {
        return Err(format!("{len} bytes at PA {pa:#x} run past their chunk"));
    }
    let n = usize::try_from(len).map_err(|_| format!("{len} bytes is too large"))?;
    let mut buf = vec![0u8; n];
    memory::read(dev, &chunk, off, &mut buf).map_err(|e| format!("read failed (errno {e})"))?;
    Ok((chunk, buf))
}

/// Handles a doorbell ring on `core` of `device` by process `tgid`.
pub(crate) fn ring(st: &mut State, machine: &Arc<SimMachine>, device: u32, core: u32, tgid: u32) {
    st.counters.launches += 1;
    let ok = match st.device(device) {
        Some(dev) => launch(dev, machine, core, tgid),
        None => false,
    };
    if !ok {
        st.counters.launch_failures += 1;
    }
}

/// One launch; whether it completed with status 0 and was posted.
fn launch(dev: &mut Device, machine: &Arc<SimMachine>, core: u32, tgid: u32) -> bool {
    let Some(sems) = dev.semaphores.get(core as usize) else {
        return false;
    };
    let mailbox = u64::from(sems[SEM_MAILBOX_LO]) | u64::from(sems[SEM_MAILBOX_HI]) << 32;
    // Without a readable mailbox there is no sequence number to post: nothing completes, as
    // on hardware.
    let Ok((_, header)) = read_pa(dev, mailbox, DESC_HEADER) else {
        return false;
    };
    let seq = le_u64(&header, 8);
    memory::sim(dev, machine, tgid);
    let (status, message) = match execute(dev, core, tgid, mailbox, &header) {
        Ok(()) => (Status::Completed, String::new()),
        Err(f) => f,
    };
    if let Some(c) = dev.model_started.get_mut(core as usize) {
        *c += 1;
    }
    let posted = post(dev, core, mailbox, seq, status, &message);
    posted && status == Status::Completed
}

/// Writes the failure message, the queue entry and bumps `SEM_COMPLETED`; whether the entry
/// could be posted.
fn post(
    dev: &mut Device,
    core: u32,
    mailbox: u64,
    seq: u64,
    status: Status,
    message: &str,
) -> bool {
    if status != Status::Completed {
        let mut text: Vec<u8> = message.bytes().take(MESSAGE_ROOM - 1).collect();
        text.push(0);
        if let Some((_, chunk)) = dev.chunk_at(mailbox) {
            let off = mailbox - chunk.pa + MESSAGE_OFFSET;
            if chunk.within(off, text.len() as u64) {
                let _ = memory::write(dev, &chunk, off, &text);
            }
        }
    }
    let queue = dev
        .nqs
        .get(&(core, NQ_ENGINE, NQ_TYPE_NOTIFY))
        .and_then(|h| dev.chunks.get(h))
        .copied()
        .filter(|c| c.is_host() && c.within(0, NQ_BYTES));
    let posted = match queue {
        Some(q) => {
            let slot = (seq.wrapping_sub(1) % (NQ_BYTES / NQ_ENTRY)) * NQ_ENTRY;
            let mut tail = [0u8; 8];
            tail[..4].copy_from_slice(&(status as u32).to_le_bytes());
            // Status and reserved first, the sequence number last.
            memory::write(dev, &q, slot + 8, &tail).is_ok()
                && memory::write(dev, &q, slot, &seq.to_le_bytes()).is_ok()
        }
        None => false,
    };
    if let Some(s) = dev
        .semaphores
        .get_mut(core as usize)
        .and_then(|s| s.get_mut(SEM_COMPLETED))
    {
        *s = s.wrapping_add(1);
    }
    posted
}

/// One parsed binding of the descriptor.
struct DescBinding {
    output: bool,
    io_index: u32,
    pa: u64,
    size: u64,
}

fn execute(
    dev: &mut Device,
    core: u32,
    tgid: u32,
    mailbox: u64,
    header: &[u8],
) -> Result<(), Failure> {
    if header.get(..8) != Some(&EXEC_MAGIC[..]) {
        return Err(malformed("bad execution descriptor magic"));
    }
    let image_pa = le_u64(header, 16);
    let timeout = le_u32(header, 24);
    let count = u64::from(le_u32(header, 28));
    let room = MESSAGE_OFFSET - DESC_HEADER;
    if count.saturating_mul(BINDING_BYTES) > room {
        return Err(malformed(format!(
            "{count} bindings do not fit the mailbox"
        )));
    }
    let (_, raw) = read_pa(dev, mailbox + DESC_HEADER, count * BINDING_BYTES).map_err(malformed)?;
    let bindings: Vec<DescBinding> = raw
        .chunks(BINDING_BYTES as usize)
        .map(|b| DescBinding {
            output: le_u32(b, 0) == 1,
            io_index: le_u32(b, 4),
            pa: le_u64(b, 8),
            size: le_u64(b, 16),
        })
        .collect();
    if let Some(b) = raw
        .chunks(BINDING_BYTES as usize)
        .find(|b| le_u32(b, 0) > 1)
    {
        return Err(malformed(format!(
            "binding side {} is neither 0 nor 1",
            le_u32(b, 0)
        )));
    }
    let model = stage(dev, core, tgid, image_pa, &bindings)?;
    let mut inputs = Vec::new();
    let mut outputs = Vec::new();
    for b in &bindings {
        let (_, chunk) = dev
            .chunk_at(b.pa)
            .ok_or_else(|| malformed(format!("no memory chunk at binding PA {:#x}", b.pa)))?;
        let Backing::Device { buffer, offset } = chunk.backing else {
            return Err(malformed(format!(
                "binding PA {:#x} is host memory; tensors must be device memory",
                b.pa
            )));
        };
        let within = b.pa - chunk.pa;
        if !chunk.within(within, b.size) {
            return Err(malformed(format!(
                "binding at PA {:#x} runs past its chunk",
                b.pa
            )));
        }
        let binding = Binding {
            index: b.io_index,
            buffer,
            offset: offset + within,
            size: b.size,
        };
        if b.output {
            outputs.push(binding);
        } else {
            inputs.push(binding);
        }
    }
    let request = ExecRequest {
        subgraphs: &[model],
        inputs: &inputs,
        outputs: &outputs,
        timeout_secs: (timeout != 0).then_some(timeout),
    };
    let sim = dev
        .sims
        .get(&tgid)
        .ok_or_else(|| malformed("the process has no simulated driver"))?;
    sim.submit(&request).map_err(|e| {
        let status = match e.kind() {
            ErrorKind::Timeout => Status::TimedOut,
            ErrorKind::InvalidArgument => Status::Malformed,
            _ => Status::Failed,
        };
        (status, e.to_string())
    })
}

/// The staged model of the image at `image_pa`: cached, or parsed and staged now.
fn stage(
    dev: &mut Device,
    core: u32,
    tgid: u32,
    image_pa: u64,
    bindings: &[DescBinding],
) -> Result<nrt_core::driver::StagedModel, Failure> {
    if let Some(s) = dev.staged.get(&image_pa) {
        if s.owner == tgid {
            return Ok(s.model);
        }
    }
    let (_, head) = read_pa(dev, image_pa, 32).map_err(malformed)?;
    if head.get(..8) != Some(&IMAGE_MAGIC[..]) {
        return Err(malformed("bad stage image magic"));
    }
    if le_u32(&head, 8) != 1 {
        return Err(malformed(format!(
            "stage image version {}",
            le_u32(&head, 8)
        )));
    }
    let header_len = u64::from(le_u32(&head, 12));
    let program_len = le_u64(&head, 16);
    let counts = [le_u32(&head, 24), le_u32(&head, 28)];
    if header_len < 32 || header_len % 8 != 0 {
        return Err(malformed(format!("stage image header_len {header_len}")));
    }
    let total = header_len
        .checked_add(program_len)
        .ok_or_else(|| malformed("stage image too large"))?;
    let (_, image) = read_pa(dev, image_pa, total).map_err(malformed)?;
    let names = parse_names(image.get(32..header_len as usize).unwrap_or(&[]), counts)?;
    let program = image.get(header_len as usize..).unwrap_or(&[]);
    if program.is_empty() {
        return Err(malformed("the stage image carries no program"));
    }
    // Sizes from the bindings (the table only maps names to I/O indices for the simulator).
    let side = |output: bool, names: &[String]| -> Vec<TensorInfo> {
        names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let size = bindings
                    .iter()
                    .find(|b| b.output == output && b.io_index as usize == i)
                    .map_or(0, |b| b.size);
                TensorInfo {
                    name: name.clone(),
                    size,
                    dtype: Dtype::Uint8,
                    shape: vec![u32::try_from(size).unwrap_or(u32::MAX)],
                }
            })
            .collect()
    };
    let io = IoTable::new(side(false, &names.0), side(true, &names.1))
        .map_err(|e| malformed(format!("stage image names: {}", e.message())))?;
    let pnc = dev.index * dev.cores + core;
    let image = SubgraphImage {
        lnc: pnc,
        index: 0,
        pnc,
        name: "sg00",
        model: "nrt-emu",
        program: Some(program),
        io: &io,
    };
    let sim = dev
        .sims
        .get(&tgid)
        .ok_or_else(|| malformed("the process has no simulated driver"))?;
    let model = sim
        .stage_subgraph(&image)
        .map_err(|e| malformed(e.to_string()))?;
    // A previous stage of another process at this PA is dropped.
    if let Some(old) = dev.staged.insert(image_pa, Staged { owner: tgid, model }) {
        if let Some(s) = dev.sims.get(&old.owner) {
            let _ = s.unstage_model(old.model);
        }
    }
    Ok(model)
}

/// The image's names: each a `u32` length, the UTF-8 bytes, zero padding to 4.
fn parse_names(mut b: &[u8], counts: [u32; 2]) -> Result<(Vec<String>, Vec<String>), Failure> {
    let mut sides = [Vec::new(), Vec::new()];
    for (side, &count) in sides.iter_mut().zip(&counts) {
        for _ in 0..count {
            let len = le_u32(b, 0) as usize;
            let bytes = b
                .get(4..4 + len)
                .ok_or_else(|| malformed("stage image names run past the header"))?;
            let name = std::str::from_utf8(bytes)
                .map_err(|_| malformed("stage image name is not UTF-8"))?;
            side.push(name.to_string());
            let padded = (4 + len).next_multiple_of(4);
            b = b.get(padded..).unwrap_or(&[]);
        }
    }
    // I/O indices are positions in the runtime's table, which sorts each side by name.
    for side in &sides {
        if side.windows(2).any(|w| w[0].as_bytes() >= w[1].as_bytes()) {
            return Err(malformed(
                "stage image names are not in I/O-index (sorted, unique) order",
            ));
        }
    }
    let [inputs, outputs] = sides;
    Ok((inputs, outputs))
}
