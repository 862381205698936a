//! lowbit-runtime: the pieces behind the `lowbit` command that applications can also call.
//!
//! Today: the format table ([`formats`]) and raw-file codec conversion ([`rawcodec`]).
//! What must not live here: format layouts and codecs (those are `lowbit-core`'s).

pub mod formats;
pub mod rawcodec;
