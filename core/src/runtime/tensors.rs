//! Tensors (spec 000 §2): allocation on a logical core's device or in host memory, and the
//! device memory operations tensors need from the runtime.

use alloc::string::String;

use super::Runtime;
use crate::driver::{DeviceBuffer, Driver, DriverError};
use crate::error::{Error, Result};
use crate::events::RuntimeEvent;
use crate::fmt::Level;
use crate::host::Host;
use crate::tensor::{DeviceMemory, Tensor, TensorPlacement};

fn driver_error<E: DriverError>(e: &E, what: core::fmt::Arguments<'_>) -> Error {
    Error::new(e.status(), format_args!("{what}: {e}"))
}

impl<D: Driver, H: Host> Runtime<D, H> {
    /// Returns `buffer` to the driver.
    pub(super) fn free_now(&self, buffer: DeviceBuffer) {
        if let Err(e) = self.driver.free_device(buffer) {
            self.log(
                Level::Error,
                format_args!("Failed to free device memory: {e}"),
            );
        }
    }
}

impl<D: Driver + Sync, H: Host + Sync> DeviceMemory for Runtime<D, H> {
    /// Frees the storage of the last tensor using `buffer`. A queued or running asynchronous
    /// execution still uses it: the free waits for that execution to complete, so the memory
    /// is neither reused nor released under it.
    fn free(&self, buffer: DeviceBuffer) {
        {
            let mut state = self.async_state.lock();
            if let Some(s) = state.as_mut() {
                if s.uses(buffer) {
                    s.deferred_frees.push(buffer);
                    return;
                }
            }
        }
        self.free_now(buffer);
    }
    fn read(&self, b: DeviceBuffer, offset: u64, out: &mut [u8]) -> Result<()> {
        self.events.emit(|| RuntimeEvent::TensorRead {
            nc: crate::events::core_on_device(self.published.topology(), b.device),
            bytes: out.len() as u64,
        });
        self.driver.read_device(b, offset, out).map_err(|e| {
            self.fail(driver_error(
                &e,
                format_args!("Failed to read device memory"),
            ))
        })
    }
    fn write(&self, b: DeviceBuffer, offset: u64, data: &[u8]) -> Result<()> {
        self.events.emit(|| RuntimeEvent::TensorWrite {
            nc: crate::events::core_on_device(self.published.topology(), b.device),
            bytes: data.len() as u64,
        });
        self.driver.write_device(b, offset, data).map_err(|e| {
            self.fail(driver_error(
                &e,
                format_args!("Failed to write device memory"),
            ))
        })
    }
    fn copy(&self, src: DeviceBuffer, so: u64, dst: DeviceBuffer, d: u64, len: u64) -> Result<()> {
        self.events.emit(|| RuntimeEvent::TensorCopy {
            nc: crate::events::core_on_device(self.published.topology(), dst.device),
            bytes: len,
        });
        self.driver.copy_device(src, so, dst, d, len).map_err(|e| {
            self.fail(driver_error(
                &e,
                format_args!("Failed to copy device memory"),
            ))
        })
    }
    fn memset(&self, b: DeviceBuffer, offset: u64, value: u8, len: u64) -> Result<()> {
        self.driver
            .memset_device(b, offset, value, len)
            .map_err(|e| {
                self.fail(driver_error(
                    &e,
                    format_args!("Failed to set device memory"),
                ))
            })
    }
}

impl<D: Driver + Sync, H: Host + Sync> Runtime<D, H> {
    /// `nrt_tensor_allocate`: a tensor of `size` bytes in device memory of the (process-
    /// relative) logical core `lnc`, or in host memory. Device memory exhaustion is
    /// `NRT_RESOURCE`.
    pub fn tensor_allocate(
        &self,
        placement: TensorPlacement,
        lnc: i32,
        size: u64,
        name: &str,
    ) -> Result<Tensor<'_>> {
        self.guard()?;
        match placement {
            TensorPlacement::Device => {
                let abs = self.resolve_lnc(lnc.into())?;
                let device = self.published.topology().device_of_lnc(abs);
                let buffer = self.driver.alloc_device(device, size).map_err(|e| {
                    self.fail(Error::new(
                        e.status(),
                        format_args!(
                            "Failed to allocate {size} bytes of device memory for tensor \
                             \"{name}\" on Neuron Core {lnc}: {e}"
                        ),
                    ))
                })?;
                Ok(Tensor::device(String::from(name), buffer, self))
            }
            TensorPlacement::Host => {
                Tensor::host(String::from(name), size).map_err(|e| self.fail(e))
            }
            TensorPlacement::Virtual => Ok(Tensor::empty(name)),
        }
    }
}
