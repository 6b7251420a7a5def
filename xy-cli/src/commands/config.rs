//! `xyctl config check [DIR] [--json]`: validates a config directory the way
//! xyd would, without a daemon. Exit 0 valid, 3 invalid.

use std::path::Path;

use xy_core::config::{ConfigErrors, ConfigSet, load, load_dir, load_settings};
use xy_core::paths::Paths;

use crate::cli::ConfigCmd;
use crate::ctx::Ctx;
use crate::error::{Exit, Failure};
use crate::output;

pub(crate) fn run(ctx: &Ctx, cmd: ConfigCmd) -> Result<Exit, Failure> {
    let ConfigCmd::Check { dir, json } = cmd;
    let named = dir.is_some();
    let paths = Paths::from_env();
    // The daemon's settings file is checked too, wherever the servers are
    // (`--config-dir` does not move it either).
    let settings_file = paths.as_ref().ok().map(|p| p.settings_file.clone());
    let dir = match dir {
        Some(d) => d,
        None => {
            paths
                .map_err(|e| Failure::new(Exit::Operational, e.to_string()))?
                .config_dir
        }
    };
    let settings_ok = |file: &Option<std::path::PathBuf>| match file {
        Some(f) => load_settings(f).map(|_| ()),
        None => Ok(()),
    };
    // A missing default directory is a first run, which xyd boots with no
    // servers (creating it, SPEC §14): valid, as xyd would load it. A
    // directory named explicitly must exist, as for `xyd --config-dir`.
    if !named
        && matches!(std::fs::metadata(&dir), Err(e) if e.kind() == std::io::ErrorKind::NotFound)
        && settings_ok(&settings_file).is_ok()
    {
        if json {
            output::json_line(
                &serde_json::json!({
                    "valid": true,
                    "dir": dir.display().to_string(),
                    "servers": [],
                    "warnings": [],
                    "errors": [],
                })
                .to_string(),
            );
        } else {
            output::stdout(&format!(
                "0 servers OK ({} does not exist yet; xyd creates it when it starts)\n",
                dir.display()
            ));
        }
        return Ok(Exit::Success);
    }
    let dir_exists = std::fs::metadata(&dir).is_ok();
    let loaded = match &settings_file {
        Some(file) if named || dir_exists => load(&dir, file),
        // No servers yet (xyd creates the directory), but a settings file
        // with mistakes (a valid one returned above).
        Some(file) => load_settings(file).map(|settings| ConfigSet {
            dir: dir.clone(),
            settings,
            ..ConfigSet::default()
        }),
        None => load_dir(&dir),
    };
    if json {
        output::json_line(&check_json(&dir, &loaded).to_string());
        return Ok(if loaded.is_ok() {
            Exit::Success
        } else {
            Exit::ConfigInvalid
        });
    }
    match loaded {
        Ok(set) => {
            for w in &set.warnings {
                output::warn(&ctx.err, &w.to_string());
            }
            output::stdout(&summary(&set));
            if let Some(f) = settings_file.as_ref().filter(|f| f.exists()) {
                output::stdout(&format!("settings OK ({})\n", f.display()));
            }
            Ok(Exit::Success)
        }
        Err(errs) => Err(Failure::config_invalid(&dir, &errs, ctx.err.color)),
    }
}

/// `3 servers OK (/home/u/.config/xy/servers)`.
fn summary(set: &ConfigSet) -> String {
    let n = set.servers.len();
    format!(
        "{n} {} OK ({})\n",
        if n == 1 { "server" } else { "servers" },
        set.dir.display()
    )
}

fn check_json(dir: &Path, loaded: &Result<ConfigSet, ConfigErrors>) -> serde_json::Value {
    match loaded {
        Ok(set) => serde_json::json!({
            "valid": true,
            "dir": dir.display().to_string(),
            "servers": set.servers.keys().collect::<Vec<_>>(),
            "warnings": set.warnings.iter().map(|w| serde_json::json!({
                "file": w.file.display().to_string(),
                "name": w.name,
                "message": w.message,
            })).collect::<Vec<_>>(),
            "errors": [],
        }),
        Err(errs) => serde_json::json!({
            "valid": false,
            "dir": dir.display().to_string(),
            "servers": [],
            "warnings": [],
            "errors": errs.to_json(),
        }),
    }
}
