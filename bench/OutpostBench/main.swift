// `make bench` runs this with no arguments: every benchmark, with a table each and a verdict.
// `outpost-bench NAME...` runs only the named ones; `outpost-bench --list` names them.
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.first == InitialSyncDevice.command {
    // The device process `initial-sync` starts; not a benchmark.
    exit(InitialSyncDevice.main(Array(arguments.dropFirst())))
}
if arguments.first == IncrementalSyncDevice.command {
    // The warm device `incremental-sync-cpu` starts; not a benchmark.
    exit(IncrementalSyncDevice.main(Array(arguments.dropFirst())))
}
if arguments.first == FilesDevice.command {
    // A device transfer `files` starts; not a benchmark.
    exit(FilesDevice.main(Array(arguments.dropFirst())))
}
if arguments.first == FilesRawServer.command {
    // The baseline server `files` starts; not a benchmark.
    exit(FilesRawServer.main(Array(arguments.dropFirst())))
}
let runner = Runner(benchmarks: Benchmarks.all)
exit(runner.main(arguments).rawValue)
