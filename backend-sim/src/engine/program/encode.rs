//! The writer of the binary program format: sections, tensors, descriptors, initial
//! semaphores, one stream per engine (instructions in `encode_instr.rs`) and, when the program
//! has any, the dynamic terms. The header carries the lowest minor that expresses the program
//! ([`Program::format_minor`]), so a format-1.0 program is written exactly as before 1.1
//! existed, and a program without terms exactly as before terms existed.

use super::encode_instr::{put_instr, put_u16, put_u32, put_u64};
use super::{
    FORMAT_MAJOR, MAGIC, Program, SEC_DESCRIPTORS, SEC_NAME, SEC_SEM_INIT, SEC_STREAM_BASE,
    SEC_TENSORS, SEC_TERMS,
};
use crate::engine::isa::{DmaEndpoint, EngineId, MemKind};

impl Program {
    /// Serializes the program (format version [`FORMAT_MAJOR`].[`Program::format_minor`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Vec::new();
        w.extend_from_slice(&MAGIC);
        put_u16(&mut w, FORMAT_MAJOR);
        put_u16(&mut w, self.format_minor());
        put_u32(&mut w, 0); // flags
        let terms = !self.terms.is_empty();
        put_u32(&mut w, 4 + 5 + u32::from(terms)); // sections
        section(&mut w, SEC_NAME, |s| put_str(s, &self.name));
        section(&mut w, SEC_TENSORS, |s| {
            put_u32(s, self.tensors.len() as u32);
            for t in &self.tensors {
                put_str(s, &t.name);
                s.push(t.kind.code());
                s.push(t.dtype.code());
                s.push(t.shape.len() as u8);
                for &d in &t.shape {
                    put_u64(s, d);
                }
                put_u64(s, t.data.len() as u64);
                s.extend_from_slice(&t.data);
            }
        });
        section(&mut w, SEC_DESCRIPTORS, |s| {
            put_u32(s, self.descriptors.len() as u32);
            for d in &self.descriptors {
                put_endpoint(s, &d.src);
                put_endpoint(s, &d.dst);
                put_u32(s, d.len);
            }
        });
        section(&mut w, SEC_SEM_INIT, |s| {
            put_u32(s, self.sem_init.len() as u32);
            for &(sem, v) in &self.sem_init {
                s.push(sem);
                put_u32(s, v);
            }
        });
        for engine in EngineId::ALL {
            section(&mut w, SEC_STREAM_BASE + engine.index() as u32, |s| {
                let stream = self.stream(engine);
                put_u32(s, stream.len() as u32);
                for ins in stream {
                    put_instr(s, ins);
                }
            });
        }
        if terms {
            section(&mut w, SEC_TERMS, |s| {
                put_u32(s, self.terms.len() as u32);
                for t in &self.terms {
                    let (kind, operand) = t.slot.code();
                    s.push(t.engine.index() as u8);
                    put_u32(s, t.pc);
                    s.push(kind);
                    s.push(operand);
                    s.push(t.reg);
                    put_u64(s, t.step as u64);
                }
            });
        }
        w
    }
}

fn put_str(w: &mut Vec<u8>, s: &str) {
    put_u16(w, s.len().min(usize::from(u16::MAX)) as u16);
    w.extend_from_slice(
        s.as_bytes()
            .get(..usize::from(u16::MAX))
            .unwrap_or(s.as_bytes()),
    );
}
fn section(w: &mut Vec<u8>, tag: u32, f: impl FnOnce(&mut Vec<u8>)) {
    let mut body = Vec::new();
    f(&mut body);
    put_u32(w, tag);
    put_u64(w, body.len() as u64);
    w.extend_from_slice(&body);
}
fn put_endpoint(w: &mut Vec<u8>, e: &DmaEndpoint) {
    match *e {
        DmaEndpoint::Hbm { tensor, offset } => {
            w.push(0);
            put_u32(w, tensor);
            put_u64(w, offset);
        }
        DmaEndpoint::Sbuf { partition, offset } => {
            w.push(1);
            w.push(partition);
            put_u32(w, offset);
        }
        DmaEndpoint::Psum { partition, offset } => {
            w.push(2);
            w.push(partition);
            put_u32(w, offset);
        }
        DmaEndpoint::Block(b) => {
            w.push(3);
            w.push(match b.mem {
                MemKind::Hbm => 0,
                MemKind::Sbuf => 1,
                MemKind::Psum => 2,
            });
            put_u32(w, b.index);
            put_u64(w, b.offset);
            w.push(b.dtype.code());
            put_u32(w, b.rows);
            put_u32(w, b.cols);
            put_u32(w, b.pitch);
            w.push(u8::from(b.transposed));
        }
    }
}
