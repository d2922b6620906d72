//! The writer of the binary program format: sections, tensors, descriptors, initial
//! semaphores and one stream per engine.

use super::{
    FORMAT_MAJOR, FORMAT_MINOR, MAGIC, Program, SEC_DESCRIPTORS, SEC_NAME, SEC_SEM_INIT,
    SEC_STREAM_BASE, SEC_TENSORS, op,
};
use crate::engine::isa::{AccessPattern, Bias, DmaEndpoint, EngineId, Instr, SemCmp, Space};

impl Program {
    /// Serializes the program (format version [`FORMAT_MAJOR`].[`FORMAT_MINOR`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Vec::new();
        w.extend_from_slice(&MAGIC);
        put_u16(&mut w, FORMAT_MAJOR);
        put_u16(&mut w, FORMAT_MINOR);
        put_u32(&mut w, 0); // flags
        put_u32(&mut w, 4 + 5); // sections
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
        w
    }
}

fn put_u16(w: &mut Vec<u8>, v: u16) {
    w.extend_from_slice(&v.to_le_bytes());
}
fn put_u32(w: &mut Vec<u8>, v: u32) {
    w.extend_from_slice(&v.to_le_bytes());
}
fn put_u64(w: &mut Vec<u8>, v: u64) {
    w.extend_from_slice(&v.to_le_bytes());
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
    }
}
fn put_ap(w: &mut Vec<u8>, ap: &AccessPattern) {
    w.push(match ap.space {
        Space::Sbuf => 0,
        Space::Psum => 1,
    });
    w.push(ap.dtype.code());
    w.push(ap.start_partition);
    w.push(ap.partitions);
    put_u32(w, ap.offset);
    w.push(ap.ndims);
    for d in ap.used_dims() {
        put_u16(w, d.size);
        w.extend_from_slice(&d.stride.to_le_bytes());
    }
}

fn put_instr(w: &mut Vec<u8>, ins: &Instr) {
    match *ins {
        Instr::SemWait { sem, cmp, value } => {
            w.push(op::SEM_WAIT);
            w.push(sem);
            w.push(match cmp {
                SemCmp::Ge => 0,
                SemCmp::Eq => 1,
            });
            put_u32(w, value);
        }
        Instr::SemInc { sem, value } => {
            w.push(op::SEM_INC);
            w.push(sem);
            put_u32(w, value);
        }
        Instr::SemSet { sem, value } => {
            w.push(op::SEM_SET);
            w.push(sem);
            put_u32(w, value);
        }
        Instr::DmaTrigger {
            dma,
            queue,
            first,
            count,
            sem,
            inc,
        } => {
            w.push(op::DMA_TRIGGER);
            w.push(dma);
            w.push(queue);
            put_u32(w, first);
            put_u32(w, count);
            w.push(sem);
            put_u32(w, inc);
        }
        Instr::Notify { payload } => {
            w.push(op::NOTIFY);
            put_u32(w, payload);
        }
        Instr::Halt => w.push(op::HALT),
        Instr::LoadStationary { src } => {
            w.push(op::LOAD_STATIONARY);
            put_ap(w, &src);
        }
        Instr::MultiplyMoving {
            moving,
            dst,
            accumulate,
        } => {
            w.push(op::MULTIPLY_MOVING);
            put_ap(w, &moving);
            put_ap(w, &dst);
            w.push(u8::from(accumulate));
        }
        Instr::TensorTensor { op: o, a, b, out } => {
            w.push(op::TENSOR_TENSOR);
            w.push(o.code());
            put_ap(w, &a);
            put_ap(w, &b);
            put_ap(w, &out);
        }
        Instr::TensorScalar {
            op: o,
            src,
            scalar,
            out,
        } => {
            w.push(op::TENSOR_SCALAR);
            w.push(o.code());
            put_ap(w, &src);
            put_u32(w, scalar.to_bits());
            put_ap(w, &out);
        }
        Instr::Activation {
            func,
            src,
            out,
            scale,
            bias,
        } => {
            w.push(op::ACTIVATION);
            w.push(func.code());
            put_ap(w, &src);
            put_ap(w, &out);
            put_u32(w, scale.to_bits());
            match bias {
                Bias::Imm(v) => {
                    w.push(0);
                    put_u32(w, v.to_bits());
                }
                Bias::PerPartition(ap) => {
                    w.push(1);
                    put_ap(w, &ap);
                }
            }
        }
        Instr::TensorCopy { src, out } => {
            w.push(op::TENSOR_COPY);
            put_ap(w, &src);
            put_ap(w, &out);
        }
        Instr::Memset { out, bits } => {
            w.push(op::MEMSET);
            put_ap(w, &out);
            put_u32(w, bits);
        }
        Instr::Iota {
            out,
            base,
            partition_step,
            free_step,
        } => {
            w.push(op::IOTA);
            put_ap(w, &out);
            w.extend_from_slice(&base.to_le_bytes());
            w.extend_from_slice(&partition_step.to_le_bytes());
            w.extend_from_slice(&free_step.to_le_bytes());
        }
    }
}
