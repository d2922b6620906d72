//! A `defmt` global logger over semihosting: each frame is rzCOBS-encoded by `defmt` into a
//! static buffer and written to the host file `defmt.out` (QEMU's working directory) with one
//! `SYS_WRITE`. Single-core, no interrupts: the logger is taken with an atomic flag.

use core::sync::atomic::{AtomicBool, Ordering};

use semihosting::fs::File;
use semihosting::io::Write as _;

#[defmt::global_logger]
struct Logger;

static TAKEN: AtomicBool = AtomicBool::new(false);

struct State {
    encoder: defmt::Encoder,
    file: Option<File>,
    opened: bool,
    buf: [u8; 256],
    len: usize,
}

static STATE: spin::Mutex<State> = spin::Mutex::new(State {
    encoder: defmt::Encoder::new(),
    file: None,
    opened: false,
    buf: [0; 256],
    len: 0,
});

impl State {
    fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.len == self.buf.len() {
                self.drain();
            }
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = b;
                self.len += 1;
            }
        }
    }

    fn drain(&mut self) {
        if !self.opened {
            self.opened = true;
            self.file = File::create(c"defmt.out").ok();
        }
        if let (Some(f), Some(data)) = (self.file.as_mut(), self.buf.get(..self.len)) {
            // A host that refuses the write loses the log, never the run.
            let _ = f.write_all(data);
        }
        self.len = 0;
    }
}

// SAFETY: `acquire` / `release` bracket every frame and the flag makes them exclusive; the
// state is behind a lock besides.
unsafe impl defmt::Logger for Logger {
    fn acquire() {
        while TAKEN
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            core::hint::spin_loop();
        }
        let mut s = STATE.lock();
        let st = &mut *s;
        st.encoder
            .start_frame(|b| push_to(&mut st.buf, &mut st.len, b));
        flush_if_full(st);
    }

    unsafe fn flush() {
        STATE.lock().drain();
    }

    unsafe fn release() {
        {
            let mut s = STATE.lock();
            let st = &mut *s;
            let mut tmp = [0u8; 16];
            let mut n = 0;
            st.encoder.end_frame(|b| {
                for &x in b {
                    if let Some(slot) = tmp.get_mut(n) {
                        *slot = x;
                        n += 1;
                    }
                }
            });
            if let Some(t) = tmp.get(..n) {
                st.push(t);
            }
            st.drain();
        }
        TAKEN.store(false, Ordering::Release);
    }

    unsafe fn write(bytes: &[u8]) {
        let mut s = STATE.lock();
        let st = &mut *s;
        // The encoder hands out at most a few bytes per input byte: stage them through the
        // buffer, draining it to the host when full.
        let mut pending: heapless::Vec<u8, 64> = heapless::Vec::new();
        for chunk in bytes.chunks(16) {
            pending.clear();
            st.encoder.write(chunk, |b| {
                let _ = pending.extend_from_slice(b);
            });
            st.push(&pending);
        }
    }
}

fn push_to(buf: &mut [u8; 256], len: &mut usize, bytes: &[u8]) {
    for &b in bytes {
        if let Some(slot) = buf.get_mut(*len) {
            *slot = b;
            *len += 1;
        }
    }
}

fn flush_if_full(st: &mut State) {
    if st.len >= st.buf.len() {
        st.drain();
    }
}

/// Writes out whatever the logger holds (before exiting).
pub fn flush() {
    STATE.lock().drain();
}
