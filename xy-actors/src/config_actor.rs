//! The ConfigActor: holds the current [`ConfigSet`] and computes `reload`
//! diffs (added / removed / changed settings / unchanged).
//!
//! It is the one holder of the applied set: the root forwards each reload
//! step to it, and on failure rebuilds it from the configs the ServerActors
//! run with. It owns no OS resources.

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use xy_core::config::{ConfigSet, ServerConfig};

/// A reload diff; every list sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ConfigDiff {
    /// New servers.
    pub(crate) added: Vec<ServerConfig>,
    /// Servers no longer configured.
    pub(crate) removed: Vec<String>,
    /// Servers whose [`ServerConfig::settings`] differ (the new config).
    pub(crate) changed: Vec<ServerConfig>,
    /// Servers with the same settings.
    pub(crate) unchanged: Vec<String>,
}

/// The diff from `old` to `new`.
pub(crate) fn diff(old: &ConfigSet, new: &ConfigSet) -> ConfigDiff {
    let mut d = ConfigDiff::default();
    for (name, cfg) in &new.servers {
        match old.servers.get(name) {
            None => d.added.push(cfg.clone()),
            Some(o) if o.settings() != cfg.settings() => d.changed.push(cfg.clone()),
            Some(_) => d.unchanged.push(name.clone()),
        }
    }
    d.removed = old
        .servers
        .keys()
        .filter(|n| !new.servers.contains_key(*n))
        .cloned()
        .collect();
    d
}

/// Messages of the ConfigActor.
pub(crate) enum ConfigMsg {
    /// Number of configured servers.
    Count(RpcReplyPort<usize>),
    /// The current set and its diff against a new one (the set is not
    /// replaced).
    Diff(Box<ConfigSet>, RpcReplyPort<(Box<ConfigSet>, ConfigDiff)>),
    /// Makes `set` current.
    Replace(Box<ConfigSet>, RpcReplyPort<()>),
    /// One server's config (`None`: not configured).
    Get(String, RpcReplyPort<Option<ServerConfig>>),
    /// Sets one server's config (a reload step as it is applied).
    Put(Box<ServerConfig>),
    /// Forgets one server (removed by a reload).
    Remove(String),
    /// A config that reached a rebuilt ConfigActor late: kept unless the
    /// name already has one (a reload since then is newer).
    Adopt(Box<ServerConfig>),
    /// Fault injection: panic in the handler.
    InjectPanic,
}

/// See the module docs.
pub(crate) struct ConfigActor;

impl Actor for ConfigActor {
    type Msg = ConfigMsg;
    type State = ConfigSet;
    type Arguments = ConfigSet;

    async fn pre_start(
        &self,
        _myself: ActorRef<ConfigMsg>,
        set: ConfigSet,
    ) -> Result<ConfigSet, ActorProcessingErr> {
        Ok(set)
    }

    async fn handle(
        &self,
        _myself: ActorRef<ConfigMsg>,
        msg: ConfigMsg,
        set: &mut ConfigSet,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            ConfigMsg::Count(reply) => {
                if !reply.is_closed() {
                    let _ = reply.send(set.servers.len());
                }
            }
            ConfigMsg::Diff(new, reply) => {
                if !reply.is_closed() {
                    let _ = reply.send((Box::new(set.clone()), diff(set, &new)));
                }
            }
            ConfigMsg::Replace(new, reply) => {
                *set = *new;
                if !reply.is_closed() {
                    let _ = reply.send(());
                }
            }
            ConfigMsg::Get(name, reply) => {
                if !reply.is_closed() {
                    let _ = reply.send(set.servers.get(&name).cloned());
                }
            }
            ConfigMsg::Put(cfg) => {
                set.servers.insert(cfg.name.clone(), *cfg);
            }
            ConfigMsg::Remove(name) => {
                set.servers.remove(&name);
            }
            ConfigMsg::Adopt(cfg) => {
                set.servers.entry(cfg.name.clone()).or_insert(*cfg);
            }
            ConfigMsg::InjectPanic => panic!("injected panic in the ConfigActor"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Server `name` whose settings differ by `v` (its port).
    fn cfg(name: &str, v: u16) -> ServerConfig {
        ServerConfig {
            name: name.into(),
            source: format!("{name}.kdl").into(),
            command: "/bin/true".into(),
            args: vec![],
            port: v,
            transport: Default::default(),
            remote: None,
            path: "/mcp".into(),
            on_demand: None,
            env: Default::default(),
            working_dir: None,
            restart: Default::default(),
            stop: Default::default(),
            health: None,
            env_files: Vec::new(),
            secrets: Vec::new(),
            hooks: Default::default(),
            agent: Default::default(),
            firewall: None,
            sandbox: None,
            package: None,
            autostart: true,
        }
    }

    fn set(items: &[(&str, u16)]) -> ConfigSet {
        ConfigSet {
            servers: items
                .iter()
                .map(|(n, h)| ((*n).to_owned(), cfg(n, *h)))
                .collect(),
            ..ConfigSet::default()
        }
    }

    #[test]
    fn diff_classifies_every_server() {
        let d = diff(
            &set(&[("a", 1), ("b", 2), ("c", 3)]),
            &set(&[("b", 2), ("c", 4), ("d", 5)]),
        );
        assert_eq!(
            d.added.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["d"]
        );
        assert_eq!(d.removed, ["a"]);
        assert_eq!(
            d.changed
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>(),
            ["c"]
        );
        assert_eq!(d.changed[0].port, 4, "the new config");
        assert_eq!(d.unchanged, ["b"]);
    }
}
