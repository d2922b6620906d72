//! How far into each SBUF partition a validated program reaches: the bound a device checks
//! against its generation's SBUF ([`CoreSpec::sbuf_partition_bytes`](crate::engine::CoreSpec))
//! at load. The validator checks the largest SBUF of any generation; this pass finds the
//! highest byte any instruction, descriptor or instance of a looped instruction touches.

use super::Program;
use super::loops::{for_each_corner, terms_at, walk};
use crate::engine::isa::{
    AccessPattern, DmaDescriptor, DmaEndpoint, DmaShift, EngineId, Instr, MemKind, Space, instance,
    shift_descriptor,
};

fn pattern_end(ap: &AccessPattern) -> u64 {
    if ap.space == Space::Sbuf {
        ap.byte_range().1.max(0) as u64
    } else {
        0
    }
}

fn endpoint_end(e: DmaEndpoint, len: u32) -> u64 {
    match e {
        DmaEndpoint::Sbuf { offset, .. } => u64::from(offset) + u64::from(len),
        DmaEndpoint::Block(b) if b.mem == MemKind::Sbuf => b.offset.saturating_add(b.row_bytes()),
        _ => 0,
    }
}

fn descriptor_end(d: &DmaDescriptor) -> u64 {
    endpoint_end(d.src, d.len).max(endpoint_end(d.dst, d.len))
}

/// The SBUF end of one instruction (or instance), its trigger's descriptors shifted by `shift`.
fn instr_end(p: &Program, ins: &Instr, shift: DmaShift) -> u64 {
    if let Instr::DmaTrigger { first, count, .. } = *ins {
        let range = first as usize..(first as usize).saturating_add(count as usize);
        return p.descriptors.get(range).map_or(0, |ds| {
            ds.iter()
                .filter_map(|d| shift_descriptor(d, shift))
                .map(|d| descriptor_end(&d))
                .max()
                .unwrap_or(0)
        });
    }
    let (acc, n) = ins.accesses();
    acc.iter()
        .take(n)
        .flatten()
        .map(|(ap, _)| pattern_end(ap))
        .max()
        .unwrap_or(0)
}

impl Program {
    /// One past the highest SBUF byte (per partition) the program can touch. For a program
    /// that passed [`Program::validate`]; an instance that fails to form counts nothing (the
    /// validator has rejected such programs).
    pub(crate) fn sbuf_extent(&self) -> u64 {
        let mut end = 0u64;
        let mut next = 0usize;
        for engine in EngineId::ALL {
            let stream = self.stream(engine);
            let _ = walk(engine, stream, |pc, ins, stack| {
                let terms = terms_at(&self.terms, &mut next, engine, pc);
                if terms.is_empty() {
                    end = end.max(instr_end(self, ins, DmaShift::default()));
                    return Ok(());
                }
                for_each_corner(terms, stack, |regs, _| {
                    if let Ok((inst, shift)) = instance(ins, terms, regs) {
                        end = end.max(instr_end(self, &inst, shift));
                    }
                    Ok(())
                })
            });
        }
        end
    }
}
