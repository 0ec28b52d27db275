// `make bench` runs this with no arguments: every benchmark, with a table each and a verdict.
// `outpost-bench NAME...` runs only the named ones; `outpost-bench --list` names them.
import Foundation

let runner = Runner(benchmarks: Benchmarks.all)
exit(runner.main(Array(CommandLine.arguments.dropFirst())).rawValue)
