//! Test builds only: a locked-down worker tries what its lockdown must forbid, from native
//! code, and reports what happened (the `Probe` frame; `tests/lockdown.rs`).

/// Test builds only: tries something the lockdown must forbid, from native code.
pub(crate) fn probe(what: &str) -> Result<String, String> {
    match what {
        "open" => std::fs::File::open("/etc/hostname")
            .map(|_| "opened /etc/hostname".to_string())
            .map_err(|e| e.to_string()),
        "create" => std::fs::File::create("/tmp/sandgate-probe")
            .map(|_| "created a file".to_string())
            .map_err(|e| e.to_string()),
        "socket" => std::net::TcpStream::connect("127.0.0.1:9")
            .map(|_| "connected".to_string())
            .map_err(|e| e.to_string()),
        "udp" => std::net::UdpSocket::bind("127.0.0.1:0")
            .map(|_| "bound a UDP socket".to_string())
            .map_err(|e| e.to_string()),
        "exec" => std::process::Command::new("/bin/true")
            .status()
            .map(|s| format!("ran /bin/true: {s}"))
            .map_err(|e| e.to_string()),
        #[expect(
            clippy::disallowed_methods,
            reason = "the lockdown probe looks for any environment the worker should not have"
        )]
        "env" => match std::env::vars_os().next() {
            Some((k, _)) => Ok(format!("saw {k:?}")),
            None => Err("the environment is empty".into()),
        },
        other => Err(format!("unknown probe {other}")),
    }
}
