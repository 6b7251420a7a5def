//! Unit tests of the rule set: what `effective` gives each kind of program.

use super::*;

fn facts<'a>(home: &'a Path, program: &'a Path) -> SpawnFacts<'a> {
    SpawnFacts {
        home,
        program,
        interpreter: None,
        script: None,
        working_dir: Path::new("/home/me/work"),
        temp_dir: Path::new("/home/me/.local/state/xy/sandbox/notes/tmp"),
        venv: None,
        data_dir: None,
        listen_port: Some(8421),
        os: Os::Linux,
    }
}

#[test]
fn host_port_parses_names_v4_v6_and_refuses_wildcards() {
    assert_eq!(
        HostPort::parse("API.github.com:443").unwrap(),
        HostPort {
            host: "api.github.com".into(),
            port: 443
        }
    );
    assert_eq!(
        HostPort::parse("[::1]:8080").unwrap().to_string(),
        "[::1]:8080"
    );
    assert_eq!(HostPort::parse("10.0.0.1:53").unwrap().port, 53);
    assert!(HostPort::parse("example.com").is_err());
    assert!(HostPort::parse("*.example.com:443").is_err());
    assert!(HostPort::parse("example.com:0").is_err());
    assert!(HostPort::parse("example.com:99999").is_err());
    assert!(HostPort::parse(":443").is_err());
}

#[test]
fn effective_rules_add_the_promised_defaults_and_never_the_home() {
    let home = Path::new("/home/me");
    let program = Path::new("/home/me/.nvm/versions/node/v22/bin/node");
    let config = SandboxConfig {
        read: vec!["~/notes".into()],
        write: vec!["~/notes/inbox".into()],
        network: NetworkMode::None,
        ..SandboxConfig::default()
    };
    let rules = effective(&config, &facts(home, program));
    assert!(rules.can_read(Path::new("/usr/lib/libc.so.6")));
    assert!(rules.can_read(Path::new("/home/me/.nvm/versions/node/v22/lib/x.js")));
    assert!(rules.can_read(Path::new("/home/me/notes/a.md")));
    assert!(rules.can_write(Path::new("/home/me/notes/inbox/new.md")));
    assert!(!rules.can_write(Path::new("/home/me/notes/a.md")));
    assert!(rules.can_write(Path::new("/home/me/work/out.txt")));
    assert!(rules.can_write(Path::new("/home/me/.local/state/xy/sandbox/notes/tmp/x")));
    for secret in [
        "/home/me/.ssh/id_rsa",
        "/home/me/.bashrc",
        "/home/me/.local/state/xy/xy.pid",
        "/root/.aws/credentials",
        "/tmp/other",
        "/run/user/1000/xy.sock",
    ] {
        assert!(
            !rules.can_read(Path::new(secret)),
            "{secret} must not be readable"
        );
    }
    assert_eq!(rules.listen_port, Some(8421));
    assert_eq!(
        effective(&SandboxConfig::default(), &facts(home, program)).listen_port,
        None,
        "network \"any\" needs no listen rule"
    );
}

#[test]
fn a_working_dir_at_or_above_home_opens_nothing() {
    let home = Path::new("/home/me");
    let program = Path::new("/usr/bin/node");
    for cwd in ["/", "/home", "/home/me"] {
        let f = SpawnFacts {
            working_dir: Path::new(cwd),
            ..facts(home, program)
        };
        let rules = effective(&SandboxConfig::default(), &f);
        assert!(!rules.can_write(Path::new("/home/me/.bashrc")), "{cwd}");
        assert!(!rules.can_read(Path::new("/home/me/.ssh/id_rsa")), "{cwd}");
        assert!(
            rules
                .write
                .iter()
                .all(|r| r.source != RuleSource::WorkingDir)
        );
    }
}

#[test]
fn a_program_in_the_home_opens_only_its_own_directory() {
    let home = Path::new("/home/me");
    for (program, covered) in [
        ("/home/me/bin/server", "/home/me/bin"),
        ("/home/me/.local/bin/uvx", "/home/me/.local/bin"),
        ("/home/me/server", "/home/me/server"),
        (
            "/home/me/.nvm/versions/node/v22/bin/node",
            "/home/me/.nvm/versions/node/v22",
        ),
    ] {
        let rules = effective(&SandboxConfig::default(), &facts(home, Path::new(program)));
        let got: Vec<_> = rules
            .read
            .iter()
            .filter(|r| r.source == RuleSource::Program)
            .map(|r| r.path.display().to_string())
            .collect();
        assert_eq!(got, [covered], "{program}");
        assert!(!rules.can_read(Path::new("/home/me/.local/state/xy/xy.pid")));
    }
}

#[test]
fn an_interpreters_script_opens_its_package_tree() {
    let home = Path::new("/home/me");
    let cwd = Path::new("/srv/app");
    let node = Path::new("/usr/bin/node");
    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        script_candidate(
            node,
            &args(&["--enable-source-maps", "dist/index.js", "/data"]),
            cwd
        ),
        Some(PathBuf::from("/srv/app/dist/index.js"))
    );
    assert_eq!(
        script_candidate(Path::new("/usr/bin/python3.11"), &args(&["server.py"]), cwd),
        Some(PathBuf::from("/srv/app/server.py"))
    );
    assert_eq!(script_candidate(node, &args(&["--stdio"]), cwd), None);
    assert_eq!(
        script_candidate(node, &args(&["serve", "/x"]), cwd),
        None,
        "a subcommand is not a script"
    );
    // Not an interpreter: an argument naming a file is data, never a rule.
    assert_eq!(
        script_candidate(
            Path::new("/usr/local/bin/tool"),
            &args(&["--read", "/home/me/.ssh/id_rsa"]),
            cwd
        ),
        None
    );
    assert!(is_interpreter(Path::new("/opt/homebrew/bin/python3")));
    assert!(is_interpreter(Path::new(
        "/home/me/.nvm/versions/node/v22/bin/node"
    )));
    assert!(!is_interpreter(Path::new("/usr/bin/npx")));
    // A script in a dot dir straight under the home opens nothing.
    let f = SpawnFacts {
        script: Some(Path::new("/home/me/.ssh/run.py")),
        ..facts(home, node)
    };
    let rules = effective(&SandboxConfig::default(), &f);
    assert!(
        !rules.can_read(Path::new("/home/me/.ssh/id_rsa")),
        "{:?}",
        rules.read
    );
    for (script, covered) in [
        (
            "/p/node_modules/@scope/server/node_modules/x/index.js",
            "/p/node_modules",
        ),
        (
            "/home/me/.npm/_npx/ab12/node_modules/@s/server/dist/index.js",
            "/home/me/.npm/_npx/ab12/node_modules",
        ),
        (
            "/venv/lib/python3.12/site-packages/server/__main__.py",
            "/venv/lib/python3.12/site-packages",
        ),
        ("/srv/app/server.py", "/srv/app"),
        ("/home/me/server.py", "/home/me/server.py"),
    ] {
        let f = SpawnFacts {
            script: Some(Path::new(script)),
            ..facts(home, Path::new("/usr/bin/node"))
        };
        let rules = effective(&SandboxConfig::default(), &f);
        assert!(
            rules
                .read
                .iter()
                .any(|r| r.source == RuleSource::Program && r.path == Path::new(covered)),
            "{script}: {:?}",
            rules.read
        );
        assert!(
            !rules.can_read(Path::new("/home/me/.ssh/id_rsa")),
            "{script}"
        );
    }
}

#[test]
fn a_venv_is_found_on_the_path_as_written_and_read_whole() {
    let has = |p: &Path| p == Path::new("/home/me/proj/.venv/pyvenv.cfg");
    assert_eq!(
        venv_root(Path::new("/home/me/proj/.venv/bin/python"), &has),
        Some(PathBuf::from("/home/me/proj/.venv"))
    );
    assert_eq!(
        venv_root(Path::new("/home/me/proj/.venv/bin/mcp-server-time"), &has),
        Some(PathBuf::from("/home/me/proj/.venv"))
    );
    // No pyvenv.cfg, or not in a bin dir: no venv.
    assert_eq!(venv_root(Path::new("/usr/bin/python3"), &has), None);
    assert_eq!(
        venv_root(Path::new("/home/me/proj/.venv/python"), &has),
        None
    );
    let home = Path::new("/home/me");
    let f = SpawnFacts {
        venv: Some(Path::new("/home/me/proj/.venv")),
        data_dir: Some(Path::new("/home/me/.local/share/xy/data/notes")),
        ..facts(home, Path::new("/usr/bin/python3.12"))
    };
    let rules = effective(&SandboxConfig::default(), &f);
    assert!(rules.can_read(Path::new(
        "/home/me/proj/.venv/lib/python3.12/site-packages/mcp/__init__.py"
    )));
    assert!(rules.can_read(Path::new("/home/me/proj/.venv/pyvenv.cfg")));
    assert!(!rules.can_write(Path::new("/home/me/proj/.venv/pyvenv.cfg")));
    assert!(rules.can_write(Path::new("/home/me/.local/share/xy/data/notes/.app/x")));
    assert!(!rules.can_read(Path::new("/home/me/.local/share/xy/data/other")));
    assert!(!rules.can_read(Path::new("/home/me/proj/secret.txt")));
}

#[test]
fn a_venvs_home_is_read_from_its_config() {
    let cfg = "home = /root/.pyenv/versions/3.11.7/bin\ninclude-system-site-packages = false\nversion = 3.11.7\n";
    assert_eq!(
        venv_home(cfg),
        Some(PathBuf::from("/root/.pyenv/versions/3.11.7/bin"))
    );
    assert_eq!(venv_home("home=relative/bin\n"), None);
    assert_eq!(venv_home("version = 3.12\n"), None);
    // Its rule is the interpreter's package, never the home dir.
    let home = Path::new("/home/me");
    assert_eq!(
        program_rule(
            Path::new("/home/me/.pyenv/versions/3.12.1/bin/python"),
            home
        ),
        PathBuf::from("/home/me/.pyenv/versions/3.12.1")
    );
    assert_eq!(
        program_rule(Path::new("/home/me/bin/python"), home),
        PathBuf::from("/home/me/bin")
    );
}

#[test]
fn package_root_climbs_out_of_bin() {
    assert_eq!(
        package_root(Path::new("/opt/node/bin/node")).unwrap(),
        PathBuf::from("/opt/node")
    );
    assert_eq!(
        package_root(Path::new("/p/node_modules/.bin/server")).unwrap(),
        PathBuf::from("/p/node_modules")
    );
    assert_eq!(
        package_root(Path::new("/srv/tools/server.py")).unwrap(),
        PathBuf::from("/srv/tools")
    );
}

#[test]
fn denials_are_explained_in_terms_of_the_block() {
    let home = Path::new("/home/me");
    let program = Path::new("/usr/bin/node");
    let config = SandboxConfig {
        network: NetworkMode::Allow,
        allow_hosts: vec![HostPort::parse("api.github.com:443").unwrap()],
        ..SandboxConfig::default()
    };
    let rules = effective(&config, &facts(home, program));
    assert_eq!(
        explain_denial(&rules, &Denied::Read("/home/me/.ssh/id_rsa".into()), home),
        "sandbox: read of ~/.ssh/id_rsa denied (not under sandbox.read); \
         fix: add `read \"~/.ssh/id_rsa\"` to the sandbox block"
    );
    // Neither the file nor its directory exists: create it first.
    assert_eq!(
        explain_denial(&rules, &Denied::Write("/home/me/new/a.txt".into()), home),
        "sandbox: write to ~/new/a.txt denied (not under sandbox.write); \
         fix: create ~/new first, then add `write \"~/new\"` to the sandbox block"
    );
    assert_eq!(
        explain_denial(&rules, &Denied::Connect("evil.example:443".into()), home),
        "sandbox: connection to evil.example:443 denied (network \"allow\": not an allow-host line (api.github.com:443)); \
         fix: add `allow-host \"evil.example:443\"` to the sandbox block"
    );
    assert!(explain_denial(&rules, &Denied::Bind(9999), home).contains("only port 8421"));
}

/// SPEC §25: a failed create names the directory to allow (it exists),
/// and says so when that is inside the server's own package.
#[test]
fn a_failed_create_names_its_directory() {
    let tmp = std::env::temp_dir().join(format!("xy-fix-{}", std::process::id()));
    let pkg = tmp.join("pkg/dist");
    std::fs::create_dir_all(&pkg).unwrap();
    let program = tmp.join("pkg/dist/index.js");
    std::fs::write(&program, "").unwrap();
    let home = Path::new("/home/me");
    let mut f = facts(home, Path::new("/usr/bin/node"));
    f.script = Some(&program);
    let rules = effective(&SandboxConfig::default(), &f);
    let file = pkg.join("memory.jsonl");
    let fix = fix_for(&rules, &Denied::Write(file), home).unwrap();
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(
        fix.starts_with(&format!(
            "add `write {:?}` to the sandbox block",
            pkg.display().to_string()
        )),
        "{fix}"
    );
    assert!(
        fix.contains("inside what the server may only read"),
        "{fix}"
    );
}
