import ArgumentParser
import ContractCompiler
import Foundation

struct Explain: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Explain a rule: why it exists, when it applies, and how to fix a violation."
    )

    @Argument(help: "A rule id, for example FIELD_REMOVED. Without one, list every rule.")
    var rule: String?

    func run() throws {
        guard let rule else {
            for id in RuleCatalog.allRules {
                print("\(id.rawValue.padding(toLength: 32, withPad: " ", startingAt: 0)) \(RuleCatalog.explanation(for: id)!.title)")
            }
            return
        }
        let id = RuleID(rule.uppercased())
        guard let explanation = RuleCatalog.explanation(for: id) else {
            let guess = Names.closest(to: id.rawValue, among: RuleCatalog.allRules.map(\.rawValue))
            FileHandle.standardError.write(
                Data("error: unknown rule '\(rule)'\(guess.map { "; did you mean \($0)?" } ?? "")\nhelp: `contractc explain` lists every rule\n".utf8)
            )
            throw ExitCode(1)
        }
        print(explanation.rendered)
    }
}
