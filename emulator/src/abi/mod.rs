//! The driver ABI as the emulator reads it: field tables of the argument structs it serves
//! ([`layouts`]), the request table ([`requests`]) and the record type that decodes a struct's
//! bytes through its table.

pub mod layouts;
mod record;
pub mod requests;

pub(crate) use record::Rec;
pub use record::{Field, Layout};
pub use requests::{REQUESTS, Request, lookup, name_of};
