# xy task runner. `just ci` runs exactly what .ci/run runs.

default: ci

fmt:
    cargo fmt --all

lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings
    cargo clippy --workspace --all-targets --target aarch64-apple-darwin -- -D warnings
    ! cargo tree -p xy-cli -e normal | grep -q ractor

test:
    cargo build --workspace --bins && cargo test --workspace

ci:
    bash .ci/run

# Install xyd and xyctl for good (into ~/.cargo/bin), then `xyctl service install`.
install:
    cargo install --locked --path xy-daemon
    cargo install --locked --path xy-cli

# Run xyd in the foreground supervising the bundled example MCP server.
demo:
    cargo build --workspace --bins
    PATH="$PWD/target/debug:$PATH" target/debug/xyd --config-dir examples/servers

bench:
    cargo bench -p xy-actors --bench pump
    cargo bench -p xy-daemon --bench rpc
    cargo bench -p xy-cli --bench list

# Side-by-side benchmark against supervisord and pm2 (installs them under bench/.cache/); add --quick for a short run.
bench-compare *ARGS:
    bash bench/compare.sh {{ARGS}}
