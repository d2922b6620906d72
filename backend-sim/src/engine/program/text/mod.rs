//! The program text format: [`disassemble`] writes a [`Program`] as text, one instruction per
//! line, and [`assemble`] reads that text back, so programs can be read, diffed and edited
//! by hand. `docs/SIM_ISA.md` ("Program text") is the reference; in short:
//!
//! ```text
//! .format 1.0                      # format version: the header minor a binary would carry
//! .program "add"
//! .tensor "a" input fp32 [4, 8]    # name, kind, dtype, shape; in table order
//! .tensor "w" const fp32 [2]
//! .data "w" 0000803f00000040       # a constant's bytes, hex; lines append
//! .sem 3 init=2                    # initial semaphore values, in order
//! .desc 0 src=hbm:"a"+0 dst=sbuf:0+0 len=32
//! .engine VectorE                  # then that engine's stream, one instruction per line
//!     tensor_tensor op=add a=sbuf.fp32[0:4][0; [1,8]] b=sbuf.fp32[0:4][32; [1,8]] out=...
//!     halt
//! ```
//!
//! Every operand is written, in a fixed order (the order of the instruction's fields);
//! `#` starts a comment. Access patterns are `space.dtype[p0:p1][offset; [stride,size], ...]`
//! (partitions `p0..p1`, byte offset, free dimensions outermost first, in elements). Floats
//! are printed in the shortest decimal form that reads back to the same binary32 (always
//! with a `.` or an exponent, which is what tells a float immediate from an integer one),
//! `inf`, `-inf`, or `nan:0xBITS` (the payload and sign kept).
//!
//! The assembler never panics: a malformed line is `NRT_INVALID` naming the line, the column
//! and what was expected; the program is then validated exactly as `Program::from_bytes`
//! validates a decoded one (the `.format` minor plays the header's part).
//!
//! * `lex.rs` — the tokens of one line;
//! * `names.rs` — mnemonics, names and the float form;
//! * `print.rs` — the disassembler;
//! * `parse.rs` — the directives and the assembler's driver;
//! * `operands.rs` — instructions and their operands.

mod lex;
mod names;
mod operands;
mod parse;
mod print;

use nrt_core::Error;

use super::Program;

/// Writes `program` as text (see `docs/SIM_ISA.md`, "Program text"). The output reads back
/// with [`assemble`] into the same program, and is deterministic (comments included), so
/// `disassemble(&assemble(text)?) == text` for any text it wrote.
pub fn disassemble(program: &Program) -> String {
    print::program(program)
}

/// Reads a program from text (the format [`disassemble`] writes). A syntax error is
/// `NRT_INVALID` with `line L, column C: expected X, found Y`; the program is then validated
/// as a decoded binary is (an unknown format major: `NRT_UNSUPPORTED_NEFF_VERSION`). Never
/// panics.
pub fn assemble(text: &str) -> Result<Program, Error> {
    parse::program(text)
}
