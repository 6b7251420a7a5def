//! SPEC §20: `xyctl mcp`, the server an AI agent talks to, may show what
//! the firewall holds back but must never approve or deny: an agent that
//! could approve tools would approve the poisoned ones. Its code (the
//! `mcp` module, every file of it) names neither method, so no tool it
//! offers can reach them.

use std::path::Path;

#[test]
fn the_agent_facing_server_has_no_path_to_tools_approve_or_tools_deny() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![src.join("mcp.rs")];
    for entry in std::fs::read_dir(src.join("mcp")).unwrap() {
        files.push(entry.unwrap().path());
    }
    assert!(files.len() >= 2, "{files:?}");
    let forbidden = [
        xy_core::protocol::method::TOOLS_APPROVE,
        xy_core::protocol::method::TOOLS_DENY,
        "TOOLS_APPROVE",
        "TOOLS_DENY",
        // A method name assembled at run time would start like this.
        "\"tools_",
    ];
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for word in forbidden {
            assert!(
                !text.contains(word),
                "{} names {word}: xyctl mcp must not be able to approve or deny tools",
                f.display()
            );
        }
    }
}
