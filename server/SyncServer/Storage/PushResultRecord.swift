import ContractRuntime
import Foundation

/// The answers of one push, stored as one record: exactly once needs a resend answered as it was
/// the first time, and a push is written in one transaction, so its results are kept (and pruned
/// and erased) together. One record per push rather than one row per mutation: a push of 500
/// writes one row of bookkeeping instead of 500.
package struct PushResultRecord: Hashable, Sendable {
    /// The seq the first result answers; the results answer consecutive seqs from it.
    package var firstSeq: Int64
    /// The canonical JSON of each result (SyncProtocol's `MutationResult`), in seq order.
    package var results: [String]

    package init(firstSeq: Int64, results: [String]) {
        self.firstSeq = firstSeq
        self.results = results
    }

    /// The last seq the record answers.
    package var lastSeq: Int64 { firstSeq + Int64(results.count) - 1 }

    /// The stored text of the result of `seq`, `nil` when the record does not answer it.
    package func result(of seq: Int64) -> String? {
        guard seq >= firstSeq, seq <= lastSeq else { return nil }
        return results[Int(seq - firstSeq)]
    }

    /// The stored form: a JSON array of the results' canonical texts, written as they are.
    var storedText: String {
        var text = "["
        text.reserveCapacity(results.reduce(2) { $0 + $1.utf8.count + 1 })
        for (index, result) in results.enumerated() {
            if index > 0 { text += "," }
            text += result
        }
        text += "]"
        return text
    }

    /// Reads the stored form back: each element is kept as its canonical text.
    init(firstSeq: Int64, storedText: String) throws {
        let elements = try JSONDecoder().decode([JSONValue].self, from: Data(storedText.utf8))
        self.init(firstSeq: firstSeq, results: elements.map { CanonicalJSON.text($0) })
    }
}
