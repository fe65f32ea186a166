//! `msp`: the real host (`msp serve`) and the conformance runner.
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("conformance") => std::process::exit(msp::conformance::main(args[1..].to_vec())),
        Some("serve") => std::process::exit(msp::io::serve_main(args[1..].to_vec())),
        _ => {
            eprintln!("usage: msp serve ... | msp conformance ...");
            std::process::exit(2);
        }
    }
}
