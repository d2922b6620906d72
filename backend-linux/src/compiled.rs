//! Staging a compiler NEFF's subgraph for real: each engine's instruction stream into its own
//! `CODE_DEVICE` chunk, each constant array (a `file` variable of `def.json`, the `.npy` data
//! without its header) into a `CONSTANTS_DEVICE` chunk, all with `MEM_ALLOC*` +
//! `MEM_BUF_COPY*`. What is staged is recorded ([`StagedFile`]) and freed at unstage.
//!
//! Executing it is another matter (see `exec.rs`): the start/complete protocol and the
//! encoding of the streams are not public.

use nrt_core::driver::SubgraphImage;
use serde_json::Value;

use crate::error::LinuxError;
use crate::resources::{FileKind, StagedFile, chunk_info, free_chunk};
use crate::sys::{self, AllocParams, DeviceFd, MemForm, MemLocation, MemType};

const OP: &str = "stage_subgraph";

/// The `def.json` keys naming each engine's instruction stream, with the engine's name.
pub(crate) const ENGINE_STREAMS: [(&str, &str); 5] = [
    ("pe_instr", "PE"),
    ("act_instr", "Activation"),
    ("pool_instr", "Pool"),
    ("dve_instr", "DVE"),
    ("sp_instr", "SP"),
];

/// Alignment of instruction-stream chunks.
const STREAM_ALIGN: u64 = 4096;
/// Alignment of constants whose variable states none.
const CONSTANT_ALIGN: u64 = 64;

/// One file to stage.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Item<'a> {
    kind: FileKind,
    name: String,
    file: String,
    data: &'a [u8],
    align: u64,
}

fn invalid(what: String) -> LinuxError {
    LinuxError::invalid(OP, what)
}

/// The array data of a `.npy` file: what follows its header (format versions 1 to 3).
pub(crate) fn npy_data(bytes: &[u8]) -> Option<&[u8]> {
    if bytes.get(..6)? != b"\x93NUMPY" {
        return None;
    }
    let (len, start) = match *bytes.get(6)? {
        1 => {
            let b = bytes.get(8..10)?;
            (usize::from(u16::from_le_bytes([b[0], b[1]])), 10usize)
        }
        2 | 3 => {
            let b: [u8; 4] = bytes.get(8..12)?.try_into().ok()?;
            (u32::from_le_bytes(b) as usize, 12usize)
        }
        _ => return None,
    };
    bytes.get(start.checked_add(len)?..)
}

/// What of the subgraph's files is staged: the streams `def.json` names, then its `file`
/// variables in name order. No `def.json` (an image without a NEFF behind it): nothing.
pub(crate) fn plan<'a>(image: &SubgraphImage<'a>) -> Result<Vec<Item<'a>>, LinuxError> {
    let Some(def_bytes) = image.file("def.json") else {
        return Ok(Vec::new());
    };
    let sg = image.name;
    let def: Value = serde_json::from_slice(def_bytes)
        .map_err(|e| invalid(format!("{sg}/def.json is not JSON: {e}")))?;
    let member = |file: &str| {
        image.file(file).ok_or_else(|| {
            invalid(format!(
                "{sg}/def.json names {file}, which the NEFF does not carry"
            ))
        })
    };
    let mut items = Vec::new();
    for (key, engine) in ENGINE_STREAMS {
        let Some(v) = def.get(key) else { continue };
        let file = v
            .as_str()
            .ok_or_else(|| invalid(format!("{sg}/def.json: {key} is not a file name")))?;
        items.push(Item {
            kind: FileKind::Stream,
            name: engine.to_string(),
            file: file.to_string(),
            data: member(file)?,
            align: STREAM_ALIGN,
        });
    }
    if let Some(vars) = def.get("var").and_then(Value::as_object) {
        for (name, var) in vars {
            if var.get("type").and_then(Value::as_str) != Some("file") {
                continue;
            }
            let bad = |what: &str| invalid(format!("{sg}/def.json: variable {name}: {what}"));
            let file = var
                .get("file_name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("no file_name"))?;
            let size = var
                .get("size")
                .and_then(Value::as_u64)
                .ok_or_else(|| bad("no size"))?;
            let align = match var.get("alignment").map(Value::as_u64) {
                None => CONSTANT_ALIGN,
                Some(Some(a)) if a.is_power_of_two() => a,
                Some(_) => return Err(bad("alignment is not a power of two")),
            };
            let raw = member(file)?;
            let data = if file.ends_with(".npy") {
                npy_data(raw).ok_or_else(|| bad("its .npy file has no valid header"))?
            } else {
                raw
            };
            if data.len() as u64 != size {
                return Err(bad(&format!(
                    "{file} holds {} bytes of data, the variable {size}",
                    data.len()
                )));
            }
            items.push(Item {
                kind: FileKind::Constant,
                name: name.clone(),
                file: file.to_string(),
                data,
                align,
            });
        }
    }
    Ok(items)
}

/// Frees the chunks of `files` (best effort: the first error is returned).
pub(crate) fn free_all(fd: &DeviceFd, files: &[StagedFile]) -> Result<(), LinuxError> {
    let mut first = Ok(());
    for f in files {
        if let Err(e) = free_chunk(fd, f.handle) {
            if first.is_ok() {
                first = Err(e);
            }
        }
    }
    first
}

/// Allocates and writes a chunk per item on core `nc`; on any failure frees what it made.
pub(crate) fn place(
    fd: &DeviceFd,
    form: MemForm,
    nc: u32,
    items: &[Item<'_>],
) -> Result<Vec<StagedFile>, LinuxError> {
    let mut done: Vec<StagedFile> = Vec::with_capacity(items.len());
    for item in items {
        let mem_type = match item.kind {
            FileKind::Stream => MemType::CODE_DEVICE,
            FileKind::Constant => MemType::CONSTANTS_DEVICE,
        };
        let placed = sys::mem_alloc(
            fd,
            form,
            &AllocParams {
                // A chunk is never empty.
                size: (item.data.len() as u64).max(1),
                align: item.align,
                location: MemLocation::empty(),
                dram_channel: 0,
                nc_id: nc,
                mem_type,
            },
        )
        .map_err(|e| LinuxError::io("MEM_ALLOC (compiler NEFF file)", e))
        .and_then(|handle| {
            let written = sys::mem_buf_write(fd, form, handle, 0, item.data)
                .map_err(|e| LinuxError::io("MEM_BUF_COPY (compiler NEFF file)", e))
                .and_then(|()| chunk_info(fd, handle));
            match written {
                Ok((pa, _)) => Ok(StagedFile {
                    kind: item.kind,
                    name: item.name.clone(),
                    file: item.file.clone(),
                    bytes: item.data.len() as u64,
                    pa,
                    handle,
                }),
                Err(e) => {
                    let _ = free_chunk(fd, handle);
                    Err(e)
                }
            }
        });
        match placed {
            Ok(f) => done.push(f),
            Err(e) => {
                let _ = free_all(fd, &done);
                return Err(e);
            }
        }
    }
    Ok(done)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use nrt_core::io::IoTable;
    use nrt_core::neff::SubgraphMember;

    fn npy(header_len: u16, data: &[u8]) -> Vec<u8> {
        let mut v = b"\x93NUMPY\x01\x00".to_vec();
        v.extend_from_slice(&header_len.to_le_bytes());
        v.extend(std::iter::repeat_n(b' ', header_len as usize));
        v.extend_from_slice(data);
        v
    }

    fn member(name: &str, data: &[u8]) -> SubgraphMember {
        SubgraphMember {
            name: name.into(),
            size: data.len() as u64,
            data: Some(data.to_vec()),
        }
    }

    fn image<'a>(files: &'a [SubgraphMember], io: &'a IoTable) -> SubgraphImage<'a> {
        SubgraphImage {
            lnc: 0,
            index: 0,
            pnc: 0,
            name: "sg00",
            model: "m",
            program: None,
            uuid: [0; 16],
            files,
            io,
        }
    }

    #[test]
    fn npy_headers_are_stripped() {
        assert_eq!(npy_data(&npy(6, &[1, 2, 3])), Some(&[1u8, 2, 3][..]));
        let mut v2 = b"\x93NUMPY\x02\x00".to_vec();
        v2.extend_from_slice(&2u32.to_le_bytes());
        v2.extend_from_slice(b"  \x07");
        assert_eq!(npy_data(&v2), Some(&[7u8][..]));
        assert_eq!(npy_data(b"NUMPY"), None);
        assert_eq!(npy_data(&npy(6, &[])[..12]), None);
        assert_eq!(npy_data(b"\x93NUMPY\x09\x00\x00\x00"), None);
    }

    #[test]
    fn the_plan_is_the_named_streams_then_the_file_variables() {
        let def = br#"{"pe_instr": "PE.bin", "sp_instr": "SP.bin", "var": {
            "w": {"type": "file", "file_name": "w.npy", "size": 3, "alignment": 32768},
            "x": {"type": "input", "size": 4}, "SB": {"type": "state-buffer"}}}"#;
        let files = [
            member("def.json", def),
            member("PE.bin", &[1; 5]),
            member("SP.bin", &[2; 7]),
            member("w.npy", &npy(6, &[9, 8, 7])),
        ];
        let io = IoTable::new(vec![], vec![]).unwrap();
        let items = plan(&image(&files, &io)).unwrap();
        let summary: Vec<_> = items
            .iter()
            .map(|i| (i.kind, i.name.as_str(), i.file.as_str(), i.data, i.align))
            .collect();
        assert_eq!(
            summary,
            [
                (FileKind::Stream, "PE", "PE.bin", &[1u8; 5][..], 4096),
                (FileKind::Stream, "SP", "SP.bin", &[2u8; 7][..], 4096),
                (FileKind::Constant, "w", "w.npy", &[9u8, 8, 7][..], 32768),
            ]
        );
        // No def.json: nothing to stage.
        assert!(plan(&image(&[], &io)).unwrap().is_empty());
    }

    #[test]
    fn inconsistent_definitions_are_refused() {
        let io = IoTable::new(vec![], vec![]).unwrap();
        for (def, want) in [
            (
                &br#"{"pe_instr": "PE.bin"}"#[..],
                "sg00/def.json names PE.bin, which the NEFF does not carry",
            ),
            (
                br#"{"var": {"w": {"type": "file", "file_name": "w.npy", "size": 4}}}"#,
                "variable w: w.npy holds 3 bytes of data, the variable 4",
            ),
            (
                br#"{"var": {"w": {"type": "file", "file_name": "w.npy", "size": 3, "alignment": 3}}}"#,
                "variable w: alignment is not a power of two",
            ),
            (b"{", "sg00/def.json is not JSON"),
        ] {
            let files = [member("def.json", def), member("w.npy", &npy(6, &[1, 2, 3]))];
            let err = plan(&image(&files, &io)).unwrap_err().to_string();
            assert!(err.contains(want), "{err}");
        }
    }
}
