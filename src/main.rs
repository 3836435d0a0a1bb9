// Parsing HTML, JSON and Lua values allocates many small short-lived
// objects; mimalloc serves them faster than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    sluice::cli_main()
}
