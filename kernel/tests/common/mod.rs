//! Helpers shared by the integration tests: running a program on a simulated device with the
//! hazard list checked, counting instructions, deterministic data.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    dead_code,
    unreachable_pub
)]

use nrt_kernel::{EngineId, Program};
use nrt_sim::Instance;
use nrt_sim::engine::{
    Device, EventKind, ExecOptions, ExecReport, Instr, TensorKind, Track, assemble, disassemble,
};

/// Runs `program` on a trn1 device with `inputs` written by name; asserts the run completed
/// without hazards; returns the outputs by name and the report. Every program run is also
/// checked to survive the program text: `assemble(disassemble(p))` encodes to `p`'s bytes.
pub fn run(program: &Program, inputs: &[(&str, Vec<u8>)]) -> (Vec<(String, Vec<u8>)>, ExecReport) {
    let text = disassemble(program);
    let back = assemble(&text).unwrap_or_else(|e| panic!("{}: {e:?}", program.name));
    assert_eq!(
        back.to_bytes(),
        program.to_bytes(),
        "{}: text round trip",
        program.name
    );
    let dev = Device::new(Instance::Trn1);
    let lp = dev.load(0, program.clone()).unwrap();
    for (n, d) in inputs {
        dev.write_tensor(&lp, n, d).unwrap();
    }
    let report = dev.execute(&lp, &ExecOptions::default()).unwrap();
    assert!(
        report.hazards.is_empty(),
        "hazards: {:?}",
        report.hazards.first()
    );
    report.result().unwrap();
    let outs = program
        .tensors
        .iter()
        .filter(|t| t.kind == TensorKind::Output)
        .map(|t| (t.name.clone(), dev.read_tensor(&lp, &t.name).unwrap()))
        .collect();
    (outs, report)
}

/// The output called `name`.
pub fn output<'a>(outs: &'a [(String, Vec<u8>)], name: &str) -> &'a [u8] {
    &outs.iter().find(|(n, _)| n == name).unwrap().1
}

/// Instructions of `engine`'s stream for which `f` holds.
pub fn count(p: &Program, engine: EngineId, f: impl Fn(&Instr) -> bool) -> usize {
    p.stream(engine).iter().filter(|i| f(i)).count()
}

/// `SemWait`s of a stream.
pub fn waits(p: &Program, engine: EngineId) -> usize {
    count(p, engine, |i| matches!(i, Instr::SemWait { .. }))
}

/// `SemInc`s of a stream.
pub fn incs(p: &Program, engine: EngineId) -> usize {
    count(p, engine, |i| matches!(i, Instr::SemInc { .. }))
}

/// `DmaTrigger`s of a stream.
pub fn triggers(p: &Program, engine: EngineId) -> usize {
    count(p, engine, |i| matches!(i, Instr::DmaTrigger { .. }))
}

/// A deterministic generator (xorshift64*).
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    /// A small integer in `-k..=k`, as f32.
    pub fn small(&mut self, k: i64) -> f32 {
        (self.below((2 * k + 1) as usize) as i64 - k) as f32
    }
}

/// Busy intervals of a unit class, merged: `(start, end)` ticks of the data-path
/// instructions of an engine, or of every DMA descriptor.
pub fn busy(report: &ExecReport, engine: Option<EngineId>) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = report
        .events
        .iter()
        .filter(|ev| match (ev.track, ev.kind, engine) {
            (Track::Engine(e), EventKind::Instr { op, .. }, Some(want)) => {
                e == want
                    && !matches!(
                        op,
                        "SemWait" | "SemInc" | "SemSet" | "DmaTrigger" | "Notify" | "Halt"
                    )
            }
            (Track::DmaEngine(_), EventKind::Descriptor { .. }, None) => true,
            _ => false,
        })
        .map(|ev| (ev.start, ev.start + ev.dur))
        .collect();
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (s, e) in v {
        match out.last_mut() {
            Some(l) if s <= l.1 => l.1 = l.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Ticks during which both interval sets are busy.
pub fn overlap(a: &[(u64, u64)], b: &[(u64, u64)]) -> u64 {
    let mut t = 0;
    for &(s1, e1) in a {
        for &(s2, e2) in b {
            let (s, e) = (s1.max(s2), e1.min(e2));
            if e > s {
                t += e - s;
            }
        }
    }
    t
}
