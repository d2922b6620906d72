//! `NRT_STATUS`: the status codes of the public C API, with their exact numeric values.

use core::fmt;

/// Every `NRT_STATUS` value of libnrt 2.31 (`nrt/nrt_status.h`), with its exact number.
///
/// The header's policy is "only append": values 8 and 12 are unused and callers treat unknown
/// values as opaque integers, which is what [`NrtStatus::from_raw`] does.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum NrtStatus {
    /// Success.
    Success = 0,
    /// Non specific failure.
    Failure = 1,
    /// Invalid NEFF, bad instruction, bad DMA descriptor, input tensor name/size mismatch, ...
    Invalid = 2,
    /// A handle (model, tensor) that does not name a live object.
    InvalidHandle = 3,
    /// Failed to allocate a resource for the requested operation.
    Resource = 4,
    /// Operation timed out.
    Timeout = 5,
    /// Hardware failure.
    HwError = 6,
    /// Not enough space in the execution input queue.
    QueueFull = 7,
    /// Failed to allocate enough NeuronCores for loading a NEFF.
    LoadNotEnoughNc = 9,
    /// The NEFF's version is not supported.
    UnsupportedNeffVersion = 10,
    /// Kept for backward compatibility only.
    FailHostMemAlloc = 11,
    /// Called before `nrt_init`.
    Uninitialized = 13,
    /// Called after `nrt_close`.
    Closed = 14,
    /// Accessed a queue with no data.
    QueueEmpty = 15,
    /// Execution unit in limbo, needs a reset.
    ExecUnitUnrecoverable = 101,
    /// Bad input to an execution.
    ExecBadInput = 1002,
    /// Execution completed with numerical errors (NaN).
    ExecCompletedWithNumErr = 1003,
    /// Execution completed with errors.
    ExecCompletedWithErr = 1004,
    /// Core locked by another model or process.
    ExecNcBusy = 1005,
    /// Indirect memcopy or embedding update out of bounds.
    ExecOob = 1006,
    /// Collective operation pending.
    CollPending = 1100,
    /// Hardware error in collectives.
    ExecHwErrCollectives = 1200,
    /// Uncorrectable HBM error.
    ExecHwErrHbmUe = 1201,
    /// Uncorrectable NeuronCore error.
    ExecHwErrNcUe = 1202,
    /// DMA abort.
    ExecHwErrDmaAbort = 1203,
    /// Software notification-queue overflow.
    ExecSwNqOverflow = 1204,
    /// Repairable uncorrectable HBM error.
    ExecHwErrRepairableHbmUe = 1205,
    /// Network proxy failure.
    NetworkProxyFailure = 1206,
}

impl NrtStatus {
    /// Every status, in numeric order.
    pub const ALL: [NrtStatus; 28] = [
        Self::Success,
        Self::Failure,
        Self::Invalid,
        Self::InvalidHandle,
        Self::Resource,
        Self::Timeout,
        Self::HwError,
        Self::QueueFull,
        Self::LoadNotEnoughNc,
        Self::UnsupportedNeffVersion,
        Self::FailHostMemAlloc,
        Self::Uninitialized,
        Self::Closed,
        Self::QueueEmpty,
        Self::ExecUnitUnrecoverable,
        Self::ExecBadInput,
        Self::ExecCompletedWithNumErr,
        Self::ExecCompletedWithErr,
        Self::ExecNcBusy,
        Self::ExecOob,
        Self::CollPending,
        Self::ExecHwErrCollectives,
        Self::ExecHwErrHbmUe,
        Self::ExecHwErrNcUe,
        Self::ExecHwErrDmaAbort,
        Self::ExecSwNqOverflow,
        Self::ExecHwErrRepairableHbmUe,
        Self::NetworkProxyFailure,
    ];

    /// The numeric value seen by C callers.
    #[inline]
    pub const fn code(self) -> u32 {
        self as u32
    }

    /// The status with this numeric value, or `None` for a value the header does not define.
    pub fn from_raw(code: u32) -> Option<Self> {
        Self::ALL.iter().copied().find(|s| s.code() == code)
    }

    /// The C enumerator name (`"NRT_SUCCESS"`, `"NRT_INVALID"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Success => "NRT_SUCCESS",
            Self::Failure => "NRT_FAILURE",
            Self::Invalid => "NRT_INVALID",
            Self::InvalidHandle => "NRT_INVALID_HANDLE",
            Self::Resource => "NRT_RESOURCE",
            Self::Timeout => "NRT_TIMEOUT",
            Self::HwError => "NRT_HW_ERROR",
            Self::QueueFull => "NRT_QUEUE_FULL",
            Self::LoadNotEnoughNc => "NRT_LOAD_NOT_ENOUGH_NC",
            Self::UnsupportedNeffVersion => "NRT_UNSUPPORTED_NEFF_VERSION",
            Self::FailHostMemAlloc => "NRT_FAIL_HOST_MEM_ALLOC",
            Self::Uninitialized => "NRT_UNINITIALIZED",
            Self::Closed => "NRT_CLOSED",
            Self::QueueEmpty => "NRT_QUEUE_EMPTY",
            Self::ExecUnitUnrecoverable => "NRT_EXEC_UNIT_UNRECOVERABLE",
            Self::ExecBadInput => "NRT_EXEC_BAD_INPUT",
            Self::ExecCompletedWithNumErr => "NRT_EXEC_COMPLETED_WITH_NUM_ERR",
            Self::ExecCompletedWithErr => "NRT_EXEC_COMPLETED_WITH_ERR",
            Self::ExecNcBusy => "NRT_EXEC_NC_BUSY",
            Self::ExecOob => "NRT_EXEC_OOB",
            Self::CollPending => "NRT_COLL_PENDING",
            Self::ExecHwErrCollectives => "NRT_EXEC_HW_ERR_COLLECTIVES",
            Self::ExecHwErrHbmUe => "NRT_EXEC_HW_ERR_HBM_UE",
            Self::ExecHwErrNcUe => "NRT_EXEC_HW_ERR_NC_UE",
            Self::ExecHwErrDmaAbort => "NRT_EXEC_HW_ERR_DMA_ABORT",
            Self::ExecSwNqOverflow => "NRT_EXEC_SW_NQ_OVERFLOW",
            Self::ExecHwErrRepairableHbmUe => "NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE",
            Self::NetworkProxyFailure => "NRT_NETWORK_PROXY_FAILURE",
        }
    }

    /// A short human description, as `nrt_get_status_as_str` returns it.
    pub const fn description(self) -> &'static str {
        match self {
            Self::Success => "Success",
            Self::Failure => "Non specific failure",
            Self::Invalid => "Invalid NEFF, instruction, DMA descriptor or input tensor",
            Self::InvalidHandle => "Invalid handle",
            Self::Resource => "Failed to allocate a resource for the requested operation",
            Self::Timeout => "Operation timed out",
            Self::HwError => "Hardware failure",
            Self::QueueFull => "Not enough space in the execution input queue",
            Self::LoadNotEnoughNc => "Failed to allocate enough NCs for loading a NEFF",
            Self::UnsupportedNeffVersion => "Unsupported NEFF version",
            Self::FailHostMemAlloc => "Failed to allocate host memory",
            Self::Uninitialized => "Called before nrt_init",
            Self::Closed => "Called after nrt_close",
            Self::QueueEmpty => "Accessed a queue with no data",
            Self::ExecUnitUnrecoverable => "Execution unit in unrecoverable state, reset needed",
            Self::ExecBadInput => "Bad execution input",
            Self::ExecCompletedWithNumErr => "Execution completed with numerical errors (NaN)",
            Self::ExecCompletedWithErr => "Execution completed with errors",
            Self::ExecNcBusy => "NeuronCore locked by another model or process",
            Self::ExecOob => "Indirect memcopy or embedding update out of bounds",
            Self::CollPending => "Collective operation pending",
            Self::ExecHwErrCollectives => "Hardware error in collectives",
            Self::ExecHwErrHbmUe => "Uncorrectable HBM error",
            Self::ExecHwErrNcUe => "Uncorrectable NeuronCore error",
            Self::ExecHwErrDmaAbort => "DMA abort",
            Self::ExecSwNqOverflow => "Notification queue overflow",
            Self::ExecHwErrRepairableHbmUe => "Repairable uncorrectable HBM error",
            Self::NetworkProxyFailure => "Network proxy failure",
        }
    }
}

/// `nrt_get_status_as_str`: the enumerator name of a raw status value, `"NRT_UNKNOWN_STATUS"` for
/// a value the header does not define. Never fails, for any input.
pub fn status_as_str(code: u32) -> &'static str {
    match NrtStatus::from_raw(code) {
        Some(s) => s.name(),
        None => "NRT_UNKNOWN_STATUS",
    }
}

impl fmt::Display for NrtStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

impl From<NrtStatus> for u32 {
    fn from(s: NrtStatus) -> u32 {
        s.code()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_have_the_header_numbers() {
        let expected: [(u32, &str); 28] = [
            (0, "NRT_SUCCESS"),
            (1, "NRT_FAILURE"),
            (2, "NRT_INVALID"),
            (3, "NRT_INVALID_HANDLE"),
            (4, "NRT_RESOURCE"),
            (5, "NRT_TIMEOUT"),
            (6, "NRT_HW_ERROR"),
            (7, "NRT_QUEUE_FULL"),
            (9, "NRT_LOAD_NOT_ENOUGH_NC"),
            (10, "NRT_UNSUPPORTED_NEFF_VERSION"),
            (11, "NRT_FAIL_HOST_MEM_ALLOC"),
            (13, "NRT_UNINITIALIZED"),
            (14, "NRT_CLOSED"),
            (15, "NRT_QUEUE_EMPTY"),
            (101, "NRT_EXEC_UNIT_UNRECOVERABLE"),
            (1002, "NRT_EXEC_BAD_INPUT"),
            (1003, "NRT_EXEC_COMPLETED_WITH_NUM_ERR"),
            (1004, "NRT_EXEC_COMPLETED_WITH_ERR"),
            (1005, "NRT_EXEC_NC_BUSY"),
            (1006, "NRT_EXEC_OOB"),
            (1100, "NRT_COLL_PENDING"),
            (1200, "NRT_EXEC_HW_ERR_COLLECTIVES"),
            (1201, "NRT_EXEC_HW_ERR_HBM_UE"),
            (1202, "NRT_EXEC_HW_ERR_NC_UE"),
            (1203, "NRT_EXEC_HW_ERR_DMA_ABORT"),
            (1204, "NRT_EXEC_SW_NQ_OVERFLOW"),
            (1205, "NRT_EXEC_HW_ERR_REPAIRABLE_HBM_UE"),
            (1206, "NRT_NETWORK_PROXY_FAILURE"),
        ];
        for (status, (code, name)) in NrtStatus::ALL.iter().zip(expected) {
            assert_eq!(status.code(), code);
            assert_eq!(status.name(), name);
            assert_eq!(NrtStatus::from_raw(code), Some(*status));
            assert_eq!(status_as_str(code), name);
        }
    }

    #[test]
    fn unknown_status_values_are_opaque() {
        for code in [8u32, 12, 16, 100, 999, 1001, 1007, 1207, u32::MAX] {
            assert_eq!(NrtStatus::from_raw(code), None);
            assert_eq!(status_as_str(code), "NRT_UNKNOWN_STATUS");
        }
    }
}
