//! Everything that asks the operating system about processes: process
//! groups and the subreaper (`group`), `/proc` (`procfs`), who listens on a
//! port (`ports`), who owns the peer of a loopback TCP connection (`peer`),
//! the descriptor limit (`limits`), CPU and RSS figures (`resources`) and
//! child records with the boot-time orphan sweep (`records`), a server's
//! whole process tree and what `xyd` adopts (`tree`), and the
//! sandbox put on a child at spawn (`sandbox`). Each returns
//! data; callers decide.

pub(crate) mod group;
pub(crate) mod limits;
pub(crate) mod peer;
pub(crate) mod ports;
pub(crate) mod procfs;
pub(crate) mod records;
pub(crate) mod resources;
pub(crate) mod sandbox;
pub(crate) mod spawn;
pub(crate) mod tree;
