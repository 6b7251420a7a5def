//! What an MCP message is to xy, shared by every wing that speaks MCP (the
//! stdio bridge, the gateway, the health probe, the ServerActor): xy's
//! own listing of a server and its bounds (`listing`), the tools a 2025
//! child offers only to capable clients (`gates`), what the probe
//! reports (`report`), the firewall's published verdicts and the held-back
//! answer (`verdicts`), the skill files and apps it pins (`pinned`), the
//! answers xy gives from the ledger while a server does not run
//! (`from_ledger`, SPEC §26), call records (`record`), the `_meta` keys and
//! the one id helper (`meta`), and the one strict reader that decides what
//! xy forwards (`strict`, SPEC §24). Wings import from here; nothing here
//! imports a wing.

pub(crate) mod from_ledger;
pub(crate) mod gates;
pub(crate) mod listing;
pub(crate) mod meta;
pub(crate) mod pinned;
pub(crate) mod record;
pub(crate) mod report;
pub(crate) mod strict;
pub(crate) mod verdicts;
