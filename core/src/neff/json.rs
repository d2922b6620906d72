//! The JSON members the runtime reads, as serde types. Unknown fields are ignored; objects
//! whose keys name tensors reject duplicate keys instead of silently keeping the last one.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;
use core::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

/// A JSON object kept in document order, refusing duplicate keys.
#[derive(Debug)]
pub(crate) struct UniqueMap<V>(pub(crate) Vec<(String, V)>);

impl<V> Default for UniqueMap<V> {
    fn default() -> Self {
        Self(Vec::new())
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for UniqueMap<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V2<V>(PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for V2<V> {
            type Value = UniqueMap<V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut out: Vec<(String, V)> = Vec::new();
                while let Some(k) = m.next_key::<String>()? {
                    if out.iter().any(|(e, _)| *e == k) {
                        return Err(de::Error::custom(format_args!(
                            "duplicate tensor name \"{k}\""
                        )));
                    }
                    let v = m.next_value::<V>()?;
                    out.push((k, v));
                }
                Ok(UniqueMap(out))
            }
        }
        d.deserialize_map(V2(PhantomData))
    }
}

/// `kelf-*.json`.
#[derive(Debug, Deserialize)]
pub(crate) struct KelfList {
    pub(crate) graphs: Vec<KelfGraph>,
}

/// One subgraph of the kelf list.
#[derive(Debug, Deserialize)]
pub(crate) struct KelfGraph {
    pub(crate) name: String,
    pub(crate) definition: String,
}

/// `sgNN/def.json` (only `var`).
#[derive(Debug, Deserialize)]
pub(crate) struct Def {
    #[serde(default)]
    pub(crate) var: UniqueMap<Var>,
}

/// One `var` entry.
#[derive(Debug, Deserialize)]
pub(crate) struct Var {
    #[serde(rename = "type")]
    pub(crate) kind: String,
    pub(crate) size: Option<u64>,
    pub(crate) var_id: Option<u64>,
}

/// One `tensor_map.json` entry.
#[derive(Debug, Deserialize)]
pub(crate) struct TensorMapEntry {
    pub(crate) kind: Option<String>,
    pub(crate) dtype: Option<String>,
    pub(crate) tf_shape: Option<Vec<u64>>,
    pub(crate) sim_shape: Option<Vec<u64>>,
}

/// `neff.json` (only the signatures).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct NeffJson {
    #[serde(default)]
    pub(crate) metadata: Metadata,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Metadata {
    #[serde(default)]
    pub(crate) signatures: Signatures,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Signatures {
    #[serde(default)]
    pub(crate) default: Signature,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Signature {
    #[serde(default)]
    pub(crate) inputs: UniqueMap<SignatureTensor>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct SignatureTensor {
    pub(crate) dtype: Option<String>,
    pub(crate) shape: Option<Vec<u64>>,
}

/// `info.json`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Info {
    pub(crate) tool_version: Option<String>,
}

/// Parses `bytes` as `T`, naming `member` in the error.
pub(crate) fn parse<'a, T: Deserialize<'a>>(member: &str, bytes: &'a [u8]) -> crate::Result<T> {
    serde_json::from_slice(bytes).map_err(|e| err!(Invalid, "Invalid NEFF: {member}: {e}"))
}
