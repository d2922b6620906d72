//! Which program format a kernel's operations need, and the ISA checks every recorded
//! instruction passes.
//!
//! An engine program is format 1.0 when it uses only what 1.0 has, 1.1 otherwise
//! (`Program::format_minor`), and each format has its engine rules: 1.0 keeps its old
//! assignments (`tensor_tensor` or `activation` on either VectorE or ScalarE, ...), 1.1
//! follows NKI. A kernel may use either, not both: the first operation that needs format 1.1
//! (a format-1.1 instruction, ALU operation or engine assignment, or a block DMA descriptor)
//! rules out the 1.0-only assignments from then on, and the first 1.0-only assignment rules
//! out format 1.1. The operation that would mix them is refused, naming the earlier one, so a
//! kernel whose operations all succeeded always builds.

use nrt_core::{Error, err};
use nrt_sim::engine::{EngineId, Instr};

/// What the kernel's operations so far require of the program format.
#[derive(Clone, Debug, Default)]
pub(crate) struct FormatUse {
    /// The first operation relying on a format-1.0-only engine assignment: its description
    /// and the format-1.1 rule it breaks.
    legacy: Option<(String, String)>,
    /// The first operation needing format 1.1: its description.
    v11: Option<String>,
}

/// What recording one operation adds to a [`FormatUse`] (see [`FormatUse::check`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct FormatNeed {
    legacy: Option<(String, String)>,
    v11: Option<String>,
}

impl FormatUse {
    /// Checks the instructions of operation `op` on engine `e`: each instruction's operand
    /// rules and its engine rules in a format the kernel can still have. Returns what the
    /// operation adds, for [`FormatUse::commit`] once it is recorded.
    pub(crate) fn check(
        &self,
        op: &str,
        e: EngineId,
        instrs: &[Instr],
    ) -> Result<FormatNeed, Error> {
        let mut need = FormatNeed::default();
        for ins in instrs {
            ins.validate_operands()
                .map_err(|x| err!(Invalid, "{op}: {}", x.message()))?;
            let in_1_1 = ins.check_engine(e, 1);
            let what = format!("{op} ({} on {e})", ins.name());
            if ins.format_minor_on(e) == 0 {
                // Format 1.0 has it; does 1.1 too?
                if let Err(x) = in_1_1 {
                    if let Some(first) = &self.v11 {
                        return Err(err!(
                            Invalid,
                            "{op}: {}; this kernel already uses format 1.1 (from {first})",
                            x.message()
                        ));
                    }
                    if need.legacy.is_none() {
                        need.legacy = Some((what, x.message().to_owned()));
                    }
                }
            } else {
                in_1_1.map_err(|x| err!(Invalid, "{op}: {}", x.message()))?;
                self.needs_1_1(op, &what)?;
                if need.v11.is_none() {
                    need.v11 = Some(what);
                }
            }
        }
        if let (Some(v11), Some((first, rule))) = (&need.v11, &need.legacy) {
            return Err(err!(
                Invalid,
                "{op}: {v11} needs format 1.1, which refuses {first}: {rule}"
            ));
        }
        Ok(need)
    }

    /// Checks a DMA operation `op`; `blocks` when its descriptors are (format-1.1) blocks.
    pub(crate) fn check_dma(&self, op: &str, blocks: bool) -> Result<FormatNeed, Error> {
        let mut need = FormatNeed::default();
        if blocks {
            let what = format!("{op} (block DMA descriptors)");
            self.needs_1_1(op, &what)?;
            need.v11 = Some(what);
        }
        Ok(need)
    }

    /// Refuses format 1.1 (needed by `what`) when a 1.0-only assignment is in use.
    fn needs_1_1(&self, op: &str, what: &str) -> Result<(), Error> {
        if let Some((first, rule)) = &self.legacy {
            return Err(err!(
                Invalid,
                "{op}: {what} needs format 1.1, but this kernel already relies on a format-1.0 \
                 engine assignment that format 1.1 refuses: {first}: {rule}"
            ));
        }
        Ok(())
    }

    /// Records what a checked operation added.
    pub(crate) fn commit(&mut self, need: FormatNeed) {
        if self.legacy.is_none() {
            self.legacy = need.legacy;
        }
        if self.v11.is_none() {
            self.v11 = need.v11;
        }
    }
}
