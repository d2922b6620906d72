//! The byte formats of the simulator-program launch convention v1 (docs/LINUX_BACKEND.md):
//! the stage image, the execution descriptor and the notification entry, plus the core-lock
//! model id. Pure functions, tested byte for byte against the document's tables.

/// Magic of a stage image.
pub(crate) const IMAGE_MAGIC: [u8; 8] = *b"NRTSIMG1";
/// Version of the convention.
pub(crate) const VERSION: u32 = 1;
/// Bytes of the stage image's fixed header (before the names).
const IMAGE_FIXED: usize = 32;

/// Magic of an execution descriptor.
pub(crate) const EXEC_MAGIC: [u8; 8] = *b"NRTEXEC1";
/// Bytes of the descriptor before the bindings.
pub(crate) const EXEC_FIXED: usize = 32;
/// Bytes of one binding.
pub(crate) const BINDING_LEN: usize = 32;

/// Bytes of a core's notification queue.
pub(crate) const NQ_SIZE: u32 = 4096;
/// Bytes of one notification entry.
pub(crate) const NQ_ENTRY: usize = 16;
/// Bytes of a core's mailbox.
pub(crate) const MAILBOX_SIZE: u64 = 64 * 1024;
/// Mailbox offset of a failure message.
pub(crate) const MAILBOX_MESSAGE: usize = 32 * 1024;
/// Longest failure message.
pub(crate) const MESSAGE_MAX: usize = 4096;
/// The most bindings a descriptor holds (it must end before the failure message).
pub(crate) const MAX_BINDINGS: usize = (MAILBOX_MESSAGE - EXEC_FIXED) / BINDING_LEN;

/// Semaphore holding bits 0–31 of the mailbox PA.
pub(crate) const SEM_MAILBOX_LO: u32 = 250;
/// Semaphore holding bits 32–63 of the mailbox PA.
pub(crate) const SEM_MAILBOX_HI: u32 = 251;
/// The doorbell semaphore.
pub(crate) const SEM_DOORBELL: u32 = 252;

/// Execution status: completed.
pub(crate) const STATUS_OK: u32 = 0;
/// Execution status: the program failed.
pub(crate) const STATUS_FAILED: u32 = 1;
/// Execution status: the program did not finish within the timeout.
pub(crate) const STATUS_TIMEOUT: u32 = 2;
/// Execution status: the descriptor or the stage image is malformed.
pub(crate) const STATUS_MALFORMED: u32 = 3;

/// Which side of the model a binding is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Side {
    /// An input (0).
    Input = 0,
    /// An output (1).
    Output = 1,
}

/// One binding of an execution descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DescBinding {
    /// Input or output.
    pub side: Side,
    /// Position on that side.
    pub io_index: u32,
    /// Tensor start (chunk PA + offset).
    pub pa: u64,
    /// Bytes.
    pub size: u64,
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Why an image or descriptor cannot be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EncodeError {
    /// A count or length does not fit its field.
    TooLarge(&'static str),
}

/// The stage image of a subgraph: header, the I/O names (inputs then outputs, in I/O-index
/// order), then `program` at `header_len`.
pub(crate) fn stage_image<'a>(
    inputs: impl ExactSizeIterator<Item = &'a str>,
    outputs: impl ExactSizeIterator<Item = &'a str>,
    program: &[u8],
) -> Result<Vec<u8>, EncodeError> {
    let input_count =
        u32::try_from(inputs.len()).map_err(|_| EncodeError::TooLarge("input count"))?;
    let output_count =
        u32::try_from(outputs.len()).map_err(|_| EncodeError::TooLarge("output count"))?;
    let mut names = Vec::new();
    for name in inputs.chain(outputs) {
        let len = u32::try_from(name.len()).map_err(|_| EncodeError::TooLarge("tensor name"))?;
        put_u32(&mut names, len);
        names.extend_from_slice(name.as_bytes());
        names.resize(names.len().next_multiple_of(4), 0);
    }
    let header_len = (IMAGE_FIXED + names.len()).next_multiple_of(8);
    let header_len32 =
        u32::try_from(header_len).map_err(|_| EncodeError::TooLarge("image header"))?;
    let mut out = Vec::with_capacity(header_len + program.len());
    out.extend_from_slice(&IMAGE_MAGIC);
    put_u32(&mut out, VERSION);
    put_u32(&mut out, header_len32);
    put_u64(&mut out, program.len() as u64);
    put_u32(&mut out, input_count);
    put_u32(&mut out, output_count);
    out.extend_from_slice(&names);
    out.resize(header_len, 0);
    out.extend_from_slice(program);
    Ok(out)
}

/// The execution descriptor written at mailbox offset 0.
pub(crate) fn exec_descriptor(
    seq: u64,
    image_pa: u64,
    timeout_secs: u32,
    bindings: &[DescBinding],
) -> Result<Vec<u8>, EncodeError> {
    if bindings.len() > MAX_BINDINGS {
        return Err(EncodeError::TooLarge("binding count"));
    }
    let mut out = Vec::with_capacity(EXEC_FIXED + BINDING_LEN * bindings.len());
    out.extend_from_slice(&EXEC_MAGIC);
    put_u64(&mut out, seq);
    put_u64(&mut out, image_pa);
    put_u32(&mut out, timeout_secs);
    put_u32(&mut out, bindings.len() as u32);
    for b in bindings {
        put_u32(&mut out, b.side as u32);
        put_u32(&mut out, b.io_index);
        put_u64(&mut out, b.pa);
        put_u64(&mut out, b.size);
        put_u64(&mut out, 0);
    }
    Ok(out)
}

/// Byte offset of the notification slot of launch `seq` (≥ 1) in the queue.
pub(crate) fn nq_slot_offset(seq: u64) -> usize {
    let slots = (NQ_SIZE as usize / NQ_ENTRY) as u64;
    (seq.wrapping_sub(1) % slots) as usize * NQ_ENTRY
}

/// The failure message in `area` (mailbox bytes from [`MAILBOX_MESSAGE`]): up to the first
/// NUL, at most [`MESSAGE_MAX`] bytes, invalid UTF-8 replaced.
pub(crate) fn failure_message(area: &[u8]) -> String {
    let area = area.get(..MESSAGE_MAX.min(area.len())).unwrap_or(area);
    let end = area.iter().position(|&b| b == 0).unwrap_or(area.len());
    String::from_utf8_lossy(area.get(..end).unwrap_or(&[])).into_owned()
}

/// The 32-byte core-lock id of a model: the SubgraphImage carries no NEFF uuid, so a stable
/// id from the model's name: four FNV-1a 64-bit hashes of `"nrt-linux\0" + name`, each from
/// a different offset basis (the standard one, then +1, +2, +3), little-endian.
pub(crate) fn model_uuid(model: &str) -> [u8; 32] {
    const BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut out = [0u8; 32];
    for (k, word) in out.chunks_exact_mut(8).enumerate() {
        let mut h = BASIS.wrapping_add(k as u64);
        for &b in b"nrt-linux\0".iter().chain(model.as_bytes()) {
            h ^= u64::from(b);
            h = h.wrapping_mul(PRIME);
        }
        word.copy_from_slice(&h.to_le_bytes());
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn stage_image_is_byte_exact() {
        let program = [0xaa, 0xbb, 0xcc];
        let img = stage_image(["a", "in_2"].into_iter(), ["out"].into_iter(), &program).unwrap();
        let mut want = Vec::new();
        want.extend_from_slice(b"NRTSIMG1");
        want.extend_from_slice(&1u32.to_le_bytes()); // version
        // names: 4+1+3 pad, 4+4, 4+3+1 pad = 8 + 8 + 8 = 24; 32 + 24 = 56 (a multiple of 8)
        want.extend_from_slice(&56u32.to_le_bytes()); // header_len
        want.extend_from_slice(&3u64.to_le_bytes()); // program_len
        want.extend_from_slice(&2u32.to_le_bytes()); // input_count
        want.extend_from_slice(&1u32.to_le_bytes()); // output_count
        want.extend_from_slice(&[1, 0, 0, 0, b'a', 0, 0, 0]);
        want.extend_from_slice(&[4, 0, 0, 0, b'i', b'n', b'_', b'2']);
        want.extend_from_slice(&[3, 0, 0, 0, b'o', b'u', b't', 0]);
        want.extend_from_slice(&program);
        assert_eq!(img, want);
    }

    #[test]
    fn stage_image_header_is_padded_to_eight() {
        // One 4-byte-padded name: 32 + 8 = 40; two: 48; a 5-byte name: 32 + 12 = 44 → 48.
        let img = stage_image(["abcde"].into_iter(), core::iter::empty(), &[7]).unwrap();
        assert_eq!(u32::from_le_bytes(img[12..16].try_into().unwrap()), 48);
        assert_eq!(img.len(), 49);
        assert_eq!(&img[32..41], &[5, 0, 0, 0, b'a', b'b', b'c', b'd', b'e']);
        assert_eq!(&img[41..48], &[0; 7]);
        assert_eq!(img[48], 7);
        // No names at all: the program starts at 32.
        let img = stage_image(core::iter::empty(), core::iter::empty(), &[]).unwrap();
        assert_eq!(img.len(), 32);
        assert_eq!(u32::from_le_bytes(img[12..16].try_into().unwrap()), 32);
    }

    #[test]
    fn exec_descriptor_is_byte_exact() {
        let bindings = [
            DescBinding {
                side: Side::Input,
                io_index: 0,
                pa: 0x1_0000_0040,
                size: 256,
            },
            DescBinding {
                side: Side::Output,
                io_index: 3,
                pa: 0x2000,
                size: 8,
            },
        ];
        let d = exec_descriptor(7, 0xdead_b000, 5, &bindings).unwrap();
        let mut want = Vec::new();
        want.extend_from_slice(b"NRTEXEC1");
        want.extend_from_slice(&7u64.to_le_bytes());
        want.extend_from_slice(&0xdead_b000u64.to_le_bytes());
        want.extend_from_slice(&5u32.to_le_bytes());
        want.extend_from_slice(&2u32.to_le_bytes());
        for (side, index, pa, size) in [(0u32, 0u32, 0x1_0000_0040u64, 256u64), (1, 3, 0x2000, 8)] {
            want.extend_from_slice(&side.to_le_bytes());
            want.extend_from_slice(&index.to_le_bytes());
            want.extend_from_slice(&pa.to_le_bytes());
            want.extend_from_slice(&size.to_le_bytes());
            want.extend_from_slice(&0u64.to_le_bytes());
        }
        assert_eq!(d, want);
        assert_eq!(d.len(), 32 + 2 * 32);
    }

    #[test]
    fn descriptor_binding_count_is_bounded_by_the_message_area() {
        assert_eq!(MAX_BINDINGS, 1023);
        let b = DescBinding {
            side: Side::Input,
            io_index: 0,
            pa: 0,
            size: 0,
        };
        let d = exec_descriptor(1, 0, 0, &vec![b; MAX_BINDINGS]).unwrap();
        assert_eq!(d.len(), MAILBOX_MESSAGE);
        assert_eq!(
            exec_descriptor(1, 0, 0, &vec![b; MAX_BINDINGS + 1]),
            Err(EncodeError::TooLarge("binding count"))
        );
    }

    #[test]
    fn notification_slots_wrap_after_256_launches() {
        assert_eq!(nq_slot_offset(1), 0);
        assert_eq!(nq_slot_offset(2), 16);
        assert_eq!(nq_slot_offset(256), 255 * 16);
        assert_eq!(nq_slot_offset(257), 0);
    }

    #[test]
    fn failure_messages_stop_at_nul_and_4_kib() {
        assert_eq!(failure_message(b"hazard at 3\0garbage"), "hazard at 3");
        assert_eq!(failure_message(b"\0"), "");
        let long = vec![b'x'; MESSAGE_MAX + 10];
        assert_eq!(failure_message(&long).len(), MESSAGE_MAX);
        assert_eq!(failure_message(&[0xff, b'a', 0]), "\u{fffd}a");
    }

    #[test]
    fn model_uuids_are_stable_and_distinct() {
        let a = model_uuid("resnet");
        assert_eq!(a, model_uuid("resnet"));
        assert_ne!(a, model_uuid("resnet2"));
        // Four distinct words.
        let words: Vec<&[u8]> = a.chunks(8).collect();
        assert!(
            words
                .iter()
                .enumerate()
                .all(|(i, w)| words[..i].iter().all(|v| v != w))
        );
        // The first word is FNV-1a 64 of "nrt-linux\0resnet" with the standard basis.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in b"nrt-linux\0resnet" {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        assert_eq!(&a[..8], &h.to_le_bytes());
    }
}
