//! `.onnx` models: imported and compiled in memory by `nrt-onnx` (one kernel for the whole
//! graph), packed into a NEFF like a spec, with seeded random data for inputs not given.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use clap::ValueEnum;
use nrt_core::io::{Dtype, TensorInfo};
use nrt_onnx::{Elem, Io, Lowered, NodeInfo, NodeTime, Precision};
use nrt_sim::engine::{ExecReport, TICKS_PER_SECOND, f16_to_f32};
use nrt_sim::neff::neff_from_programs_packed;

use crate::backend::{InputSource, Model, Source, gather_inputs, load_model, parse_neff};
use crate::error::{CliError, Context, Result};
use crate::npy;
use crate::out::{self, Report};

/// `--dtype`: the compute precision of an ONNX model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum DtypeArg {
    /// fp32 everywhere (results compare with CPU runtimes)
    #[default]
    Fp32,
    /// bf16 operands and intermediates, fp32 accumulation; inputs and outputs stay fp32
    Bf16,
}

impl DtypeArg {
    fn precision(self) -> Precision {
        match self {
            DtypeArg::Fp32 => Precision::Fp32,
            DtypeArg::Bf16 => Precision::Bf16,
        }
    }
}

/// Whether `path` names an ONNX model.
pub(crate) fn is_onnx(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("onnx"))
}

/// What the import made, for the summaries.
#[derive(Debug)]
pub(crate) struct Imported {
    /// Inputs bound at build time (integer ones, float ones an operator needs constant, empty
    /// ones): name, what was given.
    pub(crate) bound: Vec<(String, String)>,
    /// Device nodes, in program order.
    pub(crate) nodes: Vec<NodeInfo>,
    /// One line on the compilation.
    pub(crate) line: String,
    /// The NEFF's program and tensors, for `nrt build`.
    pub(crate) lowered_io: (usize, usize, usize),
    /// The graph inputs the NEFF takes, with their ONNX element types.
    pub(crate) inputs: Vec<Io>,
    /// The graph outputs, with their ONNX element types.
    pub(crate) outputs: Vec<Io>,
    /// The graph outputs with no elements (written by the host).
    pub(crate) empty_outputs: Vec<Io>,
    /// The graph outputs folded on the host at build time (the program copies them from
    /// constants).
    pub(crate) folded_outputs: Vec<String>,
}

impl Imported {
    /// The `--input` arguments of the NEFF's inputs (without those bound at build time).
    pub(crate) fn neff_inputs(&self, args: &[String]) -> Vec<String> {
        args.iter()
            .filter(|a| {
                let name = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
                !self.bound.iter().any(|(b, _)| b == name)
            })
            .cloned()
            .collect()
    }

    /// Reports the outputs folded at build time.
    pub(crate) fn folded_field(&self, r: &mut Report) {
        if !self.folded_outputs.is_empty() {
            r.field(
                "folded",
                format!(
                    "{}: constants computed on the host at build time; the program copies them \
                     into the outputs (integer and boolean ones as raw bytes)",
                    self.folded_outputs.join(", ")
                ),
            );
        }
    }

    /// Reports the inputs bound at build time.
    pub(crate) fn bound_field(&self, r: &mut Report) {
        if !self.bound.is_empty() {
            let v: Vec<String> = self
                .bound
                .iter()
                .map(|(n, w)| format!("{n} ({w})"))
                .collect();
            r.field(
                "bound",
                format!(
                "at build time (the program is specialised to these values and does not take them): {}",
                v.join(", ")
            ),
            );
        }
    }
}

/// The seed of an input's random data: a hash of its name (FNV-1a), so reruns agree.
fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// `n` fp32 values uniform in [-1, 1) from `seed` (xorshift64*), as little-endian bytes.
pub(crate) fn random_f32(seed: u64, n: usize) -> Vec<u8> {
    let mut s = seed | 1;
    let mut out = Vec::with_capacity(n * 4);
    for _ in 0..n {
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        let r = s.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 40;
        let v = r as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Inputs bound at build time: name, what was given.
type Bound = Vec<(String, String)>;

/// Compiles the model at `path`; `inputs` are the `--input NAME=FILE` arguments, whose
/// `.npy` shapes fix dynamic dimensions.
pub(crate) fn compile(
    path: &Path,
    inputs: &[String],
    dtype: DtypeArg,
) -> Result<(Lowered, String, Bound)> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).context(|| format!("cannot read '{shown}'"))?;
    let m = nrt_onnx::import(&bytes).map_err(|e| CliError::new(format!("{shown}: {e}")))?;
    let mut shapes = HashMap::new();
    let mut bound = HashMap::new();
    let mut values = HashMap::new();
    let mut given = HashMap::new();
    let mut bound_lines = Vec::new();
    for a in inputs {
        let Some((name, file)) = a.split_once('=') else {
            return Err(CliError::usage(format!(
                "--input '{a}': expected NAME=FILE (for example --input x=x.npy)"
            )));
        };
        if !m.inputs.iter().any(|d| d.name == name) {
            let names: Vec<&str> = m.inputs.iter().map(|d| d.name.as_str()).collect();
            return Err(CliError::new(format!(
                "model '{}' has no input named '{name}' (its inputs: {})",
                m.name,
                if names.is_empty() {
                    "none".to_owned()
                } else {
                    names.join(", ")
                }
            )));
        }
        if Path::new(file)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("npy"))
        {
            let data = std::fs::read(file).context(|| format!("cannot read '{file}'"))?;
            let arr = npy::parse(&data).map_err(|e| CliError::new(format!("{file}: {e}")))?;
            let shape = arr
                .shape
                .iter()
                .map(|&d| {
                    usize::try_from(d).map_err(|_| CliError::new(format!("{file}: too large")))
                })
                .collect::<Result<Vec<_>>>()?;
            let decl = m.inputs.iter().find(|d| d.name == name);
            given.insert(
                name.to_owned(),
                (
                    format!("{} {shape:?} from {file}", npy::type_name(&arr.descr)),
                    shape.contains(&0),
                ),
            );
            match decl {
                Some(d) if !d.elem.is_float() => {
                    let t = host_tensor(&arr, shape, file)?;
                    bound_lines.push((name.to_owned(), given[name].0.clone()));
                    bound.insert(name.to_owned(), t);
                }
                Some(d) => {
                    let t = float_tensor(&arr, d.elem, shape, name, file)?;
                    values.insert(name.to_owned(), t);
                }
                None => {
                    shapes.insert(name.to_owned(), shape);
                }
            }
        }
    }
    let lowered = nrt_onnx::compile_values(&m, &shapes, &bound, &values, dtype.precision())
        .map_err(|e| CliError::new(format!("{shown}: {e}")))?;
    for name in &lowered.bound {
        let what = match given.get(name) {
            Some((g, true)) => format!("{g}; empty"),
            Some((g, false)) => format!("{g}; needed as a constant"),
            None => "declared empty".to_owned(),
        };
        bound_lines.push((name.clone(), what));
    }
    Ok((lowered, m.name, bound_lines))
}

/// The `.npy` type string of a float graph input's element type.
fn float_descr(elem: Elem) -> &'static str {
    match elem {
        Elem::F64 => "<f8",
        Elem::F16 => "<f2",
        // float32, and bfloat16 (read from float32 arrays, as bf16 tensors are)
        _ => "<f4",
    }
}

/// The values of a float `.npy` array (checked against the graph's element type), exactly.
fn float_values(a: &npy::NpyArray, elem: Elem, name: &str, file: &str) -> Result<Vec<f64>> {
    let want = float_descr(elem);
    if a.descr != want {
        return Err(CliError::new(format!(
            "input '{name}': {file} holds {} ({}), the model declares {} ({want})",
            npy::type_name(&a.descr),
            a.descr,
            elem.name()
        )));
    }
    Ok(match want {
        "<f8" => a
            .data
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect(),
        "<f2" => a
            .data
            .chunks_exact(2)
            .map(|c| f64::from(f16_to_f32(u16::from_le_bytes([c[0], c[1]]))))
            .collect(),
        _ => a
            .data
            .chunks_exact(4)
            .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
    })
}

/// A float `.npy` array as a host tensor of the graph's element type.
fn float_tensor(
    a: &npy::NpyArray,
    elem: Elem,
    shape: Vec<usize>,
    name: &str,
    file: &str,
) -> Result<nrt_onnx::HostTensor> {
    let v = float_values(a, elem, name, file)?;
    Ok(nrt_onnx::HostTensor::floats(elem, shape, v))
}

/// An integer (or boolean) `.npy` array as a host tensor.
fn host_tensor(a: &npy::NpyArray, shape: Vec<usize>, file: &str) -> Result<nrt_onnx::HostTensor> {
    let d = a.descr.as_str();
    let (size, signed) = match d {
        "<i8" => (8, true),
        "<i4" => (4, true),
        "<i2" => (2, true),
        "|i1" => (1, true),
        "<u8" => (8, false),
        "<u4" => (4, false),
        "<u2" => (2, false),
        "|u1" | "|b1" => (1, false),
        _ => {
            return Err(CliError::new(format!(
                "{file}: {} for an integer input (expected int64, int32 or bool)",
                npy::type_name(d)
            )));
        }
    };
    let v: Vec<i64> = a
        .data
        .chunks_exact(size)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..size].copy_from_slice(c);
            let u = u64::from_le_bytes(b);
            if signed && size < 8 && (u >> (size * 8 - 1)) & 1 == 1 {
                (u | (!0u64 << (size * 8))) as i64
            } else {
                u as i64
            }
        })
        .collect();
    let elem = if d == "|b1" { Elem::Bool } else { Elem::I64 };
    Ok(nrt_onnx::HostTensor::ints(elem, shape, v))
}

/// How the NEFF an ONNX model is built into is packed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Packing {
    /// A plain tar (package version 1): built in memory to be loaded at once (`nrt run`,
    /// `nrt bench`), where compressing it and inflating it again would only cost time.
    Plain,
    /// Gzipped, as the Neuron compiler writes NEFFs (`nrt build`).
    Gzip,
}

/// Loads an ONNX model as a runnable [`Model`], its NEFF packed as `packing` says.
pub(crate) fn load(
    path: &Path,
    inputs: &[String],
    dtype: DtypeArg,
    packing: Packing,
) -> Result<(Model, Imported)> {
    let (lw, name, bound) = compile(path, inputs, dtype)?;
    if lw.inputs.is_empty() && lw.outputs.is_empty() {
        let empty: Vec<String> = lw
            .empty_outputs
            .iter()
            .map(|o| format!("{} {:?}", o.name, o.shape))
            .collect();
        return Err(CliError::new(format!(
            "{}: nothing to run on the device: every output has no elements ({}) — a NEFF needs at least one input or output tensor",
            path.display(),
            empty.join(", ")
        )));
    }
    let neff_err =
        |e: nrt_core::Error| CliError::new(format!("cannot write the NEFF: {}", e.message()));
    let mut neff = neff_from_programs_packed(
        &name,
        std::slice::from_ref(&lw.program),
        packing == Packing::Gzip,
    )
    .map_err(neff_err)?;
    let (mut parsed, mut programs) = parse_neff(path, &neff)?;
    if lw.outputs.iter().any(|o| !o.elem.is_float()) {
        // Integer and boolean outputs: the program's tensor holds their bytes in a 2- or
        // 4-byte kernel dtype; the NEFF declares their ONNX type and shape (same size).
        let mut spec = parsed.to_spec();
        for t in &mut spec.tensors {
            let Some(o) = lw.outputs.iter().find(|o| o.name == t.name) else {
                continue;
            };
            if let Some(d) = int_dtype(o.elem) {
                t.dtype = d;
                t.shape = if o.shape.is_empty() {
                    vec![1]
                } else {
                    o.shape.iter().map(|&d| d as u32).collect()
                };
            }
        }
        neff = nrt_core::neff::write(&spec).map_err(neff_err)?;
        (parsed, programs) = parse_neff(path, &neff)?;
    }
    let given: Vec<&str> = inputs
        .iter()
        .filter_map(|a| a.split_once('=').map(|(n, _)| n))
        .collect();
    let mut samples = BTreeMap::new();
    for t in &lw.inputs {
        if given.contains(&t.name.as_str()) {
            continue;
        }
        let seed = seed_of(&t.name);
        let n = t.shape.iter().product::<usize>().max(1);
        samples.insert(t.name.clone(), random_f32(seed, n));
    }
    let line = summary_line(&lw, dtype);
    let instrs: usize = lw.program.streams.iter().map(Vec::len).sum();
    let imported = Imported {
        bound,
        inputs: lw.inputs.clone(),
        outputs: lw.outputs.clone(),
        empty_outputs: lw.empty_outputs.clone(),
        folded_outputs: lw.folded_outputs.clone(),
        nodes: lw.nodes.clone(),
        line: line.clone(),
        lowered_io: (
            instrs,
            lw.program.descriptors.len(),
            lw.program.tensors.len(),
        ),
    };
    let model = Model {
        path: path.to_path_buf(),
        bytes: neff,
        neff: parsed,
        programs,
        source: Source::Spec {
            kernel: format!("ONNX, {line}"),
            samples,
        },
    };
    Ok((model, imported))
}

/// The NEFF element type of an integer or boolean graph output (`bool` as `uint8`: NEFFs
/// have no boolean type); `None` for float types.
fn int_dtype(elem: Elem) -> Option<Dtype> {
    Some(match (elem, elem.name()) {
        (Elem::I64, _) => Dtype::Int64,
        (Elem::I32, _) => Dtype::Int32,
        (Elem::Bool, _) | (_, "uint8") => Dtype::Uint8,
        (_, "int8") => Dtype::Int8,
        (_, "uint16") => Dtype::Uint16,
        (_, "int16") => Dtype::Int16,
        (_, "uint32") => Dtype::Uint32,
        (_, "uint64") => Dtype::Uint64,
        _ => return None,
    })
}

/// One line: precision, nodes, folding, memory.
fn summary_line(lw: &Lowered, dtype: DtypeArg) -> String {
    format!(
        "{} compute, {} device node{} ({} folded on the host, {} batch norm{} folded into convolutions, \
         {} merged by fusions), peak device memory {} (intermediates {} planned, {} without reuse; \
         weights {})",
        match dtype {
            DtypeArg::Fp32 => "fp32",
            DtypeArg::Bf16 => "bf16 (fp32 accumulation)",
        },
        lw.nodes.len(),
        if lw.nodes.len() == 1 { "" } else { "s" },
        lw.folded,
        lw.fused,
        if lw.fused == 1 { "" } else { "s" },
        lw.merged,
        out::bytes(lw.peak_bytes),
        out::bytes(lw.scratch_bytes),
        out::bytes(lw.unplanned_bytes),
        out::bytes(lw.weight_bytes),
    )
}

/// `nrt build MODEL.onnx -o MODEL.neff`.
pub(crate) fn build(path: &Path, output: &Path, dtype: DtypeArg) -> Result<()> {
    let (model, imp) = load(path, &[], dtype, Packing::Gzip)?;
    std::fs::write(output, &model.bytes)
        .context(|| format!("cannot write '{}'", output.display()))?;
    let mut r = Report::new();
    r.field(
        "wrote",
        format!(
            "{} ({}): model '{}' from {}",
            output.display(),
            out::bytes(model.bytes.len() as u64),
            model.neff.name(),
            path.display()
        ),
    );
    r.field("compiled", imp.line);
    let (i, d, t) = imp.lowered_io;
    r.field(
        "program",
        format!(
            "{} instructions over 5 engines, {} DMA descriptors, {t} tensors (simulator ISA, docs/SIM_ISA.md)",
            out::int(i as u64),
            out::int(d as u64)
        ),
    );
    r.print();
    Ok(())
}

/// The per-node table of an execution, and the total.
pub(crate) fn node_table(r: &mut Report, imp: &Imported, report: &ExecReport) -> Vec<NodeTime> {
    let times = nrt_onnx::attribute(report, imp.nodes.len());
    let total = report.ticks.max(1);
    let rows: Vec<Vec<String>> = imp
        .nodes
        .iter()
        .zip(&times)
        .map(|(n, t)| {
            let ticks = t.end - t.start;
            vec![
                n.name.clone(),
                n.op.clone(),
                out::int(ticks),
                out::secs(ticks as f64 / TICKS_PER_SECOND as f64),
                out::pct(ticks, total),
                t.bound.to_owned(),
            ]
        })
        .collect();
    r.line(
        "ONNX nodes (simulated time: each node's share of the total, from the engines' node \
         boundaries; docs/ONNX.md, \"Per-node timing\")",
    );
    r.table(
        "  ",
        &["node", "op", "ticks", "time", "share", "bound by"],
        &rows,
        "llrrrl",
    );
    r.field(
        "total",
        format!(
            "{} ticks = {} for the model ({} nodes)",
            out::int(report.ticks),
            out::secs(report.ticks as f64 / TICKS_PER_SECOND as f64),
            imp.nodes.len()
        ),
    );
    times
}

/// `json` (a Chrome trace of the execution) with one slice per node on a track above the
/// engines.
pub(crate) fn trace_with_nodes(mut json: String, imp: &Imported, times: &[NodeTime]) -> String {
    const TID: u32 = 9999;
    let us = |t: u64| t as f64 * 1e6 / TICKS_PER_SECOND as f64;
    if json.ends_with("]}") {
        json.truncate(json.len() - 2);
    } else {
        return json;
    }
    json.push_str(&format!(
        ",{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":0,\"tid\":{TID},\"args\":{{\"name\":\"ONNX nodes\"}}}},\
         {{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":0,\"tid\":{TID},\"args\":{{\"sort_index\":-1}}}}"
    ));
    for (n, t) in imp.nodes.iter().zip(times) {
        let name = serde_json::to_string(&format!("{} ({})", n.name, n.op))
            .unwrap_or_else(|_| "\"?\"".into());
        json.push_str(&format!(
            ",{{\"ph\":\"X\",\"name\":{name},\"cat\":\"onnx_node\",\"pid\":0,\"tid\":{TID},\"ts\":{:.6},\"dur\":{:.6},\
             \"args\":{{\"tick\":{},\"ticks\":{},\"bound_by\":\"{}\"}}}}",
            us(t.start),
            us(t.end - t.start),
            t.start,
            t.end - t.start,
            t.bound
        ));
    }
    json.push_str("]}");
    json
}

/// One input of a run: its tensor, its bytes, where they came from.
pub(crate) type GatheredInput = (TensorInfo, Vec<u8>, InputSource);

/// The model at `path` for `nrt run` / `nrt bench` — an ONNX model built in memory (then with
/// what its import says about it) or a NEFF or spec — and its inputs gathered from the
/// `--input` arguments.
pub(crate) fn load_with_inputs(
    path: &Path,
    input: &[String],
    dtype: DtypeArg,
) -> Result<(Model, Option<Imported>, Vec<GatheredInput>)> {
    let (model, imported) = if is_onnx(path) {
        let (m, i) = load(path, input, dtype, Packing::Plain)?;
        (m, Some(i))
    } else {
        (load_model(path)?, None)
    };
    let Some(imp) = imported else {
        let inputs = gather_inputs(&model, input)?;
        return Ok((model, None, inputs));
    };
    // float64 inputs: rounded to fp32 here (the NEFF takes fp32).
    let mut widened = Vec::new();
    let args: Vec<String> = imp
        .neff_inputs(input)
        .into_iter()
        .filter(|a| match a.split_once('=') {
            Some((n, f))
                if imp
                    .inputs
                    .iter()
                    .any(|i| i.name == n && i.elem == Elem::F64) =>
            {
                widened.push((n.to_owned(), f.to_owned()));
                false
            }
            _ => true,
        })
        .collect();
    let mut inputs = gather_inputs(&model, &args)?;
    for (name, file) in widened {
        let Some(slot) = inputs.iter_mut().find(|(t, _, _)| t.name == name) else {
            continue;
        };
        slot.1 = f64_input(&slot.0, &file)?;
        slot.2 = InputSource::File(format!("{file} (float64, rounded to fp32)"));
    }
    Ok((model, Some(imp), inputs))
}

/// A float64 `.npy` input as the fp32 bytes of its NEFF tensor (each value rounded to
/// nearest even).
fn f64_input(t: &TensorInfo, file: &str) -> Result<Vec<u8>> {
    let data = std::fs::read(file).context(|| format!("cannot read '{file}'"))?;
    let a = npy::parse(&data).map_err(|e| CliError::new(format!("{file}: {e}")))?;
    let v = float_values(&a, Elem::F64, &t.name, file)?;
    let narrowed = npy::NpyArray {
        descr: "<f4".into(),
        shape: a.shape,
        data: v.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect(),
    };
    crate::tensors::from_npy(t, &narrowed, file)
}

/// The `.npy` arrays of the graph outputs with no elements: name, array.
pub(crate) fn empty_outputs(imp: &Imported) -> Vec<(String, npy::NpyArray)> {
    imp.empty_outputs
        .iter()
        .map(|o| {
            let descr = match o.elem {
                Elem::F32 | Elem::F64 | Elem::F16 | Elem::Bf16 => float_descr(o.elem),
                Elem::I64 => "<i8",
                Elem::I32 => "<i4",
                Elem::Bool => "|b1",
                Elem::OtherInt(_) => match o.elem.name() {
                    "uint8" => "|u1",
                    "int8" => "|i1",
                    "uint16" => "<u2",
                    "int16" => "<i2",
                    "uint32" => "<u4",
                    _ => "<u8",
                },
            };
            let array = npy::NpyArray {
                descr: descr.into(),
                shape: o.shape.iter().map(|&d| d as u64).collect(),
                data: Vec::new(),
            };
            (o.name.clone(), array)
        })
        .collect()
}

/// The `.npy` array of an output: in the graph's element type when it is float64 (fp32
/// results widened, exactly), else as the NEFF tensor holds it; a scalar (rank 0) when the
/// graph's output is one (NEFF tensors have at least one dimension).
pub(crate) fn output_npy(imp: Option<&Imported>, t: &TensorInfo, bytes: &[u8]) -> npy::NpyArray {
    let mut a = crate::tensors::to_npy(t, bytes);
    let io = imp.and_then(|i| i.outputs.iter().find(|o| o.name == t.name));
    if io.is_some_and(|o| o.shape.is_empty()) && a.shape == [1] {
        a.shape.clear();
    }
    if io.is_some_and(|o| o.elem == Elem::F64) && a.descr == "<f4" {
        a.descr = "<f8".into();
        a.data = a
            .data
            .chunks_exact(4)
            .flat_map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])).to_le_bytes())
            .collect();
    }
    if io.is_some_and(|o| o.elem == Elem::Bool) && a.descr == "|u1" {
        a.descr = "|b1".into();
    }
    a
}
