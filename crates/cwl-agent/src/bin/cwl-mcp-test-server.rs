//! A stdio MCP server for cwl's tests (see `cwl_agent::mcp::testing`).
//!
//! `cwl-mcp-test-server [--tools a,b] [--fail-start] [--linger]`: with
//! `--fail-start` it writes a message on stderr and exits 3 at once; with
//! `--linger` it stays 60 s after its stdin closes (a server that must be
//! killed).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--fail-start") {
        eprintln!("cwl-mcp-test-server: cannot open the database (asked to fail)");
        std::process::exit(3);
    }
    let tools = cwl_agent::mcp::testing::tools_from_args(&args);
    if let Err(error) = cwl_agent::mcp::testing::serve_stdio(&tools) {
        eprintln!("cwl-mcp-test-server: {error}");
        std::process::exit(1);
    }
    if args.iter().any(|a| a == "--linger") {
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}
