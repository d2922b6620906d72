//! The assembler's driver: lines, directives (`.format`, `.program`, `.tensor`, `.data`,
//! `.sem`, `.desc`, `.engine`), DMA endpoints, and the final validation (as
//! `Program::from_bytes` does, with line numbers added to what names an instruction or a
//! descriptor).

use nrt_core::{Error, NrtStatus, err};

use super::lex::{Line, Tok, line};
use super::names::engine_named;
use super::operands::{dtype, instr, terms};
use crate::engine::isa::{DmaBlock, DmaDescriptor, DmaEndpoint, DynTerm, EngineId, MemKind};
use crate::engine::program::{
    FORMAT_MAJOR, MAX_DESCRIPTORS, MAX_RANK, MAX_STREAM_INSTRS, MAX_TENSORS, MAX_TERMS, Program,
    TensorDecl, TensorKind,
};

/// What the assembler has read so far, with the line of each instruction and descriptor.
struct State {
    p: Program,
    minor: Option<u16>,
    engine: Option<EngineId>,
    seen_engines: [bool; 5],
    instr_lines: [Vec<usize>; 5],
    desc_lines: Vec<usize>,
}

pub(super) fn program(text: &str) -> Result<Program, Error> {
    let mut st = State {
        p: Program::default(),
        minor: None,
        engine: None,
        seen_engines: [false; 5],
        instr_lines: Default::default(),
        desc_lines: Vec::new(),
    };
    let mut last_line = 0;
    for (i, raw) in text.lines().enumerate() {
        last_line = i + 1;
        let mut l = line(i + 1, raw)?;
        if l.at_end() {
            continue;
        }
        if st.minor.is_none() {
            st.minor = Some(format(&mut l)?);
            continue;
        }
        if l.eat('.') {
            directive(&mut st, &mut l)?;
        } else {
            let Some(engine) = st.engine else {
                return Err(l.expected("a directive (`.tensor`, `.engine`, ...)"));
            };
            let ins = instr(&mut l)?;
            let ts = terms(&mut l)?;
            l.finish()?;
            let stream = &mut st.p.streams[engine.index()];
            let pc = u32::try_from(stream.len()).unwrap_or(u32::MAX);
            for (slot, reg, step) in ts {
                if st.p.terms.len() >= MAX_TERMS {
                    return Err(l.error_at_prev(&format!("more than {MAX_TERMS} dynamic terms")));
                }
                st.p.terms.push(DynTerm {
                    engine,
                    pc,
                    slot,
                    reg,
                    step,
                });
            }
            if stream.len() >= MAX_STREAM_INSTRS {
                return Err(l.error_at_prev(&format!(
                    "{engine}: more than {MAX_STREAM_INSTRS} instructions"
                )));
            }
            stream.push(ins);
            st.instr_lines[engine.index()].push(l.number);
        }
    }
    let Some(minor) = st.minor else {
        return Err(err!(
            Invalid,
            "line {}, column 1: expected `.format {FORMAT_MAJOR}.N`, found the end of the text",
            last_line + 1
        ));
    };
    st.p.check_versioned(minor).map_err(|e| locate(&st, &e))?;
    Ok(st.p)
}

/// `.format MAJOR.MINOR`, the first line.
fn format(l: &mut Line) -> Result<u16, Error> {
    if !(l.eat('.') && l.keyword("format").is_ok()) {
        l.rewind();
        return Err(l.expected(&format!("`.format {FORMAT_MAJOR}.N` (the first line)")));
    }
    let text = match l.next() {
        Some(Tok::Num(s)) => s,
        _ => {
            l.back();
            return Err(l.expected("a version MAJOR.MINOR"));
        }
    };
    let parsed = text.split_once('.').and_then(|(a, b)| {
        let digits =
            |s: &str| !s.is_empty() && s.len() <= 5 && s.bytes().all(|c| c.is_ascii_digit());
        if digits(a) && digits(b) {
            Some((a.parse::<u16>().ok()?, b.parse::<u16>().ok()?))
        } else {
            None
        }
    });
    let Some((major, minor)) = parsed else {
        l.back();
        return Err(l.expected("a version MAJOR.MINOR"));
    };
    l.finish()?;
    if major != FORMAT_MAJOR {
        return Err(Error::new(
            NrtStatus::UnsupportedNeffVersion,
            format_args!(
                "line {}: simulator program format {major}.{minor} is not supported (this build \
                 reads {FORMAT_MAJOR}.x)",
                l.number
            ),
        ));
    }
    Ok(minor)
}

fn directive(st: &mut State, l: &mut Line) -> Result<(), Error> {
    let word =
        l.ident("a directive (`.program`, `.tensor`, `.data`, `.sem`, `.desc`, `.engine`)")?;
    match word.as_str() {
        "program" => {
            st.p.name = l.string("the program's name (a quoted string)")?;
        }
        "tensor" => {
            let t = tensor(l)?;
            if st.p.tensors.len() >= MAX_TENSORS {
                return Err(l.error_at_prev(&format!("more than {MAX_TENSORS} tensors")));
            }
            st.p.tensors.push(t);
        }
        "data" => {
            let name = l.string("a tensor's name (a quoted string)")?;
            let Some(i) = st.p.tensor_index(&name) else {
                return Err(l.error_at_prev(&format!("no tensor '{name}' declared above")));
            };
            let hex = match l.next() {
                Some(Tok::Num(s) | Tok::Ident(s)) => s,
                _ => {
                    l.back();
                    return Err(l.expected("hex bytes"));
                }
            };
            let bytes = hex_bytes(&hex).ok_or_else(|| {
                l.error_at_prev("expected hex bytes (an even number of 0-9a-f digits)")
            })?;
            if let Some(t) = st.p.tensors.get_mut(i) {
                t.data.extend_from_slice(&bytes);
            }
        }
        "sem" => {
            let sem = l.uint::<u8>("a semaphore")?;
            l.key("init")?;
            let v = l.uint::<u32>("its initial value")?;
            if st.p.sem_init.len() >= 256 {
                return Err(l.error_at_prev("more than 256 initial semaphore values"));
            }
            st.p.sem_init.push((sem, v));
        }
        "desc" => {
            let n = st.p.descriptors.len();
            l.int(&format!("descriptor index {n}"), n as i128, n as i128)?;
            if n >= MAX_DESCRIPTORS {
                return Err(l.error_at_prev(&format!("more than {MAX_DESCRIPTORS} descriptors")));
            }
            l.key("src")?;
            let src = endpoint(l, &st.p)?;
            l.key("dst")?;
            let dst = endpoint(l, &st.p)?;
            l.key("len")?;
            let len = l.uint::<u32>("a length in bytes")?;
            st.p.descriptors.push(DmaDescriptor { src, dst, len });
            st.desc_lines.push(l.number);
        }
        "engine" => {
            let name = l.ident("an engine (SyncE, TensorE, VectorE, ScalarE or GpSimdE)")?;
            let Some(engine) = engine_named(&name) else {
                l.back();
                return Err(l.expected("an engine (SyncE, TensorE, VectorE, ScalarE or GpSimdE)"));
            };
            let seen = &mut st.seen_engines[engine.index()];
            if *seen {
                return Err(l.error_at_prev(&format!("a second `.engine {engine}` section")));
            }
            *seen = true;
            st.engine = Some(engine);
        }
        "format" => {
            l.back();
            return Err(l.error_at_prev("`.format` appears twice"));
        }
        _ => {
            l.back();
            return Err(l.expected(
                "a directive (`.program`, `.tensor`, `.data`, `.sem`, `.desc`, `.engine`)",
            ));
        }
    }
    l.finish()
}

/// `"name" kind dtype [d0, d1, ...]`.
fn tensor(l: &mut Line) -> Result<TensorDecl, Error> {
    let name = l.string("the tensor's name (a quoted string)")?;
    let kind_word = l.ident("a tensor kind (input, output, const or scratch)")?;
    let kind = [
        TensorKind::Input,
        TensorKind::Output,
        TensorKind::Const,
        TensorKind::Scratch,
    ]
    .into_iter()
    .find(|k| k.name() == kind_word)
    .ok_or_else(|| {
        l.back();
        l.expected("a tensor kind (input, output, const or scratch)")
    })?;
    let dtype = dtype(l)?;
    l.punct('[')?;
    let mut shape = Vec::new();
    if !l.eat(']') {
        loop {
            if shape.len() >= MAX_RANK {
                return Err(l.expected(&format!("`]` (rank at most {MAX_RANK})")));
            }
            shape.push(l.uint::<u64>("a dimension")?);
            if l.eat(']') {
                break;
            }
            l.punct(',')?;
        }
    }
    Ok(TensorDecl {
        name,
        kind,
        dtype,
        shape,
        data: Vec::new(),
    })
}

fn hex_bytes(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

/// `mem:WHERE+OFFSET`: WHERE is a tensor (its quoted name or its index) for `hbm`, a
/// partition for `sbuf` and `psum`.
fn place(l: &mut Line, p: &Program) -> Result<(MemKind, u32, u64), Error> {
    let mem = match l.ident("a memory (hbm, sbuf or psum)")?.as_str() {
        "hbm" => MemKind::Hbm,
        "sbuf" => MemKind::Sbuf,
        "psum" => MemKind::Psum,
        _ => {
            l.back();
            return Err(l.expected("a memory (hbm, sbuf or psum)"));
        }
    };
    l.punct(':')?;
    let index = if mem == MemKind::Hbm {
        match l.peek() {
            Some(Tok::Str(_)) => {
                let name = l.string("a tensor")?;
                let i = p.tensor_index(&name).ok_or_else(|| {
                    l.error_at_prev(&format!("no tensor '{name}' declared above"))
                })?;
                u32::try_from(i).map_err(|_| l.error_at_prev("tensor index out of range"))?
            }
            _ => l.uint::<u32>("a tensor (its quoted name or its index)")?,
        }
    } else {
        u32::from(l.uint::<u8>("a partition")?)
    };
    l.punct('+')?;
    let offset = l.uint::<u64>("a byte offset")?;
    Ok((mem, index, offset))
}

fn endpoint(l: &mut Line, p: &Program) -> Result<DmaEndpoint, Error> {
    if matches!(l.peek(), Some(Tok::Ident(s)) if s == "block") {
        l.next();
        l.punct('(')?;
        let (mem, index, offset) = place(l, p)?;
        let dtype = dtype(l)?;
        l.punct('[')?;
        let rows = l.uint::<u32>("rows")?;
        l.punct(',')?;
        let cols = l.uint::<u32>("columns")?;
        l.punct(']')?;
        l.key("pitch")?;
        let pitch = l.uint::<u32>("a pitch in elements")?;
        l.key("transposed")?;
        let transposed = super::operands::boolean(l)?;
        l.punct(')')?;
        return Ok(DmaEndpoint::Block(DmaBlock {
            mem,
            index,
            offset,
            dtype,
            rows,
            cols,
            pitch,
            transposed,
        }));
    }
    let (mem, index, offset) = place(l, p)?;
    let narrow = |l: &Line| {
        u32::try_from(offset).map_err(|_| l.error_at_prev("an on-chip offset must fit 32 bits"))
    };
    Ok(match mem {
        MemKind::Hbm => DmaEndpoint::Hbm {
            tensor: index,
            offset,
        },
        MemKind::Sbuf => DmaEndpoint::Sbuf {
            partition: u8::try_from(index).unwrap_or(u8::MAX),
            offset: narrow(l)?,
        },
        MemKind::Psum => DmaEndpoint::Psum {
            partition: u8::try_from(index).unwrap_or(u8::MAX),
            offset: narrow(l)?,
        },
    })
}

/// Adds the line of the instruction or descriptor a validation message names
/// (`<engine> pc N`, `dynamic term on <engine> pc N`, `dynamic term N` or `DMA descriptor N`).
fn locate(st: &State, e: &Error) -> Error {
    let msg = e.message();
    let number = |rest: &str| {
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<usize>().ok()
    };
    let instr_line = |engine: EngineId, pc: usize| st.instr_lines[engine.index()].get(pc).copied();
    let mut line = None;
    let body = msg.strip_prefix("dynamic term on ").unwrap_or(msg);
    for engine in EngineId::ALL {
        if let Some(pc) = body.strip_prefix(&format!("{engine} pc ")).and_then(number) {
            line = instr_line(engine, pc);
        }
    }
    if let Some(t) = msg
        .strip_prefix("dynamic term ")
        .and_then(number)
        .and_then(|i| st.p.terms.get(i))
    {
        line = usize::try_from(t.pc)
            .ok()
            .and_then(|pc| instr_line(t.engine, pc));
    }
    if let Some(i) = msg.strip_prefix("DMA descriptor ").and_then(number) {
        line = st.desc_lines.get(i).copied();
    }
    match line {
        Some(n) => Error::new(e.status(), format_args!("line {n}: {msg}")),
        None => e.clone(),
    }
}
