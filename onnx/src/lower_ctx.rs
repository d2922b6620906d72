//! The state of a kernel being lowered: the views of device values, kernel constants (one
//! per host tensor and dtype), the current step's temporaries.

use std::collections::HashMap;
use std::sync::Arc;

use nrt_kernel::{DType, Kernel, Tensor, View};

use crate::error::{Error, Result};
use crate::ir::{Analysis, Operand};
use crate::tensor::{Elem, HostTensor};

/// A kernel being lowered.
pub(crate) struct Lower<'a> {
    pub(crate) k: Kernel,
    pub(crate) dt: DType,
    pub(crate) an: &'a Analysis,
    /// The view of every device value's buffer, by value id (roots and aliases).
    pub(crate) views: Vec<Option<View>>,
    pub(crate) consts: HashMap<usize, Tensor>,
    pub(crate) temp: Option<Tensor>,
    /// Offsets of the current step's temporaries.
    pub(crate) temps: Vec<(usize, usize)>,
    pub(crate) weight_bytes: u64,
    pub(crate) n_consts: usize,
    pub(crate) keep: Vec<Arc<HostTensor>>,
}

/// The bytes of `v` as `dt` (fp32 or bf16, nearest even).
pub(crate) fn encode(t: &HostTensor, dt: DType) -> Vec<u8> {
    let f: Vec<f32> = match &t.data {
        crate::tensor::Data::F(v) => v.iter().map(|&x| x as f32).collect(),
        crate::tensor::Data::I(v) => v.iter().map(|&x| x as f32).collect(),
    };
    nrt_sim::engine::encode_f32(dt, &f)
}

/// The element type of a graph input's or output's kernel tensor: fp16 for `FLOAT16` (the
/// device converts it to and from the compute dtype), fp32 for every other type (`DOUBLE`
/// values are converted on the host: inputs rounded to fp32, outputs widened exactly).
pub fn io_dtype(elem: Elem) -> DType {
    match elem {
        Elem::F16 => DType::F16,
        _ => DType::F32,
    }
}

/// The device type a Cast to `elem` rounds through: fp16 and bf16 for their types.
pub(crate) fn round_dtype(elem: Elem) -> DType {
    match elem {
        Elem::Bf16 => DType::Bf16,
        e => io_dtype(e),
    }
}

impl Lower<'_> {
    /// The view of device value `d`.
    pub(crate) fn val(&self, d: usize) -> Result<View> {
        self.views.get(d).and_then(Clone::clone).ok_or_else(|| {
            Error::Kernel(format!("value '{}' has no buffer", self.an.values[d].name))
        })
    }

    /// A kernel constant holding `t` (in the compute dtype), with `shape` (rank 0 as [1]).
    pub(crate) fn konst(&mut self, t: &Arc<HostTensor>, dt: DType) -> Result<View> {
        let key = Arc::as_ptr(t) as usize ^ (dt as usize).wrapping_mul(0x9e37);
        if let Some(c) = self.consts.get(&key) {
            return Ok(c.view().clone());
        }
        let shape = if t.shape.is_empty() {
            vec![1]
        } else {
            t.shape.clone()
        };
        let bytes = encode(t, dt);
        self.weight_bytes += bytes.len() as u64;
        let name = format!("const{}", self.n_consts);
        self.n_consts += 1;
        let c = self.k.constant(&name, dt, &shape, bytes).map_err(kerr)?;
        let v = c.view().clone();
        self.consts.insert(key, c);
        Ok(v)
    }

    /// An operand's view (constants in the compute dtype).
    pub(crate) fn operand(&mut self, o: &Operand) -> Result<View> {
        match o {
            Operand::Dyn(d) => self.val(*d),
            Operand::Const(t) => self.konst(t, self.dt),
        }
    }

    /// The scalar constant `v` as a `[1]` view.
    pub(crate) fn scalar(&mut self, v: f32) -> Result<View> {
        let t = Arc::new(HostTensor::floats(Elem::F32, vec![1], vec![f64::from(v)]));
        let view = self.konst(&t, self.dt)?;
        // Kept alive: the cache is keyed by address.
        self.keep.push(t);
        Ok(view)
    }

    /// Temporary `i` of the current step, with `shape`.
    pub(crate) fn temp(&self, i: usize, shape: &[usize]) -> Result<View> {
        let (off, n) = self
            .temps
            .get(i)
            .copied()
            .ok_or_else(|| Error::Kernel("temporary missing".into()))?;
        let t = self
            .temp
            .as_ref()
            .ok_or_else(|| Error::Kernel("no temporary arena".into()))?;
        let len = shape.iter().product::<usize>().max(1);
        if len > n {
            return Err(Error::Kernel("temporary too small".into()));
        }
        t.slice(0, off..off + len)
            .and_then(|v| v.reshape(&kshape(shape)))
            .map_err(kerr)
    }
}

/// The kernel's shape of a value (rank 0 as [1]).
pub(crate) fn kshape(s: &[usize]) -> Vec<usize> {
    if s.is_empty() { vec![1] } else { s.to_vec() }
}

/// A kernel error as this crate's.
pub(crate) fn kerr(e: nrt_core::Error) -> Error {
    Error::Kernel(e.message().to_owned())
}
