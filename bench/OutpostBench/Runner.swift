import Foundation

/// Parses the command line, runs the selected benchmarks and prints their tables.
///
///     outpost-bench              every benchmark
///     outpost-bench codegen      only the named ones, in the order given
///     outpost-bench --list       the names
///
/// Exit status: 0 every bar holds, 1 a bar is missed or a benchmark could not run, 2 bad usage.
struct Runner {
    let benchmarks: [Benchmark]

    enum Exit: Int32 {
        case passed = 0
        case failed = 1
        case usage = 2
    }

    func main(_ arguments: [String]) -> Exit {
        var names: [String] = []
        for argument in arguments {
            switch argument {
            case "-h", "--help":
                Console.out(usage)
                return .passed
            case "-l", "--list":
                for benchmark in benchmarks {
                    Console.out(pad(benchmark.name, to: nameWidth) + "  " + benchmark.summary)
                }
                return .passed
            default:
                if argument.hasPrefix("-") {
                    Console.error("error: unknown option '\(argument)'\n\(usage)")
                    return .usage
                }
                names.append(argument)
            }
        }
        var selected: [Benchmark] = []
        for name in names {
            guard let benchmark = benchmarks.first(where: { $0.name == name }) else {
                Console.error(
                    "error: no benchmark named '\(name)'; known: \(benchmarks.map(\.name).joined(separator: ", "))"
                )
                return .usage
            }
            if !selected.contains(where: { $0.name == name }) { selected.append(benchmark) }
        }
        if selected.isEmpty { selected = benchmarks }
        return run(selected)
    }

    private func run(_ selected: [Benchmark]) -> Exit {
        var verdicts: [(name: String, verdict: String, seconds: Double)] = []
        for benchmark in selected {
            Console.out("== \(benchmark.name): \(benchmark.summary)")
            Console.out("")
            let outcome = Timing.measure { () -> Result<BenchmarkResult, any Error> in
                Result { try benchmark.run() }
            }
            switch outcome.value {
            case .success(let result):
                printResult(result)
                verdicts.append((benchmark.name, result.passed ? "PASS" : "FAIL", outcome.seconds))
            case .failure(let error):
                Console.error("error: benchmark '\(benchmark.name)' could not run: \(error)")
                Console.out("FAIL  \(benchmark.name): could not run (see the error above)")
                verdicts.append((benchmark.name, "FAIL (could not run)", outcome.seconds))
            }
            Console.out("")
        }
        Console.out("== summary")
        Console.out("")
        Console.out(
            table(
                header: ["benchmark", "verdict", "wall time"],
                rows: verdicts.map { [$0.name, $0.verdict, Format.duration($0.seconds)] }
            ))
        let failed = verdicts.filter { $0.verdict != "PASS" }
        Console.out("")
        if failed.isEmpty {
            Console.out("PASS: every bar holds (\(verdicts.count) benchmark\(verdicts.count == 1 ? "" : "s")).")
            return .passed
        }
        Console.out("FAIL: \(failed.map(\.name).joined(separator: ", ")) missed a bar or could not run.")
        return .failed
    }

    private func printResult(_ result: BenchmarkResult) {
        if !result.facts.isEmpty {
            let width = result.facts.map(\.0.count).max() ?? 0
            for (label, value) in result.facts {
                Console.out(pad(label + ":", to: width + 1) + " " + value)
            }
            Console.out("")
        }
        if !result.rows.isEmpty {
            Console.out(
                table(
                    header: result.columns,
                    rows: result.rows.map { [$0.measurement, $0.median, $0.min, $0.note] }
                ))
            Console.out("")
        }
        for check in result.checks {
            Console.out("\(check.passed ? "PASS" : "FAIL")  \(check.name): \(check.detail)")
        }
    }

    private var nameWidth: Int { benchmarks.map(\.name.count).max() ?? 0 }

    private var usage: String {
        """
        usage: outpost-bench [--list] [NAME ...]

        Runs the named benchmarks (all of them when none is named) and prints their figures
        and a PASS/FAIL verdict against the quality bars in docs/PERFORMANCE.md. Build with
        `swift build -c release --product outpost-bench --product contractc` (or run `make bench`).

        benchmarks: \(benchmarks.map(\.name).joined(separator: ", "))
        exit status: 0 every bar holds, 1 a bar is missed or a benchmark could not run, 2 bad usage
        """
    }
}

/// A Markdown table with padded columns, so it reads in a terminal and pastes into docs.
func table(header: [String], rows: [[String]]) -> String {
    var widths = header.map(\.count)
    for row in rows {
        for (index, cell) in row.enumerated() where index < widths.count {
            widths[index] = max(widths[index], cell.count)
        }
    }
    func line(_ cells: [String]) -> String {
        "| " + cells.enumerated().map { pad($0.element, to: widths[$0.offset]) }.joined(separator: " | ") + " |"
    }
    var lines = [line(header), "| " + widths.map { String(repeating: "-", count: $0) }.joined(separator: " | ") + " |"]
    lines += rows.map(line)
    return lines.joined(separator: "\n")
}

func pad(_ text: String, to width: Int) -> String {
    text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
}

/// Standard output and error, unbuffered, so failures show next to the table they interrupt
/// even when both go to one pipe or file.
enum Console {
    static func out(_ line: String = "") {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    static func error(_ message: String) {
        FileHandle.standardError.write(Data((message + "\n").utf8))
    }
}
