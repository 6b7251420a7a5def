//! What an MCP message is to xy, shared by every wing that speaks MCP (the
//! stdio bridge, the gateway, the health probe, the ServerActor): the
//! firewall's published verdicts and the held-back answer, and call records.
//! Wings import from here; nothing here imports a wing.

pub(crate) mod listing;
pub(crate) mod meta;
pub(crate) mod record;
pub(crate) mod report;
pub(crate) mod verdicts;
