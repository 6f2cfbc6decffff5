//! One module per subcommand; each owns its `Args` and `run`.

pub mod info;
