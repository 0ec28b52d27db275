import ContractRuntime
import EngineTestContracts
import Foundation
import Hummingbird
import HummingbirdTesting
import SyncProtocol
import Testing

@testable import SyncServer

/// The `Content-Encoding`s of request bodies: gzip (and `x-gzip`) and `identity` are read, any
/// other is refused with 415 `unsupported_encoding` before the body is read, and writes nothing.
/// On the engines' own contracts (`Activity` pushes).
@Suite("Routes: request body encodings")
struct PushEncodingTests {
    @Test("a push in an encoding the server does not read is 415 unsupported_encoding, naming those it reads, and writes nothing")
    func unknownEncodingIs415() async throws {
        let harness = try RouteHarness.engine()
        let body = try JSONEncoder().encode(EngineMutations.push([EngineMutations.activity(seq: 1)]))
        try await harness.test { client in
            for encoding in ["br", "deflate", "compress", "zstd", "gzip, br", "identity, gzip"] {
                // Whatever the bytes: the encoding is refused before they are read.
                for bytes in [body, Gzip.compress(body)] {
                    let response = try await client.execute(
                        uri: "/sync/v1/push", method: .post, headers: harness.headers(nil, [.contentEncoding: encoding]),
                        body: ByteBuffer(bytes: bytes)
                    )
                    #expect(response.status == .unsupportedMediaType, "\(encoding)")
                    #expect(response.headers[.contentType] == "application/json; charset=utf-8")
                    let error = try response.errorBody()
                    #expect(error.code == .unsupportedEncoding, "\(encoding)")
                    #expect(error.message.contains("`\(encoding)`"), "\(error.message)")
                    #expect(error.details == .object(["accepted": .array([.string("gzip"), .string("identity")])]))
                }
            }
            #expect(try await RouteErrorTests.nothingWritten(harness))

            // The other JSON routes refuse it the same way.
            let subscriptions = try await client.execute(
                uri: "/sync/v1/subscriptions/pull", method: .post, headers: harness.headers(nil, [.contentEncoding: "br"]),
                body: ByteBuffer(string: #"{"subscriptions": []}"#)
            )
            #expect(subscriptions.status == .unsupportedMediaType)
            #expect(try subscriptions.errorBody().code == .unsupportedEncoding)
        }
    }

    @Test("gzip, x-gzip in any case, identity and no encoding are the same push")
    func readableEncodings() async throws {
        let harness = try RouteHarness.engine()
        try await harness.test { client in
            var seq: Int64 = 0
            for (encoding, compress) in [
                (nil, false), ("identity", false), ("gzip", true), ("x-gzip", true), ("GZip", true), (" gzip ", true),
            ] as [(String?, Bool)] {
                seq += 1
                let body = try JSONEncoder().encode(
                    EngineMutations.push([
                        EngineMutations.activity(seq: seq, id: "9b2f3c1e-0000-4000-8000-\(String(format: "%012d", seq))", subject: "card-\(seq)")
                    ]))
                var extra: HTTPFields = [:]
                if let encoding { extra[.contentEncoding] = encoding }
                let response = try await client.execute(
                    uri: "/sync/v1/push", method: .post, headers: harness.headers(nil, extra),
                    body: ByteBuffer(bytes: compress ? Gzip.compress(body) : body)
                )
                #expect(response.status == .ok, "\(encoding ?? "none"): \(response.text)")
                let decoded = try JSONDecoder().decode(PushResponse.self, from: response.data)
                #expect(decoded.results.map(\.status) == [.applied], "\(encoding ?? "none"): \(response.text)")
                #expect(decoded.lastSeq == seq)
            }
            // A gzip header on bytes that are not gzip stays 400 malformed_request.
            let notGzip = try await client.execute(
                uri: "/sync/v1/push", method: .post, headers: harness.headers(nil, [.contentEncoding: "gzip"]),
                body: ByteBuffer(string: "{}")
            )
            #expect(notGzip.status == .badRequest)
            #expect(try notGzip.errorBody().code == .malformedRequest)
        }
    }
}
