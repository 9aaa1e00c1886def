//! The sandbox worker process: a locked-down QuickJS runner that talks over stdin/stdout.
//! The host spawns it; it is not meant to be run by hand.

fn main() {
    std::process::exit(sandgate_sandbox::worker::main());
}
