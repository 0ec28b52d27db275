import ContractRuntime
import Foundation
import GRDB
import SyncProtocol

extension ErrorDetail {
    /// Canonical JSON text, for `last_error` columns.
    var storedText: String {
        (try? CanonicalJSON.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? message
    }
}
