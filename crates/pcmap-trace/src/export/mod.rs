//! Exporters: Chrome/Perfetto JSON (object format), lldb's JSON array, folded stacks and
//! flame-graph SVG.

pub mod chrome;
pub mod folded;

pub use chrome::{ChromeOptions, ThreadView, write_chrome};
pub use folded::{folded_stacks, write_flamegraph};
