//! `xyctl tools <name> [--json]`: a server's tools, where each stands with
//! the firewall, and what changed since the previous start; `xyctl tools
//! approve|deny` change what clients see; `xyctl tools review` goes
//! through every held-back tool asking y/n (SPEC §20); `xyctl tools search`
//! prints what the aggregate's `find_tools` would return (SPEC §26).

use std::io::BufRead;

use xy_core::client::{Client, ClientError};
use xy_core::protocol::mcp::{
    ExpectedDigest, ToolSummary, ToolsApproveParams, ToolsApproveResult, ToolsDenyParams,
    ToolsDenyResult, ToolsParams, ToolsResult,
};
use xy_core::protocol::{ErrorCode, ListEntry, method};

use crate::cli::{ToolsArgs, ToolsCmd};
use crate::ctx::{Ctx, READ_TIMEOUT};
use crate::error::{Exit, Failure};
use crate::{daemon_conn, output, render};

pub(crate) fn run(ctx: &Ctx, args: ToolsArgs) -> Result<Exit, Failure> {
    match args.action {
        None => show(ctx, args.name.as_deref().unwrap_or_default(), args.json),
        Some(ToolsCmd::Approve { name, tools, all }) => approve(ctx, &name, tools, all),
        Some(ToolsCmd::Deny { name, tools }) => deny(ctx, &name, tools),
        Some(ToolsCmd::Review { name }) => review(ctx, name.as_deref()),
        Some(ToolsCmd::Search {
            query,
            server,
            limit,
            profile,
            json,
        }) => {
            let p = xy_core::protocol::aggregate::ToolsSearchParams {
                query,
                server,
                limit,
                profile,
            };
            search(ctx, &p, json)
        }
    }
}

/// `xyctl tools search`: what `find_tools` returns, one tool a line.
fn search(
    ctx: &Ctx,
    p: &xy_core::protocol::aggregate::ToolsSearchParams,
    json: bool,
) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let raw = client.call_raw(method::TOOLS_SEARCH, Some(p), READ_TIMEOUT)?;
    if json {
        output::json_line(raw.get());
        return Ok(Exit::Success);
    }
    let r: xy_core::protocol::aggregate::ToolsSearchResult = serde_json::from_str(raw.get())
        .map_err(|e| Failure::new(Exit::Operational, format!("bad `tools_search` result: {e}")))?;
    let rows: Vec<Vec<String>> = r
        .tools
        .iter()
        .map(|h| {
            let about = h.definition["description"]
                .as_str()
                .unwrap_or("")
                .lines()
                .next()
                .unwrap_or("");
            let about: String = about.chars().take(70).collect();
            vec![h.name.clone(), format!("{:.2}", h.score), about]
        })
        .collect();
    if rows.is_empty() {
        output::stdout(&format!("no tool matches {:?}\n", p.query));
    } else {
        output::stdout(&render::render_rows(
            &["NAME", "SCORE", "DESCRIPTION"],
            &rows,
            &ctx.out,
        ));
    }
    for (server, why) in &r.unavailable {
        output::warn(&ctx.err, &format!("{server} was not searched: {why}"));
    }
    Ok(Exit::Success)
}

fn show(ctx: &Ctx, name: &str, json: bool) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let params = ToolsParams {
        name: name.to_owned(),
    };
    let raw = client.call_raw(method::TOOLS, Some(&params), READ_TIMEOUT)?;
    if json {
        output::json_line(raw.get());
        return Ok(Exit::Success);
    }
    let result: ToolsResult = serde_json::from_str(raw.get())
        .map_err(|e| Failure::new(Exit::Operational, format!("bad `tools` result: {e}")))?;
    output::stdout(&render::render_tools(&result, &ctx.out));
    Ok(Exit::Success)
}

fn approve(ctx: &Ctx, name: &str, tools: Vec<String>, all: bool) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let params = ToolsApproveParams {
        name: name.to_owned(),
        tools: (!all).then_some(tools),
        all,
        expect: Vec::new(),
    };
    let r: ToolsApproveResult = client.call(method::TOOLS_APPROVE, Some(&params), READ_TIMEOUT)?;
    output::stdout(&if r.approved.is_empty() {
        format!("{name}: nothing was held back; no change\n")
    } else {
        format!(
            "{name}: approved {} (clients see {} now)\n",
            r.approved.join(", "),
            if r.approved.len() == 1 { "it" } else { "them" }
        )
    });
    Ok(Exit::Success)
}

fn deny(ctx: &Ctx, name: &str, tools: Vec<String>) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let params = ToolsDenyParams {
        name: name.to_owned(),
        tools,
    };
    let r: ToolsDenyResult = client.call(method::TOOLS_DENY, Some(&params), READ_TIMEOUT)?;
    output::stdout(&format!(
        "{name}: denied {} (held back from clients until approved)\n",
        r.denied.join(", ")
    ));
    Ok(Exit::Success)
}

/// One answer at a review prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Approve,
    Skip,
    Deny,
    Quit,
}

impl Answer {
    /// Reads `y`, `n` (or an empty line), `d` or `q`; `None` for anything else.
    fn parse(line: &str) -> Option<Answer> {
        match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => Some(Answer::Approve),
            "" | "n" | "no" => Some(Answer::Skip),
            "d" | "deny" => Some(Answer::Deny),
            "q" | "quit" => Some(Answer::Quit),
            _ => None,
        }
    }
}

fn review(ctx: &Ctx, only: Option<&str>) -> Result<Exit, Failure> {
    let mut client = daemon_conn::connect(ctx)?;
    let names = match only {
        Some(n) => vec![n.to_owned()],
        None => {
            let entries: Vec<ListEntry> = client.call::<(), _>(method::LIST, None, READ_TIMEOUT)?;
            entries.into_iter().map(|e| e.name).collect()
        }
    };
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let (mut seen, mut approved, mut denied) = (0usize, 0usize, 0usize);
    'servers: for name in &names {
        let held = held_back(&mut client, name)?;
        for tool in held {
            seen += 1;
            output::stdout(&render::review_block(name, &tool, &ctx.out));
            let answer = loop {
                output::stdout(&format!(
                    "approve {}? [y]es, [n]o (keep it held), [d]eny, [q]uit: ",
                    render::reveal(&tool.name)
                ));
                let mut line = String::new();
                if input.read_line(&mut line)? == 0 {
                    output::stdout("\n");
                    break Answer::Quit;
                }
                match Answer::parse(&line) {
                    Some(a) => break a,
                    None => output::stdout("please answer y, n, d or q\n"),
                }
            };
            match answer {
                Answer::Approve => {
                    if approve_shown(&mut client, name, &tool)? {
                        approved += 1;
                    }
                }
                Answer::Deny => {
                    let params = ToolsDenyParams {
                        name: name.clone(),
                        tools: vec![tool.name.clone()],
                    };
                    let _: ToolsDenyResult =
                        client.call(method::TOOLS_DENY, Some(&params), READ_TIMEOUT)?;
                    denied += 1;
                }
                Answer::Skip => {}
                Answer::Quit => break 'servers,
            }
            output::stdout("\n");
        }
    }
    output::stdout(&if seen == 0 {
        match only {
            Some(n) => format!("{n}: nothing is held back\n"),
            None => "nothing is held back\n".to_owned(),
        }
    } else {
        format!("reviewed {seen}: {approved} approved, {denied} denied\n")
    });
    Ok(Exit::Success)
}

/// Approves the item as the review showed it (D301): with its digest, so
/// a listing that changed after the diff was printed is refused by xyd,
/// not approved unseen. Whether it was approved.
fn approve_shown(client: &mut Client, server: &str, tool: &ToolSummary) -> Result<bool, Failure> {
    // A ledger from before digests has none: approved by name, as before.
    let expect: Vec<ExpectedDigest> = (tool.digest.iter())
        .map(|d| ExpectedDigest {
            name: tool.name.clone(),
            digest: d.clone(),
        })
        .collect();
    let params = ToolsApproveParams {
        name: server.to_owned(),
        tools: expect.is_empty().then(|| vec![tool.name.clone()]),
        all: false,
        expect,
    };
    match client.call::<_, ToolsApproveResult>(method::TOOLS_APPROVE, Some(&params), READ_TIMEOUT) {
        Ok(_) => Ok(true),
        Err(ClientError::Rpc(e)) if e.kind() == Some(ErrorCode::DigestChanged) => {
            output::stdout(&format!(
                "{} changed since it was shown: not approved; review it again                  (`xyctl tools review {server}`)\n",
                render::reveal(&tool.name)
            ));
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

/// The server's held-back tools and prompts (denied ones included: the
/// user may change their mind).
fn held_back(client: &mut Client, name: &str) -> Result<Vec<ToolSummary>, Failure> {
    let params = ToolsParams {
        name: name.to_owned(),
    };
    let r: ToolsResult = client.call(method::TOOLS, Some(&params), READ_TIMEOUT)?;
    Ok(r.current
        .into_iter()
        .flat_map(|c| c.tools)
        .chain(r.prompts)
        .chain(r.resources)
        .filter(|t| t.state.is_some_and(|s| !s.visible()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::Answer;

    #[test]
    fn review_answers() {
        assert_eq!(Answer::parse("y\n"), Some(Answer::Approve));
        assert_eq!(Answer::parse(" YES "), Some(Answer::Approve));
        assert_eq!(Answer::parse("\n"), Some(Answer::Skip));
        assert_eq!(Answer::parse("n"), Some(Answer::Skip));
        assert_eq!(Answer::parse("d"), Some(Answer::Deny));
        assert_eq!(Answer::parse("q"), Some(Answer::Quit));
        assert_eq!(Answer::parse("maybe"), None);
    }
}
