import Foundation
import Hummingbird
import NIOHTTP1
import SyncProtocol

/// The server's JSON encoder and decoder: keys sorted, so equal answers are equal bytes.
enum JSONCoding {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    static func decoder() -> JSONDecoder { JSONDecoder() }
}
