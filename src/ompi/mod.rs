//! The Open MPI edge: everything that knows Open MPI's structures or calls
//! into it, except the PML transport (`p2p::pml`). At the bottom of the
//! edge: the generated FFI layer and our C shim (`ffi`), version facts
//! (`ffi::abi`), messages (`report`), the parameters (`params`) and facts
//! about the node (`node`), and a timing probe that is empty unless built
//! with the `probe` feature (`probe`). In the middle: a module's state (`server`:
//! the communicator's barrier state and queue), its requests (`request`)
//! and the progress callback that drives them (`progress`). At the top:
//! what Open MPI calls — the component (`component`), the module object
//! (`module`) and the MPI_T variable (`pvar`). Nothing below imports the
//! top.

pub mod component;
pub mod ffi;
pub mod module;
pub mod node;
pub mod params;
pub mod probe;
pub mod progress;
pub mod pvar;
pub mod report;
pub mod request;
pub mod server;
