//! What an HTTP exchange is to xy, shared by every wing that speaks HTTP:
//! the outbound client stack and the admission edge every listener sits
//! behind. Wings import from here; nothing here imports a wing.

pub(crate) mod body;
pub(crate) mod client;
pub(crate) mod edge;
