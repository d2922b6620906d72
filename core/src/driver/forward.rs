//! The one list of [`Driver`](super::Driver) methods, and the macros generated from it: the
//! forwarding of a wrapper driver ([`forward_driver!`](crate::forward_driver)) and the
//! [`DriverCall`](super::DriverCall) enum.
//!
//! Adding a method to the trait means adding its line here too; no wrapper changes.

/// Invokes `$crate::$callback! { $($pre)* <table> }` with one entry per fallible [`Driver`]
/// method, in the order `init` first makes the calls, then `unload`'s:
/// `[CallName] method(arg: Type, ...) -> Ok;`.
///
/// [`Driver`]: crate::driver::Driver
#[doc(hidden)]
#[macro_export]
macro_rules! __driver_methods {
    ($callback:ident ! ( $($pre:tt)* )) => {
        $crate::$callback! { $($pre)*
            [RegisterSoftIncompatCallback] register_soft_incompat_callback(
                callback: $crate::driver::SoftIncompatCallback) -> ();
            [Discover] discover() -> $crate::driver::DeviceInfo;
            [OverrideHwRevision] override_hw_revision(
                revision: $crate::driver::HwRevision) -> ();
            [DriverVersion] driver_version() -> $crate::driver::DriverVersion;
            [CompatibleVersion] compatible_version() -> $crate::driver::CompatRange;
            [ReserveCores] reserve_cores(
                request: $crate::driver::ReserveRequest) -> $crate::driver::Reservation;
            [InitCores] init_cores(params: &$crate::driver::CoreInitParams) -> ();
            [StartExecReady] start_exec_ready(params: &$crate::driver::CoreInitParams) -> ();
            [ShutdownCores] shutdown_cores(params: &$crate::driver::CoreInitParams) -> ();
            [ReleaseCores] release_cores(bitmap: &$crate::bitmap::CoreBitmap) -> ();
            [StopModel] stop_model(model: $crate::driver::StagedModel) -> ();
            [UnstageModel] unstage_model(model: $crate::driver::StagedModel) -> ();
            [StageSubgraph] stage_subgraph(
                image: &$crate::driver::SubgraphImage<'_>) -> $crate::driver::StagedModel;
            [AllocDevice] alloc_device(device: u32, size: u64) -> $crate::driver::DeviceBuffer;
            [FreeDevice] free_device(buffer: $crate::driver::DeviceBuffer) -> ();
            [WriteDevice] write_device(
                buffer: $crate::driver::DeviceBuffer, offset: u64, data: &[u8]) -> ();
            [ReadDevice] read_device(
                buffer: $crate::driver::DeviceBuffer, offset: u64, out: &mut [u8]) -> ();
            [CopyDevice] copy_device(
                src: $crate::driver::DeviceBuffer, src_offset: u64,
                dst: $crate::driver::DeviceBuffer, dst_offset: u64, len: u64) -> ();
            [MemsetDevice] memset_device(
                buffer: $crate::driver::DeviceBuffer, offset: u64, value: u8, len: u64) -> ();
            [Submit] submit(request: &$crate::driver::ExecRequest<'_>) -> ();
        }
    };
}

/// Implements every [`Driver`](crate::driver::Driver) method of a wrapper by forwarding, inside
/// an `impl Driver for Wrapper { type Error = ...; forward_driver!(via); }` block.
///
/// `via` is a macro of the caller's with two rules, which receive `self`, the method's
/// [`DriverCall`](crate::driver::DriverCall) name and a binder `d` with the call to make on
/// the wrapped driver (`d.discover()`, ...):
///
/// - `(@value $s:ident, $d:ident => $e:expr)` for [`is_funtime`](crate::driver::Driver::is_funtime),
///   and [`stages_subgraph_files`](crate::driver::Driver::stages_subgraph_files), which
///   return a `bool`;
/// - `($s:ident, $call:ident, $d:ident => $e:expr)` for every other method, which must evaluate
///   to `Result<_, Self::Error>`.
///
/// A rule can match one call name to do something else for it. For example, a wrapper that
/// counts submissions:
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use nrt_core::driver::{Driver, DriverCall};
/// # use nrt_core::driver::*;
/// # #[derive(Debug)] struct E;
/// # impl core::fmt::Display for E { fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result { f.write_str("e") } }
/// # impl DriverError for E { fn kind(&self) -> ErrorKind { ErrorKind::Other } fn unsupported(_: &'static str) -> Self { E } }
/// # struct Inner;
/// # impl Driver for Inner { type Error = E;
/// #   fn is_funtime(&self) -> bool { true }
/// #   fn discover(&self) -> Result<DeviceInfo, E> { Err(E) }
/// #   fn submit(&self, _: &ExecRequest<'_>) -> Result<(), E> { Ok(()) }
/// # }
///
/// struct Counting<D> {
///     inner: D,
///     submits: AtomicU32,
/// }
///
/// macro_rules! counting {
///     (@value $s:ident, $d:ident => $e:expr) => {{ let $d = &$s.inner; $e }};
///     ($s:ident, Submit, $d:ident => $e:expr) => {{
///         $s.submits.fetch_add(1, Ordering::Relaxed);
///         let $d = &$s.inner;
///         $e
///     }};
///     ($s:ident, $call:ident, $d:ident => $e:expr) => {{ let $d = &$s.inner; $e }};
/// }
///
/// impl<D: Driver> Driver for Counting<D> {
///     type Error = D::Error;
///     nrt_core::forward_driver!(counting);
/// }
///
/// let c = Counting { inner: Inner, submits: AtomicU32::new(0) };
/// let request = ExecRequest { subgraphs: &[], inputs: &[], outputs: &[], timeout_secs: None };
/// c.submit(&request).unwrap();
/// assert!(c.driver_version().is_err()); // Inner's default: unsupported
/// assert_eq!(c.submits.load(Ordering::Relaxed), 1);
/// ```
#[macro_export]
macro_rules! forward_driver {
    ($via:ident) => {
        fn is_funtime(&self) -> bool {
            $via!(@value self, d => d.is_funtime())
        }
        fn stages_subgraph_files(&self) -> bool {
            $via!(@value self, d => d.stages_subgraph_files())
        }
        $crate::__driver_methods!(__forward_driver_fns!($via));
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __forward_driver_fns {
    ($via:ident $( [$call:ident] $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        $(
            fn $name(&self $(, $arg: $ty)*) -> ::core::result::Result<$ret, Self::Error> {
                $via!(self, $call, d => d.$name($($arg),*))
            }
        )*
    };
}

/// Defines [`DriverCall`](crate::driver::DriverCall) from the method table.
#[doc(hidden)]
#[macro_export]
macro_rules! __driver_calls {
    ($( [$call:ident] $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty ; )*) => {
        /// One fallible method of [`Driver`](crate::driver::Driver) (every method but
        /// `is_funtime`), named as the method in `UpperCamelCase`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        pub enum DriverCall {
            $(
                #[doc = concat!("[`Driver::", stringify!($name), "`](crate::driver::Driver::", stringify!($name), ").")]
                $call,
            )*
        }

        impl DriverCall {
            /// Every call, in the order `init` first makes them, then `unload`'s.
            pub const ALL: [DriverCall; [$(DriverCall::$call),*].len()] = [$(DriverCall::$call),*];

            /// The method's name.
            pub const fn method(self) -> &'static str {
                match self {
                    $(DriverCall::$call => stringify!($name),)*
                }
            }
        }
    };
}
