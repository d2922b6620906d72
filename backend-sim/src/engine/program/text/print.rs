//! The disassembler: the header (format, name, tensors and constant data, initial
//! semaphores, the DMA descriptors grouped under the triggers that start them, with the
//! queues and semaphores as comments), then each engine's stream, one instruction a line
//! (loop bodies indented), each followed by its dynamic terms (`with SLOT += STEP*rREG, ...`).

use core::fmt::Write as _;
use std::collections::{BTreeMap, BTreeSet};

use super::names::{float, mnemonic, slot_text};
use crate::engine::isa::{
    AccessPattern, ActReduce, Bias, DmaBlock, DmaEndpoint, DynTerm, EngineId, Instr, MemKind,
    Operand, ScalarStep, SemCmp, Space,
};
use crate::engine::program::{FORMAT_MAJOR, Program, TensorKind};

/// Bytes of constant data per `.data` line.
const DATA_BYTES_PER_LINE: usize = 64;

pub(super) fn program(p: &Program) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# nrt-sim program text (docs/SIM_ISA.md, \"Program text\")"
    );
    let _ = writeln!(s, ".format {FORMAT_MAJOR}.{}", p.format_minor());
    let _ = writeln!(s, ".program {:?}", p.name);
    if !p.tensors.is_empty() {
        let _ = writeln!(s, "\n# tensors: name, kind, dtype, shape");
    }
    for t in &p.tensors {
        let dims: Vec<String> = t.shape.iter().map(u64::to_string).collect();
        let _ = writeln!(
            s,
            ".tensor {:?} {} {} [{}]",
            t.name,
            t.kind.name(),
            t.dtype.name(),
            dims.join(", ")
        );
        if t.kind == TensorKind::Const || !t.data.is_empty() {
            for chunk in t.data.chunks(DATA_BYTES_PER_LINE) {
                let hex: String = chunk.iter().map(|b| format!("{b:02x}")).collect();
                let _ = writeln!(s, ".data {:?} {hex}", t.name);
            }
        }
    }
    semaphores(&mut s, p);
    descriptors(&mut s, p);
    for engine in EngineId::ALL {
        let stream = p.stream(engine);
        let _ = writeln!(
            s,
            "\n.engine {}  # {} instruction{}",
            engine.name(),
            stream.len(),
            if stream.len() == 1 { "" } else { "s" }
        );
        // Each instruction's terms, in table order.
        let mut by_pc: BTreeMap<u32, Vec<&DynTerm>> = BTreeMap::new();
        for t in p.terms.iter().filter(|t| t.engine == engine) {
            by_pc.entry(t.pc).or_default().push(t);
        }
        let mut depth = 0usize;
        for (pc, ins) in stream.iter().enumerate() {
            if matches!(ins, Instr::LoopEnd { .. }) {
                depth = depth.saturating_sub(1);
            }
            let mine: Vec<String> = u32::try_from(pc)
                .ok()
                .and_then(|pc| by_pc.get(&pc))
                .map(|ts| ts.iter().map(|t| term(t)).collect())
                .unwrap_or_default();
            let with = if mine.is_empty() {
                String::new()
            } else {
                format!(" with {}", mine.join(", "))
            };
            let _ = writeln!(s, "    {}{}{with}", "  ".repeat(depth), instr(ins));
            if matches!(ins, Instr::LoopBegin { .. }) {
                depth += 1;
            }
        }
        // Terms of instructions the stream does not have (an invalid program): shown, but
        // they cannot be written back.
        let missing = by_pc.range(u32::try_from(stream.len()).unwrap_or(u32::MAX)..);
        for t in missing.flat_map(|(_, ts)| ts) {
            let _ = writeln!(s, "    # dynamic term of missing pc {}: {}", t.pc, term(t));
        }
    }
    s
}

/// The initial values, and a comment line per semaphore the streams use.
fn semaphores(s: &mut String, p: &Program) {
    let mut uses: BTreeMap<u8, [BTreeSet<&str>; 3]> = BTreeMap::new();
    for engine in EngineId::ALL {
        for ins in p.stream(engine) {
            let (sem, role) = match *ins {
                Instr::SemWait { sem, .. } => (sem, 0),
                Instr::SemInc { sem, .. } | Instr::SemSet { sem, .. } => (sem, 1),
                Instr::DmaTrigger { sem, inc, .. } if inc != 0 => (sem, 2),
                _ => continue,
            };
            if let Some(set) = uses.entry(sem).or_default().get_mut(role) {
                set.insert(engine.name());
            }
        }
    }
    if uses.is_empty() && p.sem_init.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n# semaphores");
    for (sem, [wait, set, dma]) in &uses {
        let mut parts = Vec::new();
        for (what, engines) in [
            ("waited on by", wait),
            ("incremented or set by", set),
            ("raised by DMA triggered from", dma),
        ] {
            if !engines.is_empty() {
                let names: Vec<&str> = engines.iter().copied().collect();
                parts.push(format!("{what} {}", names.join(", ")));
            }
        }
        let _ = writeln!(s, "# sem {sem}: {}", parts.join("; "));
    }
    for &(sem, v) in &p.sem_init {
        let _ = writeln!(s, ".sem {sem} init={v}");
    }
}

/// The descriptor table; before each descriptor, a comment for every trigger whose range
/// starts there (its DMA engine and queue, engine, pc and semaphore).
fn descriptors(s: &mut String, p: &Program) {
    if p.descriptors.is_empty() {
        return;
    }
    let mut starts: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for engine in EngineId::ALL {
        for (pc, ins) in p.stream(engine).iter().enumerate() {
            if let Instr::DmaTrigger {
                dma,
                queue,
                first,
                count,
                sem,
                inc,
            } = *ins
            {
                starts.entry(first).or_default().push(format!(
                    "# dma {dma} queue {queue}: {engine} pc {pc} runs descriptors {first}..{}, \
                     then sem {sem} += {inc}",
                    u64::from(first) + u64::from(count)
                ));
            }
        }
    }
    let _ = writeln!(
        s,
        "\n# DMA descriptors (src -> dst, len bytes), grouped by the trigger that starts them"
    );
    for (i, d) in p.descriptors.iter().enumerate() {
        if let Some(lines) = u32::try_from(i).ok().and_then(|i| starts.get(&i)) {
            for l in lines {
                let _ = writeln!(s, "{l}");
            }
        }
        let _ = writeln!(
            s,
            ".desc {i} src={} dst={} len={}",
            endpoint(p, &d.src),
            endpoint(p, &d.dst),
            d.len
        );
    }
}

/// `SLOT += STEP*rREG`.
fn term(t: &DynTerm) -> String {
    format!("{} += {}*r{}", slot_text(t.slot), t.step, t.reg)
}

fn tensor_ref(p: &Program, index: u64) -> String {
    match usize::try_from(index).ok().and_then(|i| p.tensors.get(i)) {
        Some(t) => format!("{:?}", t.name),
        None => index.to_string(),
    }
}

fn endpoint(p: &Program, e: &DmaEndpoint) -> String {
    match *e {
        DmaEndpoint::Hbm { tensor, offset } => {
            format!("hbm:{}+{offset}", tensor_ref(p, u64::from(tensor)))
        }
        DmaEndpoint::Sbuf { partition, offset } => format!("sbuf:{partition}+{offset}"),
        DmaEndpoint::Psum { partition, offset } => format!("psum:{partition}+{offset}"),
        DmaEndpoint::Block(b) => block(p, &b),
    }
}

fn block(p: &Program, b: &DmaBlock) -> String {
    let at = match b.mem {
        MemKind::Hbm => format!("hbm:{}+{}", tensor_ref(p, u64::from(b.index)), b.offset),
        MemKind::Sbuf => format!("sbuf:{}+{}", b.index, b.offset),
        MemKind::Psum => format!("psum:{}+{}", b.index, b.offset),
    };
    format!(
        "block({at} {} [{}, {}] pitch={} transposed={})",
        b.dtype.name(),
        b.rows,
        b.cols,
        b.pitch,
        b.transposed
    )
}

/// `space.dtype[p0:p1][offset; [stride,size], ...]`.
pub(super) fn ap(a: &AccessPattern) -> String {
    let space = match a.space {
        Space::Sbuf => "sbuf",
        Space::Psum => "psum",
    };
    let dims: Vec<String> = a
        .dims
        .iter()
        .take(usize::from(a.ndims))
        .map(|d| format!("[{},{}]", d.stride, d.size))
        .collect();
    format!(
        "{space}.{}[{}:{}][{}; {}]",
        a.dtype.name(),
        a.start_partition,
        u16::from(a.start_partition) + u16::from(a.partitions),
        a.offset,
        dims.join(", ")
    )
}

fn operand(o: &Operand) -> String {
    match o {
        Operand::Imm(v) => float(*v),
        Operand::Int(i) => i.to_string(),
        Operand::PerPartition(a) => ap(a),
    }
}

fn bias(b: &Bias) -> String {
    match b {
        Bias::Imm(v) => float(*v),
        Bias::PerPartition(a) => ap(a),
    }
}

fn step(s: &ScalarStep) -> String {
    format!(
        "({} {} reverse={})",
        s.op.name(),
        operand(&s.operand),
        s.reverse
    )
}

fn opt_ap(a: &Option<AccessPattern>) -> String {
    a.as_ref().map_or_else(|| "none".to_owned(), ap)
}

/// One instruction: its mnemonic, then `key=value` for every field, in field order.
fn instr(ins: &Instr) -> String {
    let m = mnemonic(ins);
    match *ins {
        Instr::SemWait { sem, cmp, value } => {
            let cmp = match cmp {
                SemCmp::Ge => "ge",
                SemCmp::Eq => "eq",
            };
            format!("{m} sem={sem} cmp={cmp} value={value}")
        }
        Instr::SemInc { sem, value } | Instr::SemSet { sem, value } => {
            format!("{m} sem={sem} value={value}")
        }
        Instr::DmaTrigger {
            dma,
            queue,
            first,
            count,
            sem,
            inc,
        } => format!("{m} dma={dma} queue={queue} first={first} count={count} sem={sem} inc={inc}"),
        Instr::Notify { payload } => format!("{m} payload={payload}"),
        Instr::Halt => m.to_owned(),
        Instr::LoopBegin { reg, count } => format!("{m} reg={reg} count={count}"),
        Instr::LoopEnd { reg } => format!("{m} reg={reg}"),
        Instr::LoadStationary { src } => format!("{m} src={}", ap(&src)),
        Instr::MultiplyMoving {
            moving,
            dst,
            accumulate,
        } => format!(
            "{m} moving={} dst={} accumulate={accumulate}",
            ap(&moving),
            ap(&dst)
        ),
        Instr::TensorTensor { op, a, b, out } => format!(
            "{m} op={} a={} b={} out={}",
            op.name(),
            ap(&a),
            ap(&b),
            ap(&out)
        ),
        Instr::TensorScalar {
            op,
            src,
            scalar,
            out,
        } => format!(
            "{m} op={} src={} scalar={} out={}",
            op.name(),
            ap(&src),
            float(scalar),
            ap(&out)
        ),
        Instr::Activation {
            func,
            src,
            out,
            scale,
            bias: b,
        } => format!(
            "{m} func={} src={} out={} scale={} bias={}",
            func.name(),
            ap(&src),
            ap(&out),
            float(scale),
            bias(&b)
        ),
        Instr::TensorCopy { src, out } => format!("{m} src={} out={}", ap(&src), ap(&out)),
        Instr::Memset { out, bits } => format!("{m} out={} bits={bits:#010x}", ap(&out)),
        Instr::Iota {
            out,
            base,
            partition_step,
            free_step,
        } => format!(
            "{m} out={} base={base} partition_step={partition_step} free_step={free_step}",
            ap(&out)
        ),
        _ => instr_1_1(ins),
    }
}

/// The format-1.1 instructions.
fn instr_1_1(ins: &Instr) -> String {
    let m = mnemonic(ins);
    match *ins {
        Instr::TensorScalarChain {
            src,
            out,
            first,
            second,
        } => format!(
            "{m} src={} out={} first={} second={}",
            ap(&src),
            ap(&out),
            step(&first),
            second.as_ref().map_or_else(|| "none".to_owned(), step)
        ),
        Instr::ScalarTensorTensor {
            data,
            first,
            op1,
            data2,
            reverse1,
            out,
        } => format!(
            "{m} data={} first={} op1={} data2={} reverse1={reverse1} out={}",
            ap(&data),
            step(&first),
            op1.name(),
            ap(&data2),
            ap(&out)
        ),
        Instr::TensorReduce {
            op,
            src,
            out,
            axes,
            negate,
        } => format!(
            "{m} op={} src={} out={} axes={axes} negate={negate}",
            op.name(),
            ap(&src),
            ap(&out)
        ),
        Instr::Activate {
            func,
            src,
            out,
            scale,
            bias: b,
            reduce,
        } => format!(
            "{m} func={} src={} out={} scale={} bias={} reduce={}",
            func.name(),
            ap(&src),
            ap(&out),
            operand(&scale),
            bias(&b),
            reduce.as_ref().map_or_else(
                || "none".to_owned(),
                |r: &ActReduce| format!("({} {})", r.op.name(), ap(&r.out))
            )
        ),
        Instr::AffineSelect {
            on_true,
            out,
            on_false,
            cmp,
            offset,
            channel_multiplier,
            steps,
        } => format!(
            "{m} on_true={} out={} on_false={} cmp={} offset={offset} \
             channel_multiplier={channel_multiplier} steps=[{}, {}, {}, {}]",
            ap(&on_true),
            ap(&out),
            float(on_false),
            cmp.name(),
            steps[0],
            steps[1],
            steps[2],
            steps[3]
        ),
        Instr::RangeSelect {
            on_true,
            out,
            cmp0,
            bound0,
            cmp1,
            bound1,
            range_start,
            on_false,
            reduce_max,
        } => format!(
            "{m} on_true={} out={} cmp0={} bound0={} cmp1={} bound1={} \
             range_start={range_start} on_false={} reduce_max={}",
            ap(&on_true),
            ap(&out),
            cmp0.name(),
            ap(&bound0),
            cmp1.name(),
            ap(&bound1),
            float(on_false),
            opt_ap(&reduce_max)
        ),
        Instr::TensorTensorScan {
            data0,
            data1,
            out,
            initial,
            op0,
            op1,
            reverse0,
            reverse1,
        } => format!(
            "{m} data0={} data1={} out={} initial={} op0={} op1={} reverse0={reverse0} \
             reverse1={reverse1}",
            ap(&data0),
            ap(&data1),
            ap(&out),
            operand(&initial),
            op0.name(),
            op1.name()
        ),
        Instr::FindIndex8 { data, vals, out } => {
            format!("{m} data={} vals={} out={}", ap(&data), ap(&vals), ap(&out))
        }
        Instr::Reciprocal { src, out }
        | Instr::Transpose { src, out }
        | Instr::BnStats { src, out }
        | Instr::BnAggr { src, out }
        | Instr::Max8 { src, out } => format!("{m} src={} out={}", ap(&src), ap(&out)),
        // Format 1.0's instructions are written by `instr`.
        _ => m.to_owned(),
    }
}
