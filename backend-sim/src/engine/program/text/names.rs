//! The names of the text form: instruction mnemonics, engines, ALU operations, activation
//! functions, dynamic-term slots, and the text form of a binary32.

use crate::engine::isa::{ActFn, ActFunc, AluOp, EngineId, Instr, TermSlot};

/// The mnemonic of each instruction (snake case, `nki.isa`'s name where it has one).
pub(super) const fn mnemonic(ins: &Instr) -> &'static str {
    match ins {
        Instr::SemWait { .. } => "sem_wait",
        Instr::SemInc { .. } => "sem_inc",
        Instr::SemSet { .. } => "sem_set",
        Instr::DmaTrigger { .. } => "dma_trigger",
        Instr::Notify { .. } => "notify",
        Instr::Halt => "halt",
        Instr::LoopBegin { .. } => "loop_begin",
        Instr::LoopEnd { .. } => "loop_end",
        Instr::LoadStationary { .. } => "load_stationary",
        Instr::MultiplyMoving { .. } => "nc_matmul",
        Instr::TensorTensor { .. } => "tensor_tensor",
        Instr::TensorScalar { .. } => "tensor_scalar",
        Instr::Activation { .. } => "activation",
        Instr::TensorCopy { .. } => "tensor_copy",
        Instr::Memset { .. } => "memset",
        Instr::Iota { .. } => "iota",
        Instr::TensorScalarChain { .. } => "tensor_scalar_chain",
        Instr::ScalarTensorTensor { .. } => "scalar_tensor_tensor",
        Instr::TensorReduce { .. } => "tensor_reduce",
        Instr::Activate { .. } => "activate",
        Instr::Reciprocal { .. } => "reciprocal",
        Instr::Transpose { .. } => "nc_transpose",
        Instr::AffineSelect { .. } => "affine_select",
        Instr::RangeSelect { .. } => "range_select",
        Instr::BnStats { .. } => "bn_stats",
        Instr::BnAggr { .. } => "bn_aggr",
        Instr::TensorTensorScan { .. } => "tensor_tensor_scan",
        Instr::Max8 { .. } => "max8",
        Instr::FindIndex8 { .. } => "nc_find_index8",
    }
}

/// A binary32 in the text form: shortest round-trip decimal (with a `.` or an exponent),
/// `inf`, `-inf` or `nan:0xBITS`.
pub(super) fn float(v: f32) -> String {
    if v.is_nan() {
        format!("nan:{:#010x}", v.to_bits())
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.to_owned()
    } else {
        format!("{v:?}")
    }
}

/// The text of a dynamic term's slot: `offset(K)`, `partition(K)`, `value`, `dma_src`,
/// `dma_dst` or `dma_first`.
pub(super) fn slot_text(s: TermSlot) -> String {
    match s {
        TermSlot::Offset(k) => format!("offset({k})"),
        TermSlot::Partition(k) => format!("partition({k})"),
        TermSlot::Value => "value".to_owned(),
        TermSlot::DmaSrc => "dma_src".to_owned(),
        TermSlot::DmaDst => "dma_dst".to_owned(),
        TermSlot::DmaFirst => "dma_first".to_owned(),
    }
}

/// The engine called `name` (`SyncE`, `TensorE`, ...).
pub(super) fn engine_named(name: &str) -> Option<EngineId> {
    EngineId::ALL.into_iter().find(|e| e.name() == name)
}

pub(super) fn alu_named(name: &str) -> Option<AluOp> {
    AluOp::ALL.into_iter().find(|o| o.name() == name)
}

pub(super) fn actfn_named(name: &str) -> Option<ActFn> {
    ActFn::ALL.into_iter().find(|f| f.name() == name)
}

pub(super) fn actfunc_named(name: &str) -> Option<ActFunc> {
    (0..5)
        .filter_map(ActFunc::from_code)
        .find(|f| f.name() == name)
}
