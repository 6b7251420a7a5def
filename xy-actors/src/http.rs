//! What an HTTP exchange is to xy, shared by every wing that speaks HTTP:
//! the body type, its limit and the MCP header names (`body`), the
//! outbound client stack (`client`) and the admission edge every listener
//! sits behind (`edge`). Wings import from here; nothing here imports a wing.

pub(crate) mod body;
pub(crate) mod client;
pub(crate) mod edge;
