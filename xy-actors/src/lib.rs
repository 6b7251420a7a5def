//! `xy-actors`: the supervision engine behind `xyd`.
//!
//! The daemon talks to it through [`Engine`], a cloneable handle over the
//! ractor actor tree (RootSupervisor → ConfigActor, LogRouterActor, one
//! ServerActor per server). Depends on `xy-core`; `xy-daemon` sits above it.
#![warn(missing_docs)]

mod engine;

pub use engine::{Engine, EngineError, EngineOptions, LogEvent, LogLine, LogSubscription, SpawnFailure};
