import Foundation
import Hummingbird
import NIOHTTP1
import SyncProtocol

/// A ``ServiceError`` with response headers it needs (`Content-Range` on a 416).
struct ResponseError: Error {
    var error: ServiceError
    var headers: HTTPFields
}
